package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// ErrNoBound is wrapped by the error PlanBound and WorkBound return when
// their bound does not hold for the plan or the cluster.
var ErrNoBound = errors.New("sim: no compute bound")

// WorkBound is a lower bound on the iteration time of every plan on cm's
// cluster that runs each of the workload's ops once on each of units and
// steps every parameter (each whole on one device, or the whole model on
// one): every op of every unit at its cheapest device's cost (UnitOps; a
// unit's setup is left out), plus, with steps, every parameter's
// optimizer step at its cheapest device (StepBytes), spread evenly over
// the cluster's devices — or the largest parameter's step alone, if
// longer. It holds because a device runs one task at a time, so the
// iteration is at least its busiest device's busy time, which is at least
// the average; transfers, reductions and the executor's own time only
// add to it. A cluster with a device that overlaps its streams
// (DeviceModel.StreamOverlap) gets an error wrapping ErrNoBound.
func (cm *CostModel) WorkBound(units []core.Unit, steps bool) (time.Duration, error) {
	b, err := cm.bound(units, steps, false)
	return b.Work, err
}

// Bound is PlanBound's answer: no plan running each op once per unit on
// the cluster has a shorter iteration than Time.
type Bound struct {
	// Work is WorkBound: the units' work and the steps spread evenly
	// over the devices (or the largest step).
	Work time.Duration
	// Path is the longest path of ops in any one unit, forward and then
	// backward, at the cheapest device's cost: along a path of the op
	// DAG each forward waits for the one before it and each backward for
	// the one after it (0 when the workload's ops are not listed in
	// topological order).
	Path time.Duration
}

// Time is the bound: the larger of Work and Path.
func (b Bound) Time() time.Duration { return max(b.Work, b.Path) }

// bound is WorkBound, and with paths the longest path of ops too.
func (cm *CostModel) bound(units []core.Unit, steps, paths bool) (Bound, error) {
	devs := cm.c.Devices
	if len(devs) == 0 {
		return Bound{}, fmt.Errorf("%w: the cluster has no devices", ErrNoBound)
	}
	for _, d := range devs {
		if d.StreamOverlap > 0 {
			return Bound{}, fmt.Errorf("%w: device %s runs its streams' tasks side by side (stream_overlap), so its busy time can exceed the iteration", ErrNoBound, d.ID)
		}
	}
	// Devices of one profile and speed price every op alike: one of each
	// (a preset's thousand devices are one).
	type kind struct {
		p     *Profile
		scale float64
	}
	seen := map[kind]bool{}
	var reps []core.DeviceID
	for _, d := range devs {
		dp := cm.dev(d.ID)
		if k := (kind{dp.p, dp.scale}); !seen[k] {
			seen[k] = true
			reps = append(reps, d.ID)
		}
	}
	n := len(cm.w.Ops)
	var work, path time.Duration
	best := make([]time.Duration, n)
	var long []time.Duration // the longest path ending at each op
	if paths {
		long = make([]time.Duration, n)
		for o, op := range cm.w.Ops {
			for _, d := range op.Deps {
				if d < 0 || d >= o {
					long = nil // not in topological order: no path bound
				}
			}
		}
	}
	for _, u := range units {
		for i, d := range reps {
			cs := cm.UnitOps(d, u) // the unit's setup last
			for o := range n {
				if c := cs[o].Fwd + cs[o].Bwd; i == 0 || c < best[o] {
					best[o] = c
				}
			}
		}
		for _, c := range best {
			work += c
		}
		for o := range long {
			var before time.Duration
			for _, d := range cm.w.Ops[o].Deps {
				before = max(before, long[d])
			}
			long[o] = before + best[o]
			path = max(path, long[o])
		}
	}
	var stepSum, maxStep time.Duration
	if steps {
		stepped := map[string]bool{}
		for _, op := range cm.w.Ops {
			for _, p := range op.Params {
				if stepped[p.Name] {
					continue
				}
				stepped[p.Name] = true
				var st time.Duration
				for i, d := range devs {
					if s := cm.StepBytes(d.ID, p.Bytes); i == 0 || s < st {
						st = s
					}
				}
				stepSum += st
				maxStep = max(maxStep, st)
			}
		}
	}
	return Bound{Work: max((work+stepSum)/time.Duration(len(devs)), maxStep), Path: path}, nil
}

// PlanBound bounds the iteration of every plan running each op once on
// each of plan p's units on cm's cluster: WorkBound at those units, with
// the steps if p steps (has a TaskStep), and any unit's longest path of
// ops. A plan whose
// forward tasks do not run every op exactly once per unit (trimmed or
// reused layers, dynamic-graph groups) gets an error wrapping
// ErrNoBound, saying which.
func (cm *CostModel) PlanBound(p *core.Plan) (Bound, error) {
	n := len(cm.w.Ops)
	if len(p.Units) == 0 {
		return Bound{}, fmt.Errorf("%w: the plan has no units", ErrNoBound)
	}
	idx := make(map[int]int, len(p.Units))
	for i, u := range p.Units {
		idx[u.ID] = i
	}
	count := make([][]int32, len(p.Units))
	for i := range count {
		count[i] = make([]int32, n)
	}
	steps := false
	for _, t := range p.Tasks {
		switch t.Kind {
		case core.TaskStep:
			steps = true
		case core.TaskForward:
			i, ok := idx[t.Unit]
			if !ok {
				return Bound{}, fmt.Errorf("%w: task %d runs unit %d, which the plan does not list", ErrNoBound, t.ID, t.Unit)
			}
			for _, o := range t.OpIndices() {
				if o < 0 || o >= n {
					return Bound{}, fmt.Errorf("%w: task %d runs op %d; the workload has %d", ErrNoBound, t.ID, o, n)
				}
				count[i][o]++
			}
		}
	}
	for i, c := range count {
		for o, k := range c {
			if k != 1 {
				return Bound{}, fmt.Errorf("%w: unit %d runs op %d (%s) %d times, not once", ErrNoBound, p.Units[i].ID, o, cm.w.Ops[o].Name, k)
			}
		}
	}
	return cm.bound(p.Units, steps, true)
}
