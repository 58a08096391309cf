package sim

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// ErrNoBound is wrapped by the error PlanBound and WorkBound return when
// their bound does not hold for the plan or the cluster.
var ErrNoBound = errors.New("sim: no compute bound")

// Bound is PlanBound's answer: no plan running each op once per unit on
// the cluster simulates a shorter iteration than Time.
type Bound struct {
	// Work is WorkBound: the units' work and the steps spread evenly
	// over the devices (or the largest step).
	Work time.Duration
	// Path is the longest path of ops in any one unit, forward and then
	// backward, at the cheapest device's cost: along a path of the op
	// DAG each forward waits for the one before it and each backward for
	// the one after it in a valid plan; with one unit, its phases if
	// longer (phases). 0 when the workload's ops are not listed in
	// topological order.
	Path time.Duration
	// Devices is what Work spreads over: the cluster's devices, or its
	// host's cores if fewer (Cluster.HostCores: the devices then share
	// them).
	Devices float64
}

// Time is the bound: the larger of Work and Path.
func (b Bound) Time() time.Duration { return max(b.Work, b.Path) }

// WorkBound is a lower bound on the iteration time of every plan on
// cluster c that runs each of workload w's ops once on each of units
// (priced with prof; nil: a roofline of each device, as Simulate) and, with
// steps, steps every parameter (each whole on one device, or the whole
// model on one): every op of every unit at its cheapest device's cost
// (CostModel.UnitOps; a unit's setup is left out), plus every
// parameter's optimizer step at its cheapest device (StepBytes, and no
// more than the whole model's step there), spread evenly over the
// cluster's devices (or its host's cores, if fewer) — or the largest
// parameter's step alone, if longer. It holds because a device runs one
// task at a time, at most at its speed, so the iteration is at least the
// busiest device's busy time, which is at least the average; transfers,
// reductions and the executor's own time only add to it. A cluster with
// a device that overlaps its streams (DeviceModel.StreamOverlap) gets an
// error wrapping ErrNoBound.
func WorkBound(w *core.Workload, prof *Profile, c *Cluster, units []core.Unit, steps bool) (time.Duration, error) {
	b, err := bound(w, prof, c, units, steps, false)
	return b.Work, err
}

// PlanBound bounds the iteration of every plan running each op once on
// each of plan p's units on cluster c: WorkBound at those units, with
// the steps if p steps (has a TaskStep), and any unit's longest path of
// ops. A plan that fails core.Plan.Validate (which holds each unit to
// one forward and one backward of every op) gets an error wrapping
// ErrNoBound, saying why.
func PlanBound(p *core.Plan, w *core.Workload, prof *Profile, c *Cluster) (Bound, error) {
	if p == nil || w == nil {
		return Bound{}, fmt.Errorf("%w: nil plan or workload", ErrNoBound)
	}
	if len(p.Units) == 0 {
		return Bound{}, fmt.Errorf("%w: the plan has no units", ErrNoBound)
	}
	// Validate also holds each unit to exactly one forward and one
	// backward of every op, and the op DAG's order along them, which the
	// path and the phases rely on.
	if err := p.Validate(w); err != nil {
		return Bound{}, fmt.Errorf("%w: the plan is not valid: %v", ErrNoBound, err)
	}
	steps := slices.ContainsFunc(p.Tasks, func(t core.Task) bool { return t.Kind == core.TaskStep })
	return bound(w, prof, c, p.Units, steps, true)
}

// bound is WorkBound, and with paths the longest path of ops too. It
// prices one device of each kind (model and speed alike price every op
// and step alike): a preset's thousand devices are one.
func bound(w *core.Workload, prof *Profile, c *Cluster, units []core.Unit, steps, paths bool) (Bound, error) {
	if w == nil || c == nil {
		return Bound{}, fmt.Errorf("%w: nil workload or cluster", ErrNoBound)
	}
	if len(c.Devices) == 0 {
		return Bound{}, fmt.Errorf("%w: the cluster has no devices", ErrNoBound)
	}
	seen := map[DeviceModel]bool{}
	var reps []core.DeviceID
	for _, d := range c.Devices {
		if d.StreamOverlap > 0 {
			return Bound{}, fmt.Errorf("%w: device %s runs its streams' tasks side by side (stream_overlap), so its busy time can exceed the iteration", ErrNoBound, d.ID)
		}
		k := d
		k.ID, k.MemBytes = "", 0
		if !seen[k] {
			seen[k] = true
			reps = append(reps, d.ID)
		}
	}
	cm, err := newCostModel(w, prof, c, reps)
	if err != nil {
		return Bound{}, err
	}
	spread := float64(len(c.Devices))
	if c.HostCores > 0 {
		spread = min(spread, c.HostCores)
	}
	n := len(w.Ops)
	var work, path time.Duration
	best := make([]time.Duration, n)
	var long []time.Duration // the longest path ending at each op
	if paths {
		long = make([]time.Duration, n)
		for o, op := range w.Ops {
			for _, d := range op.Deps {
				if d < 0 || d >= o {
					long = nil // not in topological order: no path bound
				}
			}
		}
	}
	var bestF, bestB []time.Duration // one unit's: its phases (below)
	if long != nil && len(units) == 1 {
		bestF, bestB = make([]time.Duration, n), make([]time.Duration, n)
	}
	for _, u := range units {
		for i, d := range reps {
			cs := cm.UnitOps(d, u) // the unit's setup last
			for o := range n {
				if t := cs[o].Fwd + cs[o].Bwd; i == 0 || t < best[o] {
					best[o] = t
				}
				if bestF != nil {
					if i == 0 || cs[o].Fwd < bestF[o] {
						bestF[o] = cs[o].Fwd
					}
					if i == 0 || cs[o].Bwd < bestB[o] {
						bestB[o] = cs[o].Bwd
					}
				}
			}
		}
		for _, t := range best {
			work += t
		}
		for o := range long {
			var before time.Duration
			for _, d := range w.Ops[o].Deps {
				before = max(before, long[d])
			}
			long[o] = before + best[o]
			path = max(path, long[o])
		}
	}
	if bestF != nil {
		path = max(path, phases(w, bestF, bestB, spread))
	}
	var stepSum, maxStep time.Duration
	if steps {
		// Each parameter's step at its cheapest device, less a
		// nanosecond for the rounding of each (the simulator rounds one
		// step per device); no more than the whole model's step on the
		// cheapest device (a profile's measured step without a
		// parameter count prices any bytes as the whole step).
		var whole time.Duration
		for i, d := range reps {
			if s := cm.Step(d); i == 0 || s < whole {
				whole = s
			}
		}
		stepped := map[string]bool{}
		for _, op := range w.Ops {
			for _, p := range op.Params {
				if stepped[p.Name] {
					continue
				}
				stepped[p.Name] = true
				var st time.Duration
				for i, d := range reps {
					if s := cm.StepBytes(d, p.Bytes); i == 0 || s < st {
						st = s
					}
				}
				st = max(st-1, 0)
				stepSum += st
				maxStep = max(maxStep, st)
			}
		}
		stepSum, maxStep = min(stepSum, whole), min(maxStep, whole)
	}
	return Bound{Work: max(spreadOver(work+stepSum, spread), maxStep), Path: path, Devices: spread}, nil
}

// spreadOver is t spread evenly over spread devices, rounded down.
func spreadOver(t time.Duration, spread float64) time.Duration {
	if spread == float64(int64(spread)) {
		return t / time.Duration(spread)
	}
	return max(time.Duration(float64(t)/spread)-1, 0) // fractional host cores
}

// maxPhaseOps bounds the ops phases reads (it keeps each op's ancestors,
// n² bits).
const maxPhaseOps = 1 << 12

// phases bounds one unit's time from its ops' cheapest forward and
// backward costs (ops in topological order): an op every path of the op
// DAG crosses (a cut: every other op is its ancestor or descendant) runs
// forward after all its ancestors' forwards and before all its
// descendants', and backward the other way round (with one sink, every
// backward after every forward), so the ops between
// two consecutive cuts (a phase) run their forwards in a window of their
// own, and their backwards in another. Each window takes at least its
// work spread evenly over the devices, and its longest path; the cuts
// run one after another. A fork-join model on one micro-batch: the
// branches spread, the head after them (uno-8 on 4 A100s: 147.5 ms,
// where the work spread evenly is 133.4 ms). 0 past maxPhaseOps ops or
// with several sinks.
func phases(w *core.Workload, fwd, bwd []time.Duration, spread float64) time.Duration {
	n := len(w.Ops)
	if n == 0 || n > maxPhaseOps {
		return 0
	}
	words := (n + 63) / 64
	anc := make([]uint64, n*words) // op o's ancestors: anc[o*words : (o+1)*words]
	nDesc := make([]int, n)
	for o, op := range w.Ops {
		row := anc[o*words : (o+1)*words]
		for _, d := range op.Deps {
			row[d/64] |= 1 << (d % 64)
			for i, x := range anc[d*words : (d+1)*words] {
				row[i] |= x
			}
		}
	}
	nAnc := make([]int, n)
	for o := range n {
		for i, x := range anc[o*words : (o+1)*words] {
			for x != 0 {
				b := bits.TrailingZeros64(x)
				x &= x - 1
				nDesc[i*64+b]++
				nAnc[o]++
			}
		}
	}
	// One sink (every op an ancestor of the last): then every backward
	// follows every forward. An op no other reads besides it (a second
	// output) could run its backward among the forwards.
	sinks := 0
	for o := range n {
		if nDesc[o] == 0 {
			sinks++
		}
	}
	if sinks != 1 {
		return 0
	}
	// phase[o]: the cuts among o's ancestors (its phase, if o is no cut).
	cut := make([]bool, n)
	for o := range n {
		cut[o] = nAnc[o]+nDesc[o]+1 == n
	}
	phase := make([]int, n)
	nPhases := 1
	for o := range n {
		for i, x := range anc[o*words : (o+1)*words] {
			for x != 0 {
				b := bits.TrailingZeros64(x)
				x &= x - 1
				if cut[i*64+b] {
					phase[o]++
				}
			}
		}
		nPhases = max(nPhases, phase[o]+1)
	}
	workF, workB := make([]time.Duration, nPhases), make([]time.Duration, nPhases)
	pathF, pathB := make([]time.Duration, nPhases), make([]time.Duration, nPhases)
	longF, longB := make([]time.Duration, n), make([]time.Duration, n)
	var total time.Duration
	for o, op := range w.Ops {
		if cut[o] {
			total += fwd[o] + bwd[o]
			continue
		}
		k := phase[o]
		workF[k] += fwd[o]
		workB[k] += bwd[o]
		var bf, bb time.Duration
		for _, d := range op.Deps {
			if !cut[d] && phase[d] == k {
				bf, bb = max(bf, longF[d]), max(bb, longB[d])
			}
		}
		longF[o], longB[o] = bf+fwd[o], bb+bwd[o]
		pathF[k], pathB[k] = max(pathF[k], longF[o]), max(pathB[k], longB[o])
	}
	for k := range nPhases {
		total += max(spreadOver(workF[k], spread), pathF[k]) + max(spreadOver(workB[k], spread), pathB[k])
	}
	return total
}
