package sim_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/engine"
	_ "github.com/gnnkit/gnnkit/models"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
	"github.com/gnnkit/gnnkit/schedulers/sequential"
	"github.com/gnnkit/gnnkit/sim"
)

func medianDur(ds []time.Duration) time.Duration {
	c := append([]time.Duration(nil), ds...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return c[len(c)/2]
}

// accuracySetup is the workload of the simulated-vs-measured check: GCN
// on a seeded random graph, on two logical CPU devices of one thread.
type accuracySetup struct {
	tr   *engine.Trainer
	devs []core.Device
	w    *core.Workload
	b    *engine.Batch
}

func newAccuracySetup(t testing.TB, model string, nodes, hidden int) *accuracySetup {
	t.Helper()
	f := schedtest.NewFixture(nodes, 4, 64, 8, 3)
	be, err := cpu.New(core.BackendOptions{Devices: 2, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	devs := be.Devices()
	m, err := core.BuildModel(model, core.ModelConfig{InDim: f.FeatureDim, Hidden: hidden, Classes: f.Classes, Heads: 2, Dropout: 0.5, AttnDropout: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := engine.New(engine.Config{Model: m, Devices: devs, Seed: 1,
		Data: engine.Data{Graph: f.Graph, Features: f.Features, FeatureDim: f.FeatureDim, Labels: f.Labels}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	all := make([]int32, nodes)
	for i := range all {
		all[i] = int32(i)
	}
	b := tr.FullBatch(all)
	infos := []core.DeviceInfo{devs[0].Info(), devs[1].Info()}
	w, err := tr.Workload(b, infos)
	if err != nil {
		t.Fatal(err)
	}
	return &accuracySetup{tr: tr, devs: devs, w: w, b: b}
}

// TestAccuracy is the simulator-vs-executor check: on two logical CPU
// devices of one thread, the predicted iteration time of a sequential, a
// data-parallel (3 units over 2 devices, gradients reduced) and two
// pipeline plans (ops split in halves across the devices, 4
// micro-batches, listed unit by unit and GPipe-style), a micro-batched
// plan (8 subgraph units, Cherry's shape) and the pipeline schedulers'
// plans (1F1B and GPipe orders from graphpipe's schedule builder on the
// halves, owner-stepped, and the graphpipe scheduler's own choice) must be
// within 20% of the measured median. The profile, the plans' runs and the
// concurrency calibration are interleaved rep by rep, so that all see the
// same load on a shared machine; an attempt that misses is retried (up to
// three), since other processes' load comes and goes.
//
// Timing on a shared machine is noisy and `go test ./...` runs packages in
// parallel, so by default the test only guards against gross errors (within
// 2x); GNNKIT_TIMING=1 applies the 20% bound (bench/RESULTS.md records the
// measured table).
func TestAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("times real runs")
	}
	checkAccuracy(t, 15, "gcn", nil)
}

type accuracyRow struct {
	plan            string
	sim, meas       time.Duration
	bubble, cores   float64
	simMem, measMem int64
}

func (r accuracyRow) ratio() float64 { return float64(r.sim) / float64(r.meas) }

func accuracyTable(rows []accuracyRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| plan | simulated | measured (median) | sim/meas | bubble (sim) | peak cpu:0 sim / measured |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %.2f ms | %.2f ms | %.2f | %.2f | %s / %s |\n", r.plan, float64(r.sim)/1e6, float64(r.meas)/1e6,
			r.ratio(), r.bubble, core.FormatBytes(r.simMem), core.FormatBytes(r.measMem))
	}
	return b.String()
}

type namedSched struct {
	name string
	s    core.Scheduler
}

// TestAccuracyDAGModel is TestAccuracy's check for the multi-branch GNN
// (towers of 1, 2 and 3 hops joined by a fusion MLP) under the pipeline
// schedulers: the graphpipe scheduler's own choice and a fixed two-device
// split of its ops in two halves by index (owner steps, subgraph
// micro-batches).
func TestAccuracyDAGModel(t *testing.T) {
	if testing.Short() {
		t.Skip("times real runs")
	}
	scheds := []namedSched{
		{"graphpipe scheduler, m = 4 (its choice)", &graphpipe.Scheduler{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: 4}},
		{"1f1b (graphpipe.BuildPlan): halves, 4 micro-batches, owner steps", halves(graphpipe.OneFOneB)},
	}
	checkAccuracy(t, 9, "mbgnn", scheds)
}

// checkAccuracy measures and simulates the plans (measureAccuracy) up to
// three times, until every plan's simulated time is within the bound of
// the measured: 2x by default, 20% with GNNKIT_TIMING=1.
func checkAccuracy(t *testing.T, reps int, model string, scheds []namedSched) {
	t.Helper()
	bound := 1.0
	if os.Getenv("GNNKIT_TIMING") == "1" {
		bound = 0.20
	}
	var rows []accuracyRow
	for attempt := 1; attempt <= 3; attempt++ {
		rows = measureAccuracy(t, reps, model, scheds)
		worst := 0.0
		for _, r := range rows {
			worst = math.Max(worst, math.Abs(r.ratio()-1))
		}
		t.Logf("attempt %d (host cores %.2f):\n%s", attempt, rows[0].cores, accuracyTable(rows))
		if worst <= bound {
			return
		}
	}
	t.Errorf("simulated vs measured iteration time off by more than %.0f%% in three attempts:\n%s", 100*bound, accuracyTable(rows))
}

// halves plans the ops in two halves across the workload's first two
// devices with the pipeline schedule builder: the first half on the
// second device, so that the loss (and the plan's home) is on the first,
// the trainer's home.
type halves graphpipe.Kind

func (h halves) Name() string { return "halves-" + graphpipe.Kind(h).String() }

func (h halves) Schedule(_ context.Context, w *core.Workload) (*core.Plan, error) {
	part := graphpipe.Partition{StageOf: make([]int, len(w.Ops)), Chain: true,
		Devices: [][]core.DeviceID{{w.Devices[1].ID}, {w.Devices[0].ID}}}
	for o := range part.StageOf {
		part.StageOf[o] = min(1, 2*o/len(w.Ops))
	}
	return graphpipe.BuildPlan(w, part, 4, graphpipe.Kind(h), h.Name())
}

// measureAccuracy profiles GCN on the fixture interleaved with timed runs
// of each plan and returns simulated and measured times.
func measureAccuracy(t *testing.T, reps int, model string, only []namedSched) []accuracyRow {
	ctx := context.Background()
	s := newAccuracySetup(t, model, 4000, 64)
	cl, err := sim.CPUCluster(ctx, s.devs)
	if err != nil {
		t.Fatal(err)
	}
	scheds := []namedSched{
		{"sequential", &sequential.Scheduler{}},
		{"data parallel: 3 units on 2 devices", schedtest.Split{K: 3}},
		{"pipeline: halves, 4 micro-batches, unit by unit", schedtest.Stages{K: 4, Assign: schedtest.Halves}},
		{"pipeline: halves, 4 micro-batches, GPipe order", schedtest.Stages{K: 4, Assign: schedtest.Halves, GPipe: true}},
		{"micro-batches: 8 subgraph units on 1 device", micro{k: 8}},
		// The pipeline schedulers' own plans (owner-stepped): their
		// schedule builder on a fixed two-stage partition, and the
		// graphpipe scheduler's choice.
		{"1f1b (graphpipe.BuildPlan): halves, 4 micro-batches, owner steps", halves(graphpipe.OneFOneB)},
		{"gpipe (graphpipe.BuildPlan): halves, 4 micro-batches, owner steps", halves(graphpipe.GPipe)},
		{"graphpipe scheduler, m = 4 (its choice)", &graphpipe.Scheduler{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: 4}},
	}
	if only != nil {
		scheds = only
	}
	plans := make([]*core.Plan, len(scheds))
	meas := make([][]time.Duration, len(scheds))
	peak := make([]int64, len(scheds))
	for i, sc := range scheds {
		p, err := sc.s.Schedule(ctx, s.w)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(s.w); err != nil {
			t.Fatal(err)
		}
		plans[i] = p
		if _, err := s.tr.Run(ctx, p, s.b, engine.RunOptions{}); err != nil { // warm-up
			t.Fatal(err)
		}
	}
	// Profiled at the micro-batch sizes the pipeline schedulers may plan
	// (and the whole graph), as `train` profiles (cmd/gnnkit's
	// measurePlannerCosts): with only 250 targets and the whole graph,
	// a 1,000-target unit's backward was interpolated 15-20% short and the
	// owner-stepped pipelines came out 0.84-0.88 of measured.
	ladder := append((&graphpipe.Scheduler{}).UnitSizes(len(s.b.Targets)), 0)
	var cores []float64
	prof, err := sim.MeasureWith(ctx, s.tr, s.devs[0], sim.MeasureOptions{Ladder: ladder, Reps: reps, Between: func(int) error {
		for i, p := range plans {
			runtime.GC()
			t0 := time.Now() // Run's own wall, as engine.Train times an iteration
			res, err := s.tr.Run(ctx, p, s.b, engine.RunOptions{})
			if err != nil {
				return err
			}
			meas[i] = append(meas[i], time.Since(t0))
			peak[i] = max(peak[i], res.Trace.PeakMem[s.devs[0].ID()])
		}
		c, err := sim.MeasureConcurrency(ctx, s.tr, s.devs, 1)
		cores = append(cores, c)
		return err
	}})
	if err != nil {
		t.Fatal(err)
	}
	sort.Float64s(cores)
	cl.HostCores = cores[len(cores)/2]
	var rows []accuracyRow
	for i, p := range plans {
		r, err := sim.Simulate(p, s.w, prof, cl)
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, accuracyRow{plan: scheds[i].name, sim: r.Iteration, meas: medianDur(meas[i]), bubble: r.Bubble,
			cores: cl.HostCores, simMem: r.PeakMem[s.devs[0].ID()], measMem: peak[i]})
	}
	return rows
}
