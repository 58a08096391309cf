package graphpipe

import (
	"context"
	"sort"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/sim"
)

// TestSinkFirst: with PlanOptions.SinkFirst a device hosting several
// stages ranks their forward and backward tasks by 1-k_s (the trunk 0,
// the branch stage before it -1) and every other task keeps 0; without
// it nothing is ranked. Either way the executor runs a shared device's
// forwards and backwards one at a time (its gate; they overlapped, the
// streams running side by side on the host).
func TestSinkFirst(t *testing.T) {
	f := schedtest.NewFixture(256, 3, 16, 4, 9)
	model := fixtureModel(t, f, "uno", core.ModelConfig{Hidden: 64, Layers: 2, Branches: 3})
	nodes := firstNodes(256)
	tr, devs := fixtureTrainer(t, f, model, 3, 0)
	bt, w, _ := fullWorkload(t, tr, devs, nodes)
	for _, sinkFirst := range []bool{false, true} {
		p, err := sharedFixed{kind: OneFOneB, sinkFirst: sinkFirst}.Schedule(context.Background(), w)
		if err != nil {
			t.Fatal(err)
		}
		ranked := map[int]int{} // priority -> tasks
		for _, task := range p.Tasks {
			ranked[task.Priority]++
			if task.Priority != 0 && (!sinkFirst || task.Kind != core.TaskForward && task.Kind != core.TaskBackward) {
				t.Fatalf("sink first %v: task %d (%s) has priority %d", sinkFirst, task.ID, task.Kind, task.Priority)
			}
		}
		if sinkFirst && (ranked[-1] == 0 || ranked[0] == 0 || len(ranked) != 2) {
			t.Fatalf("priorities %v: want the branch stages' tasks at -1 and the trunk's at 0", ranked)
		}
		// Three devices, three branch stages and the trunk on all: every
		// device shares, so every forward and backward is gated.
		for it := range 3 {
			res, err := tr.Run(context.Background(), p, bt, engine.RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			spans := map[core.DeviceID][]core.TraceEvent{}
			for _, e := range res.Trace.Events {
				if e.Cat == core.TaskForward.String() || e.Cat == core.TaskBackward.String() {
					spans[e.Device] = append(spans[e.Device], e)
				}
			}
			for d, es := range spans {
				sort.Slice(es, func(i, j int) bool { return es[i].Start < es[j].Start })
				for i := 1; i < len(es); i++ {
					if es[i].Start < es[i-1].Start+es[i-1].Dur {
						t.Fatalf("iteration %d: on %s %q (from %v) began before %q (from %v, %v) ended", it, d, es[i].Name, es[i].Start, es[i-1].Name, es[i-1].Start, es[i-1].Dur)
					}
				}
			}
		}
	}
}

// TestWeighSinkFirst: the search keeps whichever order simulates faster.
// uno-4 (hidden 2048) on 4 A100s, the trunk shared with the four branch
// stages, m = 4, owners stepping in groups: the trunk first sends each
// micro-batch's gradients to the other branches sooner, and the branch
// device that idled 0.9 ms waiting for micro-batch 0's does not
// (73.96 → 73.32 ms, the capped benchmark's uno-4 / 4 cell).
func TestWeighSinkFirst(t *testing.T) {
	s := &Scheduler{}
	w, cm, cd := uno4SharedTrunk(t, s)
	ready := cd.res.Iteration
	if err := s.weighSinkFirst(w, cm, cd); err != nil {
		t.Fatal(err)
	}
	t.Logf("earliest ready first %v, kept %v (sink first: %v)", ready, cd.res.Iteration, cd.sinkFirst)
	if !cd.sinkFirst || float64(cd.res.Iteration) > 0.995*float64(ready) {
		t.Errorf("kept sink first %v at %v; the earliest ready first takes %v: want sink first, at least 0.5%% faster", cd.sinkFirst, cd.res.Iteration, ready)
	}
	// Weighed again, it keeps its order: the other is slower.
	if err := s.weighSinkFirst(w, cm, cd); err != nil || !cd.sinkFirst {
		t.Errorf("weighed again: sink first %v, err %v", cd.sinkFirst, err)
	}
}

// TestSinkFirstOff: with sinkfirst=off the search keeps the earliest
// ready task first on shared devices: the same case as TestWeighSinkFirst
// stays in that order.
func TestSinkFirstOff(t *testing.T) {
	s := &Scheduler{NoSinkFirst: true}
	w, cm, cd := uno4SharedTrunk(t, s)
	if err := s.weighSinkFirst(w, cm, cd); err != nil || cd.sinkFirst {
		t.Errorf("sinkfirst=off: sink first %v, err %v", cd.sinkFirst, err)
	}
}

// uno4SharedTrunk is uno-4 (hidden 2048, 8192 samples) on 4 A100s, each
// branch on a device of its own and the trunk shared by all, m = 4,
// owners stepping in groups, built by s and simulated (earliest ready
// first).
func uno4SharedTrunk(t *testing.T, s *Scheduler) (*core.Workload, *sim.CostModel, *candidate) {
	t.Helper()
	cfg := core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}
	w, cl, prof := rooflineWorkload(t, "uno", cfg, 8192, 4)
	cm, devs := costModelOf(t, w, prof, cl)
	root, _ := Decompose(w)
	branches, trunk := branchOps(root), trunkOps(root)
	part := Partition{StageOf: make([]int, len(w.Ops))}
	for b, ops := range branches {
		for _, o := range ops {
			part.StageOf[o] = b
		}
		part.Devices = append(part.Devices, devs[b:b+1])
	}
	q, ok := sharedTrunk(part, trunk)
	if !ok {
		t.Fatal("no shared-trunk variant")
	}
	cd := &candidate{part: q, kind: OneFOneB, m: 4, groups: true}
	var err error
	if cd.plan, err = s.build(w, cd); err != nil {
		t.Fatal(err)
	}
	if cd.res, err = sim.SimulateModel(cd.plan, cm.Clone(), sim.Options{}); err != nil {
		t.Fatal(err)
	}
	return w, cm, cd
}

// TestSinkFirstReused: a search whose choice runs the stage nearer the
// sink first (uno-4 on 4 A100s, m = 4: TestWeighSinkFirst's shared
// trunk) rebuilds that order when the choice is reused for the next
// batch of its shape: the same tasks at the same priorities, the same
// simulated iteration. (The kept choice dropped the order, so the
// reused plan ran the earliest ready task first while its metrics said
// sink_first.)
func TestSinkFirstReused(t *testing.T) {
	cfg := core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}
	w, cl, prof := rooflineWorkload(t, "uno", cfg, 8192, 4)
	s := &Scheduler{Graph: true, Kind: OneFOneB, MicroBatches: 4, Cluster: cl, Profile: prof, reuse: &searchReuse{}}
	searched, err := s.Schedule(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if searched.Metrics["sink_first"] != 1 {
		t.Fatalf("the search chose %v (metrics %v): want a plan running the stage nearer the sink first", searched.Alternatives[0].Description, searched.Metrics)
	}
	reused, err := s.Schedule(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if reused.Metrics["search_reused"] != 1 {
		t.Fatalf("the second call searched again (metrics %v): want the kept choice", reused.Metrics)
	}
	if len(reused.Tasks) != len(searched.Tasks) {
		t.Fatalf("reused plan has %d tasks, the searched one %d", len(reused.Tasks), len(searched.Tasks))
	}
	for i := range searched.Tasks {
		if a, b := searched.Tasks[i], reused.Tasks[i]; a.Priority != b.Priority || a.Device != b.Device || a.Kind != b.Kind {
			t.Fatalf("task %d: searched %s on %s at priority %d, reused %s on %s at priority %d", i, a.Kind, a.Device, a.Priority, b.Kind, b.Device, b.Priority)
		}
	}
	if a, b := searched.Metrics["simulated_iteration_ms"], reused.Metrics["simulated_iteration_ms"]; a != b {
		t.Errorf("simulated %v ms searched, %v ms reused", a, b)
	}
}

// TestSinkFirstTrimmed: trimWarmup shortens a candidate's warm-up and
// keeps the rest of it, its order on shared devices too. On GraphPipe's
// DLRM (4 tables of 10⁶ × 64) on 8 A100s at m = 16 the chosen plan is
// both trimmed and sink-first; the trim used to rebuild the candidate
// field by field and drop sinkFirst, so no trimmed plan ran sink-first
// (this one simulated 0.5% slower without it).
func TestSinkFirstTrimmed(t *testing.T) {
	if testing.Short() {
		t.Skip("searches dlrm-4 on 8 A100s (seconds)")
	}
	cfg := core.ModelConfig{InDim: 4, Hidden: 64, Classes: 2, Layers: 2, Branches: 4, TableRows: 1_000_000}
	w, cl, prof := rooflineWorkload(t, "dlrm", cfg, 8192, 8)
	p, err := (&Scheduler{Graph: true, Kind: OneFOneB, MicroBatches: 16, Cluster: cl, Profile: prof}).Schedule(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if p.Metrics["warmup_cap"] == 0 || p.Metrics["sink_first"] != 1 {
		t.Errorf("chose %s (metrics %v): want a trimmed warm-up (warmup_cap) that runs the stage nearer a sink first", p.Alternatives[0].Description, p.Metrics)
	}
}
