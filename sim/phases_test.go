package sim

import (
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// TestPhasesSinks: phases bounds one micro-batch only where every op
// leads to one sink. With a second output no op reads (op 3 off the
// source), its backward could run among the other ops' forwards, so the
// windows would not be disjoint: no phase bound.
func TestPhasesSinks(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name string
		deps [][]int
		want time.Duration
	}{
		// Source, three branches, join, head on 2 devices: cuts 0, 4, 5
		// (3 × 3 ms), the branches 3/2 ms forward and 6/2 ms backward.
		{"one sink", [][]int{nil, {0}, {0}, {0}, {1, 2, 3}, {4}}, 13500 * time.Microsecond},
		{"two sinks", [][]int{nil, {0}, {0}, {0}, {1, 2}, {4}}, 0},
		{"a chain", [][]int{nil, {0}, {1}}, 9 * ms},
	} {
		w := &core.Workload{}
		fwd, bwd := make([]time.Duration, len(c.deps)), make([]time.Duration, len(c.deps))
		for o, d := range c.deps {
			w.Ops = append(w.Ops, core.OpInfo{Index: o, Deps: d})
			fwd[o], bwd[o] = ms, 2*ms
		}
		if got := phases(w, fwd, bwd, 2); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
