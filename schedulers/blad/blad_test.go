package blad_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/data/dynamic"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/engine/dyntrain"
	mdyn "github.com/gnnkit/gnnkit/models/dynamic"
	"github.com/gnnkit/gnnkit/schedulers/blad"
)

func groups(t *testing.T) (*dynamic.Set, []*engine.Batch, []blad.GroupCost) {
	t.Helper()
	spec, _ := dynamic.ParseDSBM("dsbm,nodes=200,snapshots=14,edges=20,skew=30,communities=3")
	d, err := dynamic.DSBM(spec)
	if err != nil {
		t.Fatal(err)
	}
	sn, _ := d.Snapshots(1)
	s, err := dynamic.Build(sn, d.NumNodes, dynamic.Options{Window: 3, Seed: 2, Features: d.Features, FeatureDim: d.FeatureDim})
	if err != nil {
		t.Fatal(err)
	}
	var bs []*engine.Batch
	var gc []blad.GroupCost
	for _, g := range s.Train {
		bs = append(bs, dyntrain.Batch(g))
		gc = append(gc, dyntrain.Cost(g, s.FeatureDim, 8))
	}
	return s, bs, gc
}

// run executes one iteration of sched's plan (step skipped) and returns
// the loss, gradients and the plan.
func run(t *testing.T, model string, sched core.Scheduler, ndev int) (float64, map[string][]float32, *core.Plan, *core.Trace) {
	t.Helper()
	s, bs, gc := groups(t)
	b, err := cpu.New(core.BackendOptions{Devices: ndev, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	m, err := core.BuildModel(model, core.ModelConfig{InDim: s.FeatureDim, Hidden: 8, Layers: 3})
	if err != nil {
		t.Fatal(err)
	}
	full, _ := core.FromEdges(s.NumNodes, s.NumNodes, nil, nil)
	tr, err := engine.New(engine.Config{Model: m, Devices: b.Devices(), Seed: 5,
		Data: engine.Data{Graph: full, Features: s.Features, FeatureDim: s.FeatureDim, Labels: make([]int32, s.NumNodes)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	var infos []core.DeviceInfo
	for _, d := range b.Devices() {
		infos = append(infos, d.Info())
	}
	w, err := tr.GroupWorkload(bs, infos)
	if err != nil {
		t.Fatal(err)
	}
	if gs, ok := sched.(blad.GroupSetter); ok {
		gs.SetGroups(gc)
	}
	p, err := sched.Schedule(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if err := blad.GroupsOnce(p, w); err != nil {
		t.Fatal(err)
	}
	res, err := tr.Run(context.Background(), p, nil, engine.RunOptions{Groups: bs, SkipStep: true})
	if err != nil {
		t.Fatal(err)
	}
	g, err := tr.Grads()
	if err != nil {
		t.Fatal(err)
	}
	return res.Loss, g, p, res.Trace
}

// TestExact: BLAD's placement (2 and 3 devices, 1 and 2 streams with the
// hoisted split) gives the loss and gradients of the same groups run in
// order on one device (ESDG on one device).
func TestExact(t *testing.T) {
	for _, model := range []string{"tgcn", "evolvegcn"} {
		l0, g0, _, _ := run(t, model, &blad.ESDG{}, 1)
		for _, c := range []struct {
			name string
			s    core.Scheduler
			ndev int
		}{
			{"blad-2dev-2streams", blad.New(), 2},
			{"blad-3dev-2streams", blad.New(), 3},
			{"blad-2dev-1stream", &blad.Scheduler{Streams: 1}, 2},
			{"esdg-2dev", &blad.ESDG{}, 2},
		} {
			t.Run(model+"/"+c.name, func(t *testing.T) {
				l, g, p, _ := run(t, model, c.s, c.ndev)
				worst := 0.0
				for name, v := range g0 {
					e := schedtest.RelL2(g[name], v)
					worst = math.Max(worst, e)
					if e > 1e-5 {
						t.Errorf("gradient of %s: rel L2 %.3g", name, e)
					}
				}
				le := math.Abs(l-l0) / math.Abs(l0)
				if le > 1e-5 {
					t.Errorf("loss %v vs %v", l, l0)
				}
				t.Logf("loss rel err %.2g, worst grad rel L2 %.2g, %d groups, streams %v, hoisted ops %v", le, worst, len(p.Units), p.Metrics["streams"], p.Metrics["hoisted_ops"])
			})
		}
	}
}

func TestLPT(t *testing.T) {
	for _, c := range []struct {
		cost []float64
		k    int
		max  float64
	}{
		{[]float64{5, 4, 3, 3, 3}, 2, 10}, // LPT, not optimal (9)
		{[]float64{100, 1, 1, 1, 1}, 2, 100},
		{[]float64{1, 1, 1, 1}, 4, 1},
		{[]float64{}, 3, 0},
	} {
		per := blad.LPT(c.cost, c.k)
		seen, mx := 0, 0.0
		for _, gs := range per {
			l := 0.0
			for _, g := range gs {
				l += c.cost[g]
				seen++
			}
			mx = math.Max(mx, l)
		}
		if seen != len(c.cost) || mx != c.max {
			t.Errorf("LPT(%v, %d) = %v: max load %v, want %v", c.cost, c.k, per, mx, c.max)
		}
	}
}

func TestHoisted(t *testing.T) {
	m, err := core.BuildModel("tgcn", core.ModelConfig{InDim: 4, Hidden: 4, Layers: 3})
	if err != nil {
		t.Fatal(err)
	}
	w := core.NewWorkload(m, nil, 4, []int32{0}, nil, 0)
	h, r := blad.Hoisted(w.Ops)
	var names []string
	for _, i := range h {
		names = append(names, w.Ops[i].Name)
	}
	want := []string{"gcn.xw", "gcn.agg.t0", "gcn.agg.t1", "gcn.agg.t2"}
	if len(names) != len(want) || len(h)+len(r) != len(w.Ops) {
		t.Fatalf("hoisted %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Errorf("hoisted %v, want %v", names, want)
		}
	}
}

// TestObserveRebalances: measurements that make one group dominate move
// the placement, keep the home device, and still run every group once.
func TestObserveRebalances(t *testing.T) {
	s := blad.New()
	s.MinGain = 0     // any gain: here the others' share of the makespan is tiny
	s.PerGroup = true // one group's own time (the cost model would average it out)
	_, _, p, tr := run(t, "tgcn", s, 2)
	// Fake a trace where unit 0 took very long.
	fake := &core.Trace{}
	for _, e := range tr.Events {
		if e.Unit == 0 {
			e.Dur += 10 * time.Second
		}
		fake.Events = append(fake.Events, e)
	}
	_, bs, gc := groups(t)
	bk, _ := cpu.New(core.BackendOptions{Devices: 2, Threads: 1})
	defer bk.Close()
	var infos []core.DeviceInfo
	for _, d := range bk.Devices() {
		infos = append(infos, d.Info())
	}
	m, _ := core.BuildModel("tgcn", core.ModelConfig{InDim: 7, Hidden: 8, Layers: 3})
	wl := core.NewWorkload(m, bs[0].Graph, 7, make([]int32, len(bs)), infos, 0)
	for i := range wl.Batch {
		wl.Batch[i] = int32(i)
	}
	s.SetGroups(gc)
	np, err := s.Observe(context.Background(), wl, fake)
	if err != nil {
		t.Fatal(err)
	}
	if np == nil {
		t.Fatal("no re-placement after a group became 10 s slower")
	}
	if np.Home != p.Home {
		t.Errorf("home moved from %s to %s", p.Home, np.Home)
	}
	if err := blad.GroupsOnce(np, wl); err != nil {
		t.Fatal(err)
	}
	// Group 0 alone on one device.
	var dev0 core.DeviceID
	count := map[core.DeviceID]int{}
	for _, tk := range np.Tasks {
		if tk.Kind == core.TaskForward && tk.Ops[0] == 0 {
			count[tk.Device]++
			if tk.Unit == 0 {
				dev0 = tk.Device
			}
		}
	}
	if count[dev0] != 1 {
		t.Errorf("the slow group shares %s with %d others", dev0, count[dev0]-1)
	}
}

// runVertex runs one iteration of the vertex-partition baseline on ndev
// devices (the vertex-partitioned T-GCN, one part per device), step
// skipped, and returns the loss, gradients and plan.
func runVertex(t *testing.T, ndev int) (float64, map[string][]float32, *core.Plan) {
	t.Helper()
	s, _, gc := groups(t)
	b, err := cpu.New(core.BackendOptions{Devices: ndev, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	m, err := mdyn.TGCNVertex(mdyn.Config{ModelConfig: core.ModelConfig{InDim: s.FeatureDim, Hidden: 8, Layers: 3}}, ndev)
	if err != nil {
		t.Fatal(err)
	}
	var bs []*engine.Batch
	for _, g := range s.Train {
		vb, err := dyntrain.VertexBatch(g, ndev)
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, vb)
	}
	full, _ := core.FromEdges(s.NumNodes, s.NumNodes, nil, nil)
	tr, err := engine.New(engine.Config{Model: m, Devices: b.Devices(), Seed: 5,
		Data: engine.Data{Graph: full, Features: s.Features, FeatureDim: s.FeatureDim, Labels: make([]int32, s.NumNodes)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	var infos []core.DeviceInfo
	for _, d := range b.Devices() {
		infos = append(infos, d.Info())
	}
	w, err := tr.GroupWorkload(bs, infos)
	if err != nil {
		t.Fatal(err)
	}
	sched := blad.NewVertexPartition()
	sched.SetGroups(gc)
	p, err := sched.Schedule(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if err := blad.GroupsOnce(p, w); err != nil {
		t.Fatal(err)
	}
	res, err := tr.Run(context.Background(), p, nil, engine.RunOptions{Groups: bs, SkipStep: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Trace.BytesMoved == 0 && ndev > 1 {
		t.Error("no halo exchange traced")
	}
	g, err := tr.Grads()
	if err != nil {
		t.Fatal(err)
	}
	return res.Loss, g, p
}

// TestVertexExact: the vertex partition (1-3 parts on as many devices)
// gives the loss and gradients of T-GCN run group by group on one device.
func TestVertexExact(t *testing.T) {
	l0, g0, _, _ := run(t, "tgcn", &blad.ESDG{}, 1)
	for _, ndev := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("%d-parts", ndev), func(t *testing.T) {
			l, g, p := runVertex(t, ndev)
			worst := 0.0
			for name, v := range g0 {
				e := schedtest.RelL2(g[name], v)
				worst = math.Max(worst, e)
				if e > 1e-5 {
					t.Errorf("gradient of %s: rel L2 %.3g", name, e)
				}
			}
			if len(g) != len(g0) {
				t.Errorf("%d gradients, want %d", len(g), len(g0))
			}
			le := math.Abs(l-l0) / math.Abs(l0)
			if le > 1e-5 {
				t.Errorf("loss %v vs %v", l, l0)
			}
			t.Logf("loss rel err %.2g, worst grad rel L2 %.2g, %d tasks", le, worst, len(p.Tasks))
		})
	}
}

func TestVertexWrongParts(t *testing.T) {
	m, err := mdyn.TGCNVertex(mdyn.Config{ModelConfig: core.ModelConfig{InDim: 4, Hidden: 4, Layers: 2}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	w := core.NewWorkload(m, nil, 4, []int32{0}, []core.DeviceInfo{{ID: "cpu:0"}, {ID: "cpu:1"}}, 0)
	if _, err := blad.NewVertexPartition().Schedule(context.Background(), w); err == nil || !strings.Contains(err.Error(), "3 parts") {
		t.Errorf("3 parts on 2 devices: %v", err)
	}
}

// TestObserveHysteresis: once the estimates have settled, measurements
// that change the costs a little leave the placement alone.
func TestObserveHysteresis(t *testing.T) {
	s := blad.New()
	_, _, _, tr := run(t, "tgcn", s, 2)
	_, bs, gc := groups(t)
	bk, _ := cpu.New(core.BackendOptions{Devices: 2, Threads: 1})
	defer bk.Close()
	var infos []core.DeviceInfo
	for _, d := range bk.Devices() {
		infos = append(infos, d.Info())
	}
	m, _ := core.BuildModel("tgcn", core.ModelConfig{InDim: 7, Hidden: 8, Layers: 3})
	wl := core.NewWorkload(m, bs[0].Graph, 7, make([]int32, len(bs)), infos, 0)
	for i := range wl.Batch {
		wl.Batch[i] = int32(i)
	}
	s.SetGroups(gc)
	// The first observation sets measured costs; later ones that agree
	// with them within noise must not move groups.
	if _, err := s.Observe(context.Background(), wl, tr); err != nil {
		t.Fatal(err)
	}
	for k := range 8 {
		noisy := &core.Trace{}
		for _, e := range tr.Events {
			if e.Unit >= 0 {
				e.Dur = time.Duration(float64(e.Dur) * (1 + 0.002*float64((e.Unit+k)%3)))
			}
			noisy.Events = append(noisy.Events, e)
		}
		np, err := s.Observe(context.Background(), wl, noisy)
		if err != nil {
			t.Fatal(err)
		}
		// The first observations settle the device speeds and the fit;
		// then the placement must hold.
		if np != nil && k >= 3 {
			t.Errorf("observation %d: re-placed after a 0.4%% change", k)
		}
	}
}

// TestFitCost: the cost model is recovered from exact data, stays
// non-negative, and needs three points.
func TestFitCost(t *testing.T) {
	var xs [][3]float64
	var ys []float64
	for i := range 10 {
		g, d := float64(1000*(i+1)), float64(300*(10-i)+50*i*i)
		xs = append(xs, [3]float64{g, d, 1})
		ys = append(ys, 2e-6*g+5e-7*d+1e-3)
	}
	c := blad.FitCost(xs, ys)
	for j, want := range []float64{2e-6, 5e-7, 1e-3} {
		if c == nil || math.Abs(c[j]-want) > 1e-6*want {
			t.Fatalf("fit %v, want [2e-6 5e-7 1e-3]", c)
		}
	}
	// Data that a negative dense coefficient would fit best.
	for i := range ys {
		ys[i] = 2e-6*xs[i][0] - 1e-7*xs[i][1] + 1e-3
	}
	c = blad.FitCost(xs, ys)
	if c == nil || c[0] < 0 || c[1] < 0 || c[2] < 0 {
		t.Errorf("fit %v: want non-negative coefficients", c)
	}
	if blad.FitCost(xs[:2], ys[:2]) != nil {
		t.Error("two points: want no fit")
	}
}

// TestObserveSlowDevice: a device whose groups all take twice as long
// (it shares its cores with other work) gets less work.
func TestObserveSlowDevice(t *testing.T) {
	s := blad.New()
	s.MinGain = 0
	_, _, p, tr := run(t, "tgcn", s, 2)
	_, bs, gc := groups(t)
	bk, _ := cpu.New(core.BackendOptions{Devices: 2, Threads: 1})
	defer bk.Close()
	var infos []core.DeviceInfo
	for _, d := range bk.Devices() {
		infos = append(infos, d.Info())
	}
	m, _ := core.BuildModel("tgcn", core.ModelConfig{InDim: 7, Hidden: 8, Layers: 3})
	wl := core.NewWorkload(m, bs[0].Graph, 7, make([]int32, len(bs)), infos, 0)
	for i := range wl.Batch {
		wl.Batch[i] = int32(i)
	}
	s.SetGroups(gc)
	// Durations proportional to the estimates, twice as long on cpu:1.
	fake := &core.Trace{}
	for _, e := range tr.Events {
		if e.Unit >= 0 && (e.Cat == core.TaskForward.String() || e.Cat == core.TaskBackward.String()) {
			g := gc[p.Units[e.Unit].Targets[0]]
			e.Dur = time.Duration((g.Graph + g.Dense) * 1e-3)
			if e.Device == "cpu:1" {
				e.Dur *= 2
			}
		}
		fake.Events = append(fake.Events, e)
	}
	var np *core.Plan
	for range 3 {
		q, err := s.Observe(context.Background(), wl, fake)
		if err != nil {
			t.Fatal(err)
		}
		if q != nil {
			np = q
		}
	}
	if np == nil {
		t.Fatal("no re-placement for a device twice as slow")
	}
	load := map[core.DeviceID]float64{}
	for _, tk := range np.Tasks {
		if tk.Kind == core.TaskForward && slices.Contains(tk.Ops, 0) {
			g := gc[np.Units[tk.Unit].Targets[0]]
			load[tk.Device] += g.Graph + g.Dense
		}
	}
	if !(load["cpu:1"] < 0.8*load["cpu:0"]) {
		t.Errorf("loads %v: want clearly less on the slow cpu:1", load)
	}
	if got := blad.LPTSpeed([]float64{4, 4, 4}, []float64{1, 2}); len(got[0]) != 2 || len(got[1]) != 1 {
		t.Errorf("LPTSpeed: %v", got)
	}
}
