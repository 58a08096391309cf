package engine_test

import (
	"math"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/engine"
)

// TestOptimizerRejectsNonFinite: a NaN or infinite (or negative)
// optimizer setting is an error from New, not a NaN loss after training.
func TestOptimizerRejectsNonFinite(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	cases := []struct {
		name string
		opt  engine.Optimizer
		ok   bool
	}{
		{"defaults", engine.Optimizer{}, true},
		{"lr 0.05", engine.Optimizer{LR: 0.05}, true},
		{"lr NaN", engine.Optimizer{LR: nan}, false},
		{"lr +Inf", engine.Optimizer{LR: inf}, false},
		{"lr -1", engine.Optimizer{LR: -1}, false},
		{"weight decay NaN", engine.Optimizer{WeightDecay: nan}, false},
		{"weight decay -Inf", engine.Optimizer{WeightDecay: -inf}, false},
		{"sgd momentum NaN", engine.Optimizer{Kind: "sgd", Momentum: nan}, false},
		{"adam eps +Inf", engine.Optimizer{Eps: inf}, false},
	}
	f := schedtest.NewFixture(20, 3, 4, 2, 5)
	b, err := cpu.New(core.BackendOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := core.BuildModel("gcn", core.ModelConfig{InDim: f.FeatureDim, Hidden: 4, Classes: f.Classes})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := engine.New(engine.Config{Model: m, Devices: b.Devices(), Seed: 1, Optimizer: c.opt,
				Data: engine.Data{Graph: f.Graph, Features: f.Features, FeatureDim: f.FeatureDim, Labels: f.Labels}})
			if err == nil {
				tr.Close()
			}
			switch {
			case c.ok && err != nil:
				t.Fatalf("New: %v", err)
			case !c.ok && err == nil:
				t.Fatal("New accepted it")
			case !c.ok && !strings.Contains(err.Error(), "finite and non-negative"):
				t.Errorf("New: %v, want it to say finite and non-negative", err)
			}
		})
	}
}
