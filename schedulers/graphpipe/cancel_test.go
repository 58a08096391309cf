package graphpipe

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

// TestScheduleCancels: the search's long loops stop once their context
// is done — the chain DP's table between rows (its first rows left
// unfilled), GraphPipe's binary search between steps (no answer), the
// estimates side by side (estimateAll: none once it is done), and
// the no-fit figure's bisections (no figure) — so that gnnkit plan stops at a Ctrl-C instead of finishing a
// table over thousands of devices first (at 4,096 devices a table took
// seconds; at 100,000, before MaxDevices, minutes). Schedule returns the
// context's error; more devices than MaxDevices are refused.
func TestScheduleCancels(t *testing.T) {
	cfg := core.ModelConfig{InDim: 1433, Hidden: 16, Classes: 7, Layers: 2, Branches: 4} // gnnkit plan --model uno
	w, cl, prof := rooflineWorkload(t, "uno", cfg, 140, 64)
	cm, devs := costModelOf(t, w, prof, cl)
	c := newCosts(cm, w, devs, 16, StepOwners)
	done, cancel := context.WithCancel(t.Context())
	cancel()
	x := newChainDP(c)
	x.ctx = done
	best := x.tableFrom(len(devs), len(devs), OneFOneB, nil)
	if v := best[0][len(devs)].t; !math.IsInf(v, 1) {
		t.Errorf("a cancelled chain table filled its first row (%v s per micro-batch)", v)
	}
	x.ctx = nil
	if v := x.tableFrom(len(devs), len(devs), OneFOneB, nil)[0][len(devs)].t; math.IsInf(v, 1) {
		t.Fatal("the chain table without a context has no answer either")
	}
	root, _ := Decompose(w)
	tree := newSPTree(root, c)
	if got, _ := graphSearch(done, tree, c, len(devs), len(devs), newShared(c), math.Inf(1)); got != nil {
		t.Errorf("a cancelled graph search answered %d plans", len(got))
	}
	if got, _ := graphSearch(t.Context(), tree, c, len(devs), len(devs), newShared(c), math.Inf(1)); got == nil {
		t.Fatal("the graph search has no answer")
	}
	// The estimates side by side price nothing once the context is done
	// (over 1,024 devices a search's estimates took a minute after a
	// Ctrl-C), one worker or several.
	for _, n := range []int{1, 8} {
		var cds []*candidate
		for range n {
			cds = append(cds, &candidate{part: Partition{StageOf: make([]int, len(w.Ops)), Devices: [][]core.DeviceID{devs[:1]}}, kind: OneFOneB})
		}
		estimateAll(done, cds, func(*candidate) *costs { return c })
		if cds[0].pred.iter != 0 {
			t.Errorf("%d candidates, cancelled: estimated %v", n, cds[0].pred)
		}
		estimateAll(t.Context(), cds, func(*candidate) *costs { return c })
		for _, cd := range cds {
			if !(cd.pred.iter > 0) {
				t.Fatalf("%d candidates: no estimate without a cancel", n)
			}
		}
	}
	// The no-fit figure's bisections (each step a table or a DP) stop too.
	if got := minChainMemory(done, c, len(devs), len(devs), OneFOneB); got != math.MaxInt64 {
		t.Errorf("a cancelled chain bisection found %d bytes", got)
	}
	if got := minMemory(done, root, c, len(devs), len(devs)); got != math.MaxInt64 {
		t.Errorf("a cancelled DAG bisection found %d bytes", got)
	}
	if got := minChainMemory(t.Context(), c, len(devs), len(devs), OneFOneB); got == math.MaxInt64 {
		t.Fatal("the chain bisection finds nothing")
	}
	for _, s := range []*Scheduler{{Graph: true, Cluster: cl, Profile: prof}, {Cluster: cl, Profile: prof}} {
		if _, err := s.Schedule(done, w); !errors.Is(err, context.Canceled) {
			t.Errorf("%s, cancelled: %v", s.Name(), err)
		}
	}
	big, _ := presetWorkload(t, "uno", cfg, 140, MaxDevices+1)
	if _, err := (&Scheduler{Graph: true}).Schedule(t.Context(), big); err == nil || !strings.Contains(err.Error(), "plans at most 4096") {
		t.Errorf("%d devices: %v", MaxDevices+1, err)
	}
}
