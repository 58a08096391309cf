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
		{"owner without step", func(p *Plan) { p.Tasks = p.Tasks[:10] }, "owns parameters but has 0 optimizer steps"},
		{"two steps", func(p *Plan) { p.Tasks[10].Device = "d0" }, "has 2 optimizer steps"},
		{"missing reduction", func(p *Plan) { p.Tasks[8].From = "d0"; p.Tasks[8].Device = "d1" }, "has 0 gradient reductions"},
		{"reduction into itself", func(p *Plan) { p.Tasks[8].Device = "d1" }, "into itself"},
		{"reduction too early", func(p *Plan) { p.Tasks[8].Deps = []int{4} }, "does not wait for backward task 7"},
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
