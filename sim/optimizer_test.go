package sim_test

import (
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// TestRooflinePricesTheOptimizer: without a measured profile the
// optimizer's state and step come from the workload's optimizer: Adam
// (the trainer's default, and a workload that does not say) keeps two
// buffers per parameter and its step moves 8 passes over the parameter
// bytes; SGD with momentum 1 and 6; plain SGD none and 4. (The roofline
// used to price Adam for every optimizer.)
func TestRooflinePricesTheOptimizer(t *testing.T) {
	s := newAccuracySetup(t, "uno", 300, 16)
	if s.w.Optimizer == nil || s.w.Optimizer.Kind != "adam" || s.w.Optimizer.Buffers != 2 {
		t.Fatalf("the trainer's workload says optimizer %+v; want adam with 2 buffers", s.w.Optimizer)
	}
	dev := sim.DeviceModel{GFLOPS: 10, MemGBps: 10}
	cl := sim.CPU(2, dev, sim.Link{GBps: 1, Latency: time.Microsecond})
	pb := s.w.ParamBytes
	for _, c := range []struct {
		name          string
		opt           *core.OptimizerInfo
		state, passes int64
	}{
		{"unsaid", nil, 2, 8},
		{"adam", &core.OptimizerInfo{Kind: "adam", Buffers: 2}, 2, 8},
		{"sgd+momentum", &core.OptimizerInfo{Kind: "sgd", Buffers: 1}, 1, 6},
		{"sgd", &core.OptimizerInfo{Kind: "sgd"}, 0, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := *s.w
			w.Optimizer = c.opt
			if got := w.StateBuffers(); int64(got) != c.state {
				t.Errorf("StateBuffers %d, want %d", got, c.state)
			}
			prof, err := sim.Roofline(&w, dev)
			if err != nil {
				t.Fatal(err)
			}
			if prof.OptStateBytes != c.state*pb {
				t.Errorf("roofline profile: optimizer state %d bytes, want %d × %d", prof.OptStateBytes, c.state, pb)
			}
			cm, err := sim.NewCostModel(&w, nil, cl)
			if err != nil {
				t.Fatal(err)
			}
			d := w.Devices[0].ID
			if got := cm.OptStateBytes(pb); got != c.state*pb {
				t.Errorf("cost model: optimizer state %d bytes, want %d", got, c.state*pb)
			}
			if got := cm.OptStateBytes(pb / 2); got != c.state*(pb/2) {
				t.Errorf("cost model: state of half the parameters %d bytes, want %d", got, c.state*(pb/2))
			}
			if got, want := cm.Step(d), cm.MemTime(d, c.passes*pb); got != want || got <= 0 {
				t.Errorf("step %v, want %d passes over the parameters at memory bandwidth, %v", got, c.passes, want)
			}
		})
	}
}
