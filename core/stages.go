package core

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// StageReplica is one device stream that runs a stage.
type StageReplica struct {
	Device DeviceID `json:"device"`
	Stream int      `json:"stream"`
}

// Stage is one pipeline stage of a plan: a set of ops that one or more
// replicas run forward (and backward) for the units given them.
type Stage struct {
	// Ops are the stage's op indices, ascending.
	Ops []int `json:"ops"`
	// Replicas are the device streams that run the stage, in the order
	// of the first unit each runs.
	Replicas []StageReplica `json:"replicas"`
	// Units is how many units the stage runs over all its replicas.
	Units int `json:"units"`
	// Succ are the stages that read a value this stage produces,
	// ascending.
	Succ []int `json:"succ,omitempty"`
	// Depth is the number of stages on the longest path from this stage
	// to a sink, itself included: the in-flight bound k_s of a
	// generalised 1F1B schedule (PipeDream-Flush's P−i+1 on a chain).
	Depth int `json:"depth"`
}

// StageGraph derives the stage DAG of a plan from its forward tasks: a
// stage is the op set that a device stream's forward tasks run for a
// unit, its replicas every stream running that same set, and stage A
// precedes B when one of B's ops reads one of A's (Workload.Ops deps) or
// one of B's forward tasks waits on one of A's (Task.Deps: a chain
// schedule orders stages no value links).
// Stages are in topological order, ties by their first op.
//
// It fails, saying why, when the plan is not a stage pipeline: a stream
// runs different op sets for different units, two op sets share an op,
// or the stages form a cycle. A plan whose units each run on one device
// has one stage (data parallelism).
func (p *Plan) StageGraph(w *Workload) ([]Stage, error) {
	if w == nil {
		return nil, fmt.Errorf("no workload")
	}
	type rk struct {
		d DeviceID
		s int
	}
	// The op set each stream runs per unit, in plan order.
	sets := map[rk]map[int][]int{}
	var order []rk
	firstUnit := map[rk]int{}
	for _, t := range p.Tasks {
		if t.Kind != TaskForward {
			continue
		}
		if len(t.Ops) == 0 && (t.OpLo < 0 || t.OpHi > len(w.Ops) || t.OpLo >= t.OpHi) {
			return nil, fmt.Errorf("forward task %d runs op range [%d, %d); the workload has %d ops", t.ID, t.OpLo, t.OpHi, len(w.Ops))
		}
		k := rk{t.Device, t.Stream}
		if sets[k] == nil {
			sets[k] = map[int][]int{}
			order = append(order, k)
			firstUnit[k] = t.Unit
		}
		firstUnit[k] = min(firstUnit[k], t.Unit)
		for _, o := range t.OpIndices() {
			if o < 0 || o >= len(w.Ops) {
				return nil, fmt.Errorf("task %d runs op %d; the workload has %d ops", t.ID, o, len(w.Ops))
			}
			sets[k][t.Unit] = append(sets[k][t.Unit], o)
		}
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("the plan has no forward tasks")
	}
	key := func(ops []int) string {
		var b strings.Builder
		for i, o := range ops {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprint(&b, o)
		}
		return b.String()
	}
	stageOfKey := map[string]int{}
	streamKey := map[rk]string{} // a stream's op set
	var stages []Stage
	for _, k := range order {
		var want string
		units := make([]int, 0, len(sets[k]))
		for u := range sets[k] {
			units = append(units, u)
		}
		sort.Ints(units)
		var ops []int
		for _, u := range units {
			s := slices.Clone(sets[k][u])
			slices.Sort(s)
			s = slices.Compact(s)
			if got := key(s); want == "" {
				want, ops = got, s
			} else if got != want {
				return nil, fmt.Errorf("%s stream %d runs different ops for unit %d than for unit %d: not a stage pipeline", k.d, k.s, u, units[0])
			}
		}
		streamKey[k] = want
		si, ok := stageOfKey[want]
		if !ok {
			si = len(stages)
			stageOfKey[want] = si
			stages = append(stages, Stage{Ops: ops})
		}
		stages[si].Replicas = append(stages[si].Replicas, StageReplica{k.d, k.s})
		stages[si].Units += len(units)
	}
	stageOf := make([]int, len(w.Ops))
	for i := range stageOf {
		stageOf[i] = -1
	}
	for si, st := range stages {
		for _, o := range st.Ops {
			if q := stageOf[o]; q >= 0 {
				return nil, fmt.Errorf("op %d (%s) runs in two different op sets (on %s and %s): not a stage pipeline",
					o, w.Ops[o].Name, stages[q].Replicas[0].Device, st.Replicas[0].Device)
			}
			stageOf[o] = si
		}
	}
	succ := make([]map[int]bool, len(stages))
	indeg := make([]int, len(stages))
	link := func(a, b int) {
		if succ[a] == nil {
			succ[a] = map[int]bool{}
		}
		if !succ[a][b] {
			succ[a][b] = true
			indeg[b]++
		}
	}
	for o, op := range w.Ops {
		b := stageOf[o]
		if b < 0 {
			continue
		}
		for _, q := range op.Deps {
			if q < 0 || q >= len(w.Ops) {
				continue
			}
			a := stageOf[q]
			if a < 0 || a == b {
				continue
			}
			link(a, b)
		}
	}
	// The schedule's order between stages: a forward task waiting on
	// another stage's forward of the same unit (a chain schedule orders
	// stages that no value links; a wait on another unit is flow
	// control, not an edge).
	type su struct{ stage, unit int }
	ofTask := map[int]su{}
	for _, t := range p.Tasks {
		if t.Kind == TaskForward {
			ofTask[t.ID] = su{stageOfKey[streamKey[rk{t.Device, t.Stream}]], t.Unit}
		}
	}
	for _, t := range p.Tasks {
		if t.Kind != TaskForward {
			continue
		}
		b := ofTask[t.ID]
		for _, d := range t.Deps {
			a, ok := ofTask[d]
			if !ok || a.stage == b.stage || a.unit != b.unit {
				continue
			}
			link(a.stage, b.stage)
		}
	}
	// Kahn's order, the ready stage with the smallest first op first.
	var topo []int
	var ready []int
	for s := range stages {
		if indeg[s] == 0 {
			ready = append(ready, s)
		}
	}
	for len(ready) > 0 {
		sort.Slice(ready, func(i, j int) bool { return stages[ready[i]].Ops[0] < stages[ready[j]].Ops[0] })
		s := ready[0]
		ready = ready[1:]
		topo = append(topo, s)
		for t := range succ[s] {
			if indeg[t]--; indeg[t] == 0 {
				ready = append(ready, t)
			}
		}
	}
	if len(topo) < len(stages) {
		return nil, fmt.Errorf("the stages form a cycle (%d of %d stages in no order): not a stage DAG", len(stages)-len(topo), len(stages))
	}
	pos := make([]int, len(stages))
	for i, s := range topo {
		pos[s] = i
	}
	out := make([]Stage, len(stages))
	for i, s := range topo {
		st := stages[s]
		for t := range succ[s] {
			st.Succ = append(st.Succ, pos[t])
		}
		sort.Ints(st.Succ)
		sort.SliceStable(st.Replicas, func(a, b int) bool {
			return firstUnit[rk{st.Replicas[a].Device, st.Replicas[a].Stream}] < firstUnit[rk{st.Replicas[b].Device, st.Replicas[b].Stream}]
		})
		out[i] = st
	}
	for i := len(out) - 1; i >= 0; i-- {
		out[i].Depth = 1
		for _, t := range out[i].Succ {
			out[i].Depth = max(out[i].Depth, out[t].Depth+1)
		}
	}
	return out, nil
}
