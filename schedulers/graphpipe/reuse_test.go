package graphpipe

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/engine"
	_ "github.com/gnnkit/gnnkit/schedulers/sequential"
	"github.com/gnnkit/gnnkit/sim"
)

// TestSearchReused: a registry scheduler searches once per batch shape
// of sampled training and rebuilds that choice for the next batch of the
// shape (search_reused 1); a batch of another size is searched; the
// rebuilt plan is valid for its batch, simulated on its batch, and
// trains it as sequential training does (the same loss); other devices
// of the same IDs, or a batch graph of three times the size, are
// searched; a kept choice that no longer fits is not
// rebuilt; reuse=off searches every time.
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
			for _, k := range []string{"stages", "depth", "micro_batches", "dag_partition", "shared_trunk"} {
				if p1.Metrics[k] != p2.Metrics[k] {
					t.Errorf("%s: %v searched, %v reused", k, p1.Metrics[k], p2.Metrics[k])
				}
			}
			if _, ok := p2.Metrics["candidates"]; ok {
				t.Errorf("the reused plan reports the search's candidates (%v): it weighed none", p2.Metrics["candidates"])
			}
			// Its simulation is its own batch's, not the searched one's.
			cm, err := sim.NewCostModel(w2, nil, sim.ClusterFor(w2.Devices))
			if err != nil {
				t.Fatal(err)
			}
			res, err := sim.SimulateModel(p2, cm, sim.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := p2.Metrics["simulated_iteration_ms"], float64(res.Iteration)/1e6; got != want || got == p1.Metrics["simulated_iteration_ms"] {
				t.Errorf("the reused plan says it simulates %v ms; its simulation gives %v ms (the searched batch's %v)", got, want, p1.Metrics["simulated_iteration_ms"])
			}
			// A batch of three times the graph (sampled without fanouts,
			// say) is searched: its best plan can differ.
			w6 := *w2
			w6.Dims.Nodes, w6.Dims.Edges = 3*w2.Dims.Nodes, 3*w2.Dims.Edges
			if got := plan(&w6).Metrics["search_reused"]; got != 0 {
				t.Errorf("a batch graph 3x the searched one's: search_reused %v, want a search", got)
			}
			// The same IDs on other hardware (what the workload says of
			// its devices) are another shape: searched.
			w5 := *w2
			w5.Devices = slices.Clone(w2.Devices)
			for i := range w5.Devices {
				w5.Devices[i].Name += " (faster)"
			}
			if got := plan(&w5).Metrics["search_reused"]; got != 0 {
				t.Errorf("other devices of the same IDs: search_reused %v, want a search", got)
			}
			// A choice that no longer fits its shape (a cluster's memory
			// cut in place: the same key) is not rebuilt.
			gs := s.(*Scheduler)
			cl := sim.ClusterFor(w2.Devices)
			gs.Cluster = cl
			plan(w1)
			if got := plan(w2).Metrics["search_reused"]; got != 1 {
				t.Fatalf("on cluster %s: search_reused %v, want 1", cl.Name, got)
			}
			for i := range cl.Devices {
				cl.Devices[i].MemBytes = 64 << 10
			}
			cm, err = sim.NewCostModel(w2, nil, cl)
			if err != nil {
				t.Fatal(err)
			}
			var devs []core.DeviceID
			for _, d := range w2.Devices {
				devs = append(devs, d.ID)
			}
			if p, ok, err := gs.reuse.replan(context.Background(), gs, w2, cm, devs); ok || err != nil {
				t.Errorf("64 KiB devices: the kept choice was rebuilt (%v, %v), want a search", p != nil, err)
			}
			gs.Cluster = nil
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
