package engine

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// TestDeviceGate: while a task holds the gate, the waiting ones take it
// in turn, the highest priority first, then the earliest to wait; one
// whose context ends leaves the queue without taking it.
func TestDeviceGate(t *testing.T) {
	var g deviceGate
	if err := g.acquire(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	waiting := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			g.mu.Lock()
			k := len(g.waiting)
			g.mu.Unlock()
			if k == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d waiting, want %d", k, n)
			}
		}
	}
	order := make(chan int, 8)
	cancelled, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	// Queued one by one, so the order they wait in is known: tasks 1-5
	// with priorities -1, 0, -1, 2, 0; task 6 (priority 9) gives up.
	var done sync.WaitGroup // each task has released the gate
	for i, p := range []int{-1, 0, -1, 2, 0} {
		done.Add(1)
		go func() {
			defer done.Done()
			if err := g.acquire(context.Background(), p); err != nil {
				t.Error(err)
				return
			}
			order <- i + 1
			g.release()
		}()
		waiting(i + 1)
	}
	go func() { errs <- g.acquire(cancelled, 9) }()
	waiting(6)
	cancel()
	if err := <-errs; err == nil {
		t.Fatal("a waiter whose context ended took the gate")
	}
	waiting(5)
	g.release()
	var got []int
	for range 5 {
		got = append(got, <-order)
	}
	if want := []int{4, 2, 5, 1, 3}; !slices.Equal(got, want) {
		t.Errorf("took the gate in the order %v, want %v", got, want)
	}
	// The last task sends its number before it releases the gate.
	done.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.busy || len(g.waiting) > 0 {
		t.Errorf("after the last release: busy %v, %d waiting", g.busy, len(g.waiting))
	}
}

// TestDeviceGates: a device gets a gate when the plan lists it as
// Exclusive (a device hosting several stages) or its forward and
// backward tasks differ in priority; two streams of one device with
// neither (BLAD's operator overlap) run side by side, and reductions and
// steps never count.
func TestDeviceGates(t *testing.T) {
	two := func(p0, p1 int) []core.Task {
		return []core.Task{
			{ID: 0, Kind: core.TaskForward, Device: "cpu:0", Stream: 0, Priority: p0},
			{ID: 1, Kind: core.TaskForward, Device: "cpu:0", Stream: 1, Priority: p1},
			{ID: 2, Kind: core.TaskForward, Device: "cpu:1", Stream: 0},
			{ID: 3, Kind: core.TaskStep, Device: "cpu:1", Stream: 1, Priority: 4},
		}
	}
	local := func(int) bool { return true }
	for _, c := range []struct {
		name string
		plan core.Plan
		want []core.DeviceID
	}{
		{"two streams, no priorities (overlap)", core.Plan{Tasks: two(0, 0)}, nil},
		{"differing priorities", core.Plan{Tasks: two(-1, 0)}, []core.DeviceID{"cpu:0"}},
		{"exclusive", core.Plan{Tasks: two(0, 0), Exclusive: []core.DeviceID{"cpu:0"}}, []core.DeviceID{"cpu:0"}},
	} {
		var got []core.DeviceID
		for d := range deviceGates(&c.plan, local) {
			got = append(got, d)
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: gates on %v, want %v", c.name, got, c.want)
		}
	}
}
