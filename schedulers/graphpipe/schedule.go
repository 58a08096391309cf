package graphpipe

import (
	"fmt"

	"github.com/gnnkit/gnnkit/core"
)

// Partition assigns every op to a stage and every stage to devices.
type Partition struct {
	// StageOf[o] is the stage of op o.
	StageOf []int
	// Devices[s] are the replicas of stage s (data parallelism inside the
	// stage: micro-batch i runs on replica i mod len). A device hosts at
	// most one stage.
	Devices [][]core.DeviceID
	// Chain makes stage s follow stage s-1 whatever the op edges (the
	// sequential pipelines of GPipe and PipeDream, which linearise a DAG).
	Chain bool
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

// Kind is a micro-batch schedule.
type Kind int

const (
	// GPipe runs every micro-batch forward, then every one backward.
	GPipe Kind = iota
	// OneFOneB warms up k_s forwards, then alternates backward and
	// forward, then drains: PipeDream-Flush on a chain, GraphPipe's
	// generalised 1F1B on a stage DAG.
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

// BuildPlan turns a partition and m micro-batches into a plan under the
// schedule kind. Micro-batch i takes a contiguous share of the batch
// (loss weight |O_i|/|O|) and computes its targets' receptive field.
func BuildPlan(w *core.Workload, part Partition, m int, kind Kind, name string) (*core.Plan, error) {
	if len(part.StageOf) != len(w.Ops) {
		return nil, fmt.Errorf("graphpipe: partition covers %d ops, the model has %d", len(part.StageOf), len(w.Ops))
	}
	host := map[core.DeviceID]int{}
	for s, devs := range part.Devices {
		if len(devs) == 0 {
			return nil, fmt.Errorf("graphpipe: stage %d has no device", s)
		}
		for _, d := range devs {
			if prev, ok := host[d]; ok {
				return nil, fmt.Errorf("graphpipe: device %s hosts stages %d and %d", d, prev, s)
			}
			host[d] = s
		}
	}
	m = max(1, min(m, len(w.Batch)))
	if len(w.Batch) == 0 {
		m = 1
	}
	p := &core.Plan{Scheduler: name, Home: part.Devices[part.StageOf[len(w.Ops)-1]][0], Metrics: map[string]float64{}}
	for i := 0; i < m; i++ {
		lo, hi := i*len(w.Batch)/m, (i+1)*len(w.Batch)/m
		u := core.Unit{ID: i, Targets: append([]int32(nil), w.Batch[lo:hi]...), Subgraph: true, LossWeight: 1}
		if len(w.Batch) > 0 {
			u.LossWeight = float64(hi-lo) / float64(len(w.Batch))
		}
		p.Units = append(p.Units, u)
	}
	stages := part.Stages()
	preds, succs := part.StageDAG(w)
	k := InFlight(succs)
	// Per device: its stage's events in schedule order.
	type slot struct {
		dev core.DeviceID
		evs []event
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
				warm := min(k[s], len(mbs))
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
			order = append(order, slot{d, evs})
		}
	}
	id := map[event]int{}
	n := 0
	for _, sl := range order {
		for _, e := range sl.evs {
			id[e] = n
			n++
		}
	}
	bwdOn := map[core.DeviceID][]int{}
	for _, sl := range order {
		for _, e := range sl.evs {
			t := core.Task{ID: id[e], Unit: e.mb, Device: sl.dev, Ops: stages[e.stage]}
			if e.fwd {
				t.Kind = core.TaskForward
				for _, q := range preds[e.stage] {
					t.Deps = append(t.Deps, id[event{q, e.mb, true}])
				}
			} else {
				t.Kind = core.TaskBackward
				t.Deps = append(t.Deps, id[event{e.stage, e.mb, true}])
				for _, q := range succs[e.stage] {
					t.Deps = append(t.Deps, id[event{q, e.mb, false}])
				}
				bwdOn[sl.dev] = append(bwdOn[sl.dev], t.ID)
			}
			p.Tasks = append(p.Tasks, t)
		}
	}
	// Tasks must sit at their ids.
	sorted := make([]core.Task, len(p.Tasks))
	for _, t := range p.Tasks {
		sorted[t.ID] = t
	}
	p.Tasks = sorted
	var stepDeps []int
	for _, sl := range order {
		b := bwdOn[sl.dev]
		if sl.dev == p.Home {
			stepDeps = append(stepDeps, b...)
			continue
		}
		if len(b) == 0 {
			continue
		}
		rid := len(p.Tasks)
		p.Tasks = append(p.Tasks, core.Task{ID: rid, Kind: core.TaskReduceGrads, Unit: -1, Device: p.Home, Stream: 1, From: sl.dev, Deps: b})
		stepDeps = append(stepDeps, rid)
	}
	p.Tasks = append(p.Tasks, core.Task{ID: len(p.Tasks), Kind: core.TaskStep, Unit: -1, Device: p.Home, Stream: 1, Deps: stepDeps})
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
