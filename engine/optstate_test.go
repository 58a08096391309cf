package engine_test

import (
	"context"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/schedulers/sequential"
)

// TestOptimizerStateAsEstimated: the optimizer state the trainer holds
// after its steps is what Estimate counts, per optimizer: Adam's two
// moments, SGD's momentum buffer with momentum, nothing for plain SGD
// (it used to hold two buffers per parameter whatever the optimizer, so
// a plan sized by the estimate ran out of memory at the first step), and
// what the trainer's workload tells schedulers (core.Workload.Optimizer).
func TestOptimizerStateAsEstimated(t *testing.T) {
	f := schedtest.NewFixture(60, 3, 8, 3, 5)
	m, err := core.BuildModel("gcn", core.ModelConfig{InDim: f.FeatureDim, Hidden: 16, Classes: f.Classes})
	if err != nil {
		t.Fatal(err)
	}
	pb := m.ParamBytes()
	cases := []struct {
		name  string
		opt   engine.Optimizer
		state int64
	}{
		{"adam", engine.Optimizer{}, 2 * pb},
		{"sgd", engine.Optimizer{Kind: "sgd"}, 0},
		{"sgd momentum", engine.Optimizer{Kind: "sgd", Momentum: 0.9}, pb},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := cpu.New(core.BackendOptions{Devices: 1, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			dev := b.Devices()[0]
			tr, err := engine.New(engine.Config{Model: m, Devices: b.Devices(), Seed: 1, Optimizer: c.opt,
				Data: engine.Data{Graph: f.Graph, Features: f.Features, FeatureDim: f.FeatureDim, Labels: f.Labels}})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			bt := tr.FullBatch(batch(40))
			w, err := tr.Workload(bt, infos(b.Devices()))
			if err != nil {
				t.Fatal(err)
			}
			p, err := (&sequential.Scheduler{}).Schedule(context.Background(), w)
			if err != nil {
				t.Fatal(err)
			}
			resident, _, err := tr.Estimate(bt, p.Units, dev.Info())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Run(context.Background(), p, bt, engine.RunOptions{}); err != nil {
				t.Fatal(err)
			}
			before := dev.Mem().Stats().Used
			if _, err := tr.Run(context.Background(), p, bt, engine.RunOptions{}); err != nil {
				t.Fatal(err)
			}
			used := dev.Mem().Stats().Used
			t.Logf("%s: estimated resident %d B, held after the steps %d B (state %d B)", c.name, resident, used, c.state)
			if used != before {
				t.Errorf("the second iteration grew the resident memory: %d -> %d B", before, used)
			}
			if used != resident {
				t.Errorf("held %d B after the steps, Estimate says %d B resident", used, resident)
			}
			// The workload tells schedulers the same state: its buffers
			// times the parameters.
			if w.Optimizer == nil || int64(w.StateBuffers())*pb != c.state {
				t.Errorf("workload optimizer %+v; want %d bytes of state", w.Optimizer, c.state)
			}
		})
	}
}
