package core

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// StepOwners returns each parameter's owner under Plan.StepOwners: the
// device of the first forward task, in plan order, whose ops read it.
// opParams(o) names the parameters op o reads. Parameters no forward task
// reads have no owner.
func StepOwners(tasks []Task, opParams func(op int) []string) map[string]DeviceID {
	own := map[string]DeviceID{}
	for _, t := range tasks {
		if t.Kind != TaskForward {
			continue
		}
		for _, o := range t.OpIndices() {
			for _, p := range opParams(o) {
				if _, ok := own[p]; !ok {
					own[p] = t.Device
				}
			}
		}
	}
	return own
}

// ParamOwners returns each parameter's owner under p.StepOwners: p.Owners
// where set, otherwise StepOwners' rule. opParams(o) names the parameters
// op o reads.
func (p *Plan) ParamOwners(opParams func(op int) []string) map[string]DeviceID {
	if len(p.Owners) > 0 {
		return p.Owners
	}
	return StepOwners(p.Tasks, opParams)
}

// ParamReaders returns the parameters each device's forward tasks read.
func ParamReaders(tasks []Task, opParams func(op int) []string) map[DeviceID]map[string]bool {
	out := map[DeviceID]map[string]bool{}
	for _, t := range tasks {
		if t.Kind != TaskForward {
			continue
		}
		for _, o := range t.OpIndices() {
			for _, p := range opParams(o) {
				if out[t.Device] == nil {
					out[t.Device] = map[string]bool{}
				}
				out[t.Device][p] = true
			}
		}
	}
	return out
}

// OpParams returns a lookup of the parameter names each of w's ops reads
// (OpInfo.Params), for StepOwners and ParamReaders.
func (w *Workload) OpParams() func(op int) []string {
	names := make([][]string, len(w.Ops))
	for i, o := range w.Ops {
		for _, r := range o.Params {
			names[i] = append(names[i], r.Name)
		}
	}
	return func(op int) []string {
		if op < 0 || op >= len(names) {
			return nil
		}
		return names[op]
	}
}

// HomeStep returns p rewritten to step every parameter on Home: its
// ReduceGrads and Step tasks are replaced by one reduction into Home from
// every other device that runs backward work (after all of that device's
// backward tasks) and one Step on Home after them and Home's backward
// tasks. A plan without StepOwners is returned as is.
func (p *Plan) HomeStep() *Plan {
	if !p.StepOwners {
		return p
	}
	q, bwdOn, stream := p.withoutFlush()
	q.StepOwners, q.Owners = false, nil
	var stepDeps []int
	for _, d := range sortedDevs(bwdOn) {
		if d == p.Home {
			stepDeps = append(stepDeps, bwdOn[d]...)
			continue
		}
		id := len(q.Tasks)
		q.Tasks = append(q.Tasks, Task{ID: id, Kind: TaskReduceGrads, Unit: -1, Device: p.Home, Stream: stream[p.Home], From: d, Deps: bwdOn[d]})
		stepDeps = append(stepDeps, id)
	}
	q.Tasks = append(q.Tasks, Task{ID: len(q.Tasks), Kind: TaskStep, Unit: -1, Device: p.Home, Stream: stream[p.Home], Deps: stepDeps})
	return q
}

// OwnerStep returns p rewritten to step each parameter on its owner
// (ParamOwners, with w's OpInfo.Params): its ReduceGrads and Step tasks
// are replaced by reductions from each device into each other owner of
// parameters it reads (one per readiness group, see OwnerStepIn; each
// after that device's backward tasks reading the parameters it moves,
// which write those gradients; the executor adds them in after the
// owner's own) and one Step per owner (after its backward tasks and the
// reductions into it), each on a stream of its own on its device.
// Devices are taken in ID order (OwnerStepIn chooses).
func (p *Plan) OwnerStep(w *Workload) *Plan { return p.OwnerStepIn(w, nil) }

// OwnerStepIn is OwnerStep emitting the reductions and steps with devices
// in the given order (those it does not list after them, in ID order).
// A stream runs its tasks in plan order, so an owner adds its reductions
// in the order they are emitted: by when their gradients should be
// ready — the latest micro-batch (unit) among the backward tasks each
// waits for, and for the same one the later ops first (a pipeline runs a
// unit's backward from its last ops to its first) — then in that device
// order. A reduction waiting on a source's last stage would otherwise
// hold up one whose gradients were final long before (a shared stage's
// replica that also reads a pipeline stage's parameters); for the same
// reason a pair's parameters whose gradients are final at different
// times on the source (different last backward tasks) go in separate
// reductions, each naming its parameters (Task.Params).
// Each owner has one Step, after all its backward tasks and the
// reductions into it (OwnerStepGroupsIn splits it).
func (p *Plan) OwnerStepIn(w *Workload, order []DeviceID) *Plan {
	return p.ownerStep(w, order, false)
}

// OwnerStepGroupsIn is OwnerStepIn with each owner's step split by
// readiness: the parameters moved by the same reductions into it and
// ready at the same time (the later of their last backward on the owner
// and those reductions') form a group, and an owner with several has a
// Step per group, each naming its parameters (Task.Params), waiting only
// for the owner's backward tasks reading them and the reductions moving
// them, on a stream of its own. So a shared stage's parameters are
// stepped, and their new values sent to its replicas, while the owner
// still runs backward work of its own. Each parameter still steps once
// per iteration on the same summed gradient (nothing reads it after the
// reductions moving it), so the result is the same as OwnerStepIn's;
// only the timing differs, and not always for the better: early
// refreshes share ports with the reductions still travelling (a
// data-parallel stage's buckets), so a scheduler weighs both.
func (p *Plan) OwnerStepGroupsIn(w *Workload, order []DeviceID) *Plan {
	return p.ownerStep(w, order, true)
}

func (p *Plan) ownerStep(w *Workload, order []DeviceID, grouped bool) *Plan {
	q, bwdOn, stream := p.withoutFlush()
	q.StepOwners = true
	op := w.OpParams()
	owner := q.ParamOwners(op)
	readers := ParamReaders(q.Tasks, op)
	stepDeps := map[DeviceID][]int{}
	for _, d := range inOrder(bwdOn, order) {
		stepDeps[d] = append(stepDeps[d], bwdOn[d]...)
	}
	type ready struct{ unit, op int } // the latest unit waited for, its first op
	later := func(a, b ready) bool { return a.unit > b.unit || a.unit == b.unit && a.op < b.op }
	type reduction struct {
		from, into DeviceID
		names      []string // the parameters it moves
		params     []string // nil: all the pair's
		deps       []int
		ready
	}
	var reds []reduction
	finals := map[DeviceID]map[string]ready{}
	indexes := map[DeviceID]ReaderIndex{}
	for _, e := range inOrder(readers, order) {
		index := IndexReaders(q.Tasks, bwdOn[e], op)
		// When each parameter's gradient on e is final: its last
		// backward task there.
		final := map[string]ready{}
		for _, b := range bwdOn[e] {
			t := q.Tasks[b]
			ops := t.OpIndices()
			if len(ops) == 0 {
				continue
			}
			r := ready{t.Unit, ops[0]}
			for _, o := range ops {
				for _, name := range op(o) {
					if f, ok := final[name]; !ok || later(r, f) {
						final[name] = r
					}
				}
			}
		}
		finals[e], indexes[e] = final, index
		into := map[DeviceID]bool{}
		for name := range readers[e] {
			if o := owner[name]; o != e {
				into[o] = true
			}
		}
		for _, o := range inOrder(into, order) {
			// One reduction per readiness: gradients final early (a
			// stage e runs beside another) go without waiting for the
			// rest.
			groups := map[ready][]string{}
			for name := range readers[e] {
				if owner[name] == o {
					groups[final[name]] = append(groups[final[name]], name)
				}
			}
			for r, names := range groups {
				sort.Strings(names)
				moved := map[string]bool{}
				for _, name := range names {
					moved[name] = true
				}
				x := reduction{from: e, into: o, names: names, deps: index.Reading(moved), ready: r}
				if len(groups) > 1 {
					x.params = names
				}
				reds = append(reds, x)
			}
		}
	}
	// A pair's groups differ in readiness, so the order is deterministic.
	sort.SliceStable(reds, func(i, j int) bool { return later(reds[j].ready, reds[i].ready) })
	// Each owner's step groups: its parameters by their last backward on
	// it and the reductions moving them.
	movers := map[string][]int{} // by parameter, indices into reds
	for j, r := range reds {
		for _, name := range r.names {
			movers[name] = append(movers[name], j)
		}
	}
	owned := map[DeviceID][]string{}
	for name, d := range owner {
		owned[d] = append(owned[d], name)
	}
	type stepGroup struct {
		dev   DeviceID
		names []string
		reds  []int // indices into reds
		ready
	}
	var whole []DeviceID  // owners with one group: one step, after all
	var split []stepGroup // the groups of the others
	for _, d := range inOrder(owned, order) {
		names := owned[d]
		sort.Strings(names)
		type key struct {
			at   ready // the later of its last backward and reductions
			reds string
		}
		var keys []key
		byKey := map[key]*stepGroup{}
		for _, name := range names {
			at := finals[d][name]
			for _, j := range movers[name] {
				if later(reds[j].ready, at) {
					at = reds[j].ready
				}
			}
			k := key{at, fmt.Sprint(movers[name])}
			g := byKey[k]
			if g == nil {
				g = &stepGroup{dev: d, reds: movers[name], ready: at}
				byKey[k] = g
				keys = append(keys, k)
			}
			g.names = append(g.names, name)
		}
		if !grouped || len(keys) == 1 {
			whole = append(whole, d)
			continue
		}
		for _, k := range keys {
			split = append(split, *byKey[k])
		}
	}
	// Emit the reductions and the groups' steps by readiness (a step
	// after the reductions it waits for: at equal readiness reductions
	// first), then the whole steps.
	sort.SliceStable(split, func(i, j int) bool { return later(split[j].ready, split[i].ready) })
	redID := make([]int, len(reds))
	groupsOn := map[DeviceID]int{}
	emitStep := func(g stepGroup) {
		set := map[string]bool{}
		for _, name := range g.names {
			set[name] = true
		}
		deps := indexes[g.dev].Reading(set)
		if len(deps) == 0 {
			// No backward task on the owner reads them (none of the
			// models has such a parameter): after all its backward work.
			deps = slices.Clone(bwdOn[g.dev])
		}
		for _, j := range g.reds {
			deps = append(deps, redID[j])
		}
		// On a stream of its own, after the reductions' (stream[d]):
		// the next group's step need not wait for this one's refresh.
		groupsOn[g.dev]++
		q.Tasks = append(q.Tasks, Task{ID: len(q.Tasks), Kind: TaskStep, Unit: -1, Device: g.dev, Stream: stream[g.dev] + groupsOn[g.dev], Deps: deps, Params: g.names})
	}
	k := 0
	for j, r := range reds {
		for k < len(split) && later(r.ready, split[k].ready) {
			emitStep(split[k])
			k++
		}
		id := len(q.Tasks)
		redID[j] = id
		q.Tasks = append(q.Tasks, Task{ID: id, Kind: TaskReduceGrads, Unit: -1, Device: r.into, Stream: stream[r.into], From: r.from, Deps: r.deps, Params: r.params})
		stepDeps[r.into] = append(stepDeps[r.into], id)
	}
	for ; k < len(split); k++ {
		emitStep(split[k])
	}
	for _, d := range whole {
		q.Tasks = append(q.Tasks, Task{ID: len(q.Tasks), Kind: TaskStep, Unit: -1, Device: d, Stream: stream[d], Deps: stepDeps[d]})
	}
	return q
}

// MovedParams returns the parameters ReduceGrads task t of a StepOwners
// plan moves: t.Params, or every parameter t.From reads and t.Device owns
// (readers: ParamReaders; owner: ParamOwners).
func MovedParams(t Task, readers map[DeviceID]map[string]bool, owner map[string]DeviceID) map[string]bool {
	out := map[string]bool{}
	if len(t.Params) > 0 {
		for _, name := range t.Params {
			out[name] = true
		}
		return out
	}
	for name := range readers[t.From] {
		if owner[name] == t.Device {
			out[name] = true
		}
	}
	return out
}

// ReaderIndex maps each parameter to the positions in a list of backward
// tasks (IndexReaders' bwd) of those whose ops read it: for many name
// sets over the same tasks, the tasks that write those parameters'
// gradients on their device, without rescanning their ops.
type ReaderIndex struct {
	bwd []int
	pos map[string][]int
}

// IndexReaders indexes the backward tasks bwd (indices into tasks) by the
// parameters their ops read (opParams).
func IndexReaders(tasks []Task, bwd []int, opParams func(op int) []string) ReaderIndex {
	x := ReaderIndex{bwd: bwd, pos: map[string][]int{}}
	for i, b := range bwd {
		for _, o := range tasks[b].OpIndices() {
			for _, p := range opParams(o) {
				if l := x.pos[p]; len(l) == 0 || l[len(l)-1] != i {
					x.pos[p] = append(l, i)
				}
			}
		}
	}
	return x
}

// Reading returns those of the indexed tasks whose ops read a parameter
// in names, in bwd's order.
func (x ReaderIndex) Reading(names map[string]bool) []int {
	var at []int
	for name := range names {
		at = append(at, x.pos[name]...)
	}
	if len(at) == 0 {
		return nil
	}
	slices.Sort(at)
	at = slices.Compact(at)
	out := make([]int, len(at))
	for i, j := range at {
		out[i] = x.bwd[j]
	}
	return out
}

// inOrder lists m's devices: those in order first, in that order, then
// the rest in ID order.
func inOrder[V any](m map[DeviceID]V, order []DeviceID) []DeviceID {
	var out []DeviceID
	seen := map[DeviceID]bool{}
	for _, d := range order {
		if _, ok := m[d]; ok && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	for _, d := range sortedDevs(m) {
		if !seen[d] {
			out = append(out, d)
		}
	}
	return out
}

// withoutFlush returns a copy of p without its ReduceGrads and Step tasks
// (tasks that depended on one depend on its own dependencies instead),
// the backward tasks on each device, and per device a stream number no
// remaining task of it uses.
func (p *Plan) withoutFlush() (*Plan, map[DeviceID][]int, map[DeviceID]int) {
	q := *p
	q.Tasks = nil
	newID := make([]int, len(p.Tasks))
	for i, t := range p.Tasks {
		newID[i] = -1
		if t.Kind == TaskForward || t.Kind == TaskBackward {
			newID[i] = len(q.Tasks)
			q.Tasks = append(q.Tasks, t)
		}
	}
	var resolve func(i int, seen map[int]bool) []int
	resolve = func(i int, seen map[int]bool) []int {
		if newID[i] >= 0 {
			return []int{newID[i]}
		}
		if seen[i] {
			return nil
		}
		seen[i] = true
		var out []int
		for _, d := range p.Tasks[i].Deps {
			if d >= 0 && d < len(p.Tasks) {
				out = append(out, resolve(d, seen)...)
			}
		}
		return out
	}
	bwdOn := map[DeviceID][]int{}
	stream := map[DeviceID]int{}
	for i := range q.Tasks {
		t := &q.Tasks[i]
		old := t.Deps
		t.ID, t.Deps = i, nil
		seen := map[int]bool{}
		for _, d := range old {
			if d < 0 || d >= len(p.Tasks) {
				continue
			}
			for _, n := range resolve(d, map[int]bool{}) {
				if !seen[n] {
					seen[n] = true
					t.Deps = append(t.Deps, n)
				}
			}
		}
		sort.Ints(t.Deps)
		stream[t.Device] = max(stream[t.Device], t.Stream+1)
		if t.Kind == TaskBackward {
			bwdOn[t.Device] = append(bwdOn[t.Device], i)
		}
	}
	if _, ok := stream[p.Home]; !ok {
		stream[p.Home] = 0
	}
	return &q, bwdOn, stream
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedDevs[V any](m map[DeviceID]V) []DeviceID {
	out := make([]DeviceID, 0, len(m))
	for d := range m {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// validateOwnerSteps checks a StepOwners plan's reductions and steps:
// each owner's Steps (one, or several naming their share of what it
// owns, together all of it once), each after the owner's forward and
// backward tasks reading what it steps and every reduction moving that
// into it; from each device into each other owner of parameters it
// reads one reduction, or several that each name their share (together
// all of them once), each after that device's backward tasks reading
// the parameters it moves and not before the owner's own backward tasks
// reading them (the executor adds it after those); no other reductions
// or steps.
func (p *Plan) validateOwnerSteps(w *Workload, reach func(from, to int) bool, backwardOn map[DeviceID][]int, fail func(string, ...any)) {
	index := map[DeviceID]ReaderIndex{} // backwardOn's, by the parameters they read
	named := false
	for _, o := range w.Ops {
		named = named || len(o.Params) > 0
	}
	if !named {
		fail("the plan steps parameters on their owners (step_owners) but the workload names no op's parameters")
		return
	}
	op := w.OpParams()
	owner := p.ParamOwners(op)
	readers := ParamReaders(p.Tasks, op)
	if len(p.Owners) > 0 {
		// Every parameter a forward task reads has an owner among its
		// readers; nothing else has one.
		read := map[string]bool{}
		for _, ps := range readers {
			for name := range ps {
				read[name] = true
			}
		}
		for _, name := range sortedKeys(read) {
			if _, ok := owner[name]; !ok {
				fail("parameter %s has no owner in the plan's owners", name)
			}
		}
		for _, name := range sortedKeys(owner) {
			switch d := owner[name]; {
			case !read[name]:
				fail("the plan's owners name %s (owner %s), which no forward task reads", name, d)
			case !readers[d][name]:
				fail("parameter %s's owner %s runs no forward task reading it (an owner must read what it steps)", name, d)
			}
		}
	}
	owns := map[DeviceID]bool{}
	for _, d := range owner {
		owns[d] = true
	}
	steps := map[DeviceID][]int{}
	type pair struct{ from, into DeviceID }
	reduces := map[pair][]int{}
	for i, t := range p.Tasks {
		switch t.Kind {
		case TaskStep:
			steps[t.Device] = append(steps[t.Device], i)
		case TaskReduceGrads:
			reduces[pair{t.From, t.Device}] = append(reduces[pair{t.From, t.Device}], i)
		}
	}
	all := map[DeviceID]bool{}
	for d := range steps {
		all[d] = true
	}
	for d := range owns {
		all[d] = true
	}
	// stepping[i] is what step task i steps: its Params, or all its
	// device owns.
	mine := map[DeviceID]map[string]bool{}
	for name, d := range owner {
		if mine[d] == nil {
			mine[d] = map[string]bool{}
		}
		mine[d][name] = true
	}
	stepping := map[int]map[string]bool{}
	for _, d := range sortedDevs(all) {
		switch n := len(steps[d]); {
		case owns[d] && n == 0:
			fail("device %s owns parameters but has no optimizer step", d)
		case !owns[d] && n > 0:
			fail("device %s steps the optimizer but owns no parameter (the plan's owners, or else the first forward task reading a parameter, own them)", d)
		case n == 1 && len(p.Tasks[steps[d][0]].Params) == 0:
			stepping[steps[d][0]] = mine[d]
		default:
			// Several steps (or one naming its parameters): each names
			// its share, together each parameter d owns exactly once.
			left := maps.Clone(mine[d])
			bad := false
			for _, s := range steps[d] {
				ps := p.Tasks[s].Params
				if len(ps) == 0 {
					fail("device %s has %d optimizer steps and task %d names no parameters: with several, each names the parameters it steps", d, n, s)
					bad = true
					continue
				}
				set := map[string]bool{}
				for _, name := range ps {
					if set[name] {
						fail("the step on %s (task %d) names %s twice", d, s, name)
						bad = true
						continue
					}
					if !left[name] {
						fail("the step on %s (task %d) steps %s, which %s does not own, or another of its steps steps too", d, s, name, d)
						bad = true
						continue
					}
					delete(left, name)
					set[name] = true
				}
				stepping[s] = set
			}
			if !bad && len(left) > 0 {
				fail("the optimizer steps on %s leave %s unstepped", d, strings.Join(sortedKeys(left), ", "))
			}
		}
	}
	// The reductions each device owes.
	want := map[pair]bool{}
	for e, ps := range readers {
		for name := range ps {
			if o := owner[name]; o != e {
				want[pair{e, o}] = true
			}
		}
	}
	var pairs []pair
	for k := range reduces {
		pairs = append(pairs, k)
	}
	for k := range want {
		if reduces[k] == nil {
			pairs = append(pairs, k)
		}
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].from != pairs[j].from {
			return pairs[i].from < pairs[j].from
		}
		return pairs[i].into < pairs[j].into
	})
	for _, k := range pairs {
		rs := reduces[k]
		switch {
		case !want[k]:
			fail("gradients are reduced from %s into %s, which owns none of the parameters %s reads", k.from, k.into, k.from)
			continue
		case len(rs) == 0:
			fail("device %s reads parameters %s owns but has 0 gradient reductions into it, want 1", k.from, k.into)
			continue
		}
		all := MovedParams(Task{From: k.from, Device: k.into}, readers, owner)
		// Several reductions between the pair must each name their
		// parameters, together each of all exactly once.
		if len(rs) > 1 {
			left := maps.Clone(all)
			bad := false
			for _, r := range rs {
				if len(p.Tasks[r].Params) == 0 {
					fail("device %s has %d gradient reductions into %s and task %d names no parameters: with several, each names the parameters it moves", k.from, len(rs), k.into, r)
					bad = true
					continue
				}
				for _, name := range p.Tasks[r].Params {
					if !left[name] {
						fail("the gradient reduction from %s into %s (task %d) moves %s, which is not one %s reads and %s owns, or another reduction moves it too", k.from, k.into, r, name, k.from, k.into)
						bad = true
						continue
					}
					delete(left, name)
				}
			}
			if !bad && len(left) > 0 {
				fail("the gradient reductions from %s into %s leave %s unreduced", k.from, k.into, strings.Join(sortedKeys(left), ", "))
			}
		} else if ps := p.Tasks[rs[0]].Params; len(ps) > 0 {
			named := map[string]bool{}
			for _, name := range ps {
				named[name] = true
			}
			if !maps.Equal(named, all) {
				fail("the gradient reduction from %s into %s (task %d) names %s, want every parameter %s reads and %s owns (%s)", k.from, k.into, rs[0], strings.Join(sortedKeys(named), ", "), k.from, k.into, strings.Join(sortedKeys(all), ", "))
			}
		}
		for _, r := range rs {
			moved := MovedParams(p.Tasks[r], readers, owner)
			for _, d := range []DeviceID{k.into, k.from} {
				if _, ok := index[d]; !ok {
					index[d] = IndexReaders(p.Tasks, backwardOn[d], op)
				}
			}
			// The executor adds them in after the owner's own backward
			// tasks reading them: none of those may wait for the reduction.
			for _, b := range index[k.into].Reading(moved) {
				if reach(b, r) {
					fail("the gradient reduction from %s into %s (task %d) comes before %s's backward task %d, which writes gradients it moves (the reduction adds after it: deadlock)", k.from, k.into, r, k.into, b)
					break
				}
			}
			for _, b := range index[k.from].Reading(moved) {
				if !reach(r, b) {
					fail("the gradient reduction from %s into %s (task %d) does not wait for backward task %d", k.from, k.into, r, b)
					break
				}
			}
			for _, s := range steps[k.into] {
				if overlaps(stepping[s], moved) && !reach(s, r) {
					fail("the step on %s (task %d) does not wait for the gradient reduction from %s (task %d), which moves gradients it steps", k.into, s, k.from, r)
				}
			}
		}
	}
	// A step waits for every task reading what it steps: on its device
	// the backward tasks (which write those gradients) and the forward
	// ones; elsewhere through the reductions, checked above.
	forwardOn := map[DeviceID][]int{}
	for i, t := range p.Tasks {
		if t.Kind == TaskForward && owns[t.Device] {
			forwardOn[t.Device] = append(forwardOn[t.Device], i)
		}
	}
	for _, d := range sortedDevs(owns) {
		if _, ok := index[d]; !ok {
			index[d] = IndexReaders(p.Tasks, backwardOn[d], op)
		}
		fwd := IndexReaders(p.Tasks, forwardOn[d], op)
		for _, s := range steps[d] {
			for _, b := range index[d].Reading(stepping[s]) {
				if !reach(s, b) {
					fail("the step on %s (task %d) does not wait for its backward task %d, which writes gradients it steps", d, s, b)
					break
				}
			}
			for _, f := range fwd.Reading(stepping[s]) {
				if !reach(s, f) {
					fail("the step on %s (task %d) does not wait for its forward task %d, which reads parameters it steps", d, s, f)
					break
				}
			}
		}
	}
}

// overlaps reports whether a and b share a key.
func overlaps(a, b map[string]bool) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	for k := range a {
		if b[k] {
			return true
		}
	}
	return false
}
