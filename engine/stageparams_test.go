package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/schedulers/sequential"
)

// TestStageHoldsOwnParams: in a two-stage pipeline the second device
// holds only its stage's parameters (and gradients) and the inputs its
// ops read, not a full replica, and training still matches the
// one-device loss.
func TestStageHoldsOwnParams(t *testing.T) {
	for _, model := range []string{"gcn", "sage"} {
		t.Run(model, func(t *testing.T) {
			tr, devs, _ := setup(t, model, 0)
			b := tr.FullBatch(batch(60))
			w, err := tr.Workload(b, infos(devs))
			if err != nil {
				t.Fatal(err)
			}
			p, err := schedtest.Stages{K: 2, Assign: schedtest.Halves}.Schedule(context.Background(), w)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Validate(w); err != nil {
				t.Fatal(err)
			}
			var last float64
			for range 3 {
				res, err := tr.Run(context.Background(), p, b, engine.RunOptions{})
				if err != nil {
					t.Fatal(err)
				}
				last = res.Loss
			}
			// The second device's share: parameters + gradients of what its ops read.
			m := tr.Model()
			stage2 := map[string]bool{}
			for _, task := range p.Tasks {
				if task.Kind == core.TaskForward && task.Device == devs[1].ID() {
					for _, o := range task.OpIndices() {
						for _, v := range m.Ops[o].Inputs() {
							for _, ps := range m.Params {
								if ps.Name == v {
									stage2[v] = true
								}
							}
						}
					}
				}
			}
			var want int64
			for _, ps := range m.Params {
				if stage2[ps.Name] {
					want += 2 * 4 * int64(core.NumElems(ps.Shape))
				}
			}
			if len(stage2) == 0 || len(stage2) == len(m.Params) {
				t.Fatalf("stage 2 reads %d of %d parameters: not a split the test can use", len(stage2), len(m.Params))
			}
			// ... and the edge weights its aggregation reads, not the features.
			want += 4 * w.Dims.Edges
			if got := devs[1].Mem().Stats().Used; got != want {
				t.Errorf("%s holds %d bytes between iterations, want %d (its stage's parameters, gradients and edge weights)", devs[1].ID(), got, want)
			}

			// The same three steps on one device give the same loss.
			one, _, _ := setup(t, model, 0)
			b1 := one.FullBatch(batch(60))
			w1, err := one.Workload(b1, infos(devs[:1]))
			if err != nil {
				t.Fatal(err)
			}
			p1, err := schedtest.Split{K: 2}.Schedule(context.Background(), w1)
			if err != nil {
				t.Fatal(err)
			}
			var ref float64
			for range 3 {
				res, err := one.Run(context.Background(), p1, b1, engine.RunOptions{})
				if err != nil {
					t.Fatal(err)
				}
				ref = res.Loss
			}
			if d := (last - ref) / ref; d > 1e-5 || d < -1e-5 {
				t.Errorf("loss after 3 steps %.9g, one device %.9g", last, ref)
			}
		})
	}
}

// TestPredictOnStageWithoutFeatures: when the home device holds a later
// pipeline stage (its ops read no features), evaluation still runs the
// whole model there, with the same predictions as one device, and leaves
// it holding only what its stage reads.
func TestPredictOnStageWithoutFeatures(t *testing.T) {
	nodes := batch(100)
	predict := func(t *testing.T, s core.Scheduler, nDev int) []int32 {
		tr, devs, _ := setup(t, "gcn", 0)
		b := tr.FullBatch(batch(60))
		w, err := tr.Workload(b, infos(devs[:nDev]))
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.Schedule(context.Background(), w)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := tr.Run(context.Background(), p, b, engine.RunOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		before := devs[0].Mem().Stats().Used
		preds, err := tr.Predict(context.Background(), nodes)
		if err != nil {
			t.Fatalf("%s: %v", s.Name(), err)
		}
		if after := devs[0].Mem().Stats().Used; after > before {
			t.Errorf("%s: home holds %d bytes after evaluating, %d before", s.Name(), after, before)
		}
		if _, err := tr.Run(context.Background(), p, b, engine.RunOptions{}); err != nil {
			t.Fatalf("%s: training after evaluating: %v", s.Name(), err)
		}
		return preds
	}
	// The first half of the ops on cpu:1, the second (and home) on cpu:0.
	reversed := schedtest.Stages{K: 2, Assign: func(o, n, d int) int { return d - 1 - schedtest.Halves(o, n, d) }}
	got := predict(t, reversed, 2)
	want := predict(t, schedtest.Split{K: 2}, 1)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("node %d: predicted %d on the pipeline, %d on one device", i, got[i], want[i])
		}
	}
}

// TestPredictStagedUnderCap: with a memory cap on the home device and the
// model's ops spread over devices, evaluation follows the plan's
// placement instead of bringing the whole model home, where the cap
// leaves room for its own stage only (uno-4 under 1f1b at its no-fit
// figure trained an epoch, then ran out of memory evaluating). The
// predictions equal an uncapped run's, evaluated on its home, bit for
// bit; training goes on after it, owner steps included.
func TestPredictStagedUnderCap(t *testing.T) {
	f := schedtest.NewFixture(16, 3, 16, 3, 5)
	m, err := core.BuildModel("uno", core.ModelConfig{InDim: f.FeatureDim, Hidden: 512, Classes: f.Classes, Layers: 2, Branches: 4})
	if err != nil {
		t.Fatal(err)
	}
	nodes := batch(16)
	// Two branches on cpu:1; two, the join, the head and the loss on
	// cpu:0 (home): home holds the larger part of the parameters, and its
	// training peak sets the cap.
	split := schedtest.Stages{K: 2, Assign: func(o, n, d int) int {
		if strings.HasPrefix(m.Ops[o].Name(), "branch0.") || strings.HasPrefix(m.Ops[o].Name(), "branch1.") {
			return 1
		}
		return 0
	}}
	// The loss alone on cpu:1: a stage without parameters, whose inputs
	// evaluation must not leave behind there either.
	lossAlone := schedtest.Stages{K: 2, Assign: func(o, n, d int) int {
		if m.Ops[o].Name() == "loss" {
			return 1
		}
		return 0
	}}
	var stages core.Scheduler
	run := func(t *testing.T, memCap int64) ([]int32, []core.Device, error) {
		b, err := cpu.New(core.BackendOptions{Devices: 2, Threads: 1, MemCap: memCap})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		tr, err := engine.New(engine.Config{Model: m, Devices: b.Devices(), Seed: 3,
			Data: engine.Data{Graph: f.Graph, Features: f.Features, FeatureDim: f.FeatureDim, Labels: f.Labels}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.Close)
		bt := tr.FullBatch(nodes)
		w, err := tr.Workload(bt, infos(b.Devices()))
		if err != nil {
			t.Fatal(err)
		}
		p, err := stages.Schedule(context.Background(), w)
		if err != nil {
			t.Fatal(err)
		}
		p = p.OwnerStep(w)
		for range 2 {
			if _, err := tr.Run(context.Background(), p, bt, engine.RunOptions{}); err != nil {
				return nil, b.Devices(), err
			}
		}
		var before []int64
		for _, d := range b.Devices() {
			before = append(before, d.Mem().Stats().Used)
			d.Mem().ResetPeak()
		}
		preds, err := tr.Predict(context.Background(), nodes)
		if err != nil {
			return nil, b.Devices(), err
		}
		for i, d := range b.Devices() {
			st := d.Mem().Stats()
			t.Logf("cap %d: %s held %d bytes before evaluating, peaked at %d", memCap, d.ID(), before[i], st.Peak)
			if memCap > 0 && st.Used > before[i] {
				t.Errorf("%s holds %d bytes after evaluating, %d before", d.ID(), st.Used, before[i])
			}
		}
		if _, err := tr.Run(context.Background(), p, bt, engine.RunOptions{}); err != nil {
			return nil, b.Devices(), fmt.Errorf("training after evaluating: %w", err)
		}
		return preds, b.Devices(), nil
	}
	for _, c := range []struct {
		name  string
		sched core.Scheduler
		slack int64 // the cap over the larger training peak, in bytes per 100
	}{{"branches split", split, 1}, {"loss alone", lossAlone, 100}} {
		t.Run(c.name, func(t *testing.T) {
			stages = c.sched
			want, devs, err := run(t, 0)
			if err != nil {
				t.Fatal(err)
			}
			var peak int64
			for _, d := range devs {
				peak = max(peak, d.Mem().Stats().Peak)
			}
			capped := peak + peak*c.slack/100
			got, _, err := run(t, capped)
			if err != nil {
				t.Fatalf("under a cap of %d bytes (training peaks at %d): %v", capped, peak, err)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("node %d: predicted %d staged under the cap, %d on the uncapped home", i, got[i], want[i])
				}
			}
		})
	}
}

// TestPredictFallsBackToEvalDevice: evaluation reads whole
// neighbourhoods, so under a cap that sampled training fits, even one
// node's receptive field may not: with Config.EvalDevice the trainer
// evaluates there instead (counted by EvalFallbacks), with the same
// predictions as an uncapped trainer, and leaves its devices as they
// were; without one the error is the out-of-memory.
func TestPredictFallsBackToEvalDevice(t *testing.T) {
	f := schedtest.NewFixture(300, 40, 256, 3, 7) // dense: two hops reach most nodes
	m, err := core.BuildModel("gcn", core.ModelConfig{InDim: f.FeatureDim, Hidden: 8, Classes: f.Classes})
	if err != nil {
		t.Fatal(err)
	}
	nodes := batch(300)
	var trainPeak, trainUsed int64 // the last run's, before evaluating
	run := func(t *testing.T, memCap int64, withEval bool) ([]int32, *engine.Trainer, []core.Device, error) {
		b, err := cpu.New(core.BackendOptions{Devices: 1, Threads: 1, MemCap: memCap})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		cfg := engine.Config{Model: m, Devices: b.Devices(), Seed: 5,
			Data: engine.Data{Graph: f.Graph, Features: f.Features, FeatureDim: f.FeatureDim, Labels: f.Labels}}
		if withEval {
			host, err := cpu.New(core.BackendOptions{Devices: 1, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { host.Close() })
			cfg.EvalDevice = host.Devices()[0]
		}
		tr, err := engine.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.Close)
		bt, err := engine.Sample(f.Graph, batch(8), []int{2, 2}, 11)
		if err != nil {
			t.Fatal(err)
		}
		w, err := tr.Workload(bt, infos(b.Devices()))
		if err != nil {
			t.Fatal(err)
		}
		p, err := (&sequential.Scheduler{}).Schedule(context.Background(), w)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := tr.Run(context.Background(), p, bt, engine.RunOptions{}); err != nil {
				t.Fatalf("training under a cap of %d: %v", memCap, err)
			}
		}
		trainPeak, trainUsed = b.Devices()[0].Mem().Stats().Peak, b.Devices()[0].Mem().Stats().Used
		preds, err := tr.Predict(context.Background(), nodes)
		return preds, tr, b.Devices(), err
	}
	want, _, _, err := run(t, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	memCap := trainPeak + trainPeak/4
	t.Logf("training peaks at %d bytes; cap %d", trainPeak, memCap)
	if _, _, _, err := run(t, memCap, false); !errors.Is(err, core.ErrOutOfMemory) {
		t.Fatalf("without an evaluation device under %d bytes: %v, want out of memory", memCap, err)
	}
	got, tr, devs, err := run(t, memCap, true)
	if err != nil {
		t.Fatal(err)
	}
	if tr.EvalFallbacks() != 1 {
		t.Errorf("EvalFallbacks = %d, want 1", tr.EvalFallbacks())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("node %d: predicted %d on the evaluation device, %d uncapped", i, got[i], want[i])
		}
	}
	if used := devs[0].Mem().Stats().Used; used > trainUsed {
		t.Errorf("the capped device holds %d bytes after evaluating, %d before", used, trainUsed)
	}
}

// TestFirstIterationSpread: an owner-stepped first plan never has home
// hold the whole model. Home starts with the parameters its ops read or
// it owns; the others start, from the seed, on their owners (initSpread).
// Home used to start with every parameter, so under a cap the plan fits
// (each device's measured peak, plus 1%) the first iteration ran out of
// memory before its first task. The losses are those of the uncapped run.
func TestFirstIterationSpread(t *testing.T) {
	f := schedtest.NewFixture(16, 3, 16, 3, 5)
	m, err := core.BuildModel("uno", core.ModelConfig{InDim: f.FeatureDim, Hidden: 512, Classes: f.Classes, Layers: 2, Branches: 4})
	if err != nil {
		t.Fatal(err)
	}
	// Two branches on cpu:1; two, the join and the loss (home) on cpu:0,
	// which peaks the higher.
	split := schedtest.Stages{K: 2, Assign: func(o, n, d int) int {
		if name := m.Ops[o].Name(); strings.HasPrefix(name, "branch0.") || strings.HasPrefix(name, "branch1.") {
			return 1
		}
		return 0
	}}
	nodes := batch(16)
	run := func(memCap int64) ([]float64, int64, error) {
		b, err := cpu.New(core.BackendOptions{Devices: 2, Threads: 1, MemCap: memCap})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		// Plain SGD: no optimizer state, so every iteration holds alike.
		tr, err := engine.New(engine.Config{Model: m, Devices: b.Devices(), Seed: 3, Optimizer: engine.Optimizer{Kind: "sgd"},
			Data: engine.Data{Graph: f.Graph, Features: f.Features, FeatureDim: f.FeatureDim, Labels: f.Labels}})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		bt := tr.FullBatch(nodes)
		w, err := tr.Workload(bt, infos(b.Devices()))
		if err != nil {
			t.Fatal(err)
		}
		p, err := split.Schedule(context.Background(), w)
		if err != nil {
			t.Fatal(err)
		}
		p = p.OwnerStep(w)
		var losses []float64
		var peak int64
		for range 3 {
			res, err := tr.Run(context.Background(), p, bt, engine.RunOptions{})
			if err != nil {
				return nil, 0, err
			}
			losses = append(losses, res.Loss)
			for _, d := range b.Devices() {
				peak = max(peak, d.Mem().Stats().Peak)
			}
		}
		return losses, peak, nil
	}
	want, peak, err := run(0)
	if err != nil {
		t.Fatal(err)
	}
	capped := peak + peak/100
	t.Logf("largest device peak %d bytes, the model %d: capped at %d", peak, m.ParamBytes(), capped)
	got, _, err := run(capped)
	if err != nil {
		t.Fatalf("under a cap of %d bytes (training peaks at %d): %v", capped, peak, err)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("iteration %d: loss %v under the cap, %v without", i, got[i], want[i])
		}
	}
}

// TestSpreadStartFailsCleanly: a first owner-stepped Run that fails while
// starting spread (cpu:0's memory held by something else) leaves the
// trainer as new: every device back to nothing, and a later owner-stepped
// plan, data parallel with owners on both devices, trains with the loss
// of a trainer that never failed. (The undo once left the newer-elsewhere
// map nil, and that plan's first owner step panicked.)
func TestSpreadStartFailsCleanly(t *testing.T) {
	ctx := context.Background()
	run := func(fail bool) float64 {
		tr, devs, _ := setup(t, "gcn", 200<<10)
		b := tr.FullBatch(batch(60))
		w, err := tr.Workload(b, infos(devs))
		if err != nil {
			t.Fatal(err)
		}
		if fail {
			pipe, err := schedtest.Stages{K: 2, Assign: schedtest.Halves}.Schedule(ctx, w)
			if err != nil {
				t.Fatal(err)
			}
			st := devs[0].Mem().Stats()
			blocker, err := devs[0].Alloc(int((st.Cap-st.Used)/4) - 16)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Run(ctx, pipe.OwnerStep(w), b, engine.RunOptions{}); !errors.Is(err, core.ErrOutOfMemory) {
				t.Fatalf("first run with cpu:0 held: %v, want out of memory", err)
			}
			devs[0].Free(blocker)
			for _, d := range devs {
				if used := d.Mem().Stats().Used; used != 0 {
					t.Errorf("%s holds %d bytes after the failed start", d.ID(), used)
				}
			}
		}
		dp, err := schedtest.Split{K: 2}.Schedule(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		dp.Owners = map[string]core.DeviceID{}
		for i, p := range tr.Model().Params {
			dp.Owners[p.Name] = devs[i%2].ID()
		}
		dp = dp.OwnerStep(w)
		var loss float64
		for range 2 {
			res, err := tr.Run(ctx, dp, b, engine.RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			loss = res.Loss
		}
		return loss
	}
	if got, want := run(true), run(false); got != want {
		t.Errorf("loss %v after a failed start, %v without", got, want)
	}
}
