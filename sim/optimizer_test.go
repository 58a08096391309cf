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

// TestProfileOfAnotherOptimizer: a profile measured with plain SGD (no
// state, its step 4 passes over the parameters) prices a run with Adam by
// the workload's optimizer: Adam's state, and the measured step scaled
// to Adam's 8 passes. (The profile's zero state used to win: Adam was
// planned with none, and the quote ran out of memory.)
func TestProfileOfAnotherOptimizer(t *testing.T) {
	s := newAccuracySetup(t, "uno", 300, 16)
	dev := sim.DeviceModel{GFLOPS: 10, MemGBps: 10}
	cl := sim.CPU(2, dev, sim.Link{GBps: 1, Latency: time.Microsecond})
	pb := s.w.ParamBytes
	prof, err := sim.Roofline(s.w, dev)
	if err != nil {
		t.Fatal(err)
	}
	prof.OptStateBytes, prof.Step = 0, 4*time.Millisecond // measured with SGD
	d := s.w.Devices[0].ID
	for _, c := range []struct {
		opt   *core.OptimizerInfo
		state int64
		step  time.Duration
	}{
		{&core.OptimizerInfo{Kind: "adam", Buffers: 2}, 2 * pb, 8 * time.Millisecond},
		{&core.OptimizerInfo{Kind: "sgd"}, 0, 4 * time.Millisecond},
		{nil, 0, 4 * time.Millisecond}, // unsaid: the profile's
	} {
		w := *s.w
		w.Optimizer = c.opt
		cm, err := sim.NewCostModel(&w, prof, cl)
		if err != nil {
			t.Fatal(err)
		}
		if got := cm.OptStateBytes(pb); got != c.state {
			t.Errorf("%+v: optimizer state %d bytes, want %d", c.opt, got, c.state)
		}
		if got := cm.Step(d); got != c.step {
			t.Errorf("%+v: step %v, want %v", c.opt, got, c.step)
		}
	}
}
