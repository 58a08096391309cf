package sim

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	_ "github.com/gnnkit/gnnkit/models"
)

// TestCostShare: a cost model's clones and its devices of one profile
// share devProf.costs' answers (one slice, computed once), which equal
// the profile's own interpolation, from goroutines side by side; and the
// share starts over past its bound.
func TestCostShare(t *testing.T) {
	m, err := core.BuildModel("uno", core.ModelConfig{InDim: 64, Hidden: 32, Classes: 4, Layers: 2, Branches: 3})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := Preset("pcie-a100", 4)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := core.Undirected(256, nil, nil)
	batch := make([]int32, 256)
	for i := range batch {
		batch[i] = int32(i)
	}
	w := core.NewWorkload(m, g, 64, batch, cl.Infos(), 1)
	cm, err := NewCostModel(w, nil, cl)
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int64{1, 7, 64, 256}
	got := make([][][]Cost, 4) // by goroutine, by size
	var wg sync.WaitGroup
	for k := range got {
		c := cm.Clone()
		wg.Go(func() {
			dp := c.prof[cl.Devices[k].ID]
			for _, rows := range sizes {
				got[k] = append(got[k], dp.costs(rows, 0, false))
			}
		})
	}
	wg.Wait()
	for i, rows := range sizes {
		dp := cm.prof[cl.Devices[0].ID]
		want := make([]Cost, len(dp.idx)+1)
		for o, j := range dp.idx {
			want[o] = dp.p.Ops[j].At(rows, 0)
		}
		want[len(dp.idx)] = dp.p.SetupFor(rows, 0, false)
		for k := range got {
			if !slices.Equal(got[k][i], want) {
				t.Fatalf("clone %d, %d rows: the costs differ from the profile's", k, rows)
			}
			if &got[k][i][0] != &got[0][i][0] {
				t.Errorf("clone %d, %d rows: computed again, not shared", k, rows)
			}
		}
	}
	sh := newCostShare(shareCosts) // the smallest bound: 8 entries
	for rows := range int64(20) {
		sh.put([3]int64{rows, 0, 0}, []Cost{{}})
		if len(sh.m) > 8 {
			t.Fatalf("%d entries kept, bound 8", len(sh.m))
		}
	}
	if sh.get([3]int64{19, 0, 0}) == nil {
		t.Error("the latest entry is gone")
	}
}

// TestOpReads: the per-op reads unitInputs sums give what
// core.Model.InputsRead gives for any set of ops: whether they read the
// features, and how many graphs' edge weights.
func TestOpReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	withWeights := 0
	for _, name := range []string{"gcn", "gat", "sage", "mbgnn", "uno", "dlrm"} {
		m, err := core.BuildModel(name, core.ModelConfig{InDim: 16, Hidden: 8, Classes: 4, Layers: 2, Heads: 2, Branches: 2})
		if err != nil {
			t.Fatal(err)
		}
		cm := &CostModel{w: &core.Workload{Model: m}, opReads: &opReads{}}
		rd := cm.reads()
		if rd.weighted != m.WeightedGraphs() {
			t.Fatalf("%s: %d weighted graphs, want %d", name, rd.weighted, m.WeightedGraphs())
		}
		for range 50 {
			var ops []int
			for o := range m.Ops {
				if rng.IntN(3) == 0 {
					ops = append(ops, o)
				}
			}
			feat, weights := m.InputsRead(ops)
			if len(weights) > 0 {
				withWeights++
			}
			var gotFeat bool
			seen := map[int]bool{}
			for _, o := range ops {
				gotFeat = gotFeat || rd.feat[o]
				for _, g := range rd.weights[o] {
					seen[g] = true
				}
			}
			if gotFeat != feat || len(seen) != len(weights) {
				t.Fatalf("%s, ops %v: features %v and %d weights, want %v and %d (%v)", name, ops, gotFeat, len(seen), feat, len(weights), weights)
			}
		}
	}
	if withWeights == 0 {
		t.Error("no set of ops read a graph's edge weights: the test checks features only")
	}
}
