package graphpipe

import (
	"fmt"
	"math"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// TestReduction: the third pass's price of a stage's reductions is zero
// on one replica or without parameters, grows with the replicas for a
// stage of large parameters (so repRate is not monotone there), and
// minReplicas then reports no replica count meets a target it cannot
// reach instead of counting up without end (also for a stage without a
// step of its own, whose parameter another op steps), and under a memory
// cap never returns a count whose rate misses the target.
func TestReduction(t *testing.T) {
	w, cl := unoWorkload(t, core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}, 8192, 16)
	prof, err := sim.Roofline(w, cl.Devices[0])
	if err != nil {
		t.Fatal(err)
	}
	c, _ := costsOn(t, w, cl, prof, 16)
	f := c.flushAmortized()
	if !f.reduce || !f.amortize || c.reduce {
		t.Fatalf("flushAmortized: reduce %v amortize %v (the original's reduce %v)", f.reduce, f.amortize, c.reduce)
	}
	// A branch's first dense layer: 4096 × 2048 floats of weights.
	var lin []int
	for o, op := range w.Ops {
		if op.Name == "branch0.l0.lin" {
			lin = append(lin, o)
		}
	}
	if len(lin) != 1 {
		t.Fatalf("no op branch0.l0.lin in %d ops", len(w.Ops))
	}
	s := f.stat(lin)
	if s.pw < 32<<20 {
		t.Fatalf("branch0.l0.lin reads %.0f parameter bytes, want its 32 MiB weight", s.pw)
	}
	if r := f.reduction(s, 1); r != 0 {
		t.Errorf("one replica: reduction %g, want 0", r)
	}
	if r := f.reduction(stageStat{f: s.f, b: s.b}, 4); r != 0 {
		t.Errorf("no parameters: reduction %g, want 0", r)
	}
	prev := 0.0
	for d := 2; d <= 16; d++ {
		r := f.reduction(s, d)
		// (d−1) owners' shares of 32 MiB over one port, once per 16
		// micro-batches: from 32 to 480 MiB's transfer, over 16.
		want := f.link(float64(d-1)*ownedBound(s.pw, s.pmax, d)) / 16
		if r <= prev || math.Abs(r-want) > 1e-12 {
			t.Errorf("%d replicas: reduction %g (previous %g), want %g, growing", d, r, prev, want)
		}
		prev = r
		if got, plain := f.repRate(s, d), c.repRate(s, d); got < plain+r*(1-1e-9) {
			t.Errorf("%d replicas: repRate %g with the flush, %g without, reduction %g", d, got, plain, r)
		}
	}
	// Below the rate any replica count reaches, minReplicas gives up.
	least := math.Inf(1)
	for d := 1; d <= len(f.devs); d++ {
		least = min(least, f.repRate(s, d))
	}
	if got := f.minReplicas(s, least*0.9, 1); got != math.MaxInt32 {
		t.Errorf("a target below every replica count's rate: %d replicas, want none (MaxInt32)", got)
	}
	if got := f.minReplicas(s, least*1.0001, 1); got < 1 || got > len(f.devs) {
		t.Errorf("the least rate: %d replicas, want one of 1..%d", got, len(f.devs))
	}
	// Without a step of its own (amort 0): the reductions alone must
	// stop the count.
	bare := stageStat{f: s.f, b: s.b, pw: s.pw, pmax: s.pmax}
	if got := f.minReplicas(bare, least*0.5, 0); got != math.MaxInt32 {
		t.Errorf("no step, a target below every rate: %d replicas, want none", got)
	}
	// Under a cap that the fewest replicas meeting tau do not fit, the
	// fewest that fit may be past the rate's minimum: the answer must
	// still meet tau, or be none.
	const k = 12
	tau := f.repRate(s, 4) * 1.0001
	for d := 2; d <= len(f.devs); d++ {
		g := *f
		g.memCap = f.peak(s, OneFOneB, k+d, d) // d replicas just fit
		got := g.minReplicas(s, tau, k)
		if got == math.MaxInt32 {
			continue
		}
		if r := g.repRate(s, got); r > tau*(1+eps) || !g.fits(s, OneFOneB, k+got, got) {
			t.Errorf("cap at %d replicas' peak: %d replicas, rate %.4g ms against tau %.4g ms (fits %v)", d, got, r*1e3, tau*1e3, g.fits(s, OneFOneB, k+got, got))
		}
	}
}

// TestFlushPass: the third pass runs with owners on small graphs over
// several devices and with simulation, and on uno-4 over 16 PCIe A100s
// (the benchmark's cell) it takes the 1F1B chain from 48.30 to 46.91 ms:
// the plain DP replicates the second to fourth stages four ways, and
// their reductions into the owners (4.8 ms of flush by the estimate) are
// what the DP's slowest-stage objective does not see. The ladder of
// memory caps (MemCaps) is off in both arms: it reaches a faster chain
// on its own (TestMemCaps).
func TestFlushPass(t *testing.T) {
	w, cl, prof := rooflineWorkload(t, "uno", core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}, 8192, 16)
	defer func() { weighFlush = true }()
	plan := func(on bool, simulate int) *core.Plan {
		weighFlush = on
		s := &Scheduler{Kind: OneFOneB, MicroBatches: 16, Cluster: cl, Profile: prof, Simulate: simulate, MemCaps: -1}
		p, err := s.Schedule(t.Context(), w)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	with, without := plan(true, 0), plan(false, 0)
	a, b := with.Metrics["simulated_iteration_ms"], without.Metrics["simulated_iteration_ms"]
	t.Logf("1F1B chain, uno-4 / 16: %.2f ms with the third pass, %.2f without; flush %.2f vs %.2f ms predicted", a, b, with.Metrics["predicted_flush_ms"], without.Metrics["predicted_flush_ms"])
	if !(a > 0 && b >= 1.02*a) {
		t.Errorf("1F1B chain, uno-4 / 16: %.2f ms with the third pass, %.2f without: want 2%% faster or more", a, b)
	}
	if with.Metrics["flush_weighed"] != 1 || without.Metrics["flush_weighed"] != 0 {
		t.Errorf("flush_weighed: %v with the pass, %v without", with.Metrics["flush_weighed"], without.Metrics["flush_weighed"])
	}
	if with.Metrics["candidates"] <= without.Metrics["candidates"] {
		t.Errorf("candidates: %v with the pass, %v without", with.Metrics["candidates"], without.Metrics["candidates"])
	}
	// Without simulation the estimate alone would choose: no pass.
	if p, q := plan(true, -1), plan(false, -1); p.Metrics["candidates"] != q.Metrics["candidates"] {
		t.Errorf("without simulation: %v candidates with the pass on, %v off", p.Metrics["candidates"], q.Metrics["candidates"])
	}

	// The gate: owners, at most smallOps ops, more than one device.
	weighFlush = true
	c, _ := costsOn(t, w, cl, prof, 16)
	if !c.thirdPass() {
		t.Error("uno-4 on 16 devices: no third pass")
	}
	one, cl1, prof1 := rooflineWorkload(t, "uno", core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}, 8192, 1)
	if c1, _ := costsOn(t, one, cl1, prof1, 16); c1.thirdPass() {
		t.Error("one device: a third pass")
	}
	big, bcl, bprof := bigUno(t, 256)
	if cb, _ := costsOn(t, big, bcl, bprof, 16); cb.thirdPass() {
		t.Errorf("%d ops: a third pass (at most %d)", len(big.Ops), smallOps)
	}
}

// bigUno is TestPartitionSearchTime's 1,000-op DAG (uno, 16 branches of
// 20 layers) over 64 simulated devices, with samples samples, its
// cluster and its roofline profile.
func bigUno(t *testing.T, samples int) (*core.Workload, *sim.Cluster, *sim.Profile) {
	t.Helper()
	var devs []core.DeviceInfo
	for i := range 64 {
		devs = append(devs, core.DeviceInfo{ID: core.DeviceID(fmt.Sprintf("sim:%d", i)), GFLOPS: 50, MemGBps: 20, MemCap: 2 << 30})
	}
	w := workloadOn(t, "uno", core.ModelConfig{InDim: 256, Hidden: 512, Classes: 8, Branches: 16, Layers: 20}, samples, devs)
	cl := sim.ClusterFor(devs)
	prof, err := sim.Roofline(w, cl.Devices[0])
	if err != nil {
		t.Fatal(err)
	}
	return w, cl, prof
}
