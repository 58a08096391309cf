package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// Optimizer configures the parameter update.
type Optimizer struct {
	Kind        string  // "adam" (default) or "sgd"
	LR          float32 // default 0.01
	WeightDecay float32 // applied to params whose spec asks for it
	Momentum    float32 // sgd only
	Beta1       float32 // adam; default 0.9
	Beta2       float32 // adam; default 0.999
	Eps         float32 // adam; default 1e-8
}

func (o *Optimizer) defaults() error {
	if o.Kind == "" {
		o.Kind = "adam"
	}
	if o.LR == 0 {
		o.LR = 0.01
	}
	if o.Beta1 == 0 {
		o.Beta1 = 0.9
	}
	if o.Beta2 == 0 {
		o.Beta2 = 0.999
	}
	if o.Eps == 0 {
		o.Eps = 1e-8
	}
	if o.Kind != "adam" && o.Kind != "sgd" {
		return fmt.Errorf("engine: unknown optimizer %q (want adam or sgd)", o.Kind)
	}
	if o.LR < 0 || o.WeightDecay < 0 || o.Momentum < 0 {
		return fmt.Errorf("engine: optimizer settings must be non-negative (lr %g, weight decay %g, momentum %g)", o.LR, o.WeightDecay, o.Momentum)
	}
	return nil
}

// Data is the training data in host memory.
type Data struct {
	// Graph is the dataset graph (symmetric for undirected data, without
	// self-loops); the trainer prepares it per the model's GraphSpecs.
	Graph      *core.Graph
	Features   []float32 // NumNodes x FeatureDim, row-major
	FeatureDim int
	Labels     []int32 // -1: unlabelled
}

// Config configures a Trainer.
type Config struct {
	Model     *core.Model
	Data      Data
	Devices   []core.Device // the devices plans may use
	Optimizer Optimizer
	Seed      uint64
}

// Trainer holds a model's training state across iterations.
type Trainer struct {
	model    *core.Model
	data     Data
	opt      Optimizer
	seed     uint64
	devs     map[core.DeviceID]core.Device
	graphs   map[string]*core.Graph // prepared per GraphSpec
	needGrad map[string]bool
	specs    map[string]core.ParamSpec

	home   core.DeviceID
	reps   map[core.DeviceID]*replica
	moment map[string][2]*core.Tensor // optimizer state on home
	step   int
}

// replica is one device's copy of the parameters, its gradient
// accumulators and its copy of the input data.
type replica struct {
	dev    core.Device
	params map[string]*core.Tensor
	grads  map[string]*core.Tensor
	inputs map[string]*core.Tensor // "x", graph weights
}

// New prepares a trainer: graphs per the model's specs, parameters
// initialised from the seed (they are placed on devices when a plan first
// uses them).
func New(cfg Config) (*Trainer, error) {
	if cfg.Model == nil {
		return nil, errors.New("engine: no model")
	}
	if err := cfg.Model.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Optimizer.defaults(); err != nil {
		return nil, err
	}
	if len(cfg.Devices) == 0 {
		return nil, errors.New("engine: no devices")
	}
	d := cfg.Data
	if d.Graph == nil {
		return nil, errors.New("engine: no graph")
	}
	n := d.Graph.NumDst
	if d.FeatureDim <= 0 || len(d.Features) != n*d.FeatureDim {
		return nil, fmt.Errorf("engine: features have %d values, want %d nodes x %d", len(d.Features), n, d.FeatureDim)
	}
	if len(d.Labels) != n {
		return nil, fmt.Errorf("engine: %d labels for %d nodes", len(d.Labels), n)
	}
	if cfg.Model.Config.InDim != 0 && cfg.Model.Config.InDim != d.FeatureDim {
		return nil, fmt.Errorf("engine: model %s expects %d input features, data has %d", cfg.Model.Name, cfg.Model.Config.InDim, d.FeatureDim)
	}
	t := &Trainer{model: cfg.Model, data: d, opt: cfg.Optimizer, seed: cfg.Seed,
		devs: map[core.DeviceID]core.Device{}, graphs: map[string]*core.Graph{},
		needGrad: cfg.Model.NeedsGrad(), specs: map[string]core.ParamSpec{},
		reps: map[core.DeviceID]*replica{}, moment: map[string][2]*core.Tensor{}}
	for _, dev := range cfg.Devices {
		t.devs[dev.ID()] = dev
	}
	for _, p := range cfg.Model.Params {
		t.specs[p.Name] = p
	}
	for _, gs := range cfg.Model.Graphs {
		g := d.Graph
		if gs.SelfLoops {
			var err error
			if g, err = g.WithSelfLoops(); err != nil {
				return nil, fmt.Errorf("engine: graph %s: %w", gs.Name, err)
			}
		}
		t.graphs[gs.Name] = g
	}
	return t, nil
}

// Graph returns the graph as prepared for the model's first graph input
// (the one schedulers should see), or the raw graph if the model has none.
func (t *Trainer) Graph() *core.Graph {
	if len(t.model.Graphs) > 0 {
		return t.graphs[t.model.Graphs[0].Name]
	}
	return t.data.Graph
}

// Model returns the model being trained.
func (t *Trainer) Model() *core.Model { return t.model }

// Step is the number of optimizer steps taken.
func (t *Trainer) Step() int { return t.step }

// replicaOn returns dev's replica, creating it (and uploading the data and
// the current parameters) on first use.
func (t *Trainer) replicaOn(id core.DeviceID) (*replica, error) {
	if r := t.reps[id]; r != nil {
		return r, nil
	}
	dev, ok := t.devs[id]
	if !ok {
		return nil, fmt.Errorf("engine: plan uses device %s, which the trainer was not given", id)
	}
	r := &replica{dev: dev, params: map[string]*core.Tensor{}, grads: map[string]*core.Tensor{}, inputs: map[string]*core.Tensor{}}
	fail := func(what string, err error) (*replica, error) {
		r.free()
		return nil, fmt.Errorf("engine: %s on %s: %w", what, id, err)
	}
	x, err := dev.Alloc(t.graphs0Rows(), t.data.FeatureDim)
	if err != nil {
		return fail(fmt.Sprintf("placing the %d x %d input features", t.graphs0Rows(), t.data.FeatureDim), err)
	}
	r.inputs["x"] = x
	if err := dev.Upload(x, t.data.Features); err != nil {
		return fail("uploading features", err)
	}
	for _, gs := range t.model.Graphs {
		g := t.graphs[gs.Name]
		var w []float32
		switch gs.Weights {
		case core.WeightsNone:
			continue
		case core.WeightsGCN:
			w = g.GCNNorm()
		case core.WeightsMean:
			w = g.MeanWeights()
		}
		wt, err := dev.Alloc(len(w), 1)
		if err != nil {
			return fail("placing edge weights of graph "+gs.Name, err)
		}
		r.inputs[gs.Name+".w"] = wt
		if err := dev.Upload(wt, w); err != nil {
			return fail("uploading edge weights", err)
		}
	}
	for _, p := range t.model.Params {
		pt, err := dev.Alloc(p.Shape...)
		if err != nil {
			return fail("placing parameter "+p.Name, err)
		}
		r.params[p.Name] = pt
		gt, err := dev.Alloc(p.Shape...)
		if err != nil {
			return fail("placing the gradient of "+p.Name, err)
		}
		r.grads[p.Name] = gt
	}
	if len(t.reps) == 0 {
		// The first replica is the home: initialise from the seed.
		t.home = id
		for _, p := range t.model.Params {
			if err := dev.Upload(r.params[p.Name], p.Initial(t.seed)); err != nil {
				return fail("initialising "+p.Name, err)
			}
		}
	} else if err := t.copyParams(t.reps[t.home], r); err != nil {
		return fail("copying parameters", err)
	}
	t.reps[id] = r
	return r, nil
}

func (t *Trainer) graphs0Rows() int { return t.data.Graph.NumDst }

func (r *replica) free() {
	for _, m := range []map[string]*core.Tensor{r.params, r.grads, r.inputs} {
		for k, x := range m {
			r.dev.Free(x)
			delete(m, k)
		}
	}
}

// copyParams copies the parameters of src into dst (through the host) and
// returns the bytes moved.
func (t *Trainer) copyParams(src, dst *replica) error {
	_, err := t.copyParamsBytes(src, dst)
	return err
}

func (t *Trainer) copyParamsBytes(src, dst *replica) (int64, error) {
	var moved int64
	for _, p := range t.model.Params {
		buf := make([]float32, core.NumElems(p.Shape))
		if err := src.dev.Download(buf, src.params[p.Name]); err != nil {
			return moved, err
		}
		if err := dst.dev.Upload(dst.params[p.Name], buf); err != nil {
			return moved, err
		}
		moved += int64(len(buf)) * 4
	}
	return moved, nil
}

// Close frees every device buffer the trainer holds.
func (t *Trainer) Close() {
	for id, r := range t.reps {
		r.free()
		delete(t.reps, id)
	}
	for k, m := range t.moment {
		if hd := t.devs[t.home]; hd != nil {
			hd.Free(m[0])
			hd.Free(m[1])
		}
		delete(t.moment, k)
	}
}

// Params downloads the master parameters.
func (t *Trainer) Params() (map[string][]float32, error) {
	return t.download(func(r *replica) map[string]*core.Tensor { return r.params })
}

// Grads downloads the home device's gradient accumulators (after an
// iteration run with a plan whose step was skipped, see RunOptions).
func (t *Trainer) Grads() (map[string][]float32, error) {
	return t.download(func(r *replica) map[string]*core.Tensor { return r.grads })
}

func (t *Trainer) download(pick func(*replica) map[string]*core.Tensor) (map[string][]float32, error) {
	r := t.reps[t.home]
	if r == nil {
		out := map[string][]float32{}
		for _, p := range t.model.Params {
			out[p.Name] = p.Initial(t.seed)
		}
		return out, nil
	}
	out := map[string][]float32{}
	for name, x := range pick(r) {
		buf := make([]float32, x.Len())
		if err := r.dev.Download(buf, x); err != nil {
			return nil, err
		}
		out[name] = buf
	}
	return out, nil
}

// RunOptions adjust one iteration.
type RunOptions struct {
	// SkipStep runs every task but the optimizer step, leaving the summed
	// gradients in the home accumulators (for the exactness oracle).
	SkipStep bool
}

// Result is the outcome of one iteration.
type Result struct {
	Loss  float64
	Trace *core.Trace
}

// Run executes one training iteration of plan (validated by the caller).
func (t *Trainer) Run(ctx context.Context, plan *core.Plan, opts RunOptions) (*Result, error) {
	if len(t.reps) == 0 {
		// Make the plan's home the master copy.
		if _, err := t.replicaOn(plan.Home); err != nil {
			return nil, err
		}
	}
	if plan.Home != t.home {
		return nil, fmt.Errorf("engine: plan's home device %s differs from the trainer's %s", plan.Home, t.home)
	}
	for _, id := range plan.Devices() {
		if _, err := t.replicaOn(id); err != nil {
			return nil, err
		}
	}
	for _, r := range t.reps {
		r.dev.Mem().ResetPeak()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ex := &execution{t: t, plan: plan, opts: opts, start: time.Now(), envs: map[int]*core.Env{},
		done: make([]chan struct{}, len(plan.Tasks)), trace: &core.Trace{PeakMem: map[core.DeviceID]int64{}}}
	for i := range ex.done {
		ex.done[i] = make(chan struct{})
	}
	type key struct {
		d core.DeviceID
		s int
	}
	streams := map[key][]int{}
	var order []key
	for i, task := range plan.Tasks {
		k := key{task.Device, task.Stream}
		if _, ok := streams[k]; !ok {
			order = append(order, k)
		}
		streams[k] = append(streams[k], i)
	}
	var wg sync.WaitGroup
	for _, k := range order {
		tasks := streams[k]
		wg.Go(func() {
			for _, i := range tasks {
				if err := ex.wait(ctx, i); err != nil {
					ex.fail(err)
					cancel()
					return
				}
				if err := ex.run(ctx, i); err != nil {
					ex.fail(err)
					cancel()
					return
				}
				close(ex.done[i])
			}
		})
	}
	wg.Wait()
	for _, env := range ex.envs {
		env.Release()
	}
	ex.trace.Wall = time.Since(ex.start)
	for id, r := range t.reps {
		ex.trace.PeakMem[id] = r.dev.Mem().Stats().Peak
	}
	sort.SliceStable(ex.trace.Events, func(i, j int) bool { return ex.trace.Events[i].Start < ex.trace.Events[j].Start })
	if ex.err != nil {
		// Leave no half-accumulated gradients behind.
		for _, r := range t.reps {
			_ = t.zeroGrads(r)
		}
		return nil, ex.err
	}
	return &Result{Loss: ex.loss, Trace: ex.trace}, nil
}

type execution struct {
	t     *Trainer
	plan  *core.Plan
	opts  RunOptions
	start time.Time
	done  []chan struct{}

	mu    sync.Mutex
	envs  map[int]*core.Env
	loss  float64
	err   error
	trace *core.Trace
}

func (ex *execution) fail(err error) {
	ex.mu.Lock()
	if ex.err == nil || errors.Is(ex.err, context.Canceled) && !errors.Is(err, context.Canceled) {
		ex.err = err
	}
	ex.mu.Unlock()
}

func (ex *execution) wait(ctx context.Context, i int) error {
	for _, d := range ex.plan.Tasks[i].Deps {
		select {
		case <-ex.done[d]:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return ctx.Err()
}

func (ex *execution) record(e core.TraceEvent, t0 time.Time) {
	e.Start = t0.Sub(ex.start)
	e.Dur = time.Since(t0)
	ex.mu.Lock()
	ex.trace.Events = append(ex.trace.Events, e)
	ex.trace.BytesMoved += e.Bytes
	ex.mu.Unlock()
}

func (ex *execution) env(task core.Task) (*core.Env, error) {
	ex.mu.Lock()
	env := ex.envs[task.Unit]
	ex.mu.Unlock()
	if env != nil {
		return env, nil
	}
	t := ex.t
	r := t.reps[task.Device]
	env = core.NewEnv(r.dev, r.params, r.grads, t.needGrad)
	for name, g := range t.graphs {
		env.Graphs[name] = g
	}
	for name, x := range r.inputs {
		env.SetValue(name, x)
	}
	u := ex.plan.Units[task.Unit]
	env.Labels = t.data.Labels
	env.Targets = u.Targets
	if len(u.Targets) > 0 {
		env.LossScale = float32(u.LossWeight / float64(len(u.Targets)))
	}
	env.Training = true
	env.Seed = mix(t.seed, uint64(t.step))
	ex.mu.Lock()
	ex.envs[task.Unit] = env
	ex.mu.Unlock()
	return env, nil
}

func (ex *execution) run(ctx context.Context, i int) error {
	task := ex.plan.Tasks[i]
	t := ex.t
	ops := t.model.Ops
	t0 := time.Now()
	ev := core.TraceEvent{Cat: task.Kind.String(), Device: task.Device, Stream: task.Stream, Unit: task.Unit}
	switch task.Kind {
	case core.TaskForward:
		env, err := ex.env(task)
		if err != nil {
			return err
		}
		for o := task.OpLo; o < task.OpHi; o++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := ops[o].Forward(env); err != nil {
				return fmt.Errorf("engine: forward %s (unit %d on %s): %w", ops[o].Name(), task.Unit, task.Device, err)
			}
		}
		if task.OpHi == len(ops) {
			ex.mu.Lock()
			ex.loss += env.Loss
			ex.mu.Unlock()
		}
		ev.Name = fmt.Sprintf("fwd u%d ops %d-%d", task.Unit, task.OpLo, task.OpHi-1)
	case core.TaskBackward:
		ex.mu.Lock()
		env := ex.envs[task.Unit]
		ex.mu.Unlock()
		if env == nil {
			return fmt.Errorf("engine: backward of unit %d before its forward", task.Unit)
		}
		for o := task.OpHi - 1; o >= task.OpLo; o-- {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := ops[o].Backward(env); err != nil {
				return fmt.Errorf("engine: backward %s (unit %d on %s): %w", ops[o].Name(), task.Unit, task.Device, err)
			}
			for _, out := range ops[o].Outputs() {
				env.DropGrad(out)
			}
		}
		if task.OpLo == 0 {
			env.Release()
			ex.mu.Lock()
			delete(ex.envs, task.Unit)
			ex.mu.Unlock()
		}
		ev.Name = fmt.Sprintf("bwd u%d ops %d-%d", task.Unit, task.OpLo, task.OpHi-1)
	case core.TaskReduceGrads:
		n, err := t.reduceGrads(task.From, task.Device)
		if err != nil {
			return fmt.Errorf("engine: reducing gradients from %s into %s: %w", task.From, task.Device, err)
		}
		ev.Name, ev.Bytes = "reduce grads from "+string(task.From), n
	case core.TaskStep:
		if !ex.opts.SkipStep {
			if err := t.applyStep(); err != nil {
				return err
			}
			ex.record(core.TraceEvent{Name: "optimizer step", Cat: "step", Device: task.Device, Stream: task.Stream, Unit: -1}, t0)
			t1 := time.Now()
			n, err := t.broadcast()
			if err != nil {
				return fmt.Errorf("engine: refreshing parameter replicas: %w", err)
			}
			if n > 0 {
				ex.record(core.TraceEvent{Name: "broadcast params", Cat: "transfer", Device: task.Device, Stream: task.Stream, Unit: -1, Bytes: n}, t1)
			}
			return nil
		}
		ev.Name = "optimizer step (skipped)"
	}
	ex.record(ev, t0)
	return nil
}

func (t *Trainer) reduceGrads(from, into core.DeviceID) (int64, error) {
	src, dst := t.reps[from], t.reps[into]
	var moved int64
	for _, p := range t.model.Params {
		n := core.NumElems(p.Shape)
		buf := make([]float32, n)
		if err := src.dev.Download(buf, src.grads[p.Name]); err != nil {
			return moved, err
		}
		tmp, err := dst.dev.Alloc(p.Shape...)
		if err != nil {
			return moved, err
		}
		err = dst.dev.Upload(tmp, buf)
		if err == nil {
			g := dst.grads[p.Name]
			err = dst.dev.Kernels().Map(core.MapAdd, g, tmp, 0, g)
		}
		dst.dev.Free(tmp)
		if err != nil {
			return moved, err
		}
		moved += int64(n) * 4
	}
	return moved, t.zeroGrads(src)
}

func (t *Trainer) zeroGrads(r *replica) error {
	k := r.dev.Kernels()
	for _, g := range r.grads {
		if err := k.Map(core.MapFill, nil, nil, 0, g); err != nil {
			return err
		}
	}
	return nil
}

func (t *Trainer) applyStep() error {
	r := t.reps[t.home]
	k := r.dev.Kernels()
	t.step++
	for _, p := range t.model.Params {
		wd := float32(0)
		if p.WeightDecay {
			wd = t.opt.WeightDecay
		}
		pt, gt := r.params[p.Name], r.grads[p.Name]
		st, ok := t.moment[p.Name]
		if !ok {
			m, err := r.dev.Alloc(p.Shape...)
			if err != nil {
				return fmt.Errorf("engine: optimizer state for %s: %w", p.Name, err)
			}
			v, err := r.dev.Alloc(p.Shape...)
			if err != nil {
				r.dev.Free(m)
				return fmt.Errorf("engine: optimizer state for %s: %w", p.Name, err)
			}
			st = [2]*core.Tensor{m, v}
			t.moment[p.Name] = st
		}
		var err error
		switch t.opt.Kind {
		case "adam":
			err = k.Adam(pt, gt, st[0], st[1], core.AdamParams{LR: t.opt.LR, Beta1: t.opt.Beta1, Beta2: t.opt.Beta2,
				Eps: t.opt.Eps, WeightDecay: wd, Step: t.step})
		case "sgd":
			var mom *core.Tensor
			if t.opt.Momentum != 0 {
				mom = st[0]
			}
			err = k.SGD(pt, gt, mom, core.SGDParams{LR: t.opt.LR, Momentum: t.opt.Momentum, WeightDecay: wd, Step: t.step})
		}
		if err != nil {
			return fmt.Errorf("engine: optimizer step for %s: %w", p.Name, err)
		}
	}
	return t.zeroGrads(r)
}

// broadcast copies the master parameters to every other replica.
func (t *Trainer) broadcast() (int64, error) {
	var moved int64
	home := t.reps[t.home]
	ids := make([]core.DeviceID, 0, len(t.reps))
	for id := range t.reps {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if id == t.home {
			continue
		}
		n, err := t.copyParamsBytes(home, t.reps[id])
		moved += n
		if err != nil {
			return moved, err
		}
	}
	return moved, nil
}

// Logits runs the model forward in evaluation mode (no dropout) on the
// home device over the whole graph and returns the output, rows x classes.
func (t *Trainer) Logits(ctx context.Context) ([]float32, int, error) {
	if len(t.reps) == 0 {
		return nil, 0, errors.New("engine: evaluate before the first iteration")
	}
	r := t.reps[t.home]
	env := core.NewEnv(r.dev, r.params, r.grads, map[string]bool{})
	defer env.Release()
	for name, g := range t.graphs {
		env.Graphs[name] = g
	}
	for name, x := range r.inputs {
		env.SetValue(name, x)
	}
	env.Labels = t.data.Labels
	for _, op := range t.model.Ops {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		if err := op.Forward(env); err != nil {
			return nil, 0, fmt.Errorf("engine: evaluate: forward %s: %w", op.Name(), err)
		}
	}
	out, err := env.Value(t.model.Output)
	if err != nil {
		return nil, 0, err
	}
	buf := make([]float32, out.Len())
	if err := r.dev.Download(buf, out); err != nil {
		return nil, 0, err
	}
	return buf, out.Cols(), nil
}

// Accuracy is the share of nodes whose arg-max logit equals their label.
func Accuracy(logits []float32, classes int, labels []int32, nodes []int32) float64 {
	if len(nodes) == 0 || classes == 0 {
		return 0
	}
	correct := 0
	for _, n := range nodes {
		row := logits[int(n)*classes : int(n+1)*classes]
		best := 0
		for c := 1; c < classes; c++ {
			if row[c] > row[best] {
				best = c
			}
		}
		if int32(best) == labels[n] {
			correct++
		}
	}
	return float64(correct) / float64(len(nodes))
}

func mix(a, b uint64) uint64 {
	h := fnv.New64a()
	var buf [16]byte
	for i := 0; i < 8; i++ {
		buf[i] = byte(a >> (8 * i))
		buf[8+i] = byte(b >> (8 * i))
	}
	h.Write(buf[:])
	return h.Sum64()
}
