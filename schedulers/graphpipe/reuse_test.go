package graphpipe

import (
	"context"
	"math"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/engine"
	_ "github.com/gnnkit/gnnkit/schedulers/sequential"
)

// TestSearchReused: a registry scheduler searches once per batch shape
// of sampled training and rebuilds that choice for the next batch of the
// shape (search_reused 1); a batch of another size is searched; the
// rebuilt plan is valid for its batch and trains it as sequential
// training does (the same loss); reuse=off searches every time.
func TestSearchReused(t *testing.T) {
	f := schedtest.NewFixture(600, 4, 16, 4, 11)
	b, err := cpu.New(core.BackendOptions{Devices: 2, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	m, err := core.BuildModel("mbgnn", core.ModelConfig{InDim: f.FeatureDim, Hidden: 16, Classes: f.Classes, Branches: 2, Dropout: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := engine.New(engine.Config{Model: m, Devices: b.Devices(), Seed: 5, Optimizer: engine.Optimizer{LR: 0.01},
		Data: engine.Data{Graph: f.Graph, Features: f.Features, FeatureDim: f.FeatureDim, Labels: f.Labels}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	var infos []core.DeviceInfo
	for _, d := range b.Devices() {
		infos = append(infos, d.Info())
	}
	sample := func(lo, hi int, seed uint64) (*engine.Batch, *core.Workload) {
		targets := make([]int32, 0, hi-lo)
		for i := lo; i < hi; i++ {
			targets = append(targets, int32(i))
		}
		bt, err := engine.Sample(f.Graph, targets, []int{5, 5}, seed)
		if err != nil {
			t.Fatal(err)
		}
		w, err := tr.Workload(bt, infos)
		if err != nil {
			t.Fatal(err)
		}
		return bt, w
	}
	seq, err := core.NewScheduler("sequential", nil)
	if err != nil {
		t.Fatal(err)
	}
	loss := func(p *core.Plan, bt *engine.Batch) float64 {
		res, err := tr.Run(context.Background(), p, bt, engine.RunOptions{SkipStep: true})
		if err != nil {
			t.Fatal(err)
		}
		return res.Loss
	}
	for _, reuse := range []string{"on", "off"} {
		s, err := core.NewScheduler("graphpipe", map[string]string{"reuse": reuse})
		if err != nil {
			t.Fatal(err)
		}
		plan := func(w *core.Workload) *core.Plan {
			p, err := s.Schedule(context.Background(), w)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Validate(w); err != nil {
				t.Fatalf("reuse=%s: %v", reuse, err)
			}
			return p
		}
		b1, w1 := sample(0, 64, 1)
		b2, w2 := sample(64, 128, 2)
		_, w3 := sample(128, 160, 3)
		p1, p2, p3 := plan(w1), plan(w2), plan(w3)
		p4 := plan(w2) // the 64-target shape again, after another
		want := map[string]float64{"on": 1, "off": 0}[reuse]
		for i, c := range []struct {
			p    *core.Plan
			want float64
		}{{p1, 0}, {p2, want}, {p3, 0}, {p4, want}} {
			if got := c.p.Metrics["search_reused"]; got != c.want {
				t.Errorf("reuse=%s, plan %d: search_reused %v, want %v", reuse, i+1, got, c.want)
			}
		}
		if reuse == "on" {
			for _, k := range []string{"stages", "depth", "micro_batches", "dag_partition", "shared_trunk", "candidates"} {
				if p1.Metrics[k] != p2.Metrics[k] {
					t.Errorf("%s: %v searched, %v reused", k, p1.Metrics[k], p2.Metrics[k])
				}
			}
			if p2.Metrics["simulated_iteration_ms"] <= 0 || p2.Metrics["predicted_iteration_ms"] <= 0 {
				t.Errorf("the reused plan has no estimate or simulation of its own: %v", p2.Metrics)
			}
		}
		// Exact on its own batch, and on the first (the choice fits any
		// batch of the shape).
		for i, c := range []struct {
			p  *core.Plan
			bt *engine.Batch
			w  *core.Workload
		}{{p2, b2, w2}, {p1, b1, w1}} {
			ps, err := seq.Schedule(context.Background(), c.w)
			if err != nil {
				t.Fatal(err)
			}
			got, ref := loss(c.p, c.bt), loss(ps, c.bt)
			if math.Abs(got-ref) > 1e-5*math.Abs(ref) {
				t.Errorf("reuse=%s, batch %d: loss %v, sequential %v", reuse, i+1, got, ref)
			}
		}
	}
	if _, err := core.NewScheduler("1f1b", map[string]string{"reuse": "maybe"}); err == nil {
		t.Error("reuse=maybe was taken")
	}
}
