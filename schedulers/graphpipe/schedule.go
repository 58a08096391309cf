package graphpipe

import (
	"fmt"
	"slices"

	"github.com/gnnkit/gnnkit/core"
)

// Partition assigns every op to a stage and every stage to devices.
type Partition struct {
	// StageOf[o] is the stage of op o.
	StageOf []int
	// Devices[s] are the replicas of stage s (data parallelism inside the
	// stage: micro-batch i runs on replica i mod len). A device may host
	// several stages (BuildPlan runs each on a stream of its own; the
	// device computes one task at a time); the searches' partitions give
	// every stage devices of its own, and their estimate assumes so.
	Devices [][]core.DeviceID
	// Chain makes stage s follow stage s-1 whatever the op edges (the
	// sequential pipelines of GPipe and PipeDream, which linearise a DAG).
	Chain bool
	// WarmupCap, when positive, bounds the 1F1B warm-up (Warmup) of every
	// stage that has successors at this many forwards per replica: fewer
	// micro-batches in flight where the device-weighted warm-up keeps
	// more than the pipeline needs. The search trims it while the
	// simulated iteration does not grow (trimWarmup).
	WarmupCap int
}

// depths is W_s for every stage (Warmup), bounded by the warm-up cap:
// W_s ≤ WarmupCap·d_s for stages with successors. The 1F1B warm-ups and
// the in-flight memory both read it.
func (p Partition) depths(succs [][]int) []int {
	w := weightedDepth(succs, p.Devices)
	if p.WarmupCap > 0 {
		for s := range w {
			if len(succs[s]) > 0 {
				w[s] = min(w[s], p.WarmupCap*len(p.Devices[s]))
			}
		}
	}
	return w
}

// warmups turns depths into per-replica warm-ups, ceil(W_s/d_s).
func warmups(w []int, devs [][]core.DeviceID) []int {
	out := make([]int, len(w))
	for s := range w {
		d := len(devs[s])
		out[s] = (w[s] + d - 1) / d
	}
	return out
}

// Stages returns each stage's ops, ascending.
func (p Partition) Stages() [][]int {
	out := make([][]int, len(p.Devices))
	for o, s := range p.StageOf {
		out[s] = append(out[s], o)
	}
	return out
}

// StageDAG returns each stage's predecessor and successor stages.
func (p Partition) StageDAG(w *core.Workload) (preds, succs [][]int) {
	n := len(p.Devices)
	preds, succs = make([][]int, n), make([][]int, n)
	if p.Chain {
		for s := 1; s < n; s++ {
			preds[s], succs[s-1] = []int{s - 1}, []int{s}
		}
		return preds, succs
	}
	seen := map[[2]int]bool{}
	for o, op := range w.Ops {
		for _, d := range op.Deps {
			a, b := p.StageOf[d], p.StageOf[o]
			if a != b && !seen[[2]int{a, b}] {
				seen[[2]int{a, b}] = true
				preds[b] = append(preds[b], a)
				succs[a] = append(succs[a], b)
			}
		}
	}
	return preds, succs
}

// InFlight returns k_s for every stage: the number of stages on the
// longest path from s to a sink, s included. A 1F1B schedule keeps at
// most k_s micro-batches in flight on stage s; on a chain of P stages it
// is P-i for stage i (0-based), PipeDream-Flush's warm-up.
func InFlight(succs [][]int) []int {
	k := make([]int, len(succs))
	var visit func(s int) int
	visit = func(s int) int {
		if k[s] > 0 {
			return k[s]
		}
		best := 0
		for _, t := range succs[s] {
			best = max(best, visit(t))
		}
		k[s] = best + 1
		return k[s]
	}
	for s := range succs {
		visit(s)
	}
	return k
}

// Warmup returns each stage's 1F1B warm-up per replica: with W_s the
// devices on the heaviest path from s to a sink (s included; a stage
// counts its replicas), a replica of s starts ceil(W_s/d_s) forwards
// before its first backward. Without replication W_s = k_s (InFlight),
// PipeDream-Flush's warm-up; a replicated stage downstream takes d_q
// micro-batches at once, so the stages before it must keep that many
// more in flight to stay busy (PipeDream's NOAM generalised to a DAG).
// A partition's WarmupCap bounds it further (Partition.Warmups).
func Warmup(succs [][]int, devs [][]core.DeviceID) []int {
	return warmups(weightedDepth(succs, devs), devs)
}

// Warmups is the 1F1B warm-up per replica BuildPlan gives each stage of
// p on w: Warmup, bounded by p.WarmupCap on stages with successors.
func (p Partition) Warmups(w *core.Workload) []int {
	_, succs := p.StageDAG(w)
	return warmups(p.depths(succs), p.Devices)
}

// weightedDepth is W_s for every stage (see Warmup).
func weightedDepth(succs [][]int, devs [][]core.DeviceID) []int {
	w := make([]int, len(succs))
	var visit func(s int) int
	visit = func(s int) int {
		if w[s] > 0 {
			return w[s]
		}
		best := 0
		for _, t := range succs[s] {
			best = max(best, visit(t))
		}
		w[s] = best + len(devs[s])
		return w[s]
	}
	for s := range succs {
		visit(s)
	}
	return w
}

// Kind is a micro-batch schedule.
type Kind int

const (
	// GPipe runs every micro-batch forward, then every one backward.
	GPipe Kind = iota
	// OneFOneB warms up each replica with Partition.Warmups' forwards (k_s
	// on an unreplicated pipeline), then alternates backward and forward, then
	// drains: PipeDream-Flush on a chain, GraphPipe's generalised 1F1B on
	// a stage DAG.
	OneFOneB
)

func (k Kind) String() string {
	if k == GPipe {
		return "gpipe"
	}
	return "1f1b"
}

type event struct {
	stage, mb int
	fwd       bool
}

// StepMode is where a plan steps the optimizer.
type StepMode int

const (
	// StepOwners steps each parameter on its owner (core.Plan.StepOwners,
	// core.Plan.Owners named by spreadOwners: a replicated stage's
	// parameters spread over its replicas): each replica
	// reduces into the owners of the parameters it reads, each owner steps
	// what it owns and sends it back to the other readers. Workloads that
	// name no op's parameters (OpInfo.Params) get StepHome plans.
	StepOwners StepMode = iota
	// StepHome reduces every device's gradients into home, which steps the
	// whole model and sends every device its parameters back.
	StepHome
)

func (s StepMode) String() string {
	if s == StepHome {
		return "home"
	}
	return "owners"
}

// owners reports whether plans for w under mode step owner-step: the
// mode asks for it and w names its ops' parameters.
func (s StepMode) owners(w *core.Workload) bool {
	if s != StepOwners {
		return false
	}
	for _, o := range w.Ops {
		if len(o.Params) > 0 {
			return true
		}
	}
	return false
}

// BuildPlan turns a partition and m micro-batches into a plan under the
// schedule kind, stepping the optimizer on the parameters' owners
// (StepOwners; BuildPlanWith chooses). Micro-batch i takes a contiguous
// share of the batch (loss weight |O_i|/|O|) and computes its targets'
// receptive field.
func BuildPlan(w *core.Workload, part Partition, m int, kind Kind, name string) (*core.Plan, error) {
	return BuildPlanWith(w, part, m, kind, StepOwners, name)
}

// BuildPlanWith is BuildPlan with the step mode. A device hosting several
// stages runs each on a stream of its own. The plan's home is the
// first replica of the loss op's stage. Under StepHome every other device
// that runs backward work reduces into home (on home's stream 1, in the
// devices' stage order) after its last backward, and home steps once.
// Under StepOwners (on a workload that names its ops' parameters) every
// device E reduces into each owner O ≠ E of parameters it reads (on O's
// flush stream, the stream after its others, in readiness order) after
// E's backward tasks reading the parameters it moves, and every owner
// steps on its flush stream after its own backward tasks and the
// reductions into it. Owners are spreadOwners'.
func BuildPlanWith(w *core.Workload, part Partition, m int, kind Kind, step StepMode, name string) (*core.Plan, error) {
	return BuildPlanOpts(w, part, m, kind, PlanOptions{Step: step, BucketBytes: DefaultBucketBytes}, name)
}

// DefaultBucketBytes is PlanOptions.BucketBytes' default: PyTorch DDP's
// bucket_cap_mb of 25 MiB.
const DefaultBucketBytes = 25 << 20

// PlanOptions are BuildPlanOpts' choices.
type PlanOptions struct {
	Step StepMode
	// BucketBytes: under owner steps a replicated stage's last backward
	// on each replica is split into tasks over buckets of its ops, the
	// latest ops first, each closed once the parameters its ops read
	// reach this many bytes; each bucket's gradients go to their owners
	// while the next computes. 0 or less: one task.
	BucketBytes int64
	// StepGroups: under owner steps, each owner steps its parameters in
	// groups by readiness (core.Plan.OwnerStepGroupsIn): a shared
	// stage's parameters are stepped and sent back to its replicas while
	// the owner's own stage still runs backward work.
	StepGroups bool
	// SinkFirst: on a device hosting several stages, the stage nearer a
	// sink goes first when several are ready (core.Task.Priority 1-k_s,
	// InFlight's k): it finishes micro-batches in flight and sends their
	// gradients upstream sooner, but delays what the other stage feeds
	// its successors. Off: the earliest ready first.
	SinkFirst bool
}

// BuildPlanOpts is BuildPlanWith with the options.
func BuildPlanOpts(w *core.Workload, part Partition, m int, kind Kind, opts PlanOptions, name string) (*core.Plan, error) {
	if len(part.StageOf) != len(w.Ops) {
		return nil, fmt.Errorf("graphpipe: partition covers %d ops, the model has %d", len(part.StageOf), len(w.Ops))
	}
	// A device hosting several stages runs each on a stream of its own
	// (0 for the first, then 2, 3, …: stream 1 is the flush's).
	hosted := map[core.DeviceID]int{}
	streamOf := map[[2]int]int{} // (stage, replica) -> stream
	for s, devs := range part.Devices {
		if len(devs) == 0 {
			return nil, fmt.Errorf("graphpipe: stage %d has no device", s)
		}
		seen := map[core.DeviceID]bool{}
		for r, d := range devs {
			if seen[d] {
				return nil, fmt.Errorf("graphpipe: stage %d lists device %s twice", s, d)
			}
			seen[d] = true
			if n := hosted[d]; n > 0 {
				streamOf[[2]int{s, r}] = n + 1
			}
			hosted[d]++
		}
	}
	units := MicroUnits(w, m)
	m = len(units)
	p := &core.Plan{Scheduler: name, Home: part.Devices[part.StageOf[len(w.Ops)-1]][0], Metrics: map[string]float64{}, Units: units}
	// A device hosting several stages computes one task at a time, as
	// the estimate's memory bound has it (core.Plan.Exclusive).
	for _, devs := range part.Devices {
		for _, d := range devs {
			if hosted[d] > 1 && !slices.Contains(p.Exclusive, d) {
				p.Exclusive = append(p.Exclusive, d)
			}
		}
	}
	stages := part.Stages()
	preds, succs := part.StageDAG(w)
	k := InFlight(succs)
	warmup := warmups(part.depths(succs), part.Devices)
	// Per device: its stage's events in schedule order.
	type slot struct {
		dev    core.DeviceID
		stream int
		evs    []event
	}
	var order []slot
	for s, devs := range part.Devices {
		for r, d := range devs {
			var mbs []int
			for i := r; i < m; i += len(devs) {
				mbs = append(mbs, i)
			}
			var evs []event
			switch kind {
			case GPipe:
				for _, i := range mbs {
					evs = append(evs, event{s, i, true})
				}
				for _, i := range mbs {
					evs = append(evs, event{s, i, false})
				}
			default:
				warm := min(warmup[s], len(mbs))
				for _, i := range mbs[:warm] {
					evs = append(evs, event{s, i, true})
				}
				for j := range mbs {
					evs = append(evs, event{s, mbs[j], false})
					if warm+j < len(mbs) {
						evs = append(evs, event{s, mbs[warm+j], true})
					}
				}
			}
			order = append(order, slot{d, streamOf[[2]int{s, r}], evs})
		}
	}
	// A replicated stage's last backward on each replica runs in buckets
	// of its ops (the latest first), so that the gradients of each are
	// final, and go to their owners, while the rest computes (DDP's
	// gradient buckets).
	var buckets [][][]int
	if opts.Step.owners(w) && opts.BucketBytes > 0 {
		buckets = make([][][]int, len(stages))
		_, pbytes, opPar := paramIndex(w)
		for st, ops := range stages {
			if len(part.Devices[st]) > 1 {
				buckets[st] = bucketOps(ops, opPar, pbytes, float64(opts.BucketBytes))
			}
		}
	}
	chunks := func(sl slot, j int) [][]int {
		e := sl.evs[j]
		if e.fwd || j != len(sl.evs)-1 || buckets == nil || len(buckets[e.stage]) < 2 {
			return nil
		}
		return buckets[e.stage]
	}
	id := map[event]int{}
	n := 0
	for _, sl := range order {
		for j, e := range sl.evs {
			n += max(len(chunks(sl, j)), 1)
			id[e] = n - 1 // a bucketed backward's last bucket
		}
	}
	// PlanOptions.SinkFirst's priorities, on devices hosting several
	// stages.
	priority := func(d core.DeviceID, s int) int {
		if !opts.SinkFirst || hosted[d] < 2 {
			return 0
		}
		return 1 - k[s]
	}
	bwdOn := map[core.DeviceID][]int{}
	for _, sl := range order {
		for j, e := range sl.evs {
			t := core.Task{ID: id[e], Unit: e.mb, Device: sl.dev, Stream: sl.stream, Ops: stages[e.stage], Priority: priority(sl.dev, e.stage)}
			if e.fwd {
				t.Kind = core.TaskForward
				for _, q := range preds[e.stage] {
					t.Deps = append(t.Deps, id[event{q, e.mb, true}])
				}
				p.Tasks = append(p.Tasks, t)
				continue
			}
			t.Kind = core.TaskBackward
			t.Deps = append(t.Deps, id[event{e.stage, e.mb, true}])
			for _, q := range succs[e.stage] {
				t.Deps = append(t.Deps, id[event{q, e.mb, false}])
			}
			bs := chunks(sl, j)
			for b, ops := range bs[:max(len(bs)-1, 0)] {
				c := core.Task{ID: id[e] - len(bs) + 1 + b, Kind: core.TaskBackward, Unit: e.mb, Device: sl.dev, Stream: sl.stream, Ops: ops, Priority: t.Priority}
				if b == 0 {
					c.Deps = t.Deps
				} else {
					c.Deps = []int{c.ID - 1}
				}
				bwdOn[sl.dev] = append(bwdOn[sl.dev], c.ID)
				p.Tasks = append(p.Tasks, c)
			}
			if len(bs) > 0 {
				t.Ops, t.Deps = bs[len(bs)-1], []int{t.ID - 1}
			}
			bwdOn[sl.dev] = append(bwdOn[sl.dev], t.ID)
			p.Tasks = append(p.Tasks, t)
		}
	}
	// Tasks must sit at their ids.
	sorted := make([]core.Task, len(p.Tasks))
	for _, t := range p.Tasks {
		sorted[t.ID] = t
	}
	p.Tasks = sorted
	var devs []core.DeviceID
	listed := map[core.DeviceID]bool{}
	for _, sl := range order {
		if !listed[sl.dev] {
			listed[sl.dev] = true
			devs = append(devs, sl.dev)
		}
	}
	if opts.Step.owners(w) {
		p.Owners = planOwners(w, part, m)
		if opts.StepGroups {
			p = p.OwnerStepGroupsIn(w, devs)
		} else {
			p = p.OwnerStepIn(w, devs)
		}
	} else {
		homeStep(p, devs, bwdOn)
	}
	depth := 0
	for _, v := range k {
		depth = max(depth, v)
	}
	p.Metrics["stages"] = float64(len(stages))
	p.Metrics["depth"] = float64(depth)
	p.Metrics["micro_batches"] = float64(m)
	p.Metrics["bubble_bound"] = float64(depth-1) / float64(m+depth-1)
	return p, nil
}

// bucketOps splits a stage's ops (ascending) into buckets for its
// backward, latest ops first: each closes once the parameters its ops
// read (opPar, bytes; each counted in the first bucket reading it)
// reach cap bytes; the last takes the rest. One bucket: nil.
func bucketOps(ops []int, opPar [][]int32, bytes []float64, cap float64) [][]int {
	seen := map[int32]bool{}
	var out [][]int
	hi, acc := len(ops), 0.0
	for i := len(ops) - 1; i >= 0; i-- {
		for _, q := range opPar[ops[i]] {
			if !seen[q] {
				seen[q] = true
				acc += bytes[q]
			}
		}
		if acc >= cap && i > 0 {
			out = append(out, slices.Clone(ops[i:hi]))
			hi, acc = i, 0
		}
	}
	out = append(out, slices.Clone(ops[:hi]))
	if len(out) < 2 {
		return nil
	}
	return out
}

// homeStep ends p with the home flush: one reduction into home from every
// other device (in the order devs lists them) that ran backward tasks,
// then home's step.
func homeStep(p *core.Plan, devs []core.DeviceID, bwdOn map[core.DeviceID][]int) {
	var stepDeps []int
	for _, dev := range devs {
		b := bwdOn[dev]
		if dev == p.Home {
			stepDeps = append(stepDeps, b...)
			continue
		}
		if len(b) == 0 {
			continue
		}
		rid := len(p.Tasks)
		p.Tasks = append(p.Tasks, core.Task{ID: rid, Kind: core.TaskReduceGrads, Unit: -1, Device: p.Home, Stream: 1, From: dev, Deps: b})
		stepDeps = append(stepDeps, rid)
	}
	p.Tasks = append(p.Tasks, core.Task{ID: len(p.Tasks), Kind: core.TaskStep, Unit: -1, Device: p.Home, Stream: 1, Deps: stepDeps})
}
