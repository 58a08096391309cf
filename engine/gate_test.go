package engine

import (
	"context"
	"slices"
	"testing"
	"time"
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
	for i, p := range []int{-1, 0, -1, 2, 0} {
		go func() {
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
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.busy || len(g.waiting) > 0 {
		t.Errorf("after the last release: busy %v, %d waiting", g.busy, len(g.waiting))
	}
}
