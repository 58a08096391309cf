package graphpipe

import (
	"math"
	"reflect"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

// TestDPRecycle: a DP handed an earlier DP's tables (dp.recycle, as
// graphSearch's binary search does from step to step) answers every
// target as a fresh DP does, whatever target came before, where memory
// binds (the memo spans every in-flight count) and where it does not.
func TestDPRecycle(t *testing.T) {
	for _, memory := range []int64{512 << 20, 0} {
		w, _, _, cm, devs := unoWithMemory(t, core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}, 8192, 16, memory)
		c := newCosts(cm, w, devs, 16, StepOwners)
		D := len(devs)
		root, _ := Decompose(w)
		tr, sh := newSPTree(root, c), newShared(c)
		var total float64
		for _, x := range c.time {
			total += x
		}
		scratch := &dp{}
		found := 0
		for _, f := range []float64{3, 1, 1.5, 8, 1.2, 2, math.Inf(1), 1.1} {
			tau := total / float64(D) * f
			fresh := c.newDP(tr, D, D, tau, sh)
			want := fresh.solve(tr.root, 0, 0)
			p := c.newDP(tr, D, D, tau, sh)
			p.recycle(scratch)
			got := p.solve(tr.root, 0, 0)
			scratch.memo, scratch.smemo, scratch.free = p.memo, p.smemo, p.free
			if got.ok() != want.ok() || got.devs != want.devs || got.inflight != want.inflight {
				t.Fatalf("memory %d, tau %.3g: recycled ok=%v, %d devices, %d in flight; fresh ok=%v, %d, %d", memory, tau, got.ok(), got.devs, got.inflight, want.ok(), want.devs, want.inflight)
			}
			if !want.ok() || want.devs > D {
				continue
			}
			found++
			if a, b := partitionOf(len(w.Ops), p.mat(got), devs), partitionOf(len(w.Ops), fresh.mat(want), devs); !reflect.DeepEqual(a, b) {
				t.Fatalf("memory %d, tau %.3g: recycled %v, fresh %v", memory, tau, a, b)
			}
		}
		if found < 3 {
			t.Errorf("memory %d: only %d targets had a plan", memory, found)
		}
	}
}
