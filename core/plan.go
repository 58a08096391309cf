package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
)

// TaskKind is what a plan task does.
type TaskKind uint8

const (
	// TaskForward runs the task's ops (Task.OpIndices) forward for a unit.
	TaskForward TaskKind = iota
	// TaskBackward runs the task's ops backward for a unit, adding the
	// parameter gradients into its device's accumulators.
	TaskBackward
	// TaskReduceGrads adds device From's gradient accumulators into the
	// task's device (the plan's Home) and clears From's; with
	// Plan.StepOwners, only those of the parameters the task's device owns
	// (or Task.Params of them).
	TaskReduceGrads
	// TaskStep applies the optimizer on Home and refreshes the replicas;
	// with Plan.StepOwners, on its device to the parameters that device
	// owns, then sends their new values to the plan's other readers.
	TaskStep
)

var taskKindNames = [...]string{"forward", "backward", "reduce_grads", "step"}

func (k TaskKind) String() string {
	if int(k) < len(taskKindNames) {
		return taskKindNames[k]
	}
	return fmt.Sprintf("TaskKind(%d)", uint8(k))
}

// MarshalText writes the kind's name.
func (k TaskKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind's name.
func (k *TaskKind) UnmarshalText(b []byte) error {
	for i, n := range taskKindNames {
		if n == string(b) {
			*k = TaskKind(i)
			return nil
		}
	}
	return fmt.Errorf("core: unknown task kind %q (want one of %s)", b, strings.Join(taskKindNames[:], ", "))
}

// Unit is a unit of work: a set of target nodes whose loss, scaled by
// LossWeight, is one term of the iteration's loss.
//
// With Subgraph false the unit computes every row of the workload graph
// (full-graph training); with Subgraph true it computes only its targets'
// receptive field: the subgraph induced on the nodes within the model's
// depth (Model.Config.Layers hops) of the targets, with edge weights
// (normalisation) taken from the whole workload graph. Both give the
// targets' exact outputs.
type Unit struct {
	ID         int     `json:"id"`
	Targets    []int32 `json:"targets"`
	LossWeight float64 `json:"loss_weight"`
	Subgraph   bool    `json:"subgraph,omitempty"`
}

// Task is one step of a plan on a device stream. It may start once every
// task in Deps has finished; tasks on one stream also run in plan order.
//
// A forward or backward task runs the ops Ops (ascending op indices), or
// the range [OpLo, OpHi) when Ops is empty. A unit's ops may run on
// several devices (pipeline stages): the executor moves a value produced
// on one device to the devices whose ops read it before their forward
// task, and the gradient back before the producer's backward task. An
// op's backward runs on the device of its forward (its activations are
// there).
type Task struct {
	ID     int      `json:"id"`
	Kind   TaskKind `json:"kind"`
	Unit   int      `json:"unit"` // -1 for ReduceGrads and Step
	Device DeviceID `json:"device"`
	Stream int      `json:"stream"`
	OpLo   int      `json:"op_lo,omitempty"`
	OpHi   int      `json:"op_hi,omitempty"`
	Ops    []int    `json:"ops,omitempty"`
	From   DeviceID `json:"from,omitempty"` // ReduceGrads source
	Deps   []int    `json:"deps,omitempty"`
	// Params, on a ReduceGrads task of a StepOwners plan, names the
	// parameters it moves; empty: every parameter From reads and the
	// task's device owns. Several reductions between two devices split
	// those parameters between them, so gradients final early (a stage
	// a device runs beside another) need not wait for the rest. On a
	// Step task of a StepOwners plan it names the parameters it steps;
	// empty: every parameter the task's device owns. Several steps on
	// one device split those between them, so parameters final early
	// are stepped, and sent to their readers, while the rest compute.
	Params []string `json:"params,omitempty"`
	// Priority orders the ready tasks of one device: when the device is
	// free, an optimizer step goes first, then the task of highest
	// priority, then the earliest ready, then the first in plan order.
	// The executor runs the forward and backward tasks of a device whose
	// tasks differ in priority, or that the plan lists as Exclusive, one
	// at a time, the highest priority first, then the earliest ready; its
	// reductions and steps run beside them as they come.
	Priority int `json:"priority,omitempty"`
}

// OpIndices returns the ops a forward or backward task runs, ascending.
func (t Task) OpIndices() []int {
	if len(t.Ops) > 0 {
		return t.Ops
	}
	out := make([]int, 0, max(0, t.OpHi-t.OpLo))
	for o := t.OpLo; o < t.OpHi; o++ {
		out = append(out, o)
	}
	return out
}

// Plan is a scheduler's answer: plain, serialisable data.
type Plan struct {
	Scheduler string   `json:"scheduler"`
	Home      DeviceID `json:"home"` // holds the master parameters and runs the Step
	Units     []Unit   `json:"units"`
	Tasks     []Task   `json:"tasks"`
	// MemEstimate is the scheduler's predicted peak per device (optional);
	// Validate rejects a plan whose estimate exceeds a device's cap.
	MemEstimate map[DeviceID]int64 `json:"mem_estimate,omitempty"`
	// Metrics are figures the scheduler reports about its plan (e.g.
	// "micro_batches", "redundancy"); summaries print them.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Reuse, when set, asks the executor to compute each shared activation
	// once per iteration (cache-and-accumulate) instead of once per unit.
	Reuse *Reuse `json:"reuse,omitempty"`
	// StepOwners, when set, steps every parameter on its owner (see
	// StepOwners) instead of on Home: one Step per owner, and gradients
	// reduced from each reader into the owner, not into Home.
	StepOwners bool `json:"step_owners,omitempty"`
	// Owners, with StepOwners, names each parameter's owner: one of the
	// devices whose forward tasks read it (a scheduler spreads a
	// replicated stage's parameters over its replicas, as ZeRO stage 1
	// does, so each holds the optimizer state and receives the
	// gradients of its share). Nil: StepOwners' rule, the device of the
	// first forward task reading it (so does an empty map). See
	// ParamOwners.
	Owners map[string]DeviceID `json:"owners,omitempty"`
	// Alternatives, when the scheduler reports them, are the trade-offs
	// it weighed: the plan itself (Chosen) first, then the Pareto front of
	// simulated iteration and largest device peak among the other plans
	// it simulated that fit, fastest first, each lighter than every faster
	// one (the chosen plan need not be the fastest: a scheduler may trade
	// time for memory, as graphpipe's slack option does, and then lists
	// the faster plans it passed over). Informational: nothing executes
	// them.
	Alternatives []Alternative `json:"alternatives,omitempty"`
	// Exclusive are devices that run their forward and backward tasks
	// one at a time whatever streams they are on, in Task.Priority's
	// order, as the simulator runs every device: a device hosting several
	// pipeline stages, whose memory bound counts one task's transients.
	// Elsewhere a device's streams may run side by side (BLAD's operator
	// overlap) unless their tasks differ in priority.
	Exclusive []DeviceID `json:"exclusive,omitempty"`
}

// Alternative is one plan a scheduler weighed (Plan.Alternatives).
type Alternative struct {
	// Description says what the plan is (e.g. "dag, 5 stages, depth 2,
	// m 16, warm-up 5").
	Description string  `json:"description"`
	IterationMs float64 `json:"iteration_ms"`
	// PeakBytes is the largest device's simulated peak.
	PeakBytes int64 `json:"peak_bytes"`
	// NeedBytes, when the scheduler says, is the memory per device a
	// search must allow to keep this plan: the larger of PeakBytes and
	// the peak its own fit check counts (GraphPipe's estimate, which
	// takes every timing's worst case and can exceed the one timing
	// simulated). Under a smaller --device-mem the plan is ruled out.
	NeedBytes int64 `json:"need_bytes,omitempty"`
	Chosen    bool  `json:"chosen,omitempty"`
}

// Reuse describes activation reuse across the subgraph units of a
// single-device plan (docs/design.md, Cherry). The units' targets are
// the parts O_k; the shared nodes are those whose Boundary row two or
// more units read (a target or an in-neighbour of a target of each).
// The executor computes the shared rows once, in the producer chunks
// below, keeps them and the sum of their gradients on the device, and
// backpropagates through each shared row once, after its last consumer.
// The result is exactly the plan without Reuse.
type Reuse struct {
	// Boundary is the value shared rows are cached of: the input of the
	// model's last layer (Model.ReuseBoundary).
	Boundary string `json:"boundary"`
	// Chunks partition the shared nodes (batch node ids) into the units
	// that produce them.
	Chunks [][]int32 `json:"chunks"`
	// Keep holds the producers' activations from their forward pass to
	// their backward pass; otherwise the backward pass recomputes them.
	Keep bool `json:"keep,omitempty"`
}

// DecodePlan reads a plan from JSON, rejecting unknown fields.
func DecodePlan(b []byte) (*Plan, error) {
	var p Plan
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: decode: %v", ErrInvalidPlan, err)
	}
	return &p, nil
}

// Devices lists the devices the plan uses, sorted.
func (p *Plan) Devices() []DeviceID {
	seen := map[DeviceID]bool{}
	for _, t := range p.Tasks {
		seen[t.Device] = true
	}
	out := make([]DeviceID, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func planErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidPlan, fmt.Sprintf(format, a...))
}

// Validate checks the plan against the workload: known devices, acyclic
// dependencies, every batch node in exactly one unit, loss weights summing
// to 1, every op of every unit run forward and backward exactly once (on
// one device, backward after forward), per-device gradients reduced into
// Home before the single Step, and memory estimates within the caps.
// Metrics must be finite. A plan of more than 131,072 tasks is refused:
// checking the ordering keeps n*n/8 bytes of reachability sets.
func (p *Plan) Validate(w *Workload) error {
	if p == nil {
		return planErr("nil plan")
	}
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, planErr(format, a...)) }
	known := map[DeviceID]DeviceInfo{}
	for _, d := range w.Devices {
		known[d.ID] = d
	}
	if _, ok := known[p.Home]; !ok {
		fail("home device %q is not one of the workload's devices", p.Home)
	}
	for _, k := range slices.Sorted(maps.Keys(p.Metrics)) {
		if v := p.Metrics[k]; math.IsNaN(v) || math.IsInf(v, 0) {
			fail("metric %q is %v; want a finite number (JSON cannot carry NaN or infinities)", k, v)
		}
	}
	for i, a := range p.Alternatives {
		if math.IsNaN(a.IterationMs) || math.IsInf(a.IterationMs, 0) || a.IterationMs < 0 || a.PeakBytes < 0 || a.NeedBytes < 0 {
			fail("alternative %d (%q): iteration %v ms, peak %d bytes, need %d bytes; want finite, non-negative figures", i, a.Description, a.IterationMs, a.PeakBytes, a.NeedBytes)
		}
	}
	p.validateMemEstimate(known, fail)
	// Units: exactly-once coverage of the batch.
	// Multiset comparison by sorting: cheap for million-node batches.
	want := slices.Clone(w.Batch)
	slices.Sort(want)
	sum := 0.0
	var got []int32
	for i, u := range p.Units {
		if u.ID != i {
			fail("unit %d has id %d; ids must equal positions", i, u.ID)
		}
		if math.IsNaN(u.LossWeight) || math.IsInf(u.LossWeight, 0) || u.LossWeight < 0 {
			fail("unit %d has loss weight %v", i, u.LossWeight)
		}
		sum += u.LossWeight
		got = append(got, u.Targets...)
	}
	slices.Sort(got)
	if len(w.Batch) > 0 && math.Abs(sum-1) > 1e-6 {
		fail("unit loss weights sum to %.9g, want 1", sum)
	}
	var lost, dup, extra []int32
	for i, j := 0, 0; i < len(want) || j < len(got); {
		switch {
		case j == len(got) || (i < len(want) && want[i] < got[j]):
			lost = append(lost, want[i])
			i++
		case i == len(want) || got[j] < want[i]:
			if i > 0 && want[i-1] == got[j] {
				dup = append(dup, got[j])
			} else {
				extra = append(extra, got[j])
			}
			j++
		default:
			i++
			j++
		}
	}
	lost, dup, extra = slices.Compact(lost), slices.Compact(dup), slices.Compact(extra)
	if len(lost) > 0 {
		fail("%d batch nodes are in no unit (e.g. %v)", len(lost), sample(lost))
	}
	if len(dup) > 0 {
		fail("%d batch nodes are in more than one unit (e.g. %v)", len(dup), sample(dup))
	}
	if len(extra) > 0 {
		fail("%d unit targets are not in the batch (e.g. %v)", len(extra), sample(extra))
	}
	if p.Reuse != nil {
		p.validateReuse(w, fail)
	}
	for _, d := range p.Exclusive {
		if _, ok := known[d]; !ok {
			fail("exclusive device %q is not one of the workload's devices", d)
		}
	}
	// Tasks: well-formed, acyclic.
	n := len(p.Tasks)
	nOps := len(w.Ops)
	for i, t := range p.Tasks {
		if t.ID != i {
			fail("task %d has id %d; ids must equal positions", i, t.ID)
		}
		if _, ok := known[t.Device]; !ok {
			fail("task %d (%s) runs on unknown device %q", i, t.Kind, t.Device)
		}
		if t.Stream < 0 {
			fail("task %d has negative stream %d", i, t.Stream)
		}
		for _, d := range t.Deps {
			if d < 0 || d >= n || d == i {
				fail("task %d depends on task %d, which does not exist", i, d)
			}
		}
		switch t.Kind {
		case TaskForward, TaskBackward:
			if len(t.Params) > 0 {
				fail("task %d (%s) names parameters; only gradient reductions and optimizer steps do", i, t.Kind)
			}
			if t.Unit < 0 || t.Unit >= len(p.Units) {
				fail("task %d (%s) names unit %d of %d", i, t.Kind, t.Unit, len(p.Units))
			}
			if len(t.Ops) > 0 {
				if t.OpLo != 0 || t.OpHi != 0 {
					fail("task %d (%s) sets both an op list and an op range", i, t.Kind)
				}
				for j, o := range t.Ops {
					if o < 0 || o >= nOps || (j > 0 && o <= t.Ops[j-1]) {
						fail("task %d (%s) op list %v is not ascending within the model's %d ops", i, t.Kind, t.Ops, nOps)
						break
					}
				}
			} else if t.OpLo < 0 || t.OpHi > nOps || t.OpLo >= t.OpHi {
				fail("task %d (%s) has op range [%d,%d) outside the model's %d ops", i, t.Kind, t.OpLo, t.OpHi, nOps)
			}
		case TaskReduceGrads:
			if _, ok := known[t.From]; !ok {
				fail("task %d reduces gradients from unknown device %q", i, t.From)
			}
			if p.StepOwners && t.From == t.Device {
				fail("task %d reduces gradients from %s into itself", i, t.From)
			}
			if !p.StepOwners && t.Device != p.Home {
				fail("task %d reduces gradients into %s, not the home device %s", i, t.Device, p.Home)
			}
			if !p.StepOwners && len(t.Params) > 0 {
				fail("task %d names the parameters it reduces, which only owner-stepped plans (step_owners) do", i)
			}
		case TaskStep:
			if !p.StepOwners && t.Device != p.Home {
				fail("task %d steps the optimizer on %s, not the home device %s", i, t.Device, p.Home)
			}
			if !p.StepOwners && len(t.Params) > 0 {
				fail("task %d (step) names the parameters it steps, which only owner-stepped plans (step_owners) do", i)
			}
		default:
			fail("task %d has unknown kind %d", i, t.Kind)
		}
	}
	if nOps > 0 {
		// Every unit needs a forward task; this also bounds the per-unit
		// tables below by the task count.
		fwd := 0
		for _, t := range p.Tasks {
			if t.Kind == TaskForward {
				fwd++
			}
		}
		if len(p.Units) > fwd {
			fail("plan has %d units but only %d forward tasks; every unit needs its own forward and backward tasks", len(p.Units), fwd)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	order, err := p.topo()
	if err != nil {
		return err
	}
	// Per unit and op: one forward and one backward task, on one device,
	// ordered along the op DAG. The checks that need no reachability
	// come first, so that a malformed plan is refused before the
	// quadratic ancestor sets are built.
	const maxErrs = 20
	fwdOf := make([][]int, len(p.Units))
	bwdOf := make([][]int, len(p.Units))
	for u := range p.Units {
		fwdOf[u], bwdOf[u] = make([]int, nOps), make([]int, nOps)
		for o := range nOps {
			fwdOf[u][o], bwdOf[u][o] = -1, -1
		}
	}
	backwardOn := map[DeviceID][]int{}
	var bwdTasks []int
	for i, t := range p.Tasks {
		var of [][]int
		switch t.Kind {
		case TaskForward:
			of = fwdOf
		case TaskBackward:
			of = bwdOf
			backwardOn[t.Device] = append(backwardOn[t.Device], i)
			bwdTasks = append(bwdTasks, i)
		default:
			continue
		}
		for _, o := range t.OpIndices() {
			if prev := of[t.Unit][o]; prev >= 0 && len(errs) < maxErrs {
				fail("unit %d runs op %d (%s) %s in both task %d and task %d, want once", t.Unit, o, w.Ops[o].Name, t.Kind, prev, i)
			}
			of[t.Unit][o] = i
		}
	}
	for u := range p.Units {
		for o := 0; o < nOps && len(errs) < maxErrs; o++ {
			f, b := fwdOf[u][o], bwdOf[u][o]
			if f < 0 || b < 0 {
				fail("unit %d never runs op %d (%s) %s", u, o, w.Ops[o].Name, map[bool]string{true: "forward", false: "backward"}[f < 0])
				continue
			}
			if p.Tasks[f].Device != p.Tasks[b].Device {
				fail("unit %d runs op %d (%s) forward on %s but backward on %s; backward must run where the activations are",
					u, o, w.Ops[o].Name, p.Tasks[f].Device, p.Tasks[b].Device)
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if n > maxPlanTasks {
		return planErr("plan has %d tasks, over the limit of %d that validation handles (its reachability check needs about %s for that many); real schedules are far smaller (GPipe over 64 devices with 64 micro-batches: about 28,000 tasks): use fewer micro-batches or devices",
			n, maxPlanTasks, FormatBytes(ancestorBytes(n)))
	}
	anc := p.ancestors(order)
	reach := func(from, to int) bool { return anc[from][to>>6]&(1<<(to&63)) != 0 } // to is an ancestor of from
	for u := range p.Units {
		for o := 0; o < nOps && len(errs) < maxErrs; o++ {
			f, b := fwdOf[u][o], bwdOf[u][o]
			if !reach(b, f) {
				fail("unit %d: backward task %d does not wait for forward task %d of op %d (%s)", u, b, f, o, w.Ops[o].Name)
			}
			for _, d := range w.Ops[o].Deps {
				if fd := fwdOf[u][d]; fd >= 0 && fd != f && !reach(f, fd) {
					fail("unit %d: forward task %d (op %s) does not wait for task %d, which produces its input (op %s)", u, f, w.Ops[o].Name, fd, w.Ops[d].Name)
				}
				if bd := bwdOf[u][d]; bd >= 0 && bd != b && !reach(bd, b) {
					fail("unit %d: backward task %d (op %s) does not wait for task %d, which sends it the gradient of its output (op %s)", u, bd, w.Ops[d].Name, b, w.Ops[o].Name)
				}
			}
		}
	}
	// Gradient reduction and the step.
	if p.StepOwners {
		p.validateOwnerSteps(w, reach, backwardOn, fail)
	} else {
		if len(p.Owners) > 0 {
			fail("the plan names parameter owners but does not step on them (step_owners is off)")
		}
		var steps []int
		reduces := map[DeviceID][]int{}
		for i, t := range p.Tasks {
			switch t.Kind {
			case TaskStep:
				steps = append(steps, i)
			case TaskReduceGrads:
				reduces[t.From] = append(reduces[t.From], i)
			}
		}
		if len(steps) != 1 {
			fail("plan has %d optimizer steps, want exactly 1", len(steps))
		} else {
			s := steps[0]
			for _, b := range bwdTasks {
				if !reach(s, b) && len(errs) < maxErrs {
					fail("the step (task %d) does not wait for backward task %d (unit %d)", s, b, p.Tasks[b].Unit)
				}
			}
			devs := make([]DeviceID, 0, len(backwardOn))
			for d := range backwardOn {
				devs = append(devs, d)
			}
			sort.Slice(devs, func(i, j int) bool { return devs[i] < devs[j] })
			for _, d := range devs {
				if d == p.Home {
					continue
				}
				r := reduces[d]
				if len(r) != 1 {
					fail("device %s runs backward work but has %d gradient reductions into %s, want 1", d, len(r), p.Home)
					continue
				}
				if !reach(s, r[0]) {
					fail("the step does not wait for the gradient reduction from %s (task %d)", d, r[0])
				}
				for _, b := range backwardOn[d] {
					if !reach(r[0], b) && len(errs) < maxErrs {
						fail("the gradient reduction from %s (task %d) does not wait for backward task %d", d, r[0], b)
					}
				}
			}
		}
	}
	for d, est := range p.MemEstimate {
		if info, ok := known[d]; ok && info.MemCap > 0 && est > info.MemCap {
			fail("predicted peak on %s is %s, over its cap of %s", d, FormatBytes(est), FormatBytes(info.MemCap))
		}
	}
	return errors.Join(errs...)
}

func sample(v []int32) []int32 {
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	if len(v) > 5 {
		return v[:5]
	}
	return v
}

// preds returns each task's predecessors: its Deps and the task before it
// on the same device stream (streams run in plan order).
func (p *Plan) preds() [][]int {
	type key struct {
		d DeviceID
		s int
	}
	last := map[key]int{}
	pr := make([][]int, len(p.Tasks))
	for i, t := range p.Tasks {
		pr[i] = append(pr[i], t.Deps...)
		k := key{t.Device, t.Stream}
		if j, ok := last[k]; ok {
			pr[i] = append(pr[i], j)
		}
		last[k] = i
	}
	return pr
}

// Deadlock reports whether the plan's tasks can run to the end: nil, or
// an error naming tasks on a cycle of dependencies and stream order
// (which would deadlock), or a dependency on no task. It is the part of
// Validate a scheduler needs to choose between task orders it built
// itself, without Validate's checks of coverage, shapes and reductions.
func (p *Plan) Deadlock() error {
	for i, t := range p.Tasks {
		for _, d := range t.Deps {
			if d < 0 || d >= len(p.Tasks) {
				return planErr("task %d depends on task %d; the plan has tasks 0 to %d", i, d, len(p.Tasks)-1)
			}
		}
	}
	_, err := p.topo()
	return err
}

// topo returns a topological order of the tasks (dependencies plus stream
// order) or an error naming the tasks on a cycle, which would deadlock.
func (p *Plan) topo() ([]int, error) {
	n := len(p.Tasks)
	indeg := make([]int, n)
	out := make([][]int, n)
	for i, pr := range p.preds() {
		for _, d := range pr {
			out[d] = append(out[d], i)
			indeg[i]++
		}
	}
	var q, order []int
	for i := range indeg {
		if indeg[i] == 0 {
			q = append(q, i)
		}
	}
	for len(q) > 0 {
		i := q[0]
		q = q[1:]
		order = append(order, i)
		for _, j := range out[i] {
			if indeg[j]--; indeg[j] == 0 {
				q = append(q, j)
			}
		}
	}
	if len(order) != n {
		var cyc []int
		for i := range indeg {
			if indeg[i] > 0 {
				cyc = append(cyc, i)
			}
		}
		if len(cyc) > 8 {
			cyc = cyc[:8]
		}
		return nil, planErr("task dependencies (with stream order) form a cycle through tasks %v: the plan would deadlock", cyc)
	}
	return order, nil
}

// maxPlanTasks bounds the tasks of a plan Validate accepts: the
// reachability check keeps a bit set of ancestors per task, n*n/8 bytes
// (2 GiB at this limit). The largest plans the repository's schedulers
// make are about 28,000 tasks (GPipe over 64 devices with 64
// micro-batches of a 981-op model), so the limit leaves room for four
// times as many micro-batches; past it a plan is refused before the
// check allocates, instead of exhausting the host's memory.
const maxPlanTasks = 1 << 17

// ancestorBytes is what ancestors allocates for n tasks.
func ancestorBytes(n int) int64 { return int64(n) * int64((n+63)/64) * 8 }

// ancestors returns for each task the bit set of tasks it transitively
// waits on (dependencies and stream order). Validate bounds the task
// count (maxPlanTasks) before calling it.
func (p *Plan) ancestors(order []int) [][]uint64 {
	n := len(p.Tasks)
	words := (n + 63) / 64
	backing := make([]uint64, n*words)
	anc := make([][]uint64, n)
	for i := range anc {
		anc[i] = backing[i*words : (i+1)*words]
	}
	pr := p.preds()
	for _, i := range order {
		a := anc[i]
		for _, d := range pr[i] {
			a[d>>6] |= 1 << (d & 63)
			for k, x := range anc[d] {
				a[k] |= x
			}
		}
	}
	return anc
}

// validateMemEstimate checks the estimate's entries: each names one of
// the workload's devices and is a byte count (not negative). The caps are
// checked at the end of Validate.
func (p *Plan) validateMemEstimate(known map[DeviceID]DeviceInfo, fail func(string, ...any)) {
	for _, d := range slices.Sorted(maps.Keys(p.MemEstimate)) {
		if _, ok := known[d]; !ok {
			fail("memory estimate names device %q, which is not one of the workload's devices", d)
		}
		if est := p.MemEstimate[d]; est < 0 {
			fail("memory estimate for %s is %d bytes; want a byte count of 0 or more", d, est)
		}
	}
}

// validateReuse checks the activation-reuse section: a single device,
// subgraph units, a boundary the model produces, disjoint chunks.
func (p *Plan) validateReuse(w *Workload, fail func(string, ...any)) {
	r := p.Reuse
	for _, t := range p.Tasks {
		if t.Device != p.Home {
			fail("activation reuse runs on one device, but task %d runs on %s, not the home %s", t.ID, t.Device, p.Home)
			break
		}
	}
	for i, u := range p.Units {
		if !u.Subgraph {
			fail("activation reuse needs subgraph units; unit %d is not one", i)
			break
		}
	}
	if r.Boundary == "" {
		fail("activation reuse names no boundary value")
	} else if w.Model != nil {
		found := false
		for _, op := range w.Model.Ops {
			found = found || slices.Contains(op.Outputs(), r.Boundary)
		}
		if !found {
			fail("activation reuse boundary %q is not a value an op of model %s produces", r.Boundary, w.Model.Name)
		}
	}
	var all []int32
	for _, c := range r.Chunks {
		all = append(all, c...)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			fail("activation reuse lists shared node %d in two chunks", all[i])
			break
		}
	}
	if w.Graph != nil && len(all) > 0 && (all[0] < 0 || int(all[len(all)-1]) >= w.Graph.NumDst) {
		fail("activation reuse lists shared nodes outside the batch graph's %d nodes", w.Graph.NumDst)
	}
}
