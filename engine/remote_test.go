package engine_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/schedulers/sequential"
)

// inproc is an engine.Remote served by a second trainer in this process:
// the worker side (Trainer.RunSlice) without the wire. Batches are copied
// as a worker receives them, so the two trainers share no state.
type inproc struct {
	name string
	devs []core.Device
	tr   *engine.Trainer

	mu      sync.Mutex
	batches map[*engine.Batch]*engine.Batch
	loads   int
	runs    int
	fail    func(run int) error // injected failure
	plan    *core.Plan          // the last slice's
}

func (r *inproc) Name() string { return r.name }

func (r *inproc) Devices() []core.DeviceInfo {
	var out []core.DeviceInfo
	for _, d := range r.devs {
		out = append(out, d.Info())
	}
	return out
}

func (r *inproc) Load(_ context.Context, spec *engine.RemoteSpec) error {
	m, err := core.BuildModel(spec.Model.Name, spec.Model.Config)
	if err != nil {
		return err
	}
	r.tr, err = engine.New(engine.Config{Model: m, Data: spec.Data, Devices: r.devs, Optimizer: spec.Optimizer, Seed: spec.Seed})
	r.loads++
	return err
}

func (r *inproc) Run(ctx context.Context, s *engine.Slice) (*engine.SliceResult, error) {
	r.mu.Lock()
	r.runs++
	n := r.runs
	r.plan = s.Plan
	if r.batches == nil {
		r.batches = map[*engine.Batch]*engine.Batch{}
	}
	b, ok := r.batches[s.Batch]
	if !ok {
		b = &engine.Batch{Graph: s.Batch.Graph, Nodes: s.Batch.Nodes, Targets: s.Batch.Targets, Graphs: s.Batch.Graphs, Labels: s.Batch.Labels}
		r.batches[s.Batch] = b
	}
	r.mu.Unlock()
	if r.fail != nil {
		if err := r.fail(n); err != nil {
			return nil, err
		}
	}
	c := *s
	c.Batch = b
	return r.tr.RunSlice(ctx, &c)
}

// remoteSetup opens four one-thread CPU devices: cpu:0 and cpu:1 stay
// here, cpu:2 and cpu:3 are served by an in-process worker.
func remoteSetup(t *testing.T, model string, f *schedtest.Fixture) (host *engine.Trainer, ref *engine.Trainer, all []core.DeviceInfo, w *inproc) {
	t.Helper()
	b, err := cpu.New(core.BackendOptions{Devices: 4, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	devs := b.Devices()
	w = &inproc{name: "test-worker", devs: devs[2:]}
	mk := func(local []core.Device, remote []engine.Remote) *engine.Trainer {
		m, err := core.BuildModel(model, core.ModelConfig{InDim: f.FeatureDim, Hidden: 8, Classes: f.Classes, Heads: 2, Dropout: 0.5, AttnDropout: 0.5, Layers: 2})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := engine.New(engine.Config{Model: m, Devices: local, Remote: remote, Seed: 11,
			Data:      engine.Data{Graph: f.Graph, Features: f.Features, FeatureDim: f.FeatureDim, Labels: f.Labels},
			Optimizer: engine.Optimizer{LR: 0.01, WeightDecay: 5e-4}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.Close)
		return tr
	}
	// The reference needs its own devices: a trainer owns its replicas.
	rb, err := cpu.New(core.BackendOptions{Devices: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rb.Close() })
	return mk(devs[:2], []engine.Remote{w}), mk(rb.Devices(), nil), infos(devs), w
}

func pick(all []core.DeviceInfo, ids ...core.DeviceID) []core.DeviceInfo {
	var out []core.DeviceInfo
	for _, d := range all {
		if slices.Contains(ids, d.ID) {
			out = append(out, d)
		}
	}
	return out
}

// TestRemoteExact is the oracle across the process boundary (without the
// wire): units split between this process and a worker, all on the
// worker, a pipeline inside the worker, the home on the worker, and a
// sampled batch give the sequential reference's loss and gradients, then
// the same loss after a few steps.
func TestRemoteExact(t *testing.T) {
	f := schedtest.NewFixture(120, 3, 16, 4, 3)
	targets := batch(90)
	cases := []struct {
		name    string
		sched   core.Scheduler
		devs    []core.DeviceID
		fanouts []int
	}{
		{"split-host-and-worker", schedtest.Split{K: 4}, []core.DeviceID{"cpu:0", "cpu:2", "cpu:1", "cpu:3"}, nil},
		{"all-on-worker-home-here", schedtest.Split{K: 3}, []core.DeviceID{"cpu:0", "cpu:2", "cpu:3"}, nil},
		{"home-on-worker", schedtest.Split{K: 3}, []core.DeviceID{"cpu:3", "cpu:2"}, nil},
		{"sequential-on-worker", &sequential.Scheduler{}, []core.DeviceID{"cpu:2"}, nil},
		{"pipeline-inside-worker", schedtest.Stages{K: 2, Assign: schedtest.Halves}, []core.DeviceID{"cpu:2", "cpu:3"}, nil},
		{"sampled-batch", schedtest.Split{K: 3}, []core.DeviceID{"cpu:1", "cpu:2", "cpu:3"}, []int{4, 3}},
		// Owner-stepped plans touching a worker run as home-step plans.
		{"owners-split-host-and-worker", schedtest.Owners{S: schedtest.Split{K: 4}}, []core.DeviceID{"cpu:0", "cpu:2", "cpu:1", "cpu:3"}, nil},
		{"owners-pipeline-inside-worker", schedtest.Owners{S: schedtest.Stages{K: 2, Assign: schedtest.Halves}}, []core.DeviceID{"cpu:2", "cpu:3"}, nil},
	}
	for _, model := range []string{"gcn", "gat"} {
		for _, c := range cases {
			t.Run(model+"/"+c.name, func(t *testing.T) {
				host, ref, all, w := remoteSetup(t, model, f)
				mkBatch := func(tr *engine.Trainer) *engine.Batch {
					if c.fanouts == nil {
						return tr.FullBatch(targets)
					}
					b, err := engine.Sample(f.Graph, targets, c.fanouts, 99)
					if err != nil {
						t.Fatal(err)
					}
					return b
				}
				hb, rb := mkBatch(host), mkBatch(ref)
				var devs []core.DeviceInfo
				for _, id := range c.devs {
					devs = append(devs, pick(all, id)...)
				}
				plan := schedule(t, host, hb, devs, c.sched)
				refPlan := schedule(t, ref, rb, pick(all, "cpu:0"), &sequential.Scheduler{})
				ctx := context.Background()
				got, err := host.Run(ctx, plan, hb, engine.RunOptions{SkipStep: true})
				if err != nil {
					t.Fatal(err)
				}
				want, err := ref.Run(ctx, refPlan, rb, engine.RunOptions{SkipStep: true})
				if err != nil {
					t.Fatal(err)
				}
				if e := math.Abs(got.Loss-want.Loss) / want.Loss; e > 1e-5 {
					t.Errorf("loss %.9g vs reference %.9g (rel %.3g)", got.Loss, want.Loss, e)
				}
				gg, _ := host.Grads()
				gr, _ := ref.Grads()
				var a, b []float32
				names := make([]string, 0, len(gr))
				for n := range gr {
					names = append(names, n)
				}
				sort.Strings(names)
				for _, n := range names {
					a, b = append(a, gg[n]...), append(b, gr[n]...)
				}
				if e := schedtest.RelL2(a, b); e > 1e-5 || math.IsNaN(e) {
					t.Errorf("gradient rel L2 %.3g", e)
				}
				onWorker := false
				for _, e := range got.Trace.Events {
					onWorker = onWorker || (e.Device == "cpu:2" || e.Device == "cpu:3") && e.Cat == "forward"
				}
				if !onWorker {
					t.Errorf("no forward event from the worker's devices in the trace")
				}
				// Host grads were left in home by SkipStep on both; clear
				// them by running steps from here on.
				if err := host.ZeroGrads(); err != nil {
					t.Fatal(err)
				}
				if err := ref.ZeroGrads(); err != nil {
					t.Fatal(err)
				}
				var lg, lr float64
				for s := 0; s < 4; s++ {
					a, err := host.Run(ctx, plan, hb, engine.RunOptions{})
					if err != nil {
						t.Fatal(err)
					}
					b, err := ref.Run(ctx, refPlan, rb, engine.RunOptions{})
					if err != nil {
						t.Fatal(err)
					}
					lg, lr = a.Loss, b.Loss
				}
				if e := math.Abs(lg-lr) / lr; e > 1e-4 {
					t.Errorf("loss after 4 steps %.9g vs %.9g", lg, lr)
				}
				if w.loads != 1 {
					t.Errorf("worker loaded %d times, want once", w.loads)
				}
				// Evaluation runs on the home (or its stand-in) here.
				if _, err := host.Predict(ctx, batch(10)); err != nil {
					t.Errorf("predict: %v", err)
				}
			})
		}
	}
}

func schedule(t *testing.T, tr *engine.Trainer, b *engine.Batch, devs []core.DeviceInfo, s core.Scheduler) *core.Plan {
	t.Helper()
	w, err := tr.Workload(b, devs)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Schedule(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(w); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRemoteRejects covers the plans a worker cannot run and a failing
// worker: each is a clear error, and the trainer keeps working.
func TestRemoteRejects(t *testing.T) {
	f := schedtest.NewFixture(60, 3, 8, 3, 1)
	host, _, all, w := remoteSetup(t, "gcn", f)
	b := host.FullBatch(batch(40))
	ctx := context.Background()

	span := schedule(t, host, b, pick(all, "cpu:0", "cpu:2"), schedtest.Stages{K: 1, Assign: schedtest.Halves})
	if _, err := host.Run(ctx, span, b, engine.RunOptions{}); err == nil || !strings.Contains(err.Error(), "all run in this process or all on one worker") {
		t.Errorf("unit across host and worker: err = %v", err)
	}

	dep := schedule(t, host, b, pick(all, "cpu:0", "cpu:2"), schedtest.Split{K: 2})
	// Make the worker's forward task wait for the host's backward task.
	var hostBwd, workerFwd int = -1, -1
	for i, task := range dep.Tasks {
		if task.Device == "cpu:0" && task.Kind == core.TaskBackward {
			hostBwd = i
		}
		if task.Device == "cpu:2" && task.Kind == core.TaskForward {
			workerFwd = i
		}
	}
	dep.Tasks[workerFwd].Deps = append(dep.Tasks[workerFwd].Deps, hostBwd)
	if _, err := host.Run(ctx, dep, b, engine.RunOptions{}); err == nil || !strings.Contains(err.Error(), "may depend only on its own tasks") {
		t.Errorf("worker task after a host task: err = %v", err)
	}

	good := schedule(t, host, b, pick(all, "cpu:0", "cpu:2"), schedtest.Split{K: 2})
	if _, err := host.Run(ctx, good, b, engine.RunOptions{Groups: []*engine.Batch{b}}); !errors.Is(err, core.ErrUnsupported) {
		t.Errorf("groups on a worker: err = %v, want ErrUnsupported", err)
	}
	w.fail = func(int) error { return errors.New("the worker fell over") }
	_, err := host.Run(ctx, good, b, engine.RunOptions{})
	if err == nil || !strings.Contains(err.Error(), "test-worker") || !strings.Contains(err.Error(), "fell over") {
		t.Errorf("failing worker: err = %v", err)
	}
	w.fail = nil
	if _, err := host.Run(ctx, good, b, engine.RunOptions{}); err != nil {
		t.Fatalf("after a failed iteration: %v", err)
	}
}

// TestRemoteDeviceClash: a worker's device may not reuse a local id.
func TestRemoteDeviceClash(t *testing.T) {
	f := schedtest.NewFixture(30, 2, 4, 2, 1)
	b, err := cpu.New(core.BackendOptions{Devices: 2, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, _ := core.BuildModel("gcn", core.ModelConfig{InDim: 4, Hidden: 4, Classes: 2, Layers: 2})
	_, err = engine.New(engine.Config{Model: m, Devices: b.Devices()[:1], Remote: []engine.Remote{&inproc{name: "w", devs: b.Devices()[:1]}},
		Data: engine.Data{Graph: f.Graph, Features: f.Features, FeatureDim: f.FeatureDim, Labels: f.Labels}})
	if err == nil || !strings.Contains(err.Error(), "also a local device") {
		t.Errorf("err = %v", err)
	}
}

// TestRemoteKeepsPriority: a worker's slice keeps its tasks' priorities
// (core.Task.Priority) and its devices among the plan's Exclusive ones,
// which order a device hosting several stages there as here.
func TestRemoteKeepsPriority(t *testing.T) {
	f := schedtest.NewFixture(120, 3, 16, 4, 3)
	host, _, all, w := remoteSetup(t, "gcn", f)
	hb := host.FullBatch(batch(90))
	plan := schedule(t, host, hb, pick(all, "cpu:2", "cpu:3"), schedtest.Stages{K: 2, Assign: schedtest.Halves})
	plan.Exclusive = []core.DeviceID{"cpu:0", "cpu:3"}
	want := map[core.TaskKind][]int{}
	for i := range plan.Tasks {
		if k := plan.Tasks[i].Kind; k == core.TaskForward || k == core.TaskBackward {
			plan.Tasks[i].Priority = -i
			want[k] = append(want[k], -i)
		}
	}
	if _, err := host.Run(context.Background(), plan, hb, engine.RunOptions{SkipStep: true}); err != nil {
		t.Fatal(err)
	}
	got := map[core.TaskKind][]int{}
	for _, task := range w.plan.Tasks {
		got[task.Kind] = append(got[task.Kind], task.Priority)
	}
	for _, k := range []core.TaskKind{core.TaskForward, core.TaskBackward} {
		if !slices.Equal(got[k], want[k]) {
			t.Errorf("%s priorities on the worker %v, want %v", k, got[k], want[k])
		}
	}
	if !slices.Equal(w.plan.Exclusive, []core.DeviceID{"cpu:3"}) {
		t.Errorf("the worker's exclusive devices %v, want [cpu:3] (cpu:0 is the host's)", w.plan.Exclusive)
	}
}
