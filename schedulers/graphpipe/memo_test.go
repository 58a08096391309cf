package graphpipe

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// TestSearchMemo: a search that shares its costs, estimates and chain
// read-outs between its walks (searchMemo) and estimates side by side
// (estimateAll) chooses what a search keeping nothing does, metric for
// metric and task for task, with m searched (GraphPipe's walk, then each
// chain baseline's: chainWalks) and fixed; the baselines' walks find the
// read-outs GraphPipe's made; and every candidate's kept estimate is what
// a fresh costs, one estimate at a time, gives.
func TestSearchMemo(t *testing.T) {
	// Tight memory: the walks cross counts where little fits.
	w, cl, prof, cm, devs := unoWithMemory(t, core.ModelConfig{InDim: 256, Hidden: 512, Classes: 2, Layers: 3, Branches: 3}, 1024, 8, 28<<20)
	plan := func(p *core.Plan) string {
		var b []byte
		for _, k := range slices.Sorted(maps.Keys(p.Metrics)) {
			b = fmt.Appendf(b, "%s=%v\n", k, p.Metrics[k])
		}
		for _, tk := range p.Tasks {
			b = fmt.Appendf(b, "%v %v %v %v %v\n", tk.Kind, tk.Device, tk.Unit, tk.Ops, tk.Deps)
		}
		return string(b)
	}
	for _, s := range []*Scheduler{
		{Graph: true, Kind: OneFOneB, Cluster: cl, Profile: prof},
		{Graph: true, Kind: OneFOneB, Cluster: cl, Profile: prof, GPipeOrder: true},
		{Graph: true, Kind: OneFOneB, Cluster: cl, Profile: prof, MicroBatches: 8},
		{Graph: true, Kind: OneFOneB, Cluster: cl, Profile: prof, ChainDP: ChainPiper},
		{Kind: OneFOneB, Cluster: cl, Profile: prof},
	} {
		name := fmt.Sprintf("%s gpipe=%v m=%d dp=%v", s.Name(), s.GPipeOrder, s.MicroBatches, s.ChainDP)
		plain := *s
		want, err := plain.search(t.Context(), w, cm, devs)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		kept := *s
		kept.memo = &searchMemo{}
		got, err := kept.search(t.Context(), w, cm, devs)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if plan(got) != plan(want) {
			t.Errorf("%s: the plan differs with the memo:\n%s\nwithout:\n%s", name, plan(got), plan(want))
		}
		var hits, preds int64
		for _, c := range kept.memo.costs {
			hits += c.memo.hits.Load()
			preds += int64(len(c.memo.preds))
		}
		if preds == 0 {
			t.Errorf("%s: no estimate kept", name)
		}
		if s.Graph && s.MicroBatches == 0 && hits == 0 {
			t.Errorf("%s: the chain baselines' walks looked nothing up", name)
		}
		t.Logf("%s: %.3f ms at m = %v, peak %.0f MiB; %d counts, %d estimates kept, %d lookups answered", name, got.Metrics["simulated_iteration_ms"], got.Metrics["micro_batches"], got.Metrics["predicted_peak_bytes"]/(1<<20), len(kept.memo.costs), preds, hits)
	}
	// Every candidate's estimate, made side by side and kept, then
	// looked up in a second run, is a fresh costs' own, one at a time.
	s := &Scheduler{Graph: true, Kind: OneFOneB, Cluster: cl, Profile: prof, GPipeOrder: true, memo: &searchMemo{}}
	for run := range 2 {
		e, err := s.evalM(t.Context(), w, cm, devs, 8, nil)
		if err != nil {
			t.Fatal(err)
		}
		fresh := (*searchMemo)(nil).costsAt(cm, w, devs, 8, s.Step, float64(s.planOptions().BucketBytes)) // keeps nothing
		n := 0
		for _, pool := range e.pools {
			for _, cd := range pool {
				n++
				if want := fresh.price(cd.part, cd.kind); cd.pred != want {
					t.Fatalf("run %d: %s (%s): estimate %+v, fresh %+v", run, describe(cd), cd.kind, cd.pred, want)
				}
			}
		}
		if n < 20 {
			t.Errorf("run %d: only %d candidates", run, n)
		}
		if hits := e.c.memo.hits.Load(); (run == 0) != (hits < int64(n)) {
			t.Errorf("run %d: %d lookups answered for %d candidates", run, hits, n)
		}
	}
}

// TestTableFrom: a chain table at cap r seeded with a larger cap's
// budgets up to r (chainDP.tableFrom) is the table computed whole, cell
// for cell, at every cap, under both schedules and both DP passes.
func TestTableFrom(t *testing.T) {
	// The benchmark's uno-4 on A100s of 512 MiB, where the chain DP
	// pipelines (one stage of every replica does not fit).
	w, _, _, cm, devs := unoWithMemory(t, core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}, 8192, 16, 512<<20)
	c := newCosts(cm, w, devs, 16, StepOwners)
	D := len(devs)
	for _, cv := range []*costs{c, c.amortized()} {
		x := newChainDP(cv)
		for _, kind := range []Kind{OneFOneB, GPipe} {
			seed := x.table(D, D, kind)
			if s := seed[0][D].stages; s < 2 || math.IsInf(seed[0][D].t, 1) {
				t.Fatalf("amortize=%v %v: the whole budget's answer has %d stages (%v s per micro-batch); want a pipeline", cv.amortize, kind, s, seed[0][D].t)
			}
			for _, r := range replicaCaps(D, 0) {
				want, got := x.table(D, r, kind), x.tableFrom(D, r, kind, seed)
				for i := range want {
					if !slices.Equal(got[i], want[i]) {
						t.Fatalf("amortize=%v %v cap %d: row %d differs:\n%v\nwhole:\n%v", cv.amortize, kind, r, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// unoWithMemory is uno of cfg over samples rows on n pcie-a100 devices
// of memory bytes each (the devices' memory set as the tests above set
// it), with the preset's roofline profile, its cost model and device IDs.
func unoWithMemory(t *testing.T, cfg core.ModelConfig, samples, n int, memory int64) (*core.Workload, *sim.Cluster, *sim.Profile, *sim.CostModel, []core.DeviceID) {
	t.Helper()
	w, cl, prof := rooflineWorkload(t, "uno", cfg, samples, n)
	for i := range cl.Devices {
		cl.Devices[i].MemBytes = memory
	}
	w.Devices = cl.Infos()
	cm, devs := costModelOf(t, w, prof, cl)
	return w, cl, prof, cm, devs
}

// TestFitsMemo: the chain table's memory check remembered per row
// (chainDP.fitsMemo) answers every stage, replica count and in-flight
// count as costs.fits does, asked in any order, on devices where some
// stages fit and some do not.
func TestFitsMemo(t *testing.T) {
	w, _, _, cm, devs := unoWithMemory(t, core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}, 8192, 16, 512<<20)
	c := newCosts(cm, w, devs, 16, StepOwners)
	D := len(devs)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, kind := range []Kind{OneFOneB, GPipe} {
		x := newChainDP(c)
		rows := x.rows()
		fits := x.fitsMemo(rows, D, D, kind)
		var yes, no int
		for i := x.n - 1; i >= 0; i-- {
			x.advance(rows, i)
			var asks [][3]int
			for j := i + 1; j <= x.n; j++ {
				for d := 1; d <= D; d++ {
					for W := d; W <= D; W++ {
						asks = append(asks, [3]int{j, d, W})
					}
				}
			}
			rng.Shuffle(len(asks), func(a, b int) { asks[a], asks[b] = asks[b], asks[a] })
			for _, a := range asks {
				j, d, W := a[0], a[1], a[2]
				want := c.fits(x.stat(rows, j), kind, W, d)
				if got := fits(j, d, W); got != want {
					t.Fatalf("%v: ops [%d, %d) on %d replicas with %d in flight: fits %v, want %v", kind, i, j, d, W, got, want)
				}
				if want {
					yes++
				} else {
					no++
				}
			}
		}
		if yes == 0 || no == 0 {
			t.Errorf("%v: %d stages fit, %d do not: want some of each", kind, yes, no)
		}
	}
}
