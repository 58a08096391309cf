package sim

import (
	"context"
	"fmt"
	"github.com/gnnkit/gnnkit/internal/stats"
	"math"
	"runtime"
	"slices"
	"sort"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/engine"
)

// MeasureOptions configure the profiler.
type MeasureOptions struct {
	// Ladder lists unit sizes in target nodes (samples). A size of 0, or
	// one at least len(Nodes), is a unit computing the whole graph; a
	// smaller one is a unit computing its targets' receptive field (or,
	// for models without a graph input, a batch of that many samples).
	Ladder []int
	// Reps is the number of timed runs per size (default 5); the profile
	// keeps the medians. Warmup runs come first (default 1). On an
	// asynchronous device (OpenCL, CUDA) each rep also times an untraced
	// run, which the traced times are scaled to (see Measure).
	Reps, Warmup int
	// Nodes are the labelled nodes targets are drawn from, evenly spaced
	// (default: every node of the graph).
	Nodes []int32
	// Between, if set, runs after each timed rep (e.g. to time the plans
	// being predicted interleaved with the profile, so that both see the
	// same load on a shared machine).
	Between func(rep int) error
	// FitCap skips the sizes whose unit, by the trainer's memory estimate
	// (Trainer.Estimate), would not fit the device's memory cap
	// (DeviceInfo.MemCap) instead of running them out of memory; when no
	// size fits, the error wraps core.ErrOutOfMemory.
	FitCap bool
}

type ladderPoint struct {
	targets      []int32
	whole        bool
	rows, edges  int64
	batch        *engine.Batch
	plan         *core.Plan
	fwd, bwd     [][]time.Duration // per op, per rep
	out          []int64
	setF, setB   []time.Duration
	opTotal      []time.Duration // per rep: all ops, both directions
	steps        []time.Duration
	inputs, peak int64
	resident     int64
	shape        *shapeOut // nil if the shape pass failed
	// On an asynchronous device: the untraced and the traced runs' walls,
	// and factor, what the times of the traced runs (which wait for each
	// op) are scaled by to add up to an untraced run's.
	walls, tracedWalls []time.Duration
	factor             float64
	// handoffs and overheads: per rep, the executor's handoff (the step's
	// start after the backward's end) and its time outside the tasks.
	handoffs, overheads []time.Duration
}

// Measure profiles tr's model on dev: for each ladder size it runs one
// training iteration of a one-unit plan (forward, backward, optimizer
// step) reps times with per-op tracing (engine.RunOptions.OpTrace) and
// keeps each op's median forward and backward time (rescaled so that they
// add up to the median total), its output bytes from the trace, and its
// memory: what it holds from forward to backward (from a shape-only pass
// of the model over the unit's graph) and its share of the backward's
// transient memory, so that the unit's total is the peak
// Trainer.Estimate predicts. Rows of a point are the nodes the
// unit computes (the receptive field of its targets, all nodes for the
// whole graph).
//
// On an asynchronous device (tensors not in host memory: OpenCL, CUDA)
// the op trace waits for each op, which a training run does not, so each
// rep also runs the size untraced, and the traced times (ops, setup,
// step) are scaled by the untraced run's median over the traced one's
// (at most 1).
//
// Measure trains: it takes optimizer steps on tr (that is how the step is
// timed), so use a trainer made for profiling. dev must be the trainer's
// home device (its first device, or the one its earlier plans used).
func Measure(ctx context.Context, tr *engine.Trainer, dev core.Device, ladder []int, reps int) (*Profile, error) {
	return MeasureWith(ctx, tr, dev, MeasureOptions{Ladder: ladder, Reps: reps})
}

// MeasureWith is Measure with all options.
func MeasureWith(ctx context.Context, tr *engine.Trainer, dev core.Device, o MeasureOptions) (*Profile, error) {
	if tr == nil || dev == nil {
		return nil, fmt.Errorf("sim: measure needs a trainer and a device")
	}
	probe, err := dev.Alloc(1)
	if err != nil {
		return nil, fmt.Errorf("sim: measure: a test tensor on %s: %w", dev.ID(), err)
	}
	_, host := probe.Buf.(*core.HostMem)
	dev.Free(probe)
	return measure(ctx, tr, dev.Info(), !host, o)
}

// MeasureRemote is MeasureWith for a device tr reaches through a worker
// process (engine.Config.Remote), named by its description (the worker's
// DeviceInfo, e.g. gnnkit-cuda's cuda:0). The worker times each op (its
// executor waits for each under the op trace), and the untraced run the
// times are scaled to includes what training through the worker costs:
// the parameters sent, the gradients returned, and the optimizer step on
// tr's local home, where a plan homed on a worker's device steps.
func MeasureRemote(ctx context.Context, tr *engine.Trainer, dev core.DeviceInfo, o MeasureOptions) (*Profile, error) {
	if tr == nil || dev.ID == "" {
		return nil, fmt.Errorf("sim: measure needs a trainer and a device")
	}
	return measure(ctx, tr, dev, true, o)
}

// measure profiles on the device info describes; async: its kernels run
// asynchronously to the caller (see Measure).
func measure(ctx context.Context, tr *engine.Trainer, info core.DeviceInfo, async bool, o MeasureOptions) (*Profile, error) {
	if len(o.Ladder) == 0 {
		return nil, fmt.Errorf("sim: measure needs at least one ladder size")
	}
	if o.Reps <= 0 {
		o.Reps = 5
	}
	if o.Warmup <= 0 {
		o.Warmup = 1
	}
	m := tr.Model()
	g := tr.Graph()
	pool := o.Nodes
	if len(pool) == 0 {
		pool = make([]int32, g.NumDst)
		for i := range pool {
			pool[i] = int32(i)
		}
	}
	graphModel := len(m.Graphs) > 0
	weighted := 0
	for _, gs := range m.Graphs {
		if gs.Weights != core.WeightsNone {
			weighted++
		}
	}
	nOps := len(m.Ops)
	var featDim int
	var pts []*ladderPoint
	var mark []int32
	var stamp int32
	var overCap []int // sizes FitCap skipped
	// Whole-graph sizes first: a subgraph size whose receptive field is
	// the whole graph adds nothing to them.
	ladder := slices.Clone(o.Ladder)
	sort.SliceStable(ladder, func(i, j int) bool {
		wi, wj := ladder[i] <= 0 || ladder[i] >= len(pool), ladder[j] <= 0 || ladder[j] >= len(pool)
		return wi && !wj
	})
	for _, r := range ladder {
		lp := &ladderPoint{}
		if r <= 0 || r >= len(pool) {
			lp.whole, lp.targets = true, slices.Clone(pool)
			lp.batch = tr.FullBatch(lp.targets)
			lp.rows, lp.edges = int64(g.NumDst), int64(g.NumEdges())
		} else {
			lp.targets = make([]int32, r)
			for i := range lp.targets {
				lp.targets[i] = pool[i*len(pool)/r]
			}
			if graphModel {
				if mark == nil {
					mark = make([]int32, g.NumDst)
				}
				// A stamp of its own per call: a size dropped below as a
				// duplicate adds no point, and len(pts)+1 would then
				// reuse the last marks (and count nothing new).
				stamp++
				lp.rows, lp.edges = receptive(g, lp.targets, max(m.Config.Layers, 0), mark, stamp)
				lp.batch = tr.FullBatch(lp.targets)
			} else {
				// No graph input: a batch of just these samples (no
				// hops: a subgraph unit of such a model computes its
				// targets alone, engine's buildViewHops), run as a
				// subgraph unit, as pipelines run micro-batches: its
				// setup gathers its own inputs.
				b, err := engine.Sample(g, lp.targets, nil, 1)
				if err != nil {
					return nil, fmt.Errorf("sim: measure: batch of %d samples: %w", r, err)
				}
				lp.batch = b
				lp.rows, lp.edges = int64(b.Graph.NumDst), int64(b.Graph.NumEdges())
			}
		}
		if slices.ContainsFunc(pts, func(q *ladderPoint) bool { return q.rows == lp.rows }) {
			continue
		}
		w, err := tr.Workload(lp.batch, []core.DeviceInfo{info})
		if err != nil {
			return nil, fmt.Errorf("sim: measure: %w", err)
		}
		featDim = w.FeatureDim
		unit := core.Unit{ID: 0, Targets: slices.Clone(lp.batch.Targets), LossWeight: 1, Subgraph: !lp.whole}
		lp.plan = &core.Plan{Scheduler: "sim-profile", Home: info.ID, Units: []core.Unit{unit},
			Tasks: []core.Task{
				{ID: 0, Kind: core.TaskForward, Unit: 0, Device: info.ID, OpLo: 0, OpHi: nOps},
				{ID: 1, Kind: core.TaskBackward, Unit: 0, Device: info.ID, OpLo: 0, OpHi: nOps, Deps: []int{0}},
				{ID: 2, Kind: core.TaskStep, Unit: -1, Device: info.ID, Deps: []int{1}},
			}}
		if !async {
			// On a stream of its own, as plans step: its start after
			// the backward's end is the executor's handoff.
			lp.plan.Tasks[2].Stream = 1
		}
		if err := lp.plan.Validate(w); err != nil {
			return nil, fmt.Errorf("sim: measure: %w", err)
		}
		if lp.resident, lp.peak, err = tr.Estimate(lp.batch, lp.plan.Units, info); err != nil {
			return nil, fmt.Errorf("sim: measure: estimate at %d targets: %w", len(lp.targets), err)
		}
		if o.FitCap && info.MemCap > 0 && lp.resident+lp.peak > info.MemCap {
			overCap = append(overCap, len(lp.targets))
			continue
		}
		if !lp.whole {
			lp.inputs = 4 * (lp.rows*int64(featDim) + lp.edges*int64(weighted))
		}
		// What each op holds from forward to backward, from a shape-only
		// pass over the graph the unit computes.
		switch {
		case !graphModel:
			lp.shape, _ = shapes(m, lp.batch.Graph, featDim, lp.batch.Targets, nil)
		case lp.whole:
			lp.shape, _ = shapes(m, tr.Graph(), featDim, lp.batch.Targets, nil)
		default:
			lp.shape, _ = fieldShapes(m, g, featDim, lp.targets, make([]int32, g.NumDst), make([]int32, g.NumDst), 1, true)
		}
		lp.fwd, lp.bwd = make([][]time.Duration, nOps), make([][]time.Duration, nOps)
		lp.out = make([]int64, nOps)
		pts = append(pts, lp)
	}
	if len(pts) == 0 && len(overCap) > 0 {
		return nil, fmt.Errorf("sim: measure: no ladder size fits %s's %s memory (sizes %v in targets): %w", info.ID, core.FormatBytes(info.MemCap), overCap, core.ErrOutOfMemory)
	}
	// Sizes interleaved rep by rep, so drift and other load hit them
	// alike. A unit computing the whole graph keeps the batch inputs
	// resident between iterations (as in full-graph training) unless a
	// subgraph plan ran in between: then a discarded run reloads them.
	mixed := slices.ContainsFunc(pts, func(q *ladderPoint) bool { return q.whole }) &&
		slices.ContainsFunc(pts, func(q *ladderPoint) bool { return !q.whole })
	// On an asynchronous device the op trace waits for each op, which a
	// training run does not: every rep also times an untraced run, and the
	// traced times are scaled to add up to it.
	for rep := -o.Warmup; rep < o.Reps; rep++ {
		for _, lp := range pts {
			if lp.whole && mixed {
				if _, err := tr.Run(ctx, lp.plan, lp.batch, engine.RunOptions{}); err != nil {
					return nil, fmt.Errorf("sim: measure at %d targets: %w", len(lp.targets), err)
				}
			}
			// Each timed run starts from a collected heap, so one size's
			// garbage does not land on the next one's clock.
			runtime.GC()
			t0 := time.Now()
			res, err := tr.Run(ctx, lp.plan, lp.batch, engine.RunOptions{OpTrace: true})
			wall := time.Since(t0) // as engine.Train times an iteration
			if err != nil {
				return nil, fmt.Errorf("sim: measure at %d targets: %w", len(lp.targets), err)
			}
			if rep >= 0 {
				lp.collect(res.Trace, m)
				if !async {
					lp.executor(res.Trace, wall)
				}
			}
			if async {
				runtime.GC()
				u, err := tr.Run(ctx, lp.plan, lp.batch, engine.RunOptions{})
				if err != nil {
					return nil, fmt.Errorf("sim: measure at %d targets: %w", len(lp.targets), err)
				}
				if rep >= 0 {
					lp.walls = append(lp.walls, u.Trace.Wall)
					lp.tracedWalls = append(lp.tracedWalls, res.Trace.Wall)
				}
			}
		}
		if o.Between != nil && rep >= 0 {
			if err := o.Between(rep); err != nil {
				return nil, err
			}
		}
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].rows < pts[j].rows })
	p := &Profile{Model: m.Name, Device: info, ParamBytes: m.ParamBytes(), OverCapTargets: overCap}
	deps := m.OpDeps()
	inputs := map[string]bool{}
	for _, in := range m.Inputs {
		inputs[in] = true
	}
	for _, lp := range pts {
		lp.factor = 1
		if tw := stats.Median(lp.tracedWalls); async && tw > 0 {
			lp.factor = min(1, float64(stats.Median(lp.walls))/float64(tw))
		}
	}
	var steps []time.Duration
	for _, lp := range pts {
		for _, d := range lp.steps {
			steps = append(steps, scaled(d, lp.factor))
		}
		if p.OptStateBytes == 0 {
			opt := lp.resident - 2*p.ParamBytes
			if lp.whole {
				opt -= 4 * (int64(g.NumDst)*int64(featDim) + int64(g.NumEdges())*int64(weighted))
			}
			p.OptStateBytes = max(opt, 0)
		}
		p.Setup = append(p.Setup, Point{Rows: lp.rows, Edges: lp.edges, Fwd: scaled(stats.Median(lp.setF), lp.factor), Bwd: scaled(stats.Median(lp.setB), lp.factor), Mem: lp.inputs,
			Whole: lp.whole})
	}
	p.Step = stats.Median(steps)
	var handoffs, overheads []time.Duration
	for _, lp := range pts {
		handoffs = append(handoffs, lp.handoffs...)
		overheads = append(overheads, lp.overheads...)
	}
	p.Handoff, p.IterationOverhead = stats.Median(handoffs), stats.Median(overheads)
	if !async {
		p.HandoffBusy = busyHandoff(ctx, 15)
	}
	p.ResidentInputBytes = 4 * (int64(g.NumDst)*int64(featDim) + int64(g.NumEdges())*int64(weighted))
	for i, op := range m.Ops {
		p.Ops = append(p.Ops, OpProfile{Name: op.Name(), Kind: op.Kind(), Preds: deps[i]})
	}
	wl, err := tr.Workload(pts[len(pts)-1].batch, []core.DeviceInfo{info})
	if err != nil {
		return nil, err
	}
	for _, lp := range pts {
		// Estimate's peak of the unit, less its inputs, is held by the ops
		// (what the shape pass says each holds) plus the backward's
		// transient memory, shared among the ops likewise; without a shape
		// pass, all of it is shared by output size.
		share := lp.peak - lp.inputs
		held := make([]int64, nOps)
		var heldSum int64
		if lp.shape != nil && len(lp.shape.held) == nOps {
			copy(held, lp.shape.held)
		} else {
			copy(held, lp.out)
		}
		for _, h := range held {
			heldSum += h
		}
		temp := share - heldSum
		if lp.shape == nil {
			temp = 0
		}
		var tmps, gins, gouts []int64
		if lp.shape != nil && len(lp.shape.bwdPeak) == nOps {
			tmps, gins, gouts = lp.shape.calibrated(temp)
		}
		// Per-op medians, rescaled so that they add up to the median of
		// the per-run totals (a sum of medians of skewed samples falls
		// short of the typical total).
		var sumMed time.Duration
		for i := range p.Ops {
			sumMed += stats.Median(lp.fwd[i]) + stats.Median(lp.bwd[i])
		}
		scale := lp.factor
		if sumMed > 0 {
			scale *= float64(stats.Median(lp.opTotal)) / float64(sumMed)
		}
		for i := range p.Ops {
			mem, tmp, gin, gout := held[i], int64(0), int64(0), int64(0)
			switch {
			case lp.shape == nil && heldSum > 0:
				mem = int64(float64(share) * float64(held[i]) / float64(heldSum))
			case lp.shape == nil:
				mem = share / int64(nOps)
			case tmps != nil:
				tmp, gin, gout = tmps[i], gins[i], gouts[i]
			case heldSum > 0:
				tmp = int64(float64(max(temp, 0)) * float64(held[i]) / float64(heldSum))
			}
			var opEdges int64
			if lp.shape != nil && len(lp.shape.edges) == nOps && m.Ops[i].Kind() == core.KindGraph {
				opEdges = lp.shape.edges[i]
			}
			p.Ops[i].Points = append(p.Ops[i].Points, Point{Rows: lp.rows, Edges: lp.edges,
				Fwd: scaled(stats.Median(lp.fwd[i]), scale), Bwd: scaled(stats.Median(lp.bwd[i]), scale),
				Mem: max(mem, 0), OutBytes: lp.out[i], Temp: tmp, GradIn: gin, GradOut: gout, OpEdges: opEdges})
		}
	}
	last := pts[len(pts)-1]
	for i, op := range m.Ops {
		p.Ops[i].OutBytesPerRow = float64(last.out[i]) / float64(last.rows)
		p.Ops[i].WeightBytes = wl.Ops[i].Cost.WeightBytes
		for _, in := range op.Inputs() {
			if inputs[in] {
				p.Ops[i].InputSize += float64(featDim)
			}
		}
	}
	for i := range p.Ops {
		for _, q := range p.Ops[i].Preds {
			p.Ops[i].InputSize += p.Ops[q].OutBytesPerRow / 4
		}
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// collect adds one run's trace to the point's samples.
func (lp *ladderPoint) collect(t *core.Trace, m *core.Model) {
	idx := make(map[string]int, len(m.Ops))
	for i, op := range m.Ops {
		idx[op.Name()] = i
	}
	fwd := make([]time.Duration, len(m.Ops))
	bwd := make([]time.Duration, len(m.Ops))
	var task [2]time.Duration
	var ops [2]time.Duration
	for _, e := range t.Events {
		switch e.Cat {
		case "op_forward":
			if i, ok := idx[e.Name]; ok {
				fwd[i] += e.Dur
				lp.out[i] = e.Bytes
				ops[0] += e.Dur
			}
		case "op_backward":
			if i, ok := idx[e.Name]; ok {
				bwd[i] += e.Dur
				ops[1] += e.Dur
			}
		case core.TaskForward.String():
			task[0] += e.Dur
		case core.TaskBackward.String():
			task[1] += e.Dur
		case "step":
			lp.steps = append(lp.steps, e.Dur)
		}
	}
	lp.opTotal = append(lp.opTotal, ops[0]+ops[1])
	for i := range fwd {
		lp.fwd[i] = append(lp.fwd[i], fwd[i])
		lp.bwd[i] = append(lp.bwd[i], bwd[i])
	}
	lp.setF = append(lp.setF, max(task[0]-ops[0], 0))
	lp.setB = append(lp.setB, max(task[1]-ops[1], 0))
}

// busyHandoff times how long a goroutine waiting as the executor's
// streams wait (a select on a task's done channel and the context) takes
// to run after another goroutine closes that channel and keeps computing
// (a pipeline stage that goes on with its next micro-batch): the woken
// goroutine waits for an idle processor to wake (tens of µs, ~100 on a
// VM) or for the closer to block. Median of reps; 0 (not modelled) with
// one processor, where the waiter cannot run before the closer stops, or
// when the median reaches the closer's own spin (a bound, not a time).
func busyHandoff(ctx context.Context, reps int) time.Duration {
	const before, after = 200 * time.Microsecond, 400 * time.Microsecond
	if runtime.GOMAXPROCS(0) < 2 {
		return 0
	}
	spin := func(d time.Duration) {
		x := 1.0
		for t0 := time.Now(); time.Since(t0) < d; {
			for range 64 {
				x = x*1.0000001 + 1e-9
			}
		}
		runtime.KeepAlive(x)
	}
	var lat []time.Duration
	for range reps {
		if ctx.Err() != nil {
			break
		}
		done, woke := make(chan struct{}), make(chan time.Time, 1)
		go func() {
			select {
			case <-done:
			case <-ctx.Done():
			}
			woke <- time.Now()
		}()
		spin(before) // the waiter parks
		t0 := time.Now()
		close(done)
		spin(after)
		lat = append(lat, (<-woke).Sub(t0))
	}
	if m := stats.Median(lat); m < after*9/10 {
		return m
	}
	return 0
}

// executor adds one run's handoff and overhead (wall, its Run's time,
// less the span of its tasks) to the point's samples.
func (lp *ladderPoint) executor(t *core.Trace, wall time.Duration) {
	var bwdEnd, stepStart time.Duration = -1, -1
	first, last := time.Duration(math.MaxInt64), time.Duration(0)
	for _, e := range t.Events {
		switch e.Cat {
		case core.TaskForward.String(), core.TaskBackward.String(), "step":
		default:
			continue
		}
		first, last = min(first, e.Start), max(last, e.Start+e.Dur)
		switch e.Cat {
		case core.TaskBackward.String():
			bwdEnd = max(bwdEnd, e.Start+e.Dur)
		case "step":
			stepStart = e.Start
		}
	}
	if bwdEnd >= 0 && stepStart >= bwdEnd {
		lp.handoffs = append(lp.handoffs, stepStart-bwdEnd)
	}
	if last > first && wall > last-first {
		lp.overheads = append(lp.overheads, wall-(last-first))
	}
}

func scaled(d time.Duration, f float64) time.Duration {
	return time.Duration(math.Round(float64(d) * f))
}

// MeasureConcurrency estimates how many devices' worth of compute devs
// get together when they all run tr's model at once (logical devices
// sharing the host's cores, memory bandwidth and whatever else runs on
// the machine): it times one training iteration of one unit computing
// the whole graph on devs[0] alone, and of one such unit on every device
// at once, reps times each, interleaved, and returns len(devs) × alone /
// together (medians), between 0.5 and len(devs): the Cluster.HostCores
// that makes the simulator's processor sharing match. Like Measure it
// takes optimizer steps on tr; devs[0] must be tr's home device.
func MeasureConcurrency(ctx context.Context, tr *engine.Trainer, devs []core.Device, reps int) (float64, error) {
	if len(devs) < 2 {
		return float64(len(devs)), nil
	}
	if reps <= 0 {
		reps = 5
	}
	m := tr.Model()
	n := tr.Graph().NumDst
	nOps := len(m.Ops)
	all := make([]int32, n)
	for i := range all {
		all[i] = int32(i)
	}
	b := tr.FullBatch(all)
	home := devs[0].ID()
	alone := &core.Plan{Scheduler: "sim-alone", Home: home, Units: []core.Unit{{ID: 0, Targets: all, LossWeight: 1}},
		Tasks: []core.Task{
			{ID: 0, Kind: core.TaskForward, Unit: 0, Device: home, OpLo: 0, OpHi: nOps},
			{ID: 1, Kind: core.TaskBackward, Unit: 0, Device: home, OpLo: 0, OpHi: nOps, Deps: []int{0}},
			{ID: 2, Kind: core.TaskStep, Unit: -1, Device: home, Deps: []int{1}},
		}}
	// Every device computes the whole graph for its share of the targets,
	// on its own stream, as data parallelism does.
	together := &core.Plan{Scheduler: "sim-together", Home: home}
	var stepDeps []int
	for i, d := range devs {
		lo, hi := i*n/len(devs), (i+1)*n/len(devs)
		together.Units = append(together.Units, core.Unit{ID: i, Targets: all[lo:hi], LossWeight: float64(hi-lo) / float64(n)})
		f := len(together.Tasks)
		together.Tasks = append(together.Tasks,
			core.Task{ID: f, Kind: core.TaskForward, Unit: i, Device: d.ID(), Stream: i, OpLo: 0, OpHi: nOps},
			core.Task{ID: f + 1, Kind: core.TaskBackward, Unit: i, Device: d.ID(), Stream: i, OpLo: 0, OpHi: nOps, Deps: []int{f}})
		stepDeps = append(stepDeps, f+1)
	}
	for i, d := range devs[1:] {
		id := len(together.Tasks)
		together.Tasks = append(together.Tasks, core.Task{ID: id, Kind: core.TaskReduceGrads, Unit: -1, Device: home,
			Stream: len(devs), From: d.ID(), Deps: []int{stepDeps[i+1]}})
		stepDeps[i+1] = id
	}
	together.Tasks = append(together.Tasks, core.Task{ID: len(together.Tasks), Kind: core.TaskStep, Unit: -1, Device: home,
		Stream: len(devs), Deps: stepDeps})
	infos := make([]core.DeviceInfo, len(devs))
	for i, d := range devs {
		infos[i] = d.Info()
	}
	w, err := tr.Workload(b, infos)
	if err != nil {
		return 0, err
	}
	for _, p := range []*core.Plan{alone, together} {
		if err := p.Validate(w); err != nil {
			return 0, fmt.Errorf("sim: measure concurrency: %w", err)
		}
	}
	var ta, tt []time.Duration
	for rep := -1; rep < reps; rep++ {
		for _, p := range []*core.Plan{alone, together} {
			runtime.GC()
			res, err := tr.Run(ctx, p, b, engine.RunOptions{})
			if err != nil {
				return 0, fmt.Errorf("sim: measure concurrency: %w", err)
			}
			if rep < 0 {
				continue
			}
			if p == alone {
				ta = append(ta, res.Trace.Wall)
			} else {
				tt = append(tt, res.Trace.Wall)
			}
		}
	}
	k := float64(len(devs)) * float64(stats.Median(ta)) / float64(stats.Median(tt))
	return min(float64(len(devs)), max(0.5, k)), nil
}
