package graphpipe

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data"
	"github.com/gnnkit/gnnkit/sim"
)

// TestChainWalks: with m searched, each of GraphPipe's chain families is
// exactly its baseline's whole search (the baseline's walk over the
// counts, its candidates at each count, in order), whatever counts
// GraphPipe's own walk tried, the baselines' other counts included, and
// its DAG families are untouched; so GraphPipe is never slower than a
// chain baseline in the simulator. On the multi-branch GNN below, over 8
// PCIe A100s of 2 GiB, GraphPipe's walk alone had stopped at m = 2,
// 75.51 ms, where the 1F1B chain's found 58.97 ms at m = 1. Since the
// estimate prices only the gradients sent back, GraphPipe's own DAG plan
// wins there (54.86 ms at m = 1); the case now also checks that every
// walk crosses the count where nothing fits (a chain fits at m = 16, none
// at m = 8): stopping there, the 1F1B chain took 241.7 ms at m = 8. The
// ladder of memory caps that each search runs after its walk (ladder)
// then adds the same chains to the family as to its baseline.
func TestChainWalks(t *testing.T) {
	w, cl, prof := rooflineWorkload(t, "uno", core.ModelConfig{InDim: 256, Hidden: 512, Classes: 2, Layers: 3, Branches: 3}, 1024, 8)
	cm, devs := costModelOf(t, w, prof, cl)
	// (count, signature) of family f's candidates over evals, in order.
	walk := func(evals []*mEval, f int) []string {
		var out []string
		for _, e := range evals {
			for _, cd := range e.pools[f] {
				out = append(out, fmt.Sprintf("m%d %s", e.m, signature(cd.part, cd.kind)))
			}
		}
		return out
	}
	for _, s := range []*Scheduler{
		{Graph: true, Kind: OneFOneB, Cluster: cl, Profile: prof},
		{Graph: true, Kind: OneFOneB, Cluster: cl, Profile: prof, GPipeOrder: true},
	} {
		own, err := s.searchM(t.Context(), w, cm, devs)
		if err != nil {
			t.Fatal(err)
		}
		// GraphPipe's walk as it was (chainWalks rewrites its evals' pools).
		before := make([]*mEval, len(own))
		ownMs := map[int]bool{}
		for i, e := range own {
			cp := *e
			cp.pools = slices.Clone(e.pools)
			before[i] = &cp
			ownMs[e.m] = true
		}
		// Its walk as if it had tried only its first count, so that the
		// baselines' walks bring counts of their own.
		first := *before[slices.IndexFunc(before, func(e *mEval) bool { return e.m == 16 })]
		first.pools = slices.Clone(first.pools)
		short, err := s.chainWalks(t.Context(), w, cm, devs, []*mEval{&first})
		if err != nil {
			t.Fatal(err)
		}
		evals, err := s.chainWalks(t.Context(), w, cm, devs, own)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.IsSortedFunc(evals, func(a, b *mEval) int { return a.m - b.m }) {
			t.Errorf("gpipe=%v: counts out of ladder order", s.GPipeOrder)
		}
		for f, fam := range s.families() {
			if fam.dag {
				continue
			}
			base, err := s.baseline(fam).searchM(t.Context(), w, cm, devs)
			if err != nil {
				t.Fatal(err)
			}
			got, want := walk(evals, f), walk(base, 0)
			if !slices.Equal(got, want) || len(got) == 0 {
				t.Errorf("gpipe=%v, family %v: %d candidates, its baseline's walk %d; want the same, count by count", s.GPipeOrder, fam, len(got), len(want))
			}
			// And after the ladder of memory caps (ladder), which each
			// search runs on its walk's counts: the baseline's.
			ladderOn := func(s *Scheduler, evals []*mEval) []*mEval {
				out := make([]*mEval, len(evals))
				for i, e := range evals {
					cp := *e
					cp.pools = slices.Clone(e.pools)
					out[i] = &cp
				}
				if err := s.ladder(t.Context(), w, devs, out); err != nil {
					t.Fatal(err)
				}
				return out
			}
			lgot, lwant := walk(ladderOn(s, evals), f), walk(ladderOn(s.baseline(fam), base), 0)
			if !slices.Equal(lgot, lwant) || len(lgot) <= len(got) {
				t.Errorf("gpipe=%v, family %v, with the ladder: %d candidates (%d without), its baseline's %d; want the same, and more than without", s.GPipeOrder, fam, len(lgot), len(got), len(lwant))
			}
			if got := walk(short, f); !slices.Equal(got, want) {
				t.Errorf("gpipe=%v, family %v, GraphPipe's walk at m = 16 alone: %d candidates, its baseline's walk %d; want the same", s.GPipeOrder, fam, len(got), len(want))
			}
			for _, e := range base {
				if !ownMs[e.m] {
					t.Logf("gpipe=%v, family %v: m = %d from the baseline's walk alone", s.GPipeOrder, fam, e.m)
				}
			}
		}
		if len(short) < 2 || !slices.IsSortedFunc(short, func(a, b *mEval) int { return a.m - b.m }) {
			t.Errorf("gpipe=%v: from m = 16 alone, chainWalks gave %d counts; want the baselines' counts too, in ladder order", s.GPipeOrder, len(short))
		}
		for f, fam := range s.families() {
			if !fam.dag {
				continue
			}
			if got, want := walk(evals, f), walk(before, f); !slices.Equal(got, want) {
				t.Errorf("gpipe=%v: the DAG family %v changed: %d candidates, %d before", s.GPipeOrder, fam, len(got), len(want))
			}
			if got, want := walk(short, f), walk([]*mEval{before[slices.IndexFunc(before, func(e *mEval) bool { return e.m == 16 })]}, f); !slices.Equal(got, want) {
				t.Errorf("gpipe=%v: the DAG family %v gained candidates at the baselines' counts", s.GPipeOrder, fam)
			}
		}
	}

	if testing.Short() {
		t.Skip("the GNN case plans a 65,536-node graph three times")
	}
	ds, err := data.Open("synthetic:sbm,nodes=65536,feat=512,classes=16,avgdeg=10,train=512,val=0,test=0")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := core.BuildModel("mbgnn", core.ModelConfig{InDim: ds.FeatureDim, Hidden: 256, Classes: ds.NumClasses, Layers: 2, Branches: 4, Dropout: 0.5}) // as gnnkit plan builds it
	if err != nil {
		t.Fatal(err)
	}
	gcl, err := sim.Preset("pcie-a100", 8)
	if err != nil {
		t.Fatal(err)
	}
	for i := range gcl.Devices {
		gcl.Devices[i].MemBytes = 2 << 30
	}
	gw := core.NewWorkload(mod, ds.Graph, ds.FeatureDim, ds.Train, gcl.Infos(), 1)
	gprof, err := sim.Roofline(gw, gcl.Devices[0])
	if err != nil {
		t.Fatal(err)
	}
	iter, ms := map[string]float64{}, map[string]float64{}
	for _, s := range []*Scheduler{
		{Graph: true, Kind: OneFOneB, Cluster: gcl, Profile: gprof},
		{Kind: OneFOneB, Cluster: gcl, Profile: gprof},
		{Kind: GPipe, Cluster: gcl, Profile: gprof},
	} {
		p, err := s.Schedule(t.Context(), gw)
		if err != nil {
			t.Fatalf("%s: %v", s.Name(), err)
		}
		iter[s.Name()], ms[s.Name()] = p.Metrics["simulated_iteration_ms"], p.Metrics["micro_batches"]
		t.Logf("mbgnn-4, 8 devices of 2 GiB, %s: %.3f ms at m = %v", s.Name(), iter[s.Name()], p.Metrics["micro_batches"])
	}
	if iter["graphpipe"] > iter["1f1b"] || iter["graphpipe"] > iter["gpipe"] {
		t.Errorf("GraphPipe %.3f ms, slower than a chain: 1F1B %.3f ms, GPipe %.3f ms", iter["graphpipe"], iter["1f1b"], iter["gpipe"])
	}
	for _, name := range []string{"graphpipe", "1f1b", "gpipe"} {
		if ms[name] != 1 {
			t.Errorf("%s chose m = %v; want m = 1, past the count where nothing fits", name, ms[name])
		}
	}
}
