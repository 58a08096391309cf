package core

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// ownerWorkload is pipelinePlan's workload with parameters: a reads wa, b
// reads wb, and the join c reads wc and wa (shared with a).
func ownerWorkload() *Workload {
	w := fakeWorkload()
	w.Ops[2].Deps = []int{0, 1}
	w.Ops[0].Params = []ParamRef{{"wa", 40}}
	w.Ops[1].Params = []ParamRef{{"wb", 80}}
	w.Ops[2].Params = []ParamRef{{"wc", 8}, {"wa", 40}}
	return w
}

func TestStepOwners(t *testing.T) {
	w := ownerWorkload()
	p := pipelinePlan().OwnerStep(w)
	if err := p.Validate(w); err != nil {
		t.Fatalf("owner-stepped pipeline rejected: %v", err)
	}
	own := StepOwners(p.Tasks, w.OpParams())
	for name, want := range map[string]DeviceID{"wa": "d0", "wb": "d1", "wc": "d0"} {
		if own[name] != want {
			t.Errorf("owner of %s = %s, want %s (the first forward reading it)", name, own[name], want)
		}
	}
	var steps, reduces []Task
	for _, task := range p.Tasks {
		switch task.Kind {
		case TaskStep:
			steps = append(steps, task)
		case TaskReduceGrads:
			reduces = append(reduces, task)
		}
	}
	if len(steps) != 2 || steps[0].Device != "d0" || steps[1].Device != "d1" {
		t.Errorf("steps %+v, want one on d0 and one on d1", steps)
	}
	// d1 reads wa and wc (unit 1 runs every op there), owned by d0; d0
	// reads nothing d1 owns.
	if len(reduces) != 1 || reduces[0].From != "d1" || reduces[0].Device != "d0" {
		t.Fatalf("reductions %+v, want exactly d1 -> d0", reduces)
	}
	// It moves wa and wc: it waits for d1's backward task writing their
	// gradients (7), not for d1's task 4 (op b, reading only wb).
	if got := reduces[0].Deps; !slices.Equal(got, []int{7}) {
		t.Errorf("reduction d1 -> d0 waits for tasks %v, want [7]", got)
	}
	// Back to a home step: valid, one step on home.
	h := p.HomeStep()
	if h.StepOwners {
		t.Fatal("HomeStep kept StepOwners")
	}
	if err := h.Validate(w); err != nil {
		t.Fatalf("HomeStep plan rejected: %v", err)
	}
	if got := pipelinePlan().HomeStep(); got.StepOwners || len(got.Tasks) != len(pipelinePlan().Tasks) {
		t.Error("HomeStep changed a home-step plan")
	}
}

func TestStepOwnersValidate(t *testing.T) {
	w := ownerWorkload()
	// Task ids in OwnerStep's plan: 0-7 forward/backward, 8 reduce d1->d0,
	// 9 step d0, 10 step d1.
	base := func() *Plan { return pipelinePlan().OwnerStep(w) }
	if p := base(); p.Tasks[8].Kind != TaskReduceGrads || p.Tasks[9].Device != "d0" || p.Tasks[10].Device != "d1" {
		t.Fatalf("unexpected layout: %+v", p.Tasks[8:])
	}
	for _, c := range []struct {
		name   string
		mutate func(p *Plan)
		want   string
	}{
		{"owner without step", func(p *Plan) { p.Tasks = p.Tasks[:10] }, "owns parameters but has no optimizer step"},
		{"two steps", func(p *Plan) { p.Tasks[10].Device = "d0" }, "has 2 optimizer steps"},
		{"missing reduction", func(p *Plan) { p.Tasks[8].From = "d0"; p.Tasks[8].Device = "d1" }, "has 0 gradient reductions"},
		{"reduction into itself", func(p *Plan) { p.Tasks[8].Device = "d1" }, "into itself"},
		{"reduction too early", func(p *Plan) { p.Tasks[8].Deps = []int{4} }, "does not wait for backward task 7"},
		{"owner's backward after the reduction", func(p *Plan) { p.Tasks[5].Deps = append(p.Tasks[5].Deps, 8) }, "comes before d0's backward task 5"},
		{"step before reduction", func(p *Plan) { p.Tasks[9].Deps = []int{3, 5}; p.Tasks[9].Stream = 5 }, "does not wait for the gradient reduction"},
		{"step before own backward", func(p *Plan) { p.Tasks[10].Deps = []int{4}; p.Tasks[10].Stream = 6 }, "does not wait for its backward task 7"},
		{"no parameter names", func(p *Plan) {
			for i := range w.Ops {
				w.Ops[i].Params = nil
			}
		}, "names no op's parameters"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w = ownerWorkload()
			p := base()
			c.mutate(p)
			err := p.Validate(w)
			if !errors.Is(err, ErrInvalidPlan) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Validate = %v; want ErrInvalidPlan mentioning %q", err, c.want)
			}
		})
	}
}

func TestPlanOwners(t *testing.T) {
	w := ownerWorkload()
	p := pipelinePlan()
	// d0 reads wa and wc (unit 0's ops a and c), d1 every parameter
	// (unit 1 runs all ops there): wa may be stepped on d1.
	p.Owners = map[string]DeviceID{"wa": "d1", "wb": "d1", "wc": "d0"}
	q := p.OwnerStep(w)
	if err := q.Validate(w); err != nil {
		t.Fatalf("plan with named owners rejected: %v", err)
	}
	type pair struct{ from, into DeviceID }
	var reduces []pair
	for _, task := range q.Tasks {
		if task.Kind == TaskReduceGrads {
			reduces = append(reduces, pair{task.From, task.Device})
		}
	}
	if want := []pair{{"d0", "d1"}, {"d1", "d0"}}; !slices.Equal(reduces, want) {
		t.Errorf("reductions %v, want %v (each device into the owner of what it reads)", reduces, want)
	}
	if h := q.HomeStep(); h.Owners != nil {
		t.Error("HomeStep kept the owners")
	}
	// An empty map (as JSON "owners": {} decodes) is the default rule.
	e := pipelinePlan()
	e.Owners = map[string]DeviceID{}
	if e = e.OwnerStep(w); e.Validate(w) != nil || e.ParamOwners(w.OpParams())["wb"] != "d1" {
		t.Errorf("empty owners: %v, owners %v; want the first-reader rule", e.Validate(w), e.ParamOwners(w.OpParams()))
	}
	for _, c := range []struct {
		name   string
		owners map[string]DeviceID
		home   bool
		want   string
	}{
		{"owner reads nothing of it", map[string]DeviceID{"wa": "d0", "wb": "d0", "wc": "d0"}, false, "runs no forward task reading it"},
		{"parameter without owner", map[string]DeviceID{"wa": "d0", "wb": "d1"}, false, "wc has no owner"},
		{"unknown parameter", map[string]DeviceID{"wa": "d0", "wb": "d1", "wc": "d0", "wz": "d1"}, false, "which no forward task reads"},
		{"owners on a home step", map[string]DeviceID{"wa": "d0"}, true, "step_owners is off"},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := pipelinePlan().OwnerStep(w) // the default owners' flush
			q.Owners = c.owners
			if c.home {
				q = pipelinePlan()
				q.Owners = c.owners
			}
			err := q.Validate(w)
			if !errors.Is(err, ErrInvalidPlan) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Validate = %v; want ErrInvalidPlan mentioning %q", err, c.want)
			}
		})
	}
}

// TestOwnerStepOrder: an owner adds its reductions in the order their
// gradients should be ready (the latest unit each waits for), not in the
// device order given.
func TestOwnerStepOrder(t *testing.T) {
	w := ownerWorkload()
	w.Devices = append(w.Devices, DeviceInfo{ID: "d2"})
	p := &Plan{Scheduler: "test", Home: "d2",
		Units:  []Unit{{ID: 0, Targets: []int32{0, 1}, LossWeight: 1. / 3}, {ID: 1, Targets: []int32{2, 3}, LossWeight: 1. / 3}, {ID: 2, Targets: []int32{4, 5}, LossWeight: 1. / 3}},
		Owners: map[string]DeviceID{"wa": "d2", "wb": "d2", "wc": "d2"},
	}
	// Unit u runs on device d(u); d1 gets the later unit 2, d0 unit 1.
	for u, d := range []DeviceID{"d2", "d0", "d1"} {
		p.Tasks = append(p.Tasks,
			Task{ID: 2 * u, Kind: TaskForward, Unit: u, Device: d, OpLo: 0, OpHi: 3},
			Task{ID: 2*u + 1, Kind: TaskBackward, Unit: u, Device: d, OpLo: 0, OpHi: 3, Deps: []int{2 * u}})
	}
	q := p.OwnerStepIn(w, []DeviceID{"d1", "d0", "d2"})
	if err := q.Validate(w); err != nil {
		t.Fatal(err)
	}
	var from []DeviceID
	for _, task := range q.Tasks {
		if task.Kind == TaskReduceGrads {
			from = append(from, task.From)
		}
	}
	if want := []DeviceID{"d0", "d1"}; !slices.Equal(from, want) {
		t.Errorf("reductions into d2 from %v, want %v (d0's unit 1 is done before d1's unit 2)", from, want)
	}
}

// TestSplitReductions: the reduction from d1 into d0 (wa and wc) may be
// split in two, each naming its parameters, together all of them once.
func TestSplitReductions(t *testing.T) {
	w := ownerWorkload()
	// Task ids in OwnerStep's plan: 0-7 forward/backward, 8 reduce d1->d0
	// (wa, wc), 9 step d0, 10 step d1; split appends a second reduction
	// (11) and makes d0's step wait for it.
	split := func(a, b []string) *Plan {
		p := pipelinePlan().OwnerStep(w)
		p.Tasks[8].Params = a
		r := p.Tasks[8]
		r.ID, r.Params = len(p.Tasks), b
		r.Stream += 5 // after the step on the flush stream would be a cycle
		p.Tasks = append(p.Tasks, r)
		p.Tasks[9].Deps = append(p.Tasks[9].Deps, r.ID)
		return p
	}
	if err := split([]string{"wa"}, []string{"wc"}).Validate(w); err != nil {
		t.Errorf("split reduction rejected: %v", err)
	}
	for _, c := range []struct {
		name string
		p    *Plan
		want string
	}{
		{"one names nothing", split([]string{"wa"}, nil), "task 11 names no parameters"},
		{"both move wa", split([]string{"wa"}, []string{"wa", "wc"}), "or another reduction moves it too"},
		{"a parameter d0 does not own", split([]string{"wa"}, []string{"wc", "wb"}), "moves wb, which is not one d1 reads and d0 owns"},
		{"lone reduction naming part", func() *Plan { p := pipelinePlan().OwnerStep(w); p.Tasks[8].Params = []string{"wa"}; return p }(), "names wa, want every parameter d1 reads and d0 owns (wa, wc)"},
		{"params on a backward task", func() *Plan { p := pipelinePlan().OwnerStep(w); p.Tasks[7].Params = []string{"wa"}; return p }(), "only gradient reductions and optimizer steps do"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.p.Validate(w)
			if !errors.Is(err, ErrInvalidPlan) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Validate = %v; want ErrInvalidPlan mentioning %q", err, c.want)
			}
		})
	}
	if err := split([]string{"wc"}, []string{"wa"}).Validate(w); err != nil {
		t.Errorf("split in the other order rejected: %v", err)
	}
}

// groupPlan has d2 own every parameter, with unit 0 on d2, unit 1's ops a
// and b on d0 and its join c on d2, and unit 2 on d1: d0 reduces wa and
// wb into d2, d1 all three, so d2 steps wc without waiting for d0.
func groupPlan() (*Workload, *Plan) {
	w := ownerWorkload()
	w.Devices = append(w.Devices, DeviceInfo{ID: "d2"})
	p := &Plan{Scheduler: "test", Home: "d2",
		Units:  []Unit{{ID: 0, Targets: []int32{0, 1}, LossWeight: 1. / 3}, {ID: 1, Targets: []int32{2, 3}, LossWeight: 1. / 3}, {ID: 2, Targets: []int32{4, 5}, LossWeight: 1. / 3}},
		Owners: map[string]DeviceID{"wa": "d2", "wb": "d2", "wc": "d2"},
		Tasks: []Task{
			{ID: 0, Kind: TaskForward, Unit: 0, Device: "d2", OpLo: 0, OpHi: 3},
			{ID: 1, Kind: TaskBackward, Unit: 0, Device: "d2", OpLo: 0, OpHi: 3, Deps: []int{0}},
			{ID: 2, Kind: TaskForward, Unit: 1, Device: "d0", OpLo: 0, OpHi: 2},
			{ID: 3, Kind: TaskForward, Unit: 1, Device: "d2", Ops: []int{2}, Deps: []int{2, 1}},
			{ID: 4, Kind: TaskBackward, Unit: 1, Device: "d2", Ops: []int{2}, Deps: []int{3}},
			{ID: 5, Kind: TaskBackward, Unit: 1, Device: "d0", OpLo: 0, OpHi: 2, Deps: []int{4}},
			{ID: 6, Kind: TaskForward, Unit: 2, Device: "d1", OpLo: 0, OpHi: 3},
			{ID: 7, Kind: TaskBackward, Unit: 2, Device: "d1", OpLo: 0, OpHi: 3, Deps: []int{6}},
		},
	}
	return w, p.OwnerStepGroupsIn(w, nil)
}

// TestStepGroups: an owner whose parameters are final at different times
// steps them in groups, each naming its parameters and waiting only for
// what writes their gradients; Validate holds each group to that.
func TestStepGroups(t *testing.T) {
	w, p := groupPlan()
	if err := p.Validate(w); err != nil {
		t.Fatalf("grouped steps rejected: %v", err)
	}
	redFrom := map[int]DeviceID{}
	var steps []Task
	for _, task := range p.Tasks {
		switch task.Kind {
		case TaskReduceGrads:
			redFrom[task.ID] = task.From
		case TaskStep:
			steps = append(steps, task)
		}
	}
	if len(steps) != 2 {
		t.Fatalf("steps %+v, want two on d2 (wc apart from wa and wb)", steps)
	}
	var wc Task
	for _, s := range steps {
		if s.Device != "d2" {
			t.Errorf("step %d on %s, want d2", s.ID, s.Device)
		}
		if slices.Equal(s.Params, []string{"wc"}) {
			wc = s
		} else if !slices.Equal(s.Params, []string{"wa", "wb"}) {
			t.Errorf("step %d steps %v, want [wc] or [wa wb]", s.ID, s.Params)
		}
	}
	for _, d := range wc.Deps {
		if redFrom[d] == "d0" {
			t.Errorf("wc's step (task %d) waits for d0's reduction %d, which moves no gradient of wc", wc.ID, d)
		}
	}
	// Without groups: one step per owner, as OwnerStep.
	if n := countSteps(p.Tasks); n != 2 {
		t.Fatalf("%d steps", n)
	}
	w1, _ := groupPlan()
	single := 0
	for _, task := range p.HomeStep().OwnerStepIn(w1, nil).Tasks {
		if task.Kind == TaskStep {
			single++
			if len(task.Params) > 0 {
				t.Errorf("OwnerStepIn's step %d names %v", task.ID, task.Params)
			}
		}
	}
	if single != 1 {
		t.Errorf("OwnerStepIn: %d steps, want 1 (d2 owns everything)", single)
	}
	// The same plan stepped on home is valid too.
	if err := p.HomeStep().Validate(w); err != nil {
		t.Errorf("HomeStep of a grouped plan rejected: %v", err)
	}
	// Task ids: 0-7 as groupPlan, then the reductions and steps.
	find := func(p *Plan, params string) int {
		for i, task := range p.Tasks {
			if task.Kind == TaskStep && strings.Join(task.Params, ",") == params {
				return i
			}
		}
		t.Fatalf("no step of %s", params)
		return -1
	}
	for _, c := range []struct {
		name   string
		mutate func(p *Plan)
		want   string
	}{
		{"one names nothing", func(p *Plan) { p.Tasks[find(p, "wc")].Params = nil }, "names no parameters: with several"},
		{"both step wa", func(p *Plan) { p.Tasks[find(p, "wc")].Params = []string{"wc", "wa"} }, "or another of its steps steps too"},
		{"a parameter left", func(p *Plan) { p.Tasks[find(p, "wa,wb")].Params = []string{"wa"} }, "leave wb unstepped"},
		{"a parameter named twice", func(p *Plan) { p.Tasks[find(p, "wc")].Params = []string{"wc", "wc"} }, "names wc twice"},
		{"step before its reduction", func(p *Plan) {
			i := find(p, "wc")
			p.Tasks[i].Deps, p.Tasks[i].Stream = []int{1, 4}, 9
		}, "does not wait for the gradient reduction from d1"},
		{"step before its backward", func(p *Plan) {
			// (the reductions on its stream wait for d2's backward work
			// through d0's: off that stream, after d1's backward only)
			i := find(p, "wc")
			p.Tasks[i].Deps, p.Tasks[i].Stream = []int{7}, 9
		}, "does not wait for its backward task 1"},
		{"params on a home step", func(p *Plan) {
			*p = *p.HomeStep()
			p.Tasks[len(p.Tasks)-1].Params = []string{"wa"}
		}, "only owner-stepped plans (step_owners) do"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, p := groupPlan()
			c.mutate(p)
			err := p.Validate(w)
			if !errors.Is(err, ErrInvalidPlan) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Validate = %v; want ErrInvalidPlan mentioning %q", err, c.want)
			}
		})
	}
}

// TestReaderIndex: ReaderIndex.Reading answers as backwardReading does
// (the same tasks, in bwd's order, whatever order bwd lists them in) for
// every set of parameter names.
func TestReaderIndex(t *testing.T) {
	w := ownerWorkload()
	p := pipelinePlan().OwnerStep(w)
	op := w.OpParams()
	var bwd []int
	for i, task := range p.Tasks {
		if task.Kind == TaskBackward {
			bwd = append(bwd, i)
		}
	}
	slices.Reverse(bwd) // any order: Reading keeps bwd's
	x := IndexReaders(p.Tasks, bwd, op)
	all := []string{"wa", "wb", "wc", "none"}
	for mask := range 1 << len(all) {
		names := map[string]bool{}
		for i, n := range all {
			if mask&(1<<i) != 0 {
				names[n] = true
			}
		}
		want := backwardReading(p.Tasks, bwd, op, names)
		if got := x.Reading(names); !slices.Equal(got, want) || (got == nil) != (want == nil) {
			t.Errorf("names %v: Reading %v, backwardReading %v", names, got, want)
		}
	}
}

// backwardReading is the reference for ReaderIndex.Reading: it returns those of the backward tasks bwd (indices into
// tasks) whose ops read a parameter in names: the tasks that write those
// parameters' gradients on their device.
func backwardReading(tasks []Task, bwd []int, opParams func(op int) []string, names map[string]bool) []int {
	var out []int
	for _, b := range bwd {
	ops:
		for _, o := range tasks[b].OpIndices() {
			for _, p := range opParams(o) {
				if names[p] {
					out = append(out, b)
					break ops
				}
			}
		}
	}
	return out
}

func countSteps(tasks []Task) int {
	n := 0
	for _, t := range tasks {
		if t.Kind == TaskStep {
			n++
		}
	}
	return n
}
