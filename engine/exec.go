package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

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

// Workload describes one iteration over batch b on devs.
func (t *Trainer) Workload(b *Batch, devs []core.DeviceInfo) (*core.Workload, error) {
	if err := t.prepare(b); err != nil {
		return nil, err
	}
	w := core.NewWorkload(t.model, t.batchGraph(b), t.data.FeatureDim, b.Targets, devs, t.seed)
	w.ParamBytes = t.model.ParamBytes()
	w.Estimator = func(units []core.Unit, dev core.DeviceID) (int64, int64, error) {
		info, ok := w.Device(dev)
		if !ok {
			return 0, 0, fmt.Errorf("engine: estimate on unknown device %s", dev)
		}
		return t.Estimate(b, units, info)
	}
	return w, nil
}

// Run executes one training iteration of plan over batch b. The plan must
// have been validated against t.Workload(b, ...).
func (t *Trainer) Run(ctx context.Context, plan *core.Plan, b *Batch, opts RunOptions) (*Result, error) {
	if err := t.prepare(b); err != nil {
		return nil, err
	}
	if len(t.reps) == 0 {
		// The plan's home holds the master copy.
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
	t.wholeUnits = false
	for _, u := range plan.Units {
		t.wholeUnits = t.wholeUnits || !u.Subgraph
	}
	for _, r := range t.reps {
		if !t.wholeUnits {
			// Subgraph units bring their own inputs: keep nothing resident
			// that the plan's memory estimate does not count.
			r.releaseInputs()
		}
		r.dev.Mem().ResetPeak()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ex := &execution{t: t, plan: plan, batch: b, opts: opts, start: time.Now(), envs: map[int]*core.Env{},
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
	batch *Batch
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

// env returns the unit's Env, building it at the unit's first task.
func (ex *execution) env(task core.Task) (*core.Env, error) {
	ex.mu.Lock()
	env := ex.envs[task.Unit]
	ex.mu.Unlock()
	if env != nil {
		return env, nil
	}
	env, err := ex.t.unitEnv(ex.t.reps[task.Device], ex.batch, ex.plan.Units[task.Unit], true)
	if err != nil {
		return nil, err
	}
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
		if err := forward(ctx, ops[task.OpLo:task.OpHi], env); err != nil {
			return fmt.Errorf("engine: unit %d on %s: %w", task.Unit, task.Device, err)
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
		if err := backward(ctx, ops[task.OpLo:task.OpHi], env); err != nil {
			return fmt.Errorf("engine: unit %d on %s: %w", task.Unit, task.Device, err)
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

// forward runs ops forward in env.
func forward(ctx context.Context, ops []core.Op, env *core.Env) error {
	for _, op := range ops {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := op.Forward(env); err != nil {
			return fmt.Errorf("forward %s: %w", op.Name(), err)
		}
	}
	return nil
}

// backward runs ops backward in reverse order, dropping each op's output
// gradients once it has consumed them.
func backward(ctx context.Context, ops []core.Op, env *core.Env) error {
	for o := len(ops) - 1; o >= 0; o-- {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := ops[o].Backward(env); err != nil {
			return fmt.Errorf("backward %s: %w", ops[o].Name(), err)
		}
		for _, out := range ops[o].Outputs() {
			env.DropGrad(out)
		}
	}
	return nil
}
