package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// Remote is a set of devices that live in another process: a
// backend-plugin worker (plugins/worker; gnnkit-cuda serves the CUDA GPUs
// that way). Its devices appear in plans like local ones. Trainer.Run sends
// each Remote the slice of the plan on its devices (its units and their
// forward and backward tasks) concurrently with the local work, and the
// ReduceGrads task from a remote device adds the gradients the slice
// returned into the home accumulators; the optimizer step stays in this
// process.
//
// Rules a plan must follow when it uses remote devices (Run rejects it
// otherwise, naming the task): a unit runs all its ops on one side (this
// process, or one Remote); a task on a remote device depends only on tasks
// of the same Remote (a Remote runs its whole slice at once). Tasks here
// may depend on remote tasks: they wait for the whole slice. A plan whose
// home is a remote device keeps the master parameters and the optimizer on
// the trainer's first local device (Config.Devices[0]), which also runs
// evaluation (Predict).
//
// The caller owns its Remotes: Trainer.Close does not close them.
type Remote interface {
	// Name names the worker in error messages, e.g.
	// "gnnkit-cuda (/usr/local/bin/gnnkit-cuda, pid 4242)".
	Name() string
	// Devices lists the devices, by the ids plans use.
	Devices() []core.DeviceInfo
	// Load sends what the worker needs to build a trainer identical to
	// this one. Run calls it once, before the first slice.
	Load(ctx context.Context, spec *RemoteSpec) error
	// Run runs one iteration's slice and returns the summed loss of its
	// units, the parameter gradients summed over them and the trace (by
	// the plan's device ids and the slice's unit numbers).
	Run(ctx context.Context, s *Slice) (*SliceResult, error)
}

// RemoteSpec is what a worker needs to build the same trainer: the same
// model (rebuilt there from its registered name and config), data,
// optimizer and seed.
type RemoteSpec struct {
	Model     *core.Model
	Data      Data
	Optimizer Optimizer
	Seed      uint64
}

// Slice is one iteration's share of a Remote.
type Slice struct {
	// Step is the host's optimizer step count; dropout masks derive from it.
	Step int
	// Params are the current master values of the parameters the slice's
	// ops read; nil when they have not changed since the previous slice
	// that succeeded.
	Params map[string][]float32
	// Batch is the iteration's batch; the same pointer as in the previous
	// slice while the batch has not changed, so a Remote may send it once.
	Batch *Batch
	// Plan holds the units the Remote runs (ids = positions) and their
	// forward and backward tasks (ids = positions, deps among them), on the
	// Remote's devices. No ReduceGrads or Step tasks: the worker reduces its
	// own devices' gradients and never steps. The same pointer while the
	// plan has not changed.
	Plan *core.Plan
	// OpTrace is RunOptions.OpTrace.
	OpTrace bool
}

// SliceResult is what a slice returns.
type SliceResult struct {
	Loss  float64
	Grads map[string][]float32
	Trace *core.Trace
}

// remoteInfo is a trainer's remote bookkeeping: on the host, its Remotes;
// on a worker, the plan last built from a slice.
type remoteInfo struct {
	list    []*remoteState
	owner   map[core.DeviceID]*remoteState
	standIn core.DeviceID // holds the master copy when a plan's home is remote

	// Worker side: the last slice and the plan built from it.
	sliceIn, sliceRun *core.Plan
}

// remoteState is one Remote as the host sees it.
type remoteState struct {
	r      Remote
	ids    []core.DeviceID
	loaded bool
	sent   int // the step whose parameters the worker holds; -1: none
	// sentNames are the parameters sent at step sent (what the worker's
	// slices have read); a slice reading another one gets it sent.
	sentNames map[string]bool

	// The last plan sliced for this Remote and its slice.
	plan  *core.Plan
	slice *core.Plan
	units []int // slice unit -> plan unit
	tasks []int // slice task -> plan task
}

// initRemotes registers cfg.Remote; device ids must be distinct from the
// local ones and from each other.
func (t *Trainer) initRemotes(cfg Config) error {
	if len(cfg.Remote) == 0 {
		return nil
	}
	ri := &remoteInfo{owner: map[core.DeviceID]*remoteState{}, standIn: cfg.Devices[0].ID()}
	for _, r := range cfg.Remote {
		if r == nil {
			return errors.New("engine: nil Remote in Config.Remote")
		}
		rs := &remoteState{r: r, sent: -1}
		for _, d := range r.Devices() {
			if _, local := t.devs[d.ID]; local {
				return fmt.Errorf("engine: worker %s has device %s, which is also a local device; give the worker's devices another backend name", r.Name(), d.ID)
			}
			if o := ri.owner[d.ID]; o != nil {
				return fmt.Errorf("engine: device %s belongs to two workers, %s and %s", d.ID, o.r.Name(), r.Name())
			}
			ri.owner[d.ID] = rs
			rs.ids = append(rs.ids, d.ID)
		}
		if len(rs.ids) == 0 {
			return fmt.Errorf("engine: worker %s has no devices", r.Name())
		}
		ri.list = append(ri.list, rs)
	}
	t.remote = ri
	return nil
}

// isRemote reports whether id is a device of one of the trainer's Remotes.
func (t *Trainer) isRemote(id core.DeviceID) bool {
	return t.remote != nil && t.remote.owner[id] != nil
}

// homeFor is where the master copy of a plan with home id lives: id
// itself, or the stand-in when id is remote.
func (t *Trainer) homeFor(id core.DeviceID) core.DeviceID {
	if t.isRemote(id) {
		return t.remote.standIn
	}
	return id
}

// remoteExec is one iteration's remote part.
type remoteExec struct {
	runs   []*remoteRun
	byDev  map[core.DeviceID]*remoteRun
	remote []bool // plan task -> runs on a Remote
}

type remoteRun struct {
	rs     *remoteState
	params map[string][]float32
	done   chan struct{} // closed when the slice has returned (or failed)
	res    *SliceResult
	err    error

	mu    sync.Mutex
	added bool // its gradients are in the home accumulators
}

// planRemote checks a plan's use of remote devices and prepares the
// slices, loading workers on first use. It returns nil when the plan runs
// nothing remotely.
func (t *Trainer) planRemote(ctx context.Context, plan *core.Plan, opts RunOptions) (*remoteExec, error) {
	if t.remote == nil {
		return nil, nil
	}
	var used []*remoteState
	seen := map[*remoteState]bool{}
	for _, task := range plan.Tasks {
		if rs := t.remote.owner[task.Device]; rs != nil && (task.Kind == core.TaskForward || task.Kind == core.TaskBackward) && !seen[rs] {
			seen[rs] = true
			used = append(used, rs)
		}
	}
	if len(used) == 0 {
		return nil, nil
	}
	if opts.Groups != nil {
		return nil, fmt.Errorf("engine: group units (RunOptions.Groups) on worker devices: %w", core.ErrUnsupported)
	}
	if plan.Reuse != nil {
		return nil, fmt.Errorf("engine: activation reuse (Plan.Reuse) on worker devices: %w", core.ErrUnsupported)
	}
	rx := &remoteExec{byDev: map[core.DeviceID]*remoteRun{}, remote: make([]bool, len(plan.Tasks))}
	for _, rs := range used {
		if rs.plan != plan {
			if err := t.slicePlan(rs, plan); err != nil {
				return nil, err
			}
		}
		run := &remoteRun{rs: rs, done: make(chan struct{})}
		for _, i := range rs.tasks {
			rx.remote[i] = true
		}
		for _, id := range rs.ids {
			rx.byDev[id] = run
		}
		rx.runs = append(rx.runs, run)
	}
	// slicePlan has checked that no unit of a Remote runs anywhere else.
	for _, run := range rx.runs {
		rs := run.rs
		if !rs.loaded {
			spec := &RemoteSpec{Model: t.model, Data: t.data, Optimizer: t.opt, Seed: t.seed}
			if err := rs.r.Load(ctx, spec); err != nil {
				return nil, fmt.Errorf("engine: loading the model and data into worker %s: %w", rs.r.Name(), err)
			}
			rs.loaded = true
		}
	}
	return rx, nil
}

// slicePlan cuts rs's slice out of plan: its units renumbered from 0 and
// its forward/backward tasks renumbered, with deps among them.
func (t *Trainer) slicePlan(rs *remoteState, plan *core.Plan) error {
	mine := func(id core.DeviceID) bool { return t.remote.owner[id] == rs }
	s := &core.Plan{Scheduler: plan.Scheduler}
	unitOf := map[int]int{}
	taskOf := map[int]int{}
	var units, tasks []int
	for i, task := range plan.Tasks {
		if !mine(task.Device) || (task.Kind != core.TaskForward && task.Kind != core.TaskBackward) {
			continue
		}
		if _, ok := unitOf[task.Unit]; !ok {
			unitOf[task.Unit] = len(units)
			units = append(units, task.Unit)
		}
		taskOf[i] = len(tasks)
		tasks = append(tasks, i)
	}
	for i, task := range plan.Tasks {
		if task.Kind != core.TaskForward && task.Kind != core.TaskBackward {
			continue
		}
		if _, ok := unitOf[task.Unit]; ok && !mine(task.Device) {
			return fmt.Errorf("engine: unit %d runs on worker %s and on %s (task %d); a unit's ops must all run in this process or all on one worker",
				task.Unit, rs.r.Name(), task.Device, i)
		}
	}
	for n, u := range units {
		pu := plan.Units[u]
		s.Units = append(s.Units, core.Unit{ID: n, Targets: pu.Targets, LossWeight: pu.LossWeight, Subgraph: pu.Subgraph})
	}
	for n, i := range tasks {
		task := plan.Tasks[i]
		nt := core.Task{ID: n, Kind: task.Kind, Unit: unitOf[task.Unit], Device: task.Device, Stream: task.Stream,
			OpLo: task.OpLo, OpHi: task.OpHi, Ops: task.Ops, Priority: task.Priority}
		for _, d := range task.Deps {
			j, ok := taskOf[d]
			if !ok {
				dt := plan.Tasks[d]
				return fmt.Errorf("engine: task %d (%s of unit %d on %s) runs on worker %s but depends on task %d (%s on %s); a worker runs its whole slice at once, so its tasks may depend only on its own tasks",
					i, task.Kind, task.Unit, task.Device, rs.r.Name(), d, dt.Kind, dt.Device)
			}
			nt.Deps = append(nt.Deps, j)
		}
		s.Tasks = append(s.Tasks, nt)
	}
	for _, d := range plan.Exclusive {
		if mine(d) {
			s.Exclusive = append(s.Exclusive, d)
		}
	}
	rs.plan, rs.slice, rs.units, rs.tasks = plan, s, units, tasks
	return nil
}

// startRemote sends each Remote its slice; run on wg next to the local
// streams. A failed slice fails the iteration.
func (ex *execution) startRemote(ctx context.Context, wg *sync.WaitGroup, cancel context.CancelFunc) error {
	rx, t := ex.remote, ex.t
	for _, run := range rx.runs {
		// Only what the worker's ops read crosses the process boundary,
		// once per step.
		need := map[string]bool{}
		for _, id := range run.rs.ids {
			for name := range ex.used[id] {
				need[name] = true
			}
		}
		missing := run.rs.sent != t.step
		for name := range need {
			missing = missing || !run.rs.sentNames[name]
		}
		if missing {
			p, err := t.Params()
			if err != nil {
				return fmt.Errorf("engine: reading the parameters for worker %s: %w", run.rs.r.Name(), err)
			}
			for name := range p {
				if !need[name] {
					delete(p, name)
				}
			}
			run.params = p
		}
	}
	step := t.step // the step task waits for every slice, so this is the step they run at
	for _, run := range rx.runs {
		wg.Go(func() {
			defer close(run.done)
			rs := run.rs
			t0 := time.Now()
			res, err := rs.r.Run(ctx, &Slice{Step: step, Params: run.params, Batch: ex.batch, Plan: rs.slice, OpTrace: ex.opts.OpTrace})
			if err == nil && res == nil {
				err = errors.New("no result")
			}
			if err != nil {
				rs.sent = -1 // resend everything next time
				if strings.Contains(err.Error(), rs.r.Name()) {
					run.err = fmt.Errorf("engine: slice on %s: %w", joinIDs(rs.ids), err)
				} else {
					run.err = fmt.Errorf("engine: worker %s (devices %s): %w", rs.r.Name(), joinIDs(rs.ids), err)
				}
				ex.fail(run.err)
				cancel()
				return
			}
			if run.params != nil {
				if rs.sent != step || rs.sentNames == nil {
					rs.sentNames = map[string]bool{}
				}
				for name := range run.params {
					rs.sentNames[name] = true
				}
			}
			rs.sent = step
			run.res = res
			ex.mergeRemote(run, t0)
			for _, i := range rs.tasks {
				close(ex.done[i])
			}
		})
	}
	return nil
}

// mergeRemote adds a slice's trace to the iteration's (Run sums its loss
// with the others at the end).
func (ex *execution) mergeRemote(run *remoteRun, t0 time.Time) {
	res := run.res
	off := t0.Sub(ex.start)
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.trace.Events = append(ex.trace.Events, core.TraceEvent{Name: "worker " + run.rs.r.Name(), Cat: "remote",
		Device: run.rs.ids[0], Unit: -1, Start: off, Dur: time.Since(t0)})
	if res.Trace == nil {
		return
	}
	for _, e := range res.Trace.Events {
		if e.Unit >= 0 && e.Unit < len(run.rs.units) {
			e.Unit = run.rs.units[e.Unit]
		}
		e.Start += off
		ex.trace.Events = append(ex.trace.Events, e)
	}
	ex.trace.BytesMoved += res.Trace.BytesMoved
}

// remotePeaks adds the Remotes' measured peaks to the trace.
func (ex *execution) remotePeaks() {
	if ex.remote == nil {
		return
	}
	for _, run := range ex.remote.runs {
		if run.res == nil || run.res.Trace == nil {
			continue
		}
		for d, p := range run.res.Trace.PeakMem {
			ex.trace.PeakMem[d] = max(ex.trace.PeakMem[d], p)
		}
	}
}

// reduce runs a ReduceGrads task: a local device's accumulators, or a
// Remote's returned gradients (once per Remote), into the home's.
func (ex *execution) reduce(ctx context.Context, task core.Task) (int64, error) {
	t := ex.t
	if ex.remote != nil {
		if run := ex.remote.byDev[task.From]; run != nil {
			return ex.addRemote(ctx, run)
		}
	}
	if task.From == t.home {
		return 0, nil // the home's stand-in computed too: its gradients are there already
	}
	return t.reduceGrads(task.From, t.home, ex.used[task.From])
}

// ownerReduce runs ReduceGrads task under owner steps: it waits for the
// device's own backward tasks reading the parameters its source reads and
// its device owns, moves their gradients (the plan has the source's
// backward tasks reading them done) and adds them in. A prefetched
// reduction (prefetches) has them moved already, from when the source was
// done with them.
func (ex *execution) ownerReduce(ctx context.Context, task core.Task) error {
	names := core.MovedParams(task, ex.used, ex.owners)
	var staged []staged
	var err error
	if ch := ex.fetched[task.ID]; ch != nil {
		select {
		case f := <-ch:
			staged, err = f.staged, f.err
		case <-ctx.Done():
			return ctx.Err()
		}
	} else if err = ex.waitBackwardOn(ctx, task.Device, names); err == nil {
		// In its turn, after the owner's own backwards of these
		// gradients (as the simulator runs it): fetched earlier, beside
		// a backward still running, they would raise the owner's peak
		// by as much whenever the source happened to finish first.
		t0 := time.Now()
		var n int64
		staged, n, err = ex.t.fetchGrads(task.From, task.Device, names)
		if err == nil {
			ex.record(core.TraceEvent{Name: "fetch grads from " + string(task.From), Cat: "transfer", Device: task.Device, Stream: task.Stream, Unit: -1, Bytes: n}, t0)
		}
	}
	if err == nil {
		if err = ex.waitBackwardOn(ctx, task.Device, names); err == nil {
			t0 := time.Now()
			err = ex.t.addStaged(task.Device, staged)
			// The bytes moved are the fetch's (counted once).
			ex.record(core.TraceEvent{Name: "reduce grads from " + string(task.From), Cat: core.TaskReduceGrads.String(), Device: task.Device, Stream: task.Stream, Unit: -1}, t0)
		}
	}
	ex.t.freeStaged(task.Device, staged)
	if err != nil {
		return fmt.Errorf("engine: reducing gradients from %s into %s: %w", task.From, task.Device, err)
	}
	return nil
}

// waitBackwardOn waits for every local backward task on dev, or with
// names for those whose ops read one of them.
func (ex *execution) waitBackwardOn(ctx context.Context, dev core.DeviceID, names map[string]bool) error {
	bwd := ex.bwdOn[dev]
	if names != nil {
		bwd = ex.bwdIndex[dev].Reading(names)
	}
	for _, i := range bwd {
		select {
		case <-ex.done[i]:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// collectRemote adds the gradients of every Remote not reduced yet (those
// on a remote home device, which has no ReduceGrads task) before the step.
func (ex *execution) collectRemote(ctx context.Context) (int64, error) {
	if ex.remote == nil {
		return 0, nil
	}
	var moved int64
	for _, run := range ex.remote.runs {
		n, err := ex.addRemote(ctx, run)
		moved += n
		if err != nil {
			return moved, err
		}
	}
	return moved, nil
}

func (ex *execution) addRemote(ctx context.Context, run *remoteRun) (int64, error) {
	select {
	case <-run.done:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if run.err != nil {
		return 0, run.err
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	if run.added {
		return 0, nil
	}
	run.added = true
	return ex.t.addGrads(run.res.Grads, run.rs.r.Name())
}

// addGrads adds host gradients into the home accumulators.
func (t *Trainer) addGrads(grads map[string][]float32, from string) (int64, error) {
	dst := t.reps[t.home]
	dst.gradMu.Lock()
	defer dst.gradMu.Unlock()
	var moved int64
	for _, p := range t.model.Params {
		g, ok := grads[p.Name]
		if !ok {
			continue
		}
		if len(g) != core.NumElems(p.Shape) {
			return moved, fmt.Errorf("engine: worker %s returned %d gradient values for %s, want %d", from, len(g), p.Name, core.NumElems(p.Shape))
		}
		tmp, err := dst.dev.Alloc(p.Shape...)
		if err != nil {
			return moved, err
		}
		err = dst.dev.Upload(tmp, g)
		if err == nil {
			acc := dst.grads[p.Name]
			err = dst.dev.Kernels().Map(core.MapAdd, acc, tmp, 0, acc)
		}
		dst.dev.Free(tmp)
		if err != nil {
			return moved, err
		}
		moved += int64(len(g)) * 4
	}
	for name := range grads {
		if _, ok := t.specs[name]; !ok {
			return moved, fmt.Errorf("engine: worker %s returned a gradient for %q, which the model does not have", from, name)
		}
	}
	return moved, nil
}

func joinIDs(ids []core.DeviceID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = string(id)
	}
	return strings.Join(s, ",")
}

// SetParams overwrites the master parameters named in params (all or
// some; nil changes none) and sets the optimizer step count, which seeds
// dropout. Replicas on other devices pick the new values up when a plan
// next uses them. A worker calls it before each slice.
func (t *Trainer) SetParams(step int, params map[string][]float32) error {
	if step < 0 {
		return fmt.Errorf("engine: step %d is negative", step)
	}
	for name, v := range params {
		p, ok := t.specs[name]
		if !ok {
			return fmt.Errorf("engine: model %s has no parameter %q", t.model.Name, name)
		}
		if len(v) != core.NumElems(p.Shape) {
			return fmt.Errorf("engine: %d values for parameter %s of shape %v", len(v), name, p.Shape)
		}
	}
	if len(t.reps) == 0 {
		if _, err := t.replicaOn(t.defaultHome()); err != nil {
			return err
		}
	}
	home := t.reps[t.home]
	for _, p := range t.model.Params { // in model order, for determinism
		if v, ok := params[p.Name]; ok {
			pt, err := t.homeParam(p) // dropped by an owner-stepped plan: back
			if err != nil {
				return err
			}
			if err := home.dev.Upload(pt, v); err != nil {
				return fmt.Errorf("engine: setting %s on %s: %w", p.Name, t.home, err)
			}
			delete(t.newest, p.Name) // home's value is the current one now
		}
	}
	for id, r := range t.reps {
		if id == t.home {
			continue
		}
		for name, v := range r.ver {
			switch {
			case params[name] != nil:
				r.ver[name] = -1 // stale: refreshed from home on next use
			case v == t.step:
				r.ver[name] = step // still current
			default:
				r.ver[name] = -1
			}
		}
	}
	t.step = step
	return nil
}

// ZeroGrads clears the gradient accumulators on every device.
func (t *Trainer) ZeroGrads() error {
	for _, r := range t.reps {
		r.gradMu.Lock()
		err := t.zeroGrads(r)
		r.gradMu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// defaultHome is the home a worker's trainer uses: its smallest device id.
func (t *Trainer) defaultHome() core.DeviceID {
	if t.home != "" {
		return t.home
	}
	ids := make([]core.DeviceID, 0, len(t.devs))
	for id := range t.devs {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids[0]
}

// RunSlice is the worker side of Remote.Run: it runs a host's slice on this
// trainer's devices with the host's step and parameters, reduces the
// devices' gradients into this trainer's home, and returns them with the
// units' summed loss and the trace. The optimizer is never stepped here.
// The slice is checked (core.Plan.Validate, with its reductions added)
// before it runs; a slice or batch passed again by the same pointer is not
// checked again.
func (t *Trainer) RunSlice(ctx context.Context, s *Slice) (*SliceResult, error) {
	if s == nil || s.Plan == nil || s.Batch == nil {
		return nil, errors.New("engine: RunSlice needs a plan and a batch")
	}
	if err := t.prepare(s.Batch); err != nil {
		return nil, err
	}
	if err := t.SetParams(s.Step, s.Params); err != nil {
		return nil, err
	}
	if t.remote == nil {
		t.remote = &remoteInfo{}
	}
	ri := t.remote
	if ri.sliceIn != s.Plan || ri.sliceRun == nil {
		p, err := t.slicePlanHere(s.Plan, s.Batch)
		if err != nil {
			return nil, err
		}
		ri.sliceIn, ri.sliceRun = s.Plan, p
	}
	if err := t.ZeroGrads(); err != nil {
		return nil, err
	}
	res, err := t.Run(ctx, ri.sliceRun, s.Batch, RunOptions{SkipStep: true, OpTrace: s.OpTrace})
	if err != nil {
		return nil, err
	}
	grads, err := t.Grads()
	if err != nil {
		return nil, err
	}
	if err := t.ZeroGrads(); err != nil {
		return nil, err
	}
	tr := res.Trace
	kept := tr.Events[:0]
	for _, e := range tr.Events {
		if e.Cat != core.TaskStep.String() { // the skipped step is the host's business
			kept = append(kept, e)
		}
	}
	tr.Events = kept
	return &SliceResult{Loss: res.Loss, Grads: grads, Trace: tr}, nil
}

// slicePlanHere turns a host's slice into a plan for this trainer: the
// slice's tasks, a ReduceGrads into the home from every other device with
// backward work, and a Step (skipped when run). It is validated against the
// batch with the slice's units as the whole batch.
func (t *Trainer) slicePlanHere(s *core.Plan, b *Batch) (*core.Plan, error) {
	if s.Reuse != nil {
		return nil, fmt.Errorf("engine: a slice with activation reuse: %w", core.ErrUnsupported)
	}
	home := t.defaultHome()
	p := &core.Plan{Scheduler: s.Scheduler, Home: home, Units: s.Units, Tasks: slices.Clone(s.Tasks), Exclusive: s.Exclusive}
	stream := 0
	bwd := map[core.DeviceID][]int{}
	var devs []core.DeviceID
	for _, task := range s.Tasks {
		if task.Kind != core.TaskForward && task.Kind != core.TaskBackward {
			return nil, fmt.Errorf("%w: slice task %d is a %s task; a slice holds forward and backward tasks only", core.ErrInvalidPlan, task.ID, task.Kind)
		}
		stream = max(stream, task.Stream+1)
		if task.Kind == core.TaskBackward {
			if _, ok := bwd[task.Device]; !ok {
				devs = append(devs, task.Device)
			}
			bwd[task.Device] = append(bwd[task.Device], task.ID)
		}
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i] < devs[j] })
	var stepDeps []int
	for _, d := range devs {
		if d == home {
			stepDeps = append(stepDeps, bwd[d]...)
			continue
		}
		id := len(p.Tasks)
		p.Tasks = append(p.Tasks, core.Task{ID: id, Kind: core.TaskReduceGrads, Unit: -1, Device: home, Stream: stream, From: d, Deps: bwd[d]})
		stepDeps = append(stepDeps, id)
	}
	p.Tasks = append(p.Tasks, core.Task{ID: len(p.Tasks), Kind: core.TaskStep, Unit: -1, Device: home, Stream: stream, Deps: stepDeps})
	// Validate as if the slice's units were the whole batch (weights
	// rescaled to sum to one).
	var targets []int32
	sum := 0.0
	for _, u := range s.Units {
		targets = append(targets, u.Targets...)
		sum += u.LossWeight
	}
	infos := make([]core.DeviceInfo, 0, len(t.devs))
	for _, d := range t.devs {
		infos = append(infos, d.Info())
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].ID < infos[j].ID })
	w := core.NewWorkload(t.model, t.batchGraph(b), t.data.FeatureDim, targets, infos, t.seed)
	vp := *p
	vp.Units = make([]core.Unit, len(s.Units))
	for i, u := range s.Units {
		vp.Units[i] = u
		if sum > 0 {
			vp.Units[i].LossWeight = u.LossWeight / sum
		}
	}
	if err := vp.Validate(w); err != nil {
		return nil, fmt.Errorf("engine: the slice is not runnable here: %w", err)
	}
	rows := b.Graph.NumDst
	if b.Labels != nil {
		rows = len(b.Labels)
	}
	for _, u := range s.Units {
		for _, n := range u.Targets {
			if n < 0 || int(n) >= rows {
				return nil, fmt.Errorf("%w: slice unit %d has target %d outside the batch's %d rows", core.ErrInvalidPlan, u.ID, n, rows)
			}
		}
	}
	return p, nil
}

// beforeStep adds the gradients of Remotes that have no ReduceGrads task
// (those on a remote home device) before the optimizer step.
func (ex *execution) beforeStep(ctx context.Context, task core.Task) error {
	t0 := time.Now()
	n, err := ex.collectRemote(ctx)
	if err != nil {
		return fmt.Errorf("engine: reducing gradients from workers into %s: %w", ex.t.home, err)
	}
	if n > 0 {
		ex.record(core.TraceEvent{Name: "reduce grads from workers", Cat: core.TaskReduceGrads.String(), Device: task.Device,
			Stream: task.Stream, Unit: -1, Bytes: n}, t0)
	}
	return nil
}
