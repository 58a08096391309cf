package engine

import (
	"context"
	"slices"
	"sync"

	"github.com/gnnkit/gnnkit/core"
)

// deviceGate runs one task at a time on a device and, when it frees,
// hands it to the waiting task of highest priority (core.Task.Priority),
// then the earliest to wait: the simulator's choice (sim.Simulate), for
// a device hosting several stages. A task that finds the device free
// takes it at once.
type deviceGate struct {
	mu      sync.Mutex
	busy    bool
	seq     int
	waiting []gateWaiter
}

type gateWaiter struct {
	prio, seq int
	ch        chan struct{}
}

// acquire waits until the gate is the caller's; on ctx's end it returns
// ctx's error holding nothing.
func (g *deviceGate) acquire(ctx context.Context, prio int) error {
	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		return nil
	}
	w := gateWaiter{prio: prio, seq: g.seq, ch: make(chan struct{})}
	g.seq++
	g.waiting = append(g.waiting, w)
	g.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		if i := slices.IndexFunc(g.waiting, func(x gateWaiter) bool { return x.ch == w.ch }); i >= 0 {
			g.waiting = slices.Delete(g.waiting, i, i+1)
			g.mu.Unlock()
			return ctx.Err()
		}
		g.mu.Unlock()
		g.release() // handed over meanwhile: pass it on
		return ctx.Err()
	}
}

// release hands the gate to the best waiter, or frees it.
func (g *deviceGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiting) == 0 {
		g.busy = false
		return
	}
	best := 0
	for i, w := range g.waiting {
		if b := g.waiting[best]; w.prio > b.prio || w.prio == b.prio && w.seq < b.seq {
			best = i
		}
	}
	w := g.waiting[best]
	g.waiting = slices.Delete(g.waiting, best, best+1)
	close(w.ch) // still busy: now w's
}

// deviceGates returns a gate for every local device the plan lists as
// Exclusive (a device hosting several stages, whose memory bound counts
// one task's transients) or whose forward and backward tasks differ in
// priority; those tasks take it around their run, so the device computes
// one at a time, in priority order, as the simulator has it. Elsewhere a
// device's streams run side by side (BLAD's operator overlap).
// Reductions and steps never take it: a reduction waits inside its run
// for its device's own backward tasks, which a gate it held would keep
// out.
func deviceGates(plan *core.Plan, local func(i int) bool) map[core.DeviceID]*deviceGate {
	gates := map[core.DeviceID]*deviceGate{}
	for _, d := range plan.Exclusive {
		gates[d] = &deviceGate{}
	}
	first := map[core.DeviceID]int{} // a priority of the device's forward and backward tasks
	for i, t := range plan.Tasks {
		if !gated(t) || !local(i) {
			continue
		}
		p, ok := first[t.Device]
		if !ok {
			first[t.Device] = t.Priority
			continue
		}
		if p != t.Priority && gates[t.Device] == nil {
			gates[t.Device] = &deviceGate{}
		}
	}
	return gates
}

// gated reports whether task t takes its device's gate, if it has one.
func gated(t core.Task) bool {
	return t.Kind == core.TaskForward || t.Kind == core.TaskBackward
}
