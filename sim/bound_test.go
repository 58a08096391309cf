package sim_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
	"github.com/gnnkit/gnnkit/sim"
)

// TestWorkBoundByHand: three ops at 2 + 3 ms each, four micro-batches,
// three devices and no parameters: the bound is 4 × 15 / 3 = 20 ms, and
// both pipeline orders simulate no faster. With one micro-batch the work
// spread is 5 ms, but the unit's path of ops is 15 ms, which the
// pipeline (free links) takes exactly.
func TestWorkBoundByHand(t *testing.T) {
	w := chain(3, devIDs(3)...)
	prof := flat(w, 2*time.Millisecond, 3*time.Millisecond, 0, 0)
	cm, err := sim.NewCostModel(w, prof, free(3))
	if err != nil {
		t.Fatal(err)
	}
	for _, oneF1B := range []bool{false, true} {
		p := pipeline(w, 4, oneF1B)
		pb, err := cm.PlanBound(p)
		if err != nil {
			t.Fatal(err)
		}
		b := pb.Time()
		if pb.Work != 20*time.Millisecond || pb.Path != 15*time.Millisecond {
			t.Errorf("1F1B %v: bound %+v, want work 20ms, path 15ms", oneF1B, pb)
		}
		res, err := sim.Simulate(p, w, prof, free(3))
		if err != nil {
			t.Fatal(err)
		}
		if res.Iteration < b {
			t.Errorf("1F1B %v: simulated %v beats the bound %v", oneF1B, res.Iteration, b)
		}
	}
	one := pipeline(w, 1, true)
	work, err := cm.WorkBound(one.Units, false)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := cm.PlanBound(one)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Simulate(one, w, prof, free(3))
	if err != nil {
		t.Fatal(err)
	}
	if work != 5*time.Millisecond || pb.Work != work || pb.Time() != 15*time.Millisecond || res.Iteration != pb.Time() {
		t.Errorf("one micro-batch: work bound %v (want 5ms), plan bound %+v (want 15ms), simulated %v (want the plan bound)", work, pb, res.Iteration)
	}
}

// TestPlanBoundHolds: no plan the pipeline schedulers make simulates
// faster than its bound, on three DAG models over 2 to 16 A100s, at a
// fixed m and with m searched; the bound at one unit of the whole batch
// is no larger than at the plan's units here (larger products run no
// slower per row in the roofline).
func TestPlanBoundHolds(t *testing.T) {
	ctx := context.Background()
	const samples = 2048
	g, _ := core.Undirected(samples, nil, nil) // rows without edges, every one a target
	batch := make([]int32, samples)
	for i := range batch {
		batch[i] = int32(i)
	}
	for _, mc := range []struct {
		name string
		cfg  core.ModelConfig
	}{
		{"uno", core.ModelConfig{InDim: 512, Hidden: 256, Classes: 2, Layers: 2, Branches: 3}},
		{"dlrm", core.ModelConfig{InDim: 16, Hidden: 64, Classes: 2, Layers: 2, Branches: 3, TableRows: 10_000}},
		{"mbgnn", core.ModelConfig{InDim: 64, Hidden: 32, Classes: 2, Layers: 2, Branches: 2}},
	} {
		mod, err := core.BuildModel(mc.name, mc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{2, 5, 16} {
			cl, err := sim.Preset("pcie-a100", n)
			if err != nil {
				t.Fatal(err)
			}
			w := core.NewWorkload(mod, g, mc.cfg.InDim, batch, cl.Infos(), 1)
			cm, err := sim.NewCostModel(w, nil, cl)
			if err != nil {
				t.Fatal(err)
			}
			whole, err := cm.WorkBound(graphpipe.MicroUnits(w, 1), true)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []*graphpipe.Scheduler{
				{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: 8, Cluster: cl},
				{Kind: graphpipe.OneFOneB, MicroBatches: 4, Cluster: cl},
				{Kind: graphpipe.GPipe, Cluster: cl},
				{Graph: true, Kind: graphpipe.OneFOneB, Cluster: cl},
			} {
				name := fmt.Sprintf("%s/%d/%s/m%d", mc.name, n, s.Name(), s.MicroBatches)
				p, err := s.Schedule(ctx, w)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				pb, err := cm.PlanBound(p)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				b := pb.Time()
				res, err := sim.Simulate(p, w, nil, cl)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if res.Iteration < b || b <= 0 {
					t.Errorf("%s: simulated %v, bound %v", name, res.Iteration, b)
				}
				if whole > b {
					t.Errorf("%s: the whole batch's bound %v is over the plan's %v", name, whole, b)
				}
			}
		}
	}
}

// TestPlanBoundRefused: no bound for a plan running an op twice in a unit
// or not at all, nor on a device overlapping its streams.
func TestPlanBoundRefused(t *testing.T) {
	w := chain(3, devIDs(3)...)
	prof := flat(w, 2*time.Millisecond, 3*time.Millisecond, 0, 0)
	cm, err := sim.NewCostModel(w, prof, free(3))
	if err != nil {
		t.Fatal(err)
	}
	twice := pipeline(w, 2, true)
	for i, tk := range twice.Tasks {
		if tk.Kind == core.TaskForward && tk.Unit == 1 && tk.Ops[0] == 2 {
			twice.Tasks[i].Ops = []int{1, 2}
		}
	}
	missing := pipeline(w, 2, true)
	for i, tk := range missing.Tasks {
		if tk.Kind == core.TaskForward && tk.Unit == 0 && tk.Ops[0] == 0 {
			missing.Tasks[i].Ops = nil
			missing.Tasks[i].OpLo, missing.Tasks[i].OpHi = 0, 0
		}
	}
	for _, c := range []struct {
		name string
		p    *core.Plan
		want string
	}{
		{"an op twice", twice, "unit 1 runs op 1 (op1) 2 times"},
		{"an op never", missing, "unit 0 runs op 0 (op0) 0 times"},
		{"no units", &core.Plan{}, "no units"},
	} {
		_, err := cm.PlanBound(c.p)
		if !errors.Is(err, sim.ErrNoBound) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrNoBound saying %q", c.name, err, c.want)
		}
	}
	cl := free(3)
	cl.Devices[1].StreamOverlap = 0.5
	cm, err = sim.NewCostModel(w, prof, cl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cm.PlanBound(pipeline(w, 2, true)); !errors.Is(err, sim.ErrNoBound) || !strings.Contains(err.Error(), "stream_overlap") {
		t.Errorf("stream overlap: %v, want ErrNoBound naming stream_overlap", err)
	}
}
