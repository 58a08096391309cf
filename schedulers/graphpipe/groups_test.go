package graphpipe

import (
	"strings"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// TestStepGroupsSearch: uno-4 on 4 A100s, each capped at the model's
// training state / 0.75 (the benchmark's capped cell), m searched. The
// trunk's owner also runs a branch: with one step per owner the trunk's
// parameters wait for that branch's last backward and their refresh to
// the other replicas is the iteration's tail; grouped, they are stepped
// and sent while the branch computes. GraphPipe's search keeps the
// grouped plan (step_groups), strictly faster than with groups=off, and
// valid. The 1F1B chain's data-parallel plan, whose bucket groups would
// send their refreshes through ports the reductions still use (slower),
// stays ungrouped and no slower. Each scheduler's plan is simulated by
// the search (simulated_iteration_ms) on the cluster it is given.
func TestStepGroupsSearch(t *testing.T) {
	cfg := core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}
	w, cl, prof, _ := cappedWorkload(t, cfg, 4, 0.75)
	run := func(graph, noGroups bool) *core.Plan {
		t.Helper()
		s := &Scheduler{Graph: graph, Kind: OneFOneB, Cluster: cl, Profile: prof, NoStepGroups: noGroups}
		p, err := s.Schedule(t.Context(), w)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(w); err != nil {
			t.Fatalf("graph %v, groups off %v: %v", graph, noGroups, err)
		}
		return p
	}
	iter := func(p *core.Plan) float64 { return p.Metrics["simulated_iteration_ms"] }
	on, off := run(true, false), run(true, true)
	if on.Metrics["step_groups"] != 1 || off.Metrics["step_groups"] != 0 {
		t.Fatalf("graphpipe: step_groups %v with groups, %v without; want 1 and 0", on.Metrics["step_groups"], off.Metrics["step_groups"])
	}
	if !(iter(on) < iter(off)) {
		t.Errorf("graphpipe: %.2f ms grouped, %.2f ms not; want faster", iter(on), iter(off))
	}
	t.Logf("graphpipe: %.2f ms grouped, %.2f ms with one step per owner", iter(on), iter(off))
	named := 0
	for _, task := range on.Tasks {
		if task.Kind == core.TaskStep && len(task.Params) > 0 {
			named++
		}
	}
	if named < 2 {
		t.Errorf("grouped plan has %d steps naming their parameters, want several", named)
	}
	if !strings.Contains(on.Alternatives[0].Description, "step groups") {
		t.Errorf("chosen alternative %q does not say step groups", on.Alternatives[0].Description)
	}
	chainOn, chainOff := run(false, false), run(false, true)
	if chainOn.Metrics["step_groups"] != 0 || iter(chainOn) > iter(chainOff) {
		t.Errorf("1f1b chain: %.2f ms (step_groups %v), %.2f ms with groups off; want ungrouped and no slower",
			iter(chainOn), chainOn.Metrics["step_groups"], iter(chainOff))
	}
}

// TestStepGroupsSimulated: the same shared-trunk partition of uno-4 on 4
// A100s with one step per owner and grouped. Grouping moves when the
// steps and refreshes happen, not what they do: the simulator moves the
// same bytes and each device computes as long, and the grouped plan
// ends sooner (its trunk refresh no longer the tail).
func TestStepGroupsSimulated(t *testing.T) {
	cfg := core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}
	w, cl := unoWorkload(t, cfg, 8192, 4)
	prof, err := sim.Roofline(w, cl.Devices[0])
	if err != nil {
		t.Fatal(err)
	}
	// Branch b on cuda:b, the trunk (the joins on) over all four.
	part := Partition{StageOf: make([]int, len(w.Ops))}
	for b := range 4 {
		part.Devices = append(part.Devices, []core.DeviceID{cl.Devices[b].ID})
	}
	for o := range w.Ops {
		part.StageOf[o] = min(o/9, 3)
	}
	root, _ := Decompose(w)
	q, ok := sharedTrunk(part, trunkOps(root))
	if !ok {
		t.Fatal("no shared-trunk variant")
	}
	sims := map[bool]*sim.Result{}
	for _, groups := range []bool{false, true} {
		p, err := BuildPlanOpts(w, q, 4, OneFOneB, PlanOptions{Step: StepOwners, StepGroups: groups}, "test")
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(w); err != nil {
			t.Fatal(err)
		}
		if sims[groups], err = sim.Simulate(p, w, prof, cl); err != nil {
			t.Fatal(err)
		}
	}
	one, grouped := sims[false], sims[true]
	if one.BytesMoved != grouped.BytesMoved {
		t.Errorf("bytes moved: %d with one step per owner, %d grouped; want equal", one.BytesMoved, grouped.BytesMoved)
	}
	for d, b := range one.Busy {
		if g := grouped.Busy[d]; g-b > time.Microsecond || b-g > time.Microsecond {
			t.Errorf("%s busy %v with one step per owner, %v grouped; want equal", d, b, g)
		}
	}
	if !(grouped.Iteration < one.Iteration) {
		t.Errorf("iteration %v grouped, %v with one step per owner; want shorter", grouped.Iteration, one.Iteration)
	}
	t.Logf("iteration %v grouped, %v with one step per owner", grouped.Iteration, one.Iteration)
}
