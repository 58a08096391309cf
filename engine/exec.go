package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// Groups, when set, makes every unit a whole group: unit u computes
	// Groups[u.Targets[0]] (one group per unit) entirely, with that
	// batch's own graphs, targets and labels — the units of dynamic-graph
	// training (snapshot groups). The batch passed to Run is then unused.
	Groups []*Batch
	// OpTrace adds a trace event per op and direction (categories
	// "op_forward" and "op_backward", named after the op; a forward
	// event's Bytes are the op's output bytes): the profile simulators
	// and schedulers calibrate against. On an asynchronous device it
	// waits for each op (and the optimizer step) to finish, so the events
	// time the work, not its queueing; the device has one queue, so with
	// several streams on it an op's time includes the others' work queued
	// beside it (profiles use one-stream plans).
	OpTrace bool
	// PrefetchReductions fetches every owner reduction's gradients
	// (StepOwners plans) as soon as the backward tasks it waits for are
	// done, on a goroutine of its own, rather than when its turn comes on
	// the owner's stream; the adds keep their order, so the sums are the
	// same. Between devices with memory of their own (GPUs: copy engines)
	// reductions always prefetch; this makes host devices (the CPU
	// backend, where a copy takes a core) do it too.
	PrefetchReductions bool
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
	w.Optimizer = t.optimizerInfo()
	w.Estimator = func(units []core.Unit, dev core.DeviceID) (int64, int64, error) {
		info, ok := w.Device(dev)
		if !ok {
			return 0, 0, fmt.Errorf("engine: estimate on unknown device %s", dev)
		}
		return t.Estimate(b, units, info)
	}
	w.PlanEstimator = func(p *core.Plan) (int64, error) {
		info, ok := w.Device(p.Home)
		if !ok {
			return 0, fmt.Errorf("engine: estimate on unknown device %s", p.Home)
		}
		return t.EstimatePlan(b, p, info)
	}
	return w, nil
}

// GroupWorkload describes one iteration over groups (the units of dynamic
// training, see RunOptions.Groups): the workload's batch is the group ids
// 0..len(groups)-1 and its sizes are the first group's.
func (t *Trainer) GroupWorkload(groups []*Batch, devs []core.DeviceInfo) (*core.Workload, error) {
	if len(groups) == 0 {
		return nil, fmt.Errorf("engine: no groups")
	}
	for _, g := range groups {
		if err := t.prepare(g); err != nil {
			return nil, err
		}
	}
	ids := make([]int32, len(groups))
	for i := range ids {
		ids[i] = int32(i)
	}
	w := core.NewWorkload(t.model, t.batchGraph(groups[0]), t.data.FeatureDim, ids, devs, t.seed)
	w.Optimizer = t.optimizerInfo()
	return w, nil
}

// Run executes one training iteration of plan over batch b. The plan must
// have been validated against t.Workload(b, ...). It returns once the
// plan's local devices have run all the work queued on them (an
// asynchronous device's last kernels included): Trace.Wall is the whole
// iteration.
func (t *Trainer) Run(ctx context.Context, plan *core.Plan, b *Batch, opts RunOptions) (*Result, error) {
	t.place = nil // set again once this plan has run
	if opts.Groups == nil {
		if b == nil {
			return nil, fmt.Errorf("engine: Run needs a batch (or RunOptions.Groups)")
		}
		if err := t.prepare(b); err != nil {
			return nil, err
		}
	}
	if plan.StepOwners && (plan.Reuse != nil || opts.Groups != nil || t.usesRemote(plan)) {
		// Workers get their parameters from home, and activation reuse
		// and group units run on home: step there.
		plan = t.homeStep(plan)
	}
	if len(t.reps) == 0 {
		// The plan's home holds the master copy; under an owner-stepped
		// plan, only what home reads or owns (initSpread).
		var err error
		if home := t.homeFor(plan.Home); plan.StepOwners {
			err = t.initSpread(plan, home)
		} else {
			_, err = t.replicaOn(home)
		}
		if err != nil {
			return nil, err
		}
	}
	if to := t.homeFor(plan.Home); to != t.home {
		// Another plan's home (sampled training plans per batch shape):
		// the master copy moves there first.
		if err := t.rehome(to); err != nil {
			return nil, fmt.Errorf("engine: moving the master copy from %s to %s, the plan's home: %w", t.home, to, err)
		}
	}
	rx, err := t.planRemote(ctx, plan, opts) // nil: nothing runs on a worker
	if err != nil {
		return nil, err
	}
	// The params each device's ops read: only those are refreshed there,
	// reduced from there and broadcast back.
	used := map[core.DeviceID]map[string]bool{}
	isParam := map[string]bool{}
	for _, p := range t.model.Params {
		isParam[p.Name] = true
	}
	// The batch inputs (features, edge weights) each device's ops read:
	// only those stay resident there.
	isInput := map[string]bool{}
	for _, v := range t.model.Inputs {
		isInput[v] = true
	}
	for _, gs := range t.model.Graphs {
		isInput[gs.Name+".w"] = true
	}
	reads := map[core.DeviceID]map[string]bool{}
	for _, task := range plan.Tasks {
		if task.Kind != core.TaskForward {
			continue
		}
		if used[task.Device] == nil {
			used[task.Device] = map[string]bool{}
		}
		if reads[task.Device] == nil {
			reads[task.Device] = map[string]bool{}
		}
		for _, o := range task.OpIndices() {
			for _, v := range t.model.Ops[o].Inputs() {
				if isParam[v] {
					used[task.Device][v] = true
				}
				if isInput[v] {
					reads[task.Device][v] = true
				}
			}
		}
	}
	var refreshed int64
	t0 := time.Now()
	var owners map[string]core.DeviceID
	t.gradAt = nil
	if plan.StepOwners {
		owners = plan.ParamOwners(func(o int) []string { return t.opPar[o] })
		// Home keeps the gradients of the parameters its ops read, and
		// (dropHomeCopies, once the replicas are refreshed) only those
		// parameters and the ones it owns.
		homeUsed := used[t.home]
		if homeUsed == nil {
			homeUsed = map[string]bool{}
		}
		if err := t.setHomeGrads(homeUsed); err != nil {
			return nil, err
		}
		n, err := t.refreshHome(used[t.home])
		if err != nil {
			return nil, err
		}
		refreshed += n
	} else {
		n, err := t.syncHome()
		if err != nil {
			return nil, err
		}
		refreshed += n
		if err := t.setHomeGrads(nil); err != nil {
			return nil, err
		}
	}
	for _, id := range plan.Devices() {
		if t.isRemote(id) {
			continue // a worker's device: its replica lives there
		}
		r, err := t.replicaOn(id)
		if err != nil {
			return nil, err
		}
		r.setWant(reads[id])
		if id != t.home {
			if err := t.placeParams(r, used[id]); err != nil {
				return nil, err
			}
			n, err := t.refresh(r, used[id])
			if err != nil {
				return nil, fmt.Errorf("engine: refreshing parameters on %s: %w", id, err)
			}
			refreshed += n
		}
	}
	if plan.StepOwners {
		t.dropHomeCopies(used[t.home], owners) // before any task runs
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
	if plan.Reuse != nil {
		return t.runReusePlan(ctx, plan, b, opts, used, t0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ex := &execution{t: t, plan: plan, batch: b, opts: opts, start: t0, envs: map[envKey]*core.Env{}, used: used,
		owners: owners, stepNo: t.step + 1,
		done: make([]chan struct{}, len(plan.Tasks)), trace: &core.Trace{PeakMem: map[core.DeviceID]int64{}},
		opDev: make([][]core.DeviceID, len(plan.Units)), pending: map[envKey]int{}, remote: rx,
		unitLoss: make([]float64, len(plan.Units))}
	for u := range plan.Units {
		ex.opDev[u] = make([]core.DeviceID, len(t.model.Ops))
	}
	ex.indexBackward()
	for _, task := range plan.Tasks {
		switch task.Kind {
		case core.TaskForward:
			for _, o := range task.OpIndices() {
				ex.opDev[task.Unit][o] = task.Device
			}
		case core.TaskBackward:
			ex.pending[envKey{task.Unit, task.Device}]++
		}
	}
	for i := range ex.done {
		ex.done[i] = make(chan struct{})
	}
	ex.fetched = make([]chan fetched, len(plan.Tasks))
	if refreshed > 0 {
		ex.record(core.TraceEvent{Name: "refresh params", Cat: "transfer", Device: t.home, Unit: -1, Bytes: refreshed}, t0)
	}
	type key struct {
		d core.DeviceID
		s int
	}
	streams := map[key][]int{}
	var order []key
	for i, task := range plan.Tasks {
		if rx != nil && rx.remote[i] {
			continue // sent to its worker (startRemote)
		}
		k := key{task.Device, task.Stream}
		if _, ok := streams[k]; !ok {
			order = append(order, k)
		}
		streams[k] = append(streams[k], i)
	}
	var wg sync.WaitGroup
	if rx != nil {
		if err := ex.startRemote(ctx, &wg, cancel); err != nil {
			return nil, err
		}
	}
	ex.startPrefetch(ctx, &wg)
	gates := deviceGates(plan, func(i int) bool { return rx == nil || !rx.remote[i] })
	stream := func(tasks []int) {
		for _, i := range tasks {
			if err := ex.wait(ctx, i); err != nil {
				ex.fail(err)
				cancel()
				return
			}
			if err := ex.runGated(ctx, i, gates); err != nil {
				ex.fail(err)
				cancel()
				return
			}
			close(ex.done[i])
		}
	}
	for _, k := range order[:max(len(order)-1, 0)] {
		tasks := streams[k]
		wg.Go(func() { stream(tasks) })
	}
	if len(order) > 0 {
		// The last stream on Run's own goroutine: it is usually the one
		// that ends the iteration (a step stream), so Run need not wait
		// to be woken (a handoff, 10-25 µs on a VM) once it has.
		stream(streams[order[len(order)-1]])
	}
	wg.Wait()
	ex.dropPrefetched()
	for _, env := range ex.envs {
		env.Release()
	}
	if err := t.endIteration(plan.Devices(), ex.trace, ex.start); err != nil && ex.err == nil {
		ex.err = err
	}
	ex.remotePeaks()
	sort.SliceStable(ex.trace.Events, func(i, j int) bool { return ex.trace.Events[i].Start < ex.trace.Events[j].Start })
	if ex.err != nil {
		// Leave no half-accumulated gradients behind.
		for _, r := range t.reps {
			_ = t.zeroGrads(r)
		}
		return nil, ex.err
	}
	if owners != nil && !opts.SkipStep {
		t.step = ex.stepNo
	}
	if len(ex.opDev) > 0 && !slices.Contains(ex.opDev[0], "") {
		t.place = ex.opDev[0]
	}
	// Sum the units' losses in unit order, then the remote slices' in
	// theirs: the same total whatever order they finished in.
	var loss float64
	for _, l := range ex.unitLoss {
		loss += l
	}
	if ex.remote != nil {
		for _, run := range ex.remote.runs {
			if run.res != nil {
				loss += run.res.Loss
			}
		}
	}
	return &Result{Loss: loss, Trace: ex.trace}, nil
}

type execution struct {
	t     *Trainer
	plan  *core.Plan
	batch *Batch
	opts  RunOptions
	start time.Time
	done  []chan struct{}
	opDev [][]core.DeviceID // unit, op -> device running it
	used  map[core.DeviceID]map[string]bool
	// owners are the parameters' owners of a StepOwners plan (nil: the
	// plan steps on home); stepNo is the optimizer step owners apply.
	owners map[string]core.DeviceID
	stepNo int
	// fetched[i] delivers owner reduction i's prefetched gradients (nil:
	// it fetches them in its turn; see RunOptions.PrefetchReductions).
	fetched []chan fetched
	// bwdOn are each device's local backward tasks (none sent to a
	// worker), and under owner steps bwdIndex the same indexed by the
	// parameters their ops read: what a reduction waits for on its source
	// (prefetch) and on its owner (waitBackwardOn).
	bwdOn    map[core.DeviceID][]int
	bwdIndex map[core.DeviceID]core.ReaderIndex

	mu       sync.Mutex
	envs     map[envKey]*core.Env
	building map[envKey]chan struct{} // Envs being built, closed when done (env)
	pending  map[envKey]int           // backward tasks left per env
	unitLoss []float64                // per unit, summed in unit order at the end
	err      error
	trace    *core.Trace
	remote   *remoteExec // the slices on workers (remote.go), nil for none
}

// syncDevice waits until local device id has run all the work queued on
// it: an asynchronous device (OpenCL, CUDA) returns from kernel calls
// once they are queued. Host devices have nothing queued; a device not
// local (a worker's) is waited for by its worker.
func (t *Trainer) syncDevice(id core.DeviceID) error {
	d, ok := t.devs[id]
	if !ok {
		return nil
	}
	if err := d.NewStream().Sync(); err != nil {
		return fmt.Errorf("engine: waiting for %s to finish its kernels: %w", id, err)
	}
	return nil
}

// endIteration ends an iteration on the given devices: once they have
// run their queued kernels (the backward, the optimizer step), it sets
// trace's Wall from start and every replica's peak memory.
func (t *Trainer) endIteration(ids []core.DeviceID, trace *core.Trace, start time.Time) error {
	var err error
	for _, id := range ids {
		if err = t.syncDevice(id); err != nil {
			break
		}
	}
	trace.Wall = time.Since(start)
	for id, r := range t.reps {
		trace.PeakMem[id] = r.dev.Mem().Stats().Peak
	}
	return err
}

// opDone waits, under OpTrace, until the work queued on dev has run, so
// that an asynchronous device's op events (OpenCL, CUDA: a kernel call
// returns once queued) time the op itself; otherwise its time lands on
// the next op that waits for a result (the loss, reading back its
// value). Without OpTrace it does nothing.
func (ex *execution) opDone(dev core.DeviceID) error {
	if !ex.opts.OpTrace {
		return nil
	}
	return ex.t.syncDevice(dev)
}

// envKey names the Env of one unit on one device.
type envKey struct {
	unit int
	dev  core.DeviceID
}

// runGated runs task i, through its device's gate if it takes one
// (deviceGates): on an asynchronous device the gate is handed on once
// the device has run the task's work, not when it is queued, so the
// next task is chosen when the device frees, as the simulator does.
func (ex *execution) runGated(ctx context.Context, i int, gates map[core.DeviceID]*deviceGate) error {
	task := ex.plan.Tasks[i]
	g := gates[task.Device]
	if g == nil || !gated(task) {
		return ex.run(ctx, i)
	}
	if err := g.acquire(ctx, task.Priority); err != nil {
		return err
	}
	defer g.release()
	if err := ex.run(ctx, i); err != nil {
		return err
	}
	return ex.t.syncDevice(task.Device)
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
	if e.Cat == "transfer" || e.Cat == core.TaskReduceGrads.String() {
		ex.trace.BytesMoved += e.Bytes // op events' Bytes are output sizes, not traffic
	}
	ex.mu.Unlock()
}

// env returns the unit's Env on the task's device, building it at the
// first task there. Two streams of one device (two stages) may reach a
// unit's first task there at once: one builds, the other waits for it,
// so that neither's values land in an Env the other replaces.
func (ex *execution) env(task core.Task) (*core.Env, error) {
	k := envKey{task.Unit, task.Device}
	for {
		ex.mu.Lock()
		env := ex.envs[k]
		if env != nil {
			ex.mu.Unlock()
			return env, nil
		}
		wait, busy := ex.building[k]
		if !busy {
			done := make(chan struct{})
			if ex.building == nil {
				ex.building = map[envKey]chan struct{}{}
			}
			ex.building[k] = done
			ex.mu.Unlock()
			env, err := ex.buildEnv(task, k)
			ex.mu.Lock()
			delete(ex.building, k)
			ex.mu.Unlock()
			close(done)
			return env, err
		}
		ex.mu.Unlock()
		<-wait // built (or failed: then this one tries)
	}
}

// buildEnv builds the unit's Env on the task's device and records it
// under k.
func (ex *execution) buildEnv(task core.Task, k envKey) (*core.Env, error) {
	b, u := ex.batch, ex.plan.Units[task.Unit]
	if ex.opts.Groups != nil {
		if len(u.Targets) != 1 || int(u.Targets[0]) >= len(ex.opts.Groups) || u.Targets[0] < 0 {
			return nil, fmt.Errorf("engine: unit %d has targets %v; with groups each unit names exactly one of %d groups", u.ID, u.Targets, len(ex.opts.Groups))
		}
		b = ex.opts.Groups[u.Targets[0]]
		if err := ex.t.prepare(b); err != nil {
			return nil, err
		}
		u = core.Unit{ID: u.ID, Targets: b.Targets, LossWeight: u.LossWeight}
	}
	env, err := ex.t.unitEnv(ex.t.reps[task.Device], b, u, true, ex.opts.Groups != nil)
	if err != nil {
		return nil, err
	}
	ex.mu.Lock()
	ex.envs[k] = env
	ex.mu.Unlock()
	return env, nil
}

func (ex *execution) lookup(k envKey) *core.Env {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.envs[k]
}

// copyTensor moves src (on from) into a new tensor owned by env (on its
// device) and returns it with the bytes moved.
func copyTensor(from core.Device, src *core.Tensor, env *core.Env) (*core.Tensor, int64, error) {
	dst, err := env.Alloc(src.Shape...)
	if err != nil {
		return nil, 0, err
	}
	if err := MoveTensor(from, env.Dev, src, dst); err != nil {
		return nil, 0, err
	}
	return dst, src.Bytes(), nil
}

// fetchInputs brings the values the task's ops read from the devices that
// produced them (pipeline stages), once per value.
func (ex *execution) fetchInputs(task core.Task, env *core.Env) (int64, error) {
	var moved int64
	ops := ex.t.model.Ops
	for _, o := range task.OpIndices() {
		for _, v := range ops[o].Inputs() {
			p, ok := ex.t.producer[v]
			if !ok {
				continue
			}
			src := ex.opDev[task.Unit][p]
			if src == task.Device {
				continue
			}
			if _, err := env.Value(v); err == nil {
				continue // fetched already
			}
			from := ex.lookup(envKey{task.Unit, src})
			if from == nil {
				return moved, fmt.Errorf("engine: unit %d: %s needs %s from %s, which has not run", task.Unit, ops[o].Name(), v, src)
			}
			x, err := from.Value(v)
			if err != nil {
				return moved, err
			}
			y, n, err := copyTensor(from.Dev, x, env)
			if err != nil {
				return moved, fmt.Errorf("engine: moving %s of unit %d from %s to %s: %w", v, task.Unit, src, task.Device, err)
			}
			env.SetValue(v, y)
			moved += n
		}
	}
	return moved, nil
}

// fetchGrads brings back the gradients of the task's ops' outputs that
// consumers on other devices produced, summing them into env.
func (ex *execution) fetchGrads(task core.Task, env *core.Env) (int64, error) {
	var moved int64
	for _, o := range task.OpIndices() {
		for _, v := range ex.t.model.Ops[o].Outputs() {
			if !env.NeedsGrad(v) {
				continue
			}
			for _, c := range ex.t.consumers[v] {
				dev := ex.opDev[task.Unit][c]
				if dev == task.Device {
					continue
				}
				other := ex.lookup(envKey{task.Unit, dev})
				if other == nil {
					continue
				}
				g := other.Grad(v)
				if g == nil {
					continue
				}
				y, n, err := copyTensor(other.Dev, g, env)
				if err != nil {
					return moved, fmt.Errorf("engine: moving the gradient of %s of unit %d from %s to %s: %w", v, task.Unit, dev, task.Device, err)
				}
				other.DropGrad(v)
				if err := env.AccumGrad(v, y); err != nil {
					return moved, err
				}
				moved += n
			}
		}
	}
	return moved, nil
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
		if n, err := ex.fetchInputs(task, env); err != nil {
			return err
		} else if n > 0 {
			ex.record(core.TraceEvent{Name: fmt.Sprintf("recv activations u%d", task.Unit), Cat: "transfer", Device: task.Device,
				Stream: task.Stream, Unit: task.Unit, Bytes: n}, t0)
			t0 = time.Now()
		}
		idx := task.OpIndices()
		for _, o := range idx {
			to := time.Now()
			if err := forward(ctx, ops[o:o+1], env); err != nil {
				return fmt.Errorf("engine: unit %d on %s: %w", task.Unit, task.Device, err)
			}
			if err := ex.opDone(task.Device); err != nil {
				return fmt.Errorf("engine: unit %d: %w", task.Unit, err)
			}
			if ex.opts.OpTrace {
				var out int64
				for _, v := range ops[o].Outputs() {
					if x, err := env.Value(v); err == nil {
						out += x.Bytes()
					}
				}
				ex.record(core.TraceEvent{Name: ops[o].Name(), Cat: "op_forward", Device: task.Device, Stream: task.Stream, Unit: task.Unit, Bytes: out}, to)
			}
		}
		if idx[len(idx)-1] == len(ops)-1 {
			ex.mu.Lock()
			ex.unitLoss[task.Unit] += env.Loss
			ex.mu.Unlock()
		}
		ev.Name = fmt.Sprintf("fwd u%d %s", task.Unit, opSpan(idx))
	case core.TaskBackward:
		k := envKey{task.Unit, task.Device}
		env := ex.lookup(k)
		if env == nil {
			return fmt.Errorf("engine: backward of unit %d on %s before its forward there", task.Unit, task.Device)
		}
		if n, err := ex.fetchGrads(task, env); err != nil {
			return err
		} else if n > 0 {
			ex.record(core.TraceEvent{Name: fmt.Sprintf("recv gradients u%d", task.Unit), Cat: "transfer", Device: task.Device,
				Stream: task.Stream, Unit: task.Unit, Bytes: n}, t0)
			t0 = time.Now()
		}
		idx := task.OpIndices()
		for j := len(idx) - 1; j >= 0; j-- {
			to := time.Now()
			if err := backward(ctx, ops[idx[j]:idx[j]+1], env); err != nil {
				return fmt.Errorf("engine: unit %d on %s: %w", task.Unit, task.Device, err)
			}
			if err := ex.opDone(task.Device); err != nil {
				return fmt.Errorf("engine: unit %d: %w", task.Unit, err)
			}
			if ex.opts.OpTrace {
				ex.record(core.TraceEvent{Name: ops[idx[j]].Name(), Cat: "op_backward", Device: task.Device, Stream: task.Stream, Unit: task.Unit}, to)
			}
		}
		ex.mu.Lock()
		ex.pending[k]--
		last := ex.pending[k] == 0
		ex.mu.Unlock()
		if last {
			if ex.holdsGrads(task.Unit, task.Device) {
				// Only the gradients other devices fetch stay.
				env.ReleaseExcept(ex.received(task.Unit, task.Device)...)
			} else {
				ex.release(k)
			}
		}
		ev.Name = fmt.Sprintf("bwd u%d %s", task.Unit, opSpan(idx))
	case core.TaskReduceGrads:
		// Add into the accumulators only once the device's own backward
		// work on them is done, so the sum's order (own gradients, then
		// each reduction in its stream's order) and the result do not
		// depend on timing; the wait is not the reduction's time. Under
		// owner steps that is the backward tasks reading the parameters
		// the reduction moves (the only ones writing their gradients),
		// and the gradients travel before it, while the owner computes.
		if ex.owners != nil {
			return ex.ownerReduce(ctx, task)
		}
		if err := ex.waitBackwardOn(ctx, task.Device, nil); err != nil {
			return err
		}
		t0 = time.Now()
		n, err := ex.reduce(ctx, task)
		if err != nil {
			return fmt.Errorf("engine: reducing gradients from %s into %s: %w", task.From, task.Device, err)
		}
		ev.Name, ev.Bytes = "reduce grads from "+string(task.From), n
	case core.TaskStep:
		if ex.owners != nil {
			return ex.ownerStep(task, t0)
		}
		if err := ex.beforeStep(ctx, task); err != nil {
			return err
		}
		if !ex.opts.SkipStep {
			if err := t.applyStep(); err != nil {
				return err
			}
			if err := ex.opDone(task.Device); err != nil {
				return err
			}
			ex.record(core.TraceEvent{Name: "optimizer step", Cat: "step", Device: task.Device, Stream: task.Stream, Unit: -1}, t0)
			t1 := time.Now()
			n, err := t.broadcast(ex.used)
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

// holdsGrads reports whether the unit's Env on dev still holds gradients
// another device has yet to fetch (values it received from there).
func (ex *execution) holdsGrads(unit int, dev core.DeviceID) bool {
	for o, d := range ex.opDev[unit] {
		if d == dev {
			continue
		}
		// op o runs elsewhere: does dev consume its outputs?
		for _, v := range ex.t.model.Ops[o].Outputs() {
			for _, c := range ex.t.consumers[v] {
				if ex.opDev[unit][c] == dev {
					ex.mu.Lock()
					done := ex.pending[envKey{unit, d}] == 0
					ex.mu.Unlock()
					if !done {
						return true
					}
				}
			}
		}
	}
	return false
}

// received names the values the unit's ops on dev read from ops on other
// devices: their gradients go back there.
func (ex *execution) received(unit int, dev core.DeviceID) []string {
	var out []string
	for o, d := range ex.opDev[unit] {
		if d != dev {
			continue
		}
		for _, v := range ex.t.model.Ops[o].Inputs() {
			if p, ok := ex.t.producer[v]; ok && ex.opDev[unit][p] != dev {
				out = append(out, v)
			}
		}
	}
	return out
}

// release frees a unit's Env on one device, and any Env of the unit that
// was kept only to hand gradients to it.
func (ex *execution) release(k envKey) {
	ex.mu.Lock()
	env := ex.envs[k]
	delete(ex.envs, k)
	ex.mu.Unlock()
	if env != nil {
		env.Release()
	}
	ex.mu.Lock()
	var more []envKey
	for k2 := range ex.envs {
		if k2.unit == k.unit && ex.pending[k2] == 0 {
			more = append(more, k2)
		}
	}
	ex.mu.Unlock()
	for _, k2 := range more {
		if !ex.holdsGrads(k2.unit, k2.dev) {
			ex.release(k2)
		}
	}
}

// opSpan names a task's ops compactly for traces.
func opSpan(idx []int) string {
	if len(idx) == 0 {
		return "ops -"
	}
	if idx[len(idx)-1]-idx[0] == len(idx)-1 {
		return fmt.Sprintf("ops %d-%d", idx[0], idx[len(idx)-1])
	}
	return fmt.Sprintf("ops %v", idx)
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
