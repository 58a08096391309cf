package graphpipe

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/data"
	"github.com/gnnkit/gnnkit/sim"
)

func TestTrunkOps(t *testing.T) {
	for _, tc := range []struct {
		model string
		first string // the trunk's first op ("": no trunk)
	}{
		{"uno", "join0"},   // the branches' sum, the trunk MLP, the loss
		{"mbgnn", "join0"}, // the towers' sum, the fusion MLP, the loss
		{"dlrm", "join0"},  // bottom MLP and tables summed, top MLP, the loss
		{"gcn", ""},        // a chain: no branches
		{"sage", ""},
	} {
		m, err := core.BuildModel(tc.model, core.ModelConfig{InDim: 8, Hidden: 8, Classes: 2, Branches: 4})
		if err != nil {
			t.Fatal(err)
		}
		g, _ := core.Undirected(10, []int32{0, 1}, []int32{1, 2})
		w := core.NewWorkload(m, g, 8, []int32{0, 1, 2}, nil, 1)
		root, _ := Decompose(w)
		trunk := trunkOps(root)
		if tc.first == "" {
			if len(trunk) > 0 {
				t.Errorf("%s: trunk %v, want none (no branches)", tc.model, trunk)
			}
			continue
		}
		if len(trunk) == 0 {
			t.Fatalf("%s: no trunk", tc.model)
		}
		slices.Sort(trunk)
		if got := w.Ops[trunk[0]].Name; got != tc.first {
			t.Errorf("%s: trunk starts at %s, want %s", tc.model, got, tc.first)
		}
		if trunk[len(trunk)-1] != len(w.Ops)-1 {
			t.Errorf("%s: trunk ends at op %d, want the loss (%d)", tc.model, trunk[len(trunk)-1], len(w.Ops)-1)
		}
	}
}

func TestSharedTrunkPartition(t *testing.T) {
	devs := []core.DeviceID{"a", "b", "c"}
	// Ops 0-3 branches, 4-5 trunk.
	p := Partition{StageOf: []int{0, 0, 1, 2, 2, 2}, Devices: [][]core.DeviceID{{"a"}, {"b"}, {"c"}}}
	q, ok := sharedTrunk(p, []int{4, 5})
	if !ok {
		t.Fatal("no variant")
	}
	if want := []int{0, 0, 1, 2, 3, 3}; !slices.Equal(q.StageOf, want) {
		t.Errorf("StageOf = %v, want %v", q.StageOf, want)
	}
	if len(q.Devices) != 4 || !slices.Equal(q.Devices[3], devs) {
		t.Errorf("Devices = %v, want the trunk on %v", q.Devices, devs)
	}
	if !slices.Equal(p.StageOf, []int{0, 0, 1, 2, 2, 2}) || len(p.Devices) != 3 {
		t.Errorf("the input partition changed: %+v", p)
	}
	// Replicated stages: the trunk starts on their second replicas.
	r := Partition{StageOf: []int{0, 1, 1}, Devices: [][]core.DeviceID{{"a", "b"}, {"c", "d"}}}
	if q, ok := sharedTrunk(r, []int{2}); !ok || !slices.Equal(q.Devices[2], []core.DeviceID{"b", "d", "a", "c"}) {
		t.Errorf("replicated: %v, %v; want the trunk on b, d, a, c", q.Devices, ok)
	}
	// A stage holding only trunk ops would be left without work.
	if _, ok := sharedTrunk(Partition{StageOf: []int{0, 0, 1, 1}, Devices: [][]core.DeviceID{{"a"}, {"b"}}}, []int{2, 3}); ok {
		t.Error("variant of a partition whose trunk fills a stage")
	}
	if _, ok := sharedTrunk(p, nil); ok {
		t.Error("variant without a trunk")
	}
	// On first replicas: only the stages' first replicas run the trunk;
	// without a replicated stage that is sharedTrunk's variant (none).
	if q, ok := sharedTrunkFirsts(r, []int{2}); !ok || !slices.Equal(q.Devices[2], []core.DeviceID{"a", "c"}) || !slices.Equal(q.StageOf, []int{0, 1, 2}) {
		t.Errorf("on first replicas: %+v, %v; want the trunk on a, c", q, ok)
	}
	if _, ok := sharedTrunkFirsts(p, []int{4, 5}); ok {
		t.Error("first-replica variant of a partition without replicas")
	}
	saved := smallOps
	defer func() { smallOps = saved }()
	smallOps = 2
	if _, ok := sharedTrunkFirsts(r, []int{2}); ok {
		t.Error("first-replica variant on a graph of more than smallOps ops")
	}
}

// sharedFixed schedules the shared-trunk variant of a fixed partition:
// the ops before the trunk in contiguous topological runs, one stage per
// device (per replicas devices, each stage replicated), the trunk on the
// last of them, then sharedTrunk.
type sharedFixed struct {
	kind      Kind
	replicas  int
	groups    bool // PlanOptions.StepGroups
	split     bool // the branch stages split over their replicas (splitBranches)
	sinkFirst bool // PlanOptions.SinkFirst: the executor gates the shared devices
}

func (sharedFixed) Name() string { return "shared-fixed" }

func (f sharedFixed) Schedule(ctx context.Context, w *core.Workload) (*core.Plan, error) {
	root, _ := Decompose(w)
	trunk := trunkOps(root)
	in := map[int]bool{}
	for _, o := range trunk {
		in[o] = true
	}
	r := max(1, f.replicas)
	n := len(w.Devices) / r
	part := Partition{StageOf: make([]int, len(w.Ops))}
	for s := range n {
		var devs []core.DeviceID
		for _, d := range w.Devices[s*r : (s+1)*r] {
			devs = append(devs, d.ID)
		}
		part.Devices = append(part.Devices, devs)
	}
	k, rest := 0, len(w.Ops)-len(trunk)
	for o := range w.Ops {
		if in[o] {
			part.StageOf[o] = n - 1
			continue
		}
		part.StageOf[o] = k * n / rest
		k++
	}
	q, ok := sharedTrunk(part, trunk)
	if !ok {
		return nil, fmt.Errorf("%s: no shared-trunk variant (trunk %v)", w.ModelName, trunk)
	}
	if f.split {
		if q, ok = splitBranches(q, branchOps(root), make([]float64, len(w.Ops)), nil); !ok {
			return nil, fmt.Errorf("%s: no stage of whole branches to split", w.ModelName)
		}
	}
	p, err := BuildPlanOpts(w, q, 5, f.kind, PlanOptions{Step: StepOwners, StepGroups: f.groups, SinkFirst: f.sinkFirst}, "shared-fixed")
	if err == nil && f.groups {
		// The trunk's owner, hosting a branch stage too, steps the
		// trunk's parameters apart from the branch's.
		named := false
		for _, t := range p.Tasks {
			named = named || t.Kind == core.TaskStep && len(t.Params) > 0
		}
		if !named {
			return nil, fmt.Errorf("%s: no step split by readiness in the grouped shared-trunk plan", w.ModelName)
		}
	}
	if err == nil && r > 1 && !f.split { // split, no stage is replicated
		// A replica of a stage reads its stage's and the trunk's
		// parameters, both partly owned by its partner: two reductions
		// into it, the trunk's final first.
		split := false
		for _, t := range p.Tasks {
			split = split || t.Kind == core.TaskReduceGrads && len(t.Params) > 0
		}
		if !split {
			return nil, fmt.Errorf("%s: no reduction split by readiness in the replicated shared-trunk plan", w.ModelName)
		}
	}
	return p, err
}

// TestOracleSharedTrunk: shared-trunk plans (the trunk replicated over
// every device beside the branch stages), their branch stages replicated
// or split (splitBranches), train exactly like sequential, under 1F1B
// and GPipe, on the models that have a trunk.
func TestOracleSharedTrunk(t *testing.T) {
	for _, kind := range []Kind{OneFOneB, GPipe} {
		t.Run(kind.String(), func(t *testing.T) {
			schedtest.Oracle(t, sharedFixed{kind: kind}, schedtest.OracleOptions{Devices: 3, Models: []string{"uno", "mbgnn", "dlrm", "gat"}, Steps: 2})
			// Stages replicated beside the shared trunk: reductions
			// split by when their gradients are final.
			schedtest.Oracle(t, sharedFixed{kind: kind, replicas: 2}, schedtest.OracleOptions{Devices: 4, Models: []string{"uno", "mbgnn", "dlrm", "gat"}, Steps: 2})
			// Owners stepping in readiness groups: the trunk's
			// parameters stepped and refreshed while its owner's branch
			// still runs backward work.
			schedtest.Oracle(t, sharedFixed{kind: kind, groups: true}, schedtest.OracleOptions{Devices: 3, Models: []string{"uno", "mbgnn", "dlrm", "gat"}, Steps: 2})
			schedtest.Oracle(t, sharedFixed{kind: kind, replicas: 2, groups: true}, schedtest.OracleOptions{Devices: 4, Models: []string{"uno", "mbgnn", "dlrm", "gat"}, Steps: 2})
			// The trunk first where it shares a device (the executor's
			// device gates).
			schedtest.Oracle(t, sharedFixed{kind: kind, sinkFirst: true}, schedtest.OracleOptions{Devices: 3, Models: []string{"uno", "mbgnn", "dlrm", "gat"}, Steps: 2})
			schedtest.Oracle(t, sharedFixed{kind: kind, replicas: 2, groups: true, sinkFirst: true}, schedtest.OracleOptions{Devices: 4, Models: []string{"uno", "mbgnn", "dlrm", "gat"}, Steps: 2})
			// The branch stages split over their replicas (uno's halves
			// are whole branches): each branch on a device of its own.
			schedtest.Oracle(t, sharedFixed{kind: kind, replicas: 2, split: true}, schedtest.OracleOptions{Devices: 4, Models: []string{"uno"}, Steps: 2})
		})
	}
}

// TestSplitBranches: a stage of whole branches on several replicas is
// split into a stage per group of branches, its replicas shared among
// them in the stage's place; a stage holding anything else, a stage on
// one replica and a chain are left as they are. End to end: uno-4
// (hidden 16, gnnkit plan's default) on 4 A100s plans each branch on a
// device of its own with the trunk shared, as fast as 5 devices plan it
// (before, 4 devices planned 35% slower than 5: 0.2373 against 0.1755
// ms).
func TestSplitBranches(t *testing.T) {
	cfg := core.ModelConfig{InDim: 1433, Hidden: 16, Classes: 7, Layers: 2, Branches: 4}
	w, _, _ := rooflineWorkload(t, "uno", cfg, 140, 4)
	root, _ := Decompose(w)
	branches, trunk := branchOps(root), trunkOps(root)
	if len(branches) != 4 || len(trunk) == 0 {
		t.Fatalf("uno-4: %d branches, trunk %v", len(branches), trunk)
	}
	d := func(ids ...int) []core.DeviceID {
		var out []core.DeviceID
		for _, i := range ids {
			out = append(out, core.DeviceID(fmt.Sprintf("cuda:%d", i)))
		}
		return out
	}
	// b0 | b1 | b2+b3 on two replicas | the trunk on every device.
	p := Partition{StageOf: make([]int, len(w.Ops)), Devices: [][]core.DeviceID{d(0), d(1), d(2, 3), d(0, 1, 2, 3)}}
	for o := range p.StageOf {
		p.StageOf[o] = 3
	}
	for b, ops := range branches {
		for _, o := range ops {
			p.StageOf[o] = min(b, 2)
		}
	}
	time := make([]float64, len(w.Ops))
	for o := range time {
		time[o] = 1
	}
	q, ok := splitBranches(p, branches, time, nil)
	if !ok {
		t.Fatal("b2+b3 on two replicas was not split")
	}
	want := [][]core.DeviceID{d(0), d(1), d(2), d(3), d(0, 1, 2, 3)}
	if !slices.EqualFunc(q.Devices, want, slices.Equal) {
		t.Errorf("split: devices %v, want %v", q.Devices, want)
	}
	for b, ops := range branches {
		for _, o := range ops {
			if q.StageOf[o] != b {
				t.Errorf("split: branch %d's op %d on stage %d", b, o, q.StageOf[o])
			}
		}
	}
	preds, _ := q.StageDAG(w)
	for s, ps := range preds {
		for _, x := range ps {
			if x >= s {
				t.Errorf("split: stage %d follows stage %d: not in topological order", s, x)
			}
		}
	}
	// Branches of no time (ties everywhere) still spread, no group empty:
	// all four on four replicas give four stages of one branch each.
	all := Partition{StageOf: slices.Clone(p.StageOf), Devices: [][]core.DeviceID{d(0, 1, 2, 3), d(0, 1, 2, 3)}}
	for o, st := range all.StageOf {
		all.StageOf[o] = min(st, 3) / 3 // branches on stage 0, the trunk on 1
	}
	if q, ok := splitBranches(all, branches, make([]float64, len(w.Ops)), nil); !ok || len(q.Devices) != 5 {
		t.Errorf("four branches of no time on four replicas: ok %v, %d stages, want 5", ok, len(q.Devices))
	} else {
		for st, ops := range q.Stages() {
			if len(ops) == 0 {
				t.Errorf("stage %d (devices %v) has no ops", st, q.Devices[st])
			}
		}
	}
	// Not split: the trunk in the two-branch stage; one replica; a chain.
	mixed := p
	mixed.StageOf = slices.Clone(p.StageOf)
	for _, o := range trunk {
		mixed.StageOf[o] = 2
	}
	mixed.Devices = p.Devices[:3]
	one := p
	one.Devices = [][]core.DeviceID{d(0), d(1), d(2), d(0, 1, 2)}
	chain := p
	chain.Chain = true
	for name, x := range map[string]Partition{"with the trunk": mixed, "one replica": one, "a chain": chain} {
		if _, ok := splitBranches(x, branches, time, nil); ok {
			t.Errorf("%s: split", name)
		}
	}
	// A spare device: a stage of two branches on one device splits onto
	// it.
	lone := Partition{StageOf: slices.Clone(all.StageOf), Devices: [][]core.DeviceID{d(0), d(1)}}
	if q, ok := splitBranches(lone, branches, time, d(2, 3, 4)); !ok || len(q.Devices) != 5 || !slices.Equal(q.Devices[3], d(4)) {
		t.Errorf("four branches on one device, three spare: ok %v, devices %v, want a branch on each of cuda:0, 2, 3, 4", ok, q.Devices)
	}
}

// TestMoreDevicesNoSlower: a plan that fits n devices is found on n
// devices: where the search on ref devices (one more: its plan leaves
// one idle; or fewer) planned faster, it now plans at least as fast on n
// (a helper's audit: uno-4 on 4 A100s 0.2373 ms against 0.1755 on 5,
// which used 4; uno-8 on 8 0.2801 against 0.2187 on 9, which used 8;
// mbgnn on 4 H100s 0.5208 against 0.4688 on 3, the walk over the
// micro-batch counts stopping at m = 4 short of m = 1). Small, latency-
// bound models (hidden 16, as gnnkit plan builds them).
func TestMoreDevicesNoSlower(t *testing.T) {
	cora, err := data.Open("cora")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		model, preset string
		branches      int
		n, ref        int
	}{
		{"uno", "pcie-a100", 4, 4, 5},
		{"uno", "pcie-a100", 8, 8, 9},
		{"mbgnn", "nvlink-h100", 4, 4, 3},
	} {
		plan := func(n int) (float64, int) {
			cl, err := sim.Preset(c.preset, n)
			if err != nil {
				t.Fatal(err)
			}
			drop := float32(0.5) // as gnnkit plan builds them: gcn's default, none for uno
			if c.model == "uno" {
				drop = 0
			}
			mod, err := core.BuildModel(c.model, core.ModelConfig{InDim: cora.FeatureDim, Hidden: 16, Classes: cora.NumClasses, Layers: 2, Branches: c.branches, Dropout: drop})
			if err != nil {
				t.Fatal(err)
			}
			w := core.NewWorkload(mod, cora.Graph, cora.FeatureDim, cora.Train, cl.Infos(), 1)
			p, err := (&Scheduler{Graph: true, Cluster: cl}).Schedule(context.Background(), w)
			if err != nil {
				t.Fatal(err)
			}
			used := map[core.DeviceID]bool{}
			for _, task := range p.Tasks {
				used[task.Device] = true
			}
			return p.Metrics["simulated_iteration_ms"], len(used)
		}
		got, _ := plan(c.n)
		ref, used := plan(c.ref)
		if used > c.n {
			t.Fatalf("%s-%d on %d %s: the plan uses %d devices, more than %d", c.model, c.branches, c.ref, c.preset, used, c.n)
		}
		if !(got <= ref*(1+1e-9)) {
			t.Errorf("%s-%d on %s: %.4f ms on %d devices, where %d devices planned %.4f ms on %d of them", c.model, c.branches, c.preset, got, c.n, c.ref, ref, used)
		}
	}
}
