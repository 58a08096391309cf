package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/engine"
	_ "github.com/gnnkit/gnnkit/models"
	"github.com/gnnkit/gnnkit/schedulers/sequential"
)

func setup(t *testing.T, model string, memCap int64) (*engine.Trainer, []core.Device, *schedtest.Fixture) {
	t.Helper()
	f := schedtest.NewFixture(100, 3, 8, 3, 5)
	b, err := cpu.New(core.BackendOptions{Devices: 2, Threads: 1, MemCap: memCap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	m, err := core.BuildModel(model, core.ModelConfig{InDim: f.FeatureDim, Hidden: 8, Classes: f.Classes, Heads: 2, Dropout: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := engine.New(engine.Config{Model: m, Devices: b.Devices(), Seed: 3, Optimizer: engine.Optimizer{LR: 0.05},
		Data: engine.Data{Graph: f.Graph, Features: f.Features, FeatureDim: f.FeatureDim, Labels: f.Labels}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr, b.Devices(), f
}

func infos(devs []core.Device) []core.DeviceInfo {
	var out []core.DeviceInfo
	for _, d := range devs {
		out = append(out, d.Info())
	}
	return out
}

func batch(n int) []int32 {
	b := make([]int32, n)
	for i := range b {
		b[i] = int32(i)
	}
	return b
}

func TestTrainLearns(t *testing.T) {
	for _, model := range []string{"gcn", "sage", "gat"} {
		t.Run(model, func(t *testing.T) {
			tr, devs, _ := setup(t, model, 0)
			var first, last float64
			s, err := engine.Train(context.Background(), tr, infos(devs), engine.TrainOptions{
				Epochs: 60, Scheduler: &sequential.Scheduler{}, Train: batch(60), Val: batch(100)[60:], Trace: true,
				Progress: func(e engine.EpochStats) {
					if e.Epoch == 1 {
						first = e.Loss
					}
					last = e.Loss
				}})
			if err != nil {
				t.Fatal(err)
			}
			if !(last < first*0.7) {
				t.Errorf("loss went from %.4f to %.4f in 60 epochs", first, last)
			}
			if s.TrainAcc < 0.8 {
				t.Errorf("train accuracy %.3f", s.TrainAcc)
			}
			if s.PeakMem["cpu:0"] <= 0 || len(s.Trace.Events) < 3*60 || s.EpochMsMedian <= 0 {
				t.Errorf("summary lacks measurements: peak %v, %d events", s.PeakMem, len(s.Trace.Events))
			}
		})
	}
}

// TestMediansSameEpochs: with one iteration per epoch, an epoch's time
// holds its iteration's, and both medians leave out the first (warm-up),
// so the epoch median is never below the iteration median (with the
// first epoch counted, three epochs' could be: 6.12 ms against 8.35).
func TestMediansSameEpochs(t *testing.T) {
	tr, devs, _ := setup(t, "gcn", 0)
	for epochs := 1; epochs <= 4; epochs++ {
		s, err := engine.Train(context.Background(), tr, infos(devs), engine.TrainOptions{
			Epochs: epochs, Scheduler: &sequential.Scheduler{}, Train: batch(60), Val: batch(100)[60:]})
		if err != nil {
			t.Fatal(err)
		}
		if s.Iterations != 1 || len(s.EpochMs) != epochs || len(s.IterationMs) != epochs {
			t.Fatalf("%d epochs: %d iterations per epoch, %d epoch times, %d iteration times", epochs, s.Iterations, len(s.EpochMs), len(s.IterationMs))
		}
		for i := range s.EpochMs {
			if s.IterationMs[i] > s.EpochMs[i] {
				t.Errorf("epoch %d: iteration %.3f ms, epoch %.3f ms", i+1, s.IterationMs[i], s.EpochMs[i])
			}
		}
		if want := engine.Median(s.EpochMs[min(1, epochs-1):]); s.EpochMsMedian != want || s.IterationMsMedian > s.EpochMsMedian {
			t.Errorf("%d epochs: epoch median %.3f ms (want %.3f, the epochs after the first), iteration median %.3f ms", epochs, s.EpochMsMedian, want, s.IterationMsMedian)
		}
	}
}

func TestRunCancelled(t *testing.T) {
	tr, devs, _ := setup(t, "gcn", 0)
	b := tr.FullBatch(batch(50))
	w, _ := tr.Workload(b, infos(devs))
	p, _ := (&sequential.Scheduler{}).Schedule(context.Background(), w)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tr.Run(ctx, p, b, engine.RunOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a cancelled context: %v", err)
	}
	// The trainer still works afterwards and has no stale gradients.
	if _, err := tr.Run(context.Background(), p, b, engine.RunOptions{SkipStep: true}); err != nil {
		t.Fatal(err)
	}
}

func TestRunOutOfMemoryMidway(t *testing.T) {
	// Enough for the data and parameters, not for the activations.
	tr, devs, _ := setup(t, "gat", 40<<10)
	b := tr.FullBatch(batch(50))
	w, _ := tr.Workload(b, infos(devs))
	p, _ := (&sequential.Scheduler{}).Schedule(context.Background(), w)
	_, err := tr.Run(context.Background(), p, b, engine.RunOptions{})
	var oom *core.OOMError
	if !errors.As(err, &oom) {
		t.Fatalf("err = %v, want *core.OOMError", err)
	}
	if oom.Need <= oom.Free {
		t.Errorf("OOM reports need %d <= free %d", oom.Need, oom.Free)
	}
}

// TestHomeMoves: a plan whose home differs from the last one's (sampled
// training plans per batch shape, and a pipeline may put the loss on
// another device for another shape) moves the master copy there, and
// training goes on exactly: the same losses and parameters, bit for bit,
// as a trainer whose plans never moved, for home-step and owner-step
// plans alike.
func TestHomeMoves(t *testing.T) {
	// The first half of the ops on cpu:1 and the second (with the loss:
	// home) on cpu:0, and the other way round.
	reversed := schedtest.Stages{K: 2, Assign: func(o, n, d int) int { return d - 1 - schedtest.Halves(o, n, d) }}
	halves := schedtest.Stages{K: 2, Assign: schedtest.Halves}
	for _, c := range []struct {
		name   string
		scheds []core.Scheduler
		owners bool
		spread bool // the parameters owned in turn by cpu:0 and cpu:1
	}{
		{"sequential", []core.Scheduler{&sequential.Scheduler{Device: "cpu:0"}, &sequential.Scheduler{Device: "cpu:1"}}, false, false},
		{"stages", []core.Scheduler{reversed, halves}, false, false},
		{"stages, owner steps", []core.Scheduler{reversed, halves}, true, false},
		// The old home then computes the first half, whose parameters it
		// held (brought back for the move) without gradients.
		{"stages swapped, owner steps", []core.Scheduler{reversed, reversed}, true, false},
		// Each home reads every parameter and owns half: the move leaves
		// nothing for dropHomeCopies to record, and the other device's
		// steps record their newer values (a nil map after a move).
		{"data parallel, owner steps", []core.Scheduler{schedtest.Split{K: 2}, schedtest.Split{K: 2}}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			plans := func(tr *engine.Trainer, devs []core.Device) (*engine.Batch, []*core.Plan) {
				b := tr.FullBatch(batch(50))
				var ps []*core.Plan
				for k, s := range c.scheds {
					// Stages homes its plan on the workload's first device:
					// the second plan's workload lists cpu:1 first.
					ds := infos(devs)
					if k == 1 {
						ds[0], ds[1] = ds[1], ds[0]
					}
					w, err := tr.Workload(b, ds)
					if err != nil {
						t.Fatal(err)
					}
					p, err := s.Schedule(context.Background(), w)
					if err != nil {
						t.Fatal(err)
					}
					if c.spread {
						p.Owners = map[string]core.DeviceID{}
						for i, prm := range tr.Model().Params {
							p.Owners[prm.Name] = devs[i%2].ID()
						}
					}
					if c.owners {
						p = p.OwnerStep(w)
					}
					if err := p.Validate(w); err != nil {
						t.Fatal(err)
					}
					ps = append(ps, p)
				}
				if ps[0].Home == ps[1].Home {
					t.Fatalf("both plans are homed on %s", ps[0].Home)
				}
				return b, ps
			}
			moving, mdevs, _ := setup(t, "gcn", 0)
			still, sdevs, _ := setup(t, "gcn", 0)
			mb, mp := plans(moving, mdevs)
			sb, sp := plans(still, sdevs)
			for i, k := range []int{0, 1, 1, 0, 1} {
				got, err := moving.Run(context.Background(), mp[k], mb, engine.RunOptions{})
				if err != nil {
					t.Fatalf("iteration %d, on the plan homed on %s: %v", i, mp[k].Home, err)
				}
				want, err := still.Run(context.Background(), sp[0], sb, engine.RunOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got.Loss != want.Loss {
					t.Errorf("iteration %d (home %s): loss %.9g, %.9g without moving", i, mp[k].Home, got.Loss, want.Loss)
				}
			}
			equalParams(t, "after moving home", moving, still)
			moving.Close()
			for _, d := range mdevs {
				if used := d.Mem().Stats().Used; used != 0 {
					t.Errorf("%s holds %d bytes after Close", d.ID(), used)
				}
			}
		})
	}
}

// TestHomeMoveFails: a move to a device that cannot hold the model fails
// with the out-of-memory and changes nothing: the next plan, homed where
// the master copy stayed, trains as if it had not been tried.
func TestHomeMoveFails(t *testing.T) {
	moving, mdevs, _ := setup(t, "gcn", 4<<20)
	still, sdevs, _ := setup(t, "gcn", 4<<20)
	plan := func(tr *engine.Trainer, ds []core.DeviceInfo, s core.Scheduler) (*engine.Batch, *core.Plan) {
		b := tr.FullBatch(batch(50))
		w, err := tr.Workload(b, ds)
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.Schedule(context.Background(), w)
		if err != nil {
			t.Fatal(err)
		}
		return b, p.OwnerStep(w)
	}
	stages := schedtest.Stages{K: 2, Assign: schedtest.Halves}
	swapped := infos(mdevs)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	mb, first := plan(moving, infos(mdevs), stages)
	_, away := plan(moving, swapped, stages) // homed on cpu:1
	_, dp := plan(moving, infos(mdevs), schedtest.Split{K: 2})
	sb, sfirst := plan(still, infos(sdevs), stages)
	_, sdp := plan(still, infos(sdevs), schedtest.Split{K: 2})
	if away.Home != mdevs[1].ID() {
		t.Fatalf("the plan to move to is homed on %s", away.Home)
	}
	for _, c := range []struct {
		tr *engine.Trainer
		b  *engine.Batch
		p  *core.Plan
	}{{moving, mb, first}, {still, sb, sfirst}} {
		if _, err := c.tr.Run(context.Background(), c.p, c.b, engine.RunOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Fill cpu:1 but for the room of the first parameter the move would
	// place there, not the second: the move fails halfway.
	w, err := moving.Workload(mb, infos(mdevs))
	if err != nil {
		t.Fatal(err)
	}
	held, size := map[string]bool{}, map[string]int64{}
	for _, o := range w.Ops {
		for _, r := range o.Params {
			size[r.Name] = r.Bytes
		}
	}
	for _, task := range first.Tasks {
		if task.Kind == core.TaskForward && task.Device == mdevs[1].ID() {
			for _, o := range task.OpIndices() {
				for _, r := range w.Ops[o].Params {
					held[r.Name] = true
				}
			}
		}
	}
	var missing []int64
	for _, prm := range moving.Model().Params {
		if !held[prm.Name] {
			missing = append(missing, size[prm.Name])
		}
	}
	if len(missing) < 2 {
		t.Fatalf("cpu:1 lacks %d parameters: the move cannot fail halfway", len(missing))
	}
	room := missing[0] + missing[1] - 4
	st := mdevs[1].Mem().Stats()
	fill, err := mdevs[1].Alloc(int((st.Cap - st.Used - room) / 4))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := moving.Run(context.Background(), away, mb, engine.RunOptions{}); !errors.Is(err, core.ErrOutOfMemory) {
		t.Fatalf("moving home to a full device: %v, want out of memory", err)
	}
	mdevs[1].Free(fill)
	for i := range 2 {
		got, err := moving.Run(context.Background(), dp, mb, engine.RunOptions{})
		if err != nil {
			t.Fatalf("iteration %d after the failed move: %v", i, err)
		}
		want, err := still.Run(context.Background(), sdp, sb, engine.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Loss != want.Loss {
			t.Errorf("iteration %d after the failed move: loss %.9g, %.9g without it", i, got.Loss, want.Loss)
		}
	}
	equalParams(t, "after a failed move", moving, still)
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := engine.Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// Example trains GCN for a few epochs on a small synthetic graph with the
// sequential scheduler.
func Example() {
	f := schedtest.NewFixture(200, 3, 8, 3, 1)
	b, _ := cpu.New(core.BackendOptions{Threads: 1})
	defer b.Close()
	m, _ := core.BuildModel("gcn", core.ModelConfig{InDim: f.FeatureDim, Hidden: 16, Classes: f.Classes})
	tr, err := engine.New(engine.Config{Model: m, Devices: b.Devices(), Seed: 1,
		Data: engine.Data{Graph: f.Graph, Features: f.Features, FeatureDim: f.FeatureDim, Labels: f.Labels}})
	if err != nil {
		panic(err)
	}
	defer tr.Close()
	s, err := engine.Train(context.Background(), tr, infos(b.Devices()), engine.TrainOptions{
		Epochs: 50, Scheduler: &sequential.Scheduler{}, Train: batch(100), Test: batch(200)[100:]})
	if err != nil {
		panic(err)
	}
	fmt.Println("scheduler:", s.Scheduler, "units:", s.Units, "better than chance:", s.TestAcc > 0.5)
	// Output: scheduler: sequential units: 1 better than chance: true
}

// groupPlan puts group i on device i%len(devs) (one stream each) and
// reduces gradients into the first device.
func groupPlan(n int, devs []core.DeviceInfo) *core.Plan {
	p := &core.Plan{Scheduler: "groups", Home: devs[0].ID}
	var stepDeps []int
	last := map[core.DeviceID][]int{}
	for g := 0; g < n; g++ {
		d := devs[g%len(devs)].ID
		p.Units = append(p.Units, core.Unit{ID: g, Targets: []int32{int32(g)}, LossWeight: 1 / float64(n)})
		f := len(p.Tasks)
		p.Tasks = append(p.Tasks, core.Task{ID: f, Kind: core.TaskForward, Unit: g, Device: d, OpLo: 0, OpHi: -1},
			core.Task{ID: f + 1, Kind: core.TaskBackward, Unit: g, Device: d, OpLo: 0, OpHi: -1, Deps: []int{f}})
		last[d] = append(last[d], f+1)
	}
	for i, d := range devs {
		if i == 0 {
			stepDeps = append(stepDeps, last[d.ID]...)
			continue
		}
		if len(last[d.ID]) > 0 {
			id := len(p.Tasks)
			p.Tasks = append(p.Tasks, core.Task{ID: id, Kind: core.TaskReduceGrads, Unit: -1, Device: devs[0].ID, Stream: 1, From: d.ID, Deps: last[d.ID]})
			stepDeps = append(stepDeps, id)
		}
	}
	p.Tasks = append(p.Tasks, core.Task{ID: len(p.Tasks), Kind: core.TaskStep, Unit: -1, Device: devs[0].ID, Stream: 1, Deps: stepDeps})
	return p
}

// TestGroups: units that are whole groups with their own graphs and
// labels (dynamic training's snapshot groups) give the same loss and
// gradients on one device and spread over two.
func TestGroups(t *testing.T) {
	f := schedtest.NewFixture(100, 3, 8, 3, 5)
	groups := func(tr *engine.Trainer) []*engine.Batch {
		var out []*engine.Batch
		for g := 0; g < 5; g++ {
			// Group g keeps the edges whose source id is not 0 mod g+2,
			// and its own labels on a few rows.
			var src, dst []int32
			for i := 0; i < f.Graph.NumDst; i++ {
				for _, j := range f.Graph.Indices[f.Graph.Offsets[i]:f.Graph.Offsets[i+1]] {
					if int(j)%(g+2) != 0 {
						src, dst = append(src, j), append(dst, int32(i))
					}
				}
			}
			gr, err := core.FromEdges(100, 100, src, dst)
			if err != nil {
				t.Fatal(err)
			}
			labels := make([]int32, 100)
			for i := range labels {
				labels[i] = int32((i + g) % 3)
			}
			out = append(out, &engine.Batch{Graph: gr, Labels: labels, Targets: batch(20 + 10*g)})
		}
		return out
	}
	run := func(nd int) (float64, map[string][]float32) {
		tr, devs, _ := setup(t, "gcn", 0)
		gs := groups(tr)
		inf := infos(devs)[:nd]
		w, err := tr.GroupWorkload(gs, inf)
		if err != nil {
			t.Fatal(err)
		}
		p := groupPlan(len(gs), inf)
		for i := range p.Tasks {
			if p.Tasks[i].OpHi == -1 {
				p.Tasks[i].OpHi = len(w.Ops)
			}
		}
		if err := p.Validate(w); err != nil {
			t.Fatal(err)
		}
		res, err := tr.Run(context.Background(), p, nil, engine.RunOptions{Groups: gs, SkipStep: true})
		if err != nil {
			t.Fatal(err)
		}
		g, err := tr.Grads()
		if err != nil {
			t.Fatal(err)
		}
		return res.Loss, g
	}
	l1, g1 := run(1)
	l2, g2 := run(2)
	if e := math.Abs(l1-l2) / math.Abs(l1); e > 1e-6 {
		t.Errorf("loss on 1 device %v, on 2 devices %v", l1, l2)
	}
	for name, v := range g1 {
		if e := schedtest.RelL2(g2[name], v); e > 1e-5 {
			t.Errorf("gradient of %s differs across placements: %.3g", name, e)
		}
	}
	if l1 <= 0 {
		t.Errorf("loss %v", l1)
	}
}

// TestTrainEvalEvery: evaluating after every 3rd epoch (and the last)
// trains exactly as evaluating after each (evaluation changes nothing),
// and the epochs between carry the last evaluation's accuracies.
func TestTrainEvalEvery(t *testing.T) {
	run := func(every int) (*engine.Summary, []engine.EpochStats) {
		tr, devs, _ := setup(t, "gcn", 0)
		var eps []engine.EpochStats
		s, err := engine.Train(context.Background(), tr, infos(devs), engine.TrainOptions{
			Epochs: 7, Scheduler: &sequential.Scheduler{}, Train: batch(60), Val: batch(100)[60:], Test: batch(100)[80:], EvalEvery: every,
			Progress: func(e engine.EpochStats) { eps = append(eps, e) }})
		if err != nil {
			t.Fatal(err)
		}
		return s, eps
	}
	all, each := run(0)
	some, every3 := run(3)
	if all.FinalLoss != some.FinalLoss || all.TestAcc != some.TestAcc || all.ValAcc != some.ValAcc {
		t.Errorf("every epoch: loss %v, acc %v/%v; every 3rd: %v, %v/%v", all.FinalLoss, all.ValAcc, all.TestAcc, some.FinalLoss, some.ValAcc, some.TestAcc)
	}
	for i, e := range every3 {
		want := e.Epoch%3 == 0 || e.Epoch == 7
		if e.Evaluated != want || !each[i].Evaluated || e.Loss != each[i].Loss {
			t.Errorf("epoch %d: evaluated %v (want %v), loss %v vs %v", e.Epoch, e.Evaluated, want, e.Loss, each[i].Loss)
		}
		if e.Epoch > 3 && !want && e.ValAcc != each[2+3*((e.Epoch-1)/3-1)].ValAcc {
			t.Errorf("epoch %d carries val accuracy %v, want the last evaluation's", e.Epoch, e.ValAcc)
		}
	}
	tr, devs, _ := setup(t, "gcn", 0)
	if _, err := engine.Train(context.Background(), tr, infos(devs), engine.TrainOptions{Epochs: 1, Scheduler: &sequential.Scheduler{}, Train: batch(60), EvalEvery: -1}); err == nil {
		t.Error("EvalEvery -1 accepted")
	}
}

// TestGradsBeforeAnyRun: before any iteration Grads is every parameter's
// zero gradient and Params its initial value (Grads once gave the
// initial values, read from the same fallback as Params).
func TestGradsBeforeAnyRun(t *testing.T) {
	tr, _, _ := setup(t, "gcn", 0)
	g, err := tr.Grads()
	if err != nil {
		t.Fatal(err)
	}
	p, err := tr.Params()
	if err != nil {
		t.Fatal(err)
	}
	for _, par := range tr.Model().Params {
		if len(g[par.Name]) != core.NumElems(par.Shape) || len(p[par.Name]) != len(g[par.Name]) {
			t.Fatalf("%s: %d gradient and %d parameter values, want %d", par.Name, len(g[par.Name]), len(p[par.Name]), core.NumElems(par.Shape))
		}
		for i, v := range g[par.Name] {
			if v != 0 {
				t.Fatalf("%s[%d]: gradient %v before any iteration", par.Name, i, v)
			}
		}
		if !slices.Equal(p[par.Name], par.Initial(3)) { // setup's seed
			t.Errorf("%s: parameters before any iteration are not the initial values", par.Name)
		}
	}
}
