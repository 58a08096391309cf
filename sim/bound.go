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
	devs := cm.c.Devices
	if len(devs) == 0 {
		return 0, fmt.Errorf("%w: the cluster has no devices", ErrNoBound)
	}
	for _, d := range devs {
		if d.StreamOverlap > 0 {
			return 0, fmt.Errorf("%w: device %s runs its streams' tasks side by side (stream_overlap), so its busy time can exceed the iteration", ErrNoBound, d.ID)
		}
	}
	n := len(cm.w.Ops)
	var work time.Duration
	best := make([]time.Duration, n)
	for _, u := range units {
		for i, d := range devs {
			cs := cm.UnitOps(d.ID, u) // the unit's setup last
			for o := range n {
				if c := cs[o].Fwd + cs[o].Bwd; i == 0 || c < best[o] {
					best[o] = c
				}
			}
		}
		for _, c := range best {
			work += c
		}
	}
	var stepSum, maxStep time.Duration
	if steps {
		seen := map[string]bool{}
		for _, op := range cm.w.Ops {
			for _, p := range op.Params {
				if seen[p.Name] {
					continue
				}
				seen[p.Name] = true
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
	return max((work+stepSum)/time.Duration(len(devs)), maxStep), nil
}

// PlanBound is WorkBound at plan p's units, with the steps if p steps
// (has a TaskStep): the shortest iteration any plan running each op once
// on each of those units could reach on cm's cluster. A plan whose
// forward tasks do not run every op exactly once per unit (trimmed or
// reused layers, dynamic-graph groups) gets an error wrapping
// ErrNoBound, saying which.
func (cm *CostModel) PlanBound(p *core.Plan) (time.Duration, error) {
	n := len(cm.w.Ops)
	if len(p.Units) == 0 {
		return 0, fmt.Errorf("%w: the plan has no units", ErrNoBound)
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
				return 0, fmt.Errorf("%w: task %d runs unit %d, which the plan does not list", ErrNoBound, t.ID, t.Unit)
			}
			for _, o := range t.OpIndices() {
				if o < 0 || o >= n {
					return 0, fmt.Errorf("%w: task %d runs op %d; the workload has %d", ErrNoBound, t.ID, o, n)
				}
				count[i][o]++
			}
		}
	}
	for i, c := range count {
		for o, k := range c {
			if k != 1 {
				return 0, fmt.Errorf("%w: unit %d runs op %d (%s) %d times, not once", ErrNoBound, p.Units[i].ID, o, cm.w.Ops[o].Name, k)
			}
		}
	}
	return cm.WorkBound(p.Units, steps)
}
