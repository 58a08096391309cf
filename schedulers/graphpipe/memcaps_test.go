package graphpipe

import (
	"math"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

// TestMemLadder: the caps are geometric from the least estimated peak of
// the plain pass's candidates up to, not including, the largest that
// fits; the other passes' candidates and the peaks that do not fit set
// neither end, and a pool whose peaks do not differ gets none.
func TestMemLadder(t *testing.T) {
	cand := func(peak float64, fits bool, pass dpPass) *candidate {
		return &candidate{pred: prediction{peak: peak, fits: fits}, pass: pass}
	}
	pool := []*candidate{
		cand(400, true, plainPass), cand(100, false, plainPass), cand(1600, true, plainPass),
		cand(3200, false, plainPass),                           // over memory: not the top
		cand(50, true, flushPass), cand(6400, true, stepsPass), // another pass's: neither end
	}
	got := memLadder(pool, 2000, 4)
	want := []float64{100, 200, 400, 800}
	if len(got) != len(want) {
		t.Fatalf("ladder %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9*want[i] {
			t.Errorf("ladder %v, want %v", got, want)
			break
		}
	}
	if got := memLadder([]*candidate{cand(300, true, plainPass), cand(300, true, plainPass)}, 0, 8); got != nil {
		t.Errorf("equal peaks: ladder %v, want none", got)
	}
	if got := memLadder([]*candidate{cand(300, false, plainPass)}, 100, 8); got != nil {
		t.Errorf("nothing fits: ladder %v, want none", got)
	}
}

// TestMemCaps: on uno-4 over 16 PCIe A100s at m = 16 (the benchmark's
// cell), the 1F1B chain's plain search keeps a 46.91 ms chain, and the
// chain DP held to one of its 16 caps answers a chain that, widened,
// simulates at 44.20 ms: the plan says the cap (dp_mem_cap_bytes, "DP
// held to" in its description) and fits the devices' own memory.
// GraphPipe weighs the same chains (its chain family), so it is never
// slower than the chain with the ladder either. The ladder is gated
// like the third pass: not without simulation, on one device, or above
// smallOps ops.
func TestMemCaps(t *testing.T) {
	w, cl, prof := rooflineWorkload(t, "uno", core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}, 8192, 16)
	plan := func(graph bool, memCaps, simulate int) *core.Plan {
		s := &Scheduler{Graph: graph, Kind: OneFOneB, MicroBatches: 16, Cluster: cl, Profile: prof, MemCaps: memCaps, Simulate: simulate}
		p, err := s.Schedule(t.Context(), w)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ms := func(p *core.Plan) float64 { return p.Metrics["simulated_iteration_ms"] }
	with, without := plan(false, 0, 0), plan(false, -1, 0)
	t.Logf("1F1B chain, uno-4 / 16: %.2f ms with the ladder (%v candidates), %.2f without (%v)", ms(with), with.Metrics["candidates"], ms(without), without.Metrics["candidates"])
	if !(ms(with) > 0 && ms(without) >= 1.04*ms(with)) {
		t.Errorf("1F1B chain, uno-4 / 16: %.2f ms with the ladder, %.2f without: want 4%% faster or more", ms(with), ms(without))
	}
	capB := with.Metrics["dp_mem_cap_bytes"]
	if capB <= 0 || without.Metrics["dp_mem_cap_bytes"] != 0 {
		t.Errorf("dp_mem_cap_bytes: %v with the ladder, %v without", capB, without.Metrics["dp_mem_cap_bytes"])
	}
	if a := with.Alternatives; len(a) == 0 || !strings.Contains(a[0].Description, "DP held to "+core.FormatBytes(int64(capB))) {
		t.Errorf("alternatives %+v: want the chosen plan described with the DP's cap", a)
	}
	if mem := cl.Devices[0].MemBytes; with.Metrics["predicted_peak_bytes"] > float64(mem) {
		t.Errorf("the ladder's plan needs %v B, over the devices' %d", with.Metrics["predicted_peak_bytes"], mem)
	}
	if with.Metrics["candidates"] <= without.Metrics["candidates"] {
		t.Errorf("candidates: %v with the ladder, %v without", with.Metrics["candidates"], without.Metrics["candidates"])
	}
	if gp := plan(true, 0, 0); ms(gp) > ms(with) {
		t.Errorf("graphpipe %.2f ms, slower than the 1F1B chain's %.2f with the ladder", ms(gp), ms(with))
	}
	// Without simulation the estimate alone would choose: no ladder.
	if p, q := plan(false, 0, -1), plan(false, -1, -1); p.Metrics["candidates"] != q.Metrics["candidates"] {
		t.Errorf("without simulation: %v candidates with the ladder on, %v off", p.Metrics["candidates"], q.Metrics["candidates"])
	}

	// The gate.
	s := &Scheduler{}
	c, _ := costsOn(t, w, cl, prof, 16)
	if n := s.ladderCaps(c); n != DefaultMemCaps {
		t.Errorf("uno-4 on 16 devices: %d caps, want %d", n, DefaultMemCaps)
	}
	if n := (&Scheduler{MemCaps: 5}).ladderCaps(c); n != 5 {
		t.Errorf("MemCaps 5: %d caps", n)
	}
	one, cl1, prof1 := rooflineWorkload(t, "uno", core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}, 8192, 1)
	if c1, _ := costsOn(t, one, cl1, prof1, 16); s.ladderCaps(c1) != 0 {
		t.Error("one device: a ladder")
	}
	big, bcl, bprof := bigUno(t, 256)
	if cb, _ := costsOn(t, big, bcl, bprof, 16); s.ladderCaps(cb) != 0 {
		t.Errorf("%d ops: a ladder (at most %d)", len(big.Ops), smallOps)
	}
}

// TestMemCapsOption: the registry's memcaps option takes an integer
// (negative: none) and refuses the rest with what it wants; the option
// is part of the reuse key, so a kept choice is not rebuilt under
// another count.
func TestMemCapsOption(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want int
		ok   bool
	}{{"16", 16, true}, {"0", 0, true}, {"-1", -1, true}, {"many", 0, false}, {"1.5", 0, false}, {"", 0, false}} {
		s, err := core.NewScheduler("1f1b", map[string]string{"memcaps": tc.v})
		if !tc.ok {
			if err == nil || !strings.Contains(err.Error(), "memcaps") || !strings.Contains(err.Error(), "integer") {
				t.Errorf("memcaps=%q: %v, want an error saying what memcaps takes", tc.v, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("memcaps=%q: %v", tc.v, err)
			continue
		}
		if got := s.(*Scheduler).MemCaps; got != tc.want {
			t.Errorf("memcaps=%q: MemCaps %d, want %d", tc.v, got, tc.want)
		}
	}
	w := &core.Workload{Model: &core.Model{}}
	a, _ := shapeOf(&Scheduler{MemCaps: 4}, w)
	b, _ := shapeOf(&Scheduler{MemCaps: 8}, w)
	if a == b {
		t.Error("the reuse key does not tell memcaps=4 from memcaps=8")
	}
}
