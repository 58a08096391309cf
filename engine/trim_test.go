package engine_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/schedulers/sequential"
)

// TestTrimMatchesUntrimmed: on a sampled mini-batch (rows in hop order),
// computing each layer only on the rows later layers read gives the loss
// and gradients of computing every layer on every row, with dropout on,
// for 2- and 3-layer models, and uses less memory (so it did trim).
func TestTrimMatchesUntrimmed(t *testing.T) {
	f := schedtest.NewFixture(400, 5, 16, 4, 11)
	targets := []int32{3, 50, 51, 120, 200, 201, 202, 333, 399}
	for _, model := range []string{"gcn", "sage", "gat"} {
		for _, layers := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/L=%d", model, layers), func(t *testing.T) {
				fan := []int{4, 3, 3}[:layers]
				var loss [2]float64
				var grads [2]map[string][]float32
				var peak [2]int64
				for i, noTrim := range []bool{false, true} {
					be, err := cpu.New(core.BackendOptions{Devices: 1, Threads: 1})
					if err != nil {
						t.Fatal(err)
					}
					defer be.Close()
					m, err := core.BuildModel(model, core.ModelConfig{InDim: f.FeatureDim, Hidden: 8, Classes: f.Classes,
						Layers: layers, Heads: 2, Dropout: 0.5, AttnDropout: 0.3})
					if err != nil {
						t.Fatal(err)
					}
					tr, err := engine.New(engine.Config{Model: m, Devices: be.Devices(), Seed: 3, NoTrim: noTrim,
						Data: engine.Data{Graph: f.Graph, Features: f.Features, FeatureDim: f.FeatureDim, Labels: f.Labels}})
					if err != nil {
						t.Fatal(err)
					}
					defer tr.Close()
					b, err := engine.Sample(f.Graph, targets, fan, 7)
					if err != nil {
						t.Fatal(err)
					}
					w, err := tr.Workload(b, infos(be.Devices()))
					if err != nil {
						t.Fatal(err)
					}
					p, err := (&sequential.Scheduler{}).Schedule(context.Background(), w)
					if err != nil {
						t.Fatal(err)
					}
					res, err := tr.Run(context.Background(), p, b, engine.RunOptions{SkipStep: true})
					if err != nil {
						t.Fatal(err)
					}
					loss[i], peak[i] = res.Loss, res.Trace.PeakMem[be.Devices()[0].ID()]
					if grads[i], err = tr.Grads(); err != nil {
						t.Fatal(err)
					}
				}
				if d := math.Abs(loss[0]-loss[1]) / math.Abs(loss[1]); d > 1e-6 {
					t.Errorf("loss trimmed %.9g, untrimmed %.9g", loss[0], loss[1])
				}
				for name, g := range grads[1] {
					if e := schedtest.RelL2(grads[0][name], g); e > 1e-6 {
						t.Errorf("gradient of %s: relative L2 %.3g", name, e)
					}
				}
				if peak[0] >= peak[1] {
					t.Errorf("peak memory trimmed %d, untrimmed %d: trimming computed no fewer rows", peak[0], peak[1])
				}
			})
		}
	}
}
