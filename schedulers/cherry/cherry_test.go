package cherry_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/data"
	"github.com/gnnkit/gnnkit/engine"
	_ "github.com/gnnkit/gnnkit/models"
	"github.com/gnnkit/gnnkit/schedulers/cherry"
	"github.com/gnnkit/gnnkit/schedulers/sequential"
)

func TestConformance(t *testing.T) {
	for _, k := range []int{0, 3} {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			schedtest.Run(t, func(t *testing.T) core.Scheduler { return &cherry.Scheduler{K: k} })
		})
	}
}

// TestOracleSynthetic: K micro-batches give the sequential full-batch
// loss and gradients, with dropout on, for every model.
func TestOracleSynthetic(t *testing.T) {
	for _, k := range []int{1, 2, 4, 8, 16} {
		t.Run(fmt.Sprintf("K=%d", k), func(t *testing.T) {
			schedtest.Oracle(t, &cherry.Scheduler{K: k}, schedtest.OracleOptions{Devices: 1})
		})
	}
}

// TestOracleSampled: the same on a sampled mini-batch (fan-outs 3,2):
// micro-batches reproduce the full mini-batch.
func TestOracleSampled(t *testing.T) {
	f := schedtest.NewFixture(600, 4, 16, 4, 9)
	for _, k := range []int{2, 8} {
		t.Run(fmt.Sprintf("K=%d", k), func(t *testing.T) {
			schedtest.Oracle(t, &cherry.Scheduler{K: k}, schedtest.OracleOptions{Devices: 1, Fixture: f,
				Batch: []int32{5, 17, 40, 41, 99, 120, 121, 300, 301, 302, 450, 599, 2, 3, 77, 88}, Fanouts: []int{3, 2}})
		})
	}
}

func coraFixture(t *testing.T) (*schedtest.Fixture, []int32) {
	t.Helper()
	ds, err := data.Cora()
	if err != nil {
		t.Fatal(err)
	}
	return &schedtest.Fixture{Graph: ds.Graph, Features: ds.RowNormalizedFeatures(), FeatureDim: ds.FeatureDim,
		Labels: ds.Labels, Classes: ds.NumClasses}, ds.Train
}

// TestOracleCora: K micro-batches on the embedded Cora, full graph.
func TestOracleCora(t *testing.T) {
	if testing.Short() {
		t.Skip("Cora oracle: skipped with -short")
	}
	f, train := coraFixture(t)
	for _, k := range []int{1, 2, 4, 8, 16} {
		t.Run(fmt.Sprintf("K=%d", k), func(t *testing.T) {
			schedtest.Oracle(t, &cherry.Scheduler{K: k}, schedtest.OracleOptions{Devices: 1, Fixture: f, Batch: train, Steps: 2})
		})
	}
}

func TestPartition(t *testing.T) {
	f := schedtest.NewFixture(400, 3, 4, 4, 2)
	targets := make([]int32, 0, 300)
	for i := int32(0); i < 300; i++ {
		targets = append(targets, (i*7)%400)
	}
	for _, k := range []int{1, 2, 5, 16, 300, 500} {
		parts := cherry.Partition(f.Graph, targets, k)
		if want := min(k, len(targets)); len(parts) != want {
			t.Errorf("k=%d: %d parts, want %d", k, len(parts), want)
		}
		var all []int32
		lo, hi := len(targets), 0
		for _, p := range parts {
			all = append(all, p...)
			lo, hi = min(lo, len(p)), max(hi, len(p))
		}
		sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
		want := append([]int32(nil), targets...)
		sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
		if fmt.Sprint(all) != fmt.Sprint(want) {
			t.Errorf("k=%d: parts do not cover the targets exactly once", k)
		}
		if k <= len(targets) && float64(hi) > 1.06*float64(len(targets))/float64(k)+1 {
			t.Errorf("k=%d: part sizes %d..%d are unbalanced", k, lo, hi)
		}
		if again := cherry.Partition(f.Graph, targets, k); fmt.Sprint(again) != fmt.Sprint(parts) {
			t.Errorf("k=%d: partition is not deterministic", k)
		}
	}
	// Shared-neighbour partitioning beats a round-robin split on redundancy.
	recept := func(parts [][]int32) int {
		n := 0
		for _, p := range parts {
			s, _ := f.Graph.KHop(p, 2)
			n += len(s.Nodes)
		}
		return n
	}
	k := 8
	rr := make([][]int32, k)
	for i, t := range targets {
		rr[i%k] = append(rr[i%k], t)
	}
	if got, base := recept(cherry.Partition(f.Graph, targets, k)), recept(rr); got >= base {
		t.Errorf("partition reads %d receptive nodes, round-robin %d: no better", got, base)
	}
}

type setup struct {
	tr   *engine.Trainer
	devs []core.Device
	b    *engine.Batch
}

func newSetup(t *testing.T, f *schedtest.Fixture, model string, cfg core.ModelConfig, memCap int64, b func(*engine.Trainer) *engine.Batch) setup {
	t.Helper()
	be, err := cpu.New(core.BackendOptions{MemCap: memCap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	cfg.InDim, cfg.Classes = f.FeatureDim, f.Classes
	m, err := core.BuildModel(model, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := engine.New(engine.Config{Model: m, Devices: be.Devices(), Seed: 5,
		Data: engine.Data{Graph: f.Graph, Features: f.Features, FeatureDim: f.FeatureDim, Labels: f.Labels}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return setup{tr, be.Devices(), b(tr)}
}

func infos(devs []core.Device) []core.DeviceInfo {
	var out []core.DeviceInfo
	for _, d := range devs {
		out = append(out, d.Info())
	}
	return out
}

// run schedules and runs two iterations, returning the plan and the
// second iteration's measured peak.
func (s setup) run(t *testing.T, sched core.Scheduler) (*core.Plan, int64, error) {
	t.Helper()
	w, err := s.tr.Workload(s.b, infos(s.devs))
	if err != nil {
		t.Fatal(err)
	}
	p, err := sched.Schedule(context.Background(), w)
	if err != nil {
		return nil, 0, err
	}
	if err := p.Validate(w); err != nil {
		t.Fatalf("invalid plan: %v", err)
	}
	var peak int64
	for i := 0; i < 2; i++ {
		res, err := s.tr.Run(context.Background(), p, s.b, engine.RunOptions{})
		if err != nil {
			return p, 0, err
		}
		peak = res.Trace.PeakMem[s.devs[0].ID()]
	}
	return p, peak, nil
}

// TestEstimateMatchesMeasured: the predicted peak is within 10% of the
// measured one (the meta-device replay makes it exact in practice).
func TestEstimateMatchesMeasured(t *testing.T) {
	f := schedtest.NewFixture(500, 4, 24, 4, 4)
	for _, model := range []string{"gcn", "sage", "gat"} {
		for _, k := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/K=%d", model, k), func(t *testing.T) {
				s := newSetup(t, f, model, core.ModelConfig{Hidden: 16, Heads: 2, Dropout: 0.5, AttnDropout: 0.3}, 0,
					func(tr *engine.Trainer) *engine.Batch { return tr.FullBatch(nodesUpTo(400)) })
				p, measured, err := s.run(t, &cherry.Scheduler{K: k})
				if err != nil {
					t.Fatal(err)
				}
				pred := p.MemEstimate[s.devs[0].ID()]
				if e := float64(pred)/float64(measured) - 1; e > 0.10 || e < -0.10 {
					t.Errorf("predicted %d, measured %d: %+.1f%%", pred, measured, 100*e)
				}
			})
		}
	}
}

func nodesUpTo(n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(i)
	}
	return out
}

// TestCapTooSmall: a cap under the largest single node's footprint is a
// clear error naming the minimum cap.
func TestCapTooSmall(t *testing.T) {
	f := schedtest.NewFixture(300, 4, 32, 4, 6)
	s := newSetup(t, f, "gcn", core.ModelConfig{Hidden: 16}, 24<<10, func(tr *engine.Trainer) *engine.Batch { return tr.FullBatch(nodesUpTo(200)) })
	_, _, err := s.run(t, &cherry.Scheduler{})
	if !errors.Is(err, cherry.ErrTooSmall) || !strings.Contains(err.Error(), "at least") {
		t.Fatalf("err = %v, want ErrTooSmall naming the minimum cap", err)
	}
}

// TestMinimumCapSuffices: with the cap set to the reported minimum,
// cherry trains.
func TestMinimumCapSuffices(t *testing.T) {
	f := schedtest.NewFixture(300, 4, 32, 4, 6)
	full := func(tr *engine.Trainer) *engine.Batch { return tr.FullBatch(nodesUpTo(200)) }
	probe := newSetup(t, f, "gcn", core.ModelConfig{Hidden: 16}, 0, full)
	w, err := probe.tr.Workload(probe.b, infos(probe.devs))
	if err != nil {
		t.Fatal(err)
	}
	resident, _, _ := w.Estimator(nil, probe.devs[0].ID())
	var worst int64
	for _, n := range nodesUpTo(200) {
		_, p, err := w.Estimator([]core.Unit{{Targets: []int32{n}, Subgraph: true}}, probe.devs[0].ID())
		if err != nil {
			t.Fatal(err)
		}
		worst = max(worst, p)
	}
	s := newSetup(t, f, "gcn", core.ModelConfig{Hidden: 16}, resident+worst, full)
	p, peak, err := s.run(t, &cherry.Scheduler{})
	if err != nil {
		t.Fatalf("at the minimum cap %d: %v", resident+worst, err)
	}
	if peak > resident+worst {
		t.Errorf("measured peak %d over the cap %d", peak, resident+worst)
	}
	t.Logf("K=%v at the minimum cap", p.Metrics["micro_batches"])
}

// TestMemoryWall is the capacity check: a graph of 200k nodes and
// 4M edges, 128 features, hidden 256, 3 layers, a sampled mini-batch whose
// sequential peak is over 8x the cap: sequential fails with the
// out-of-memory error that suggests cherry; cherry trains under the cap.
func TestMemoryWall(t *testing.T) {
	if testing.Short() {
		t.Skip("200k-node memory-wall run: skipped with -short")
	}
	ds, err := data.Open("synthetic:rmat,nodes=200000,edges=4700000,feat=128,classes=8,seed=3")
	if err != nil {
		t.Fatal(err)
	}
	if ds.NumEdges() < 4_000_000 {
		t.Fatalf("graph has %d edges, want >= 4M", ds.NumEdges())
	}
	f := &schedtest.Fixture{Graph: ds.Graph, Features: ds.Features, FeatureDim: ds.FeatureDim, Labels: ds.Labels, Classes: ds.NumClasses}
	cfg := core.ModelConfig{Hidden: 256, Layers: 3, Dropout: 0.5}
	batch := func(tr *engine.Trainer) *engine.Batch {
		b, err := engine.Sample(ds.Graph, ds.Train, []int{10, 10, 10}, 1)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	probe := newSetup(t, f, "gcn", cfg, 0, batch)
	w, err := probe.tr.Workload(probe.b, infos(probe.devs))
	if err != nil {
		t.Fatal(err)
	}
	seqPlan, err := (&sequential.Scheduler{}).Schedule(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	resident, unit, err := w.Estimator(seqPlan.Units, probe.devs[0].ID())
	if err != nil {
		t.Fatal(err)
	}
	seqPeak := resident + unit
	memCap := seqPeak / 8
	t.Logf("batch graph: %d nodes, %d edges; sequential peak %s, cap %s", probe.b.Graph.NumDst, probe.b.Graph.NumEdges(),
		core.FormatBytes(seqPeak), core.FormatBytes(memCap))

	seq := newSetup(t, f, "gcn", cfg, memCap, batch)
	if _, _, err := seq.run(t, &sequential.Scheduler{}); !errors.Is(err, core.ErrOutOfMemory) || !strings.Contains(err.Error(), "cherry") {
		t.Fatalf("sequential under the cap: %v, want an out-of-memory error suggesting cherry", err)
	}
	ch := newSetup(t, f, "gcn", cfg, memCap, batch)
	p, peak, err := ch.run(t, &cherry.Scheduler{})
	if err != nil {
		t.Fatalf("cherry under the cap: %v", err)
	}
	t.Logf("cherry: K=%v redundancy %.2f, measured peak %s (predicted %s) under cap %s",
		p.Metrics["micro_batches"], p.Metrics["redundancy"], core.FormatBytes(peak), core.FormatBytes(p.MemEstimate[ch.devs[0].ID()]), core.FormatBytes(memCap))
	if peak > memCap {
		t.Errorf("measured peak %d over the cap %d", peak, memCap)
	}
	// The same with activation reuse: the cache counts against the cap.
	re := newSetup(t, f, "gcn", cfg, memCap, batch)
	p, peak, err = re.run(t, &cherry.Scheduler{Reuse: true})
	if err != nil {
		t.Fatalf("cherry with reuse under the cap: %v", err)
	}
	t.Logf("cherry reuse: K=%v chunks %v shared %v keep %v redundancy %.2f, measured peak %s (predicted %s) under cap %s",
		p.Metrics["micro_batches"], p.Metrics["reuse_chunks"], p.Metrics["reuse_shared"], p.Metrics["reuse_keep"], p.Metrics["redundancy"],
		core.FormatBytes(peak), core.FormatBytes(p.MemEstimate[re.devs[0].ID()]), core.FormatBytes(memCap))
	if peak > memCap {
		t.Errorf("reuse: measured peak %d over the cap %d", peak, memCap)
	}
}
