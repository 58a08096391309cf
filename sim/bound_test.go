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
	for _, oneF1B := range []bool{false, true} {
		p := pipeline(w, 4, oneF1B)
		pb, err := sim.PlanBound(p, w, prof, free(3))
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
	work, err := sim.WorkBound(w, prof, free(3), one.Units, false)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := sim.PlanBound(one, w, prof, free(3))
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
// faster than its bound, on three DAG models over 2 to 16 A100s (and 4
// with one twice as fast, and 3 CPU devices sharing 1.5 cores), at a
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
		for _, cc := range []struct {
			preset string
			n      int
			faster bool // device 0 twice as fast as the rest
		}{{"pcie-a100", 2, false}, {"pcie-a100", 5, false}, {"pcie-a100", 16, false}, {"pcie-a100", 4, true}, {"cpu", 3, false}} {
			n := cc.n
			cl, err := sim.Preset(cc.preset, n)
			if err != nil {
				t.Fatal(err)
			}
			if cc.faster {
				cl.Devices[0].GFLOPS *= 2
				cl.Devices[0].MemGBps *= 2
			}
			if cc.preset == "cpu" {
				cl.HostCores = 1.5 // three devices share one and a half cores
			}
			w := core.NewWorkload(mod, g, mc.cfg.InDim, batch, cl.Infos(), 1)
			whole, err := sim.WorkBound(w, nil, cl, graphpipe.MicroUnits(w, 1), true)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []*graphpipe.Scheduler{
				{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: 8, Cluster: cl},
				{Kind: graphpipe.OneFOneB, MicroBatches: 4, Cluster: cl},
				{Kind: graphpipe.GPipe, Cluster: cl},
				{Graph: true, Kind: graphpipe.OneFOneB, Cluster: cl},
			} {
				name := fmt.Sprintf("%s/%s-%d/%s/m%d", mc.name, cc.preset, n, s.Name(), s.MicroBatches)
				p, err := s.Schedule(ctx, w)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				pb, err := sim.PlanBound(p, w, nil, cl)
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

// TestPlanBoundRefused: no bound for a plan whose unit runs an op
// twice or never (forward or backward), for an invalid plan, nor on a
// device overlapping its streams; each error says why.
func TestPlanBoundRefused(t *testing.T) {
	w := chain(3, devIDs(3)...)
	prof := flat(w, 2*time.Millisecond, 3*time.Millisecond, 0, 0)
	edit := func(kind core.TaskKind, unit, op int, ops []int) *core.Plan {
		p := pipeline(w, 2, true)
		for i, tk := range p.Tasks {
			if tk.Kind == kind && tk.Unit == unit && tk.Ops[0] == op {
				p.Tasks[i].Ops = ops
			}
		}
		return p
	}
	badUnit := pipeline(w, 2, true)
	badUnit.Tasks[0].Unit = 7
	for _, c := range []struct {
		name string
		p    *core.Plan
		want string
	}{
		{"an op twice", edit(core.TaskForward, 1, 2, []int{1, 2}), "not valid"},
		{"a forward never", edit(core.TaskForward, 0, 0, []int{1}), "not valid"},
		{"a backward never", edit(core.TaskBackward, 1, 1, []int{2}), "not valid"},
		{"an unknown unit", badUnit, "not valid"},
		{"no units", &core.Plan{}, "no units"},
	} {
		_, err := sim.PlanBound(c.p, w, prof, free(3))
		if !errors.Is(err, sim.ErrNoBound) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrNoBound saying %q", c.name, err, c.want)
		}
	}
	cl := free(3)
	cl.Devices[1].StreamOverlap = 0.5
	if _, err := sim.PlanBound(pipeline(w, 2, true), w, prof, cl); !errors.Is(err, sim.ErrNoBound) || !strings.Contains(err.Error(), "stream_overlap") {
		t.Errorf("stream overlap: %v, want ErrNoBound naming stream_overlap", err)
	}
}

// TestPlanBoundSteps: a hundred one-byte parameters of one op stepped on
// its one device at 3 GB/s, the op free: the iteration is the home's one
// step of them all, rounded once, where each parameter's step rounds on
// its own, so the bound takes a nanosecond off each (a review found
// plans 29 ns under a bound that did not). A profile's measured step
// with no parameter count prices any bytes as the whole step: the bound
// counts it once, not once per parameter.
func TestPlanBoundSteps(t *testing.T) {
	w := chain(1, "cpu:0")
	for i := range 100 {
		w.Ops[0].Params = append(w.Ops[0].Params, core.ParamRef{Name: fmt.Sprintf("p%d", i), Bytes: 1})
	}
	cl := sim.CPU(1, sim.DeviceModel{GFLOPS: 1, MemGBps: 3}, sim.Link{})
	prof := flat(w, 0, 0, 0, 0)
	p := pipeline(w, 1, true)
	check := func(name string, prof *sim.Profile, paramBytes int64) {
		t.Helper()
		w.ParamBytes = paramBytes
		b, err := sim.PlanBound(p, w, prof, cl)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		res, err := sim.Simulate(p, w, prof, cl)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: simulated %v, bound %+v", name, res.Iteration, b)
		if res.Iteration < b.Time() || b.Work <= 0 {
			t.Errorf("%s: simulated %v, bound %+v", name, res.Iteration, b)
		}
	}
	check("memory-priced steps", prof, 100) // Adam: 8 passes, 800 B at 3 GB/s: 267 ns; each alone 3 ns
	measured := *prof
	measured.Step = time.Millisecond
	check("a measured step without a parameter count", &measured, 0)
}

// TestPhases: one micro-batch of a fork-join DAG (a source, three
// branches, a join, a head), each op 1 ms forward and 2 ms backward, on
// two devices run by one. The source, the join and the head are cuts
// (every path crosses them): 3 × 3 ms one after another; the branches'
// forwards take at least 3/2 ms and their backwards 6/2 ms. 13.5 ms, more
// than the longest path (12 ms) and the work spread evenly (9 ms); on
// one device the whole 18 ms.
func TestPhases(t *testing.T) {
	w := &core.Workload{ModelName: "forkjoin", Dims: core.Dims{Nodes: 1}, Batch: []int32{0}}
	deps := [][]int{nil, {0}, {0}, {0}, {1, 2, 3}, {4}}
	for o, d := range deps {
		w.Ops = append(w.Ops, core.OpInfo{Index: o, Name: fmt.Sprintf("op%d", o), Kind: core.KindDense, Deps: d})
	}
	prof := flat(w, time.Millisecond, 2*time.Millisecond, 0, 0)
	for _, c := range []struct {
		devices    int
		work, want time.Duration
	}{{2, 9 * time.Millisecond, 13500 * time.Microsecond}, {1, 18 * time.Millisecond, 18 * time.Millisecond}} {
		cl := free(c.devices)
		w.Devices = nil
		for _, d := range cl.Devices {
			w.Devices = append(w.Devices, core.DeviceInfo{ID: d.ID})
		}
		p := &core.Plan{Scheduler: "by hand", Home: "cpu:0", Units: []core.Unit{{ID: 0, Targets: []int32{0}, LossWeight: 1}},
			Tasks: []core.Task{
				{ID: 0, Kind: core.TaskForward, Unit: 0, Device: "cpu:0", OpLo: 0, OpHi: len(deps)},
				{ID: 1, Kind: core.TaskBackward, Unit: 0, Device: "cpu:0", OpLo: 0, OpHi: len(deps), Deps: []int{0}},
				{ID: 2, Kind: core.TaskStep, Unit: -1, Device: "cpu:0", Deps: []int{1}},
			}}
		b, err := sim.PlanBound(p, w, prof, cl)
		if err != nil {
			t.Fatal(err)
		}
		res, err := sim.Simulate(p, w, prof, cl)
		if err != nil {
			t.Fatal(err)
		}
		if b.Work != c.work || b.Time() != c.want || res.Iteration < b.Time() {
			t.Errorf("%d devices: bound %+v (want work %v, bound %v), simulated %v", c.devices, b, c.work, c.want, res.Iteration)
		}
	}
}
