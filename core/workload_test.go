package core_test

import (
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

func TestCheckOptimizer(t *testing.T) {
	for _, c := range []struct {
		o       *core.OptimizerInfo
		buffers int
		bad     bool
	}{
		{nil, 2, false},
		{&core.OptimizerInfo{Kind: "adam", Buffers: 2}, 2, false},
		{&core.OptimizerInfo{Kind: "sgd", Buffers: 1}, 1, false},
		{&core.OptimizerInfo{Kind: "sgd"}, 0, false},
		{&core.OptimizerInfo{Kind: "x", Buffers: -1}, -1, true},
		{&core.OptimizerInfo{Kind: "x", Buffers: core.MaxOptimizerBuffers + 1}, core.MaxOptimizerBuffers + 1, true},
	} {
		err := core.CheckOptimizer(c.o)
		if (err != nil) != c.bad || (err != nil && !strings.Contains(err.Error(), "buffers of state per parameter")) {
			t.Errorf("%+v: %v, want refused %v", c.o, err, c.bad)
		}
		if got := (&core.Workload{Optimizer: c.o}).StateBuffers(); got != c.buffers {
			t.Errorf("%+v: StateBuffers %d, want %d", c.o, got, c.buffers)
		}
	}
}
