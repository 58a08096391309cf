package sim

import (
	"slices"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data"
	_ "github.com/gnnkit/gnnkit/models"
)

// TestFieldShapeMatchesKHop: fieldShape builds core.Graph.KHop's induced
// graph (the executor's view of a subgraph unit), so the shape pass over
// it gives every op the output, held and backward bytes the pass over
// KHop's gives, for GCN, GAT, SAGE and the multi-branch GNN of 1–3 layers
// on a power-law graph, with seeds of any size; and the graphs are equal
// (without full, up to the outermost hop's rows, which get no edges: these
// one-graph models' forwards read none of them, so outputs and held bytes
// still match — what UnitOuts takes — while a first layer's backward
// peak, which walks its whole graph, does not).
func TestFieldShapeMatchesKHop(t *testing.T) {
	spec, err := data.ParseSynthetic("rmat,nodes=3000,edges=20000,feat=16,classes=4")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := data.Generate(spec)
	if err != nil {
		t.Fatal(err)
	}
	g := ds.Graph
	mark := make([]int32, g.NumDst)
	stamp := int32(0)
	pos := make([]int32, g.NumDst)
	for _, model := range []string{"gcn", "gat", "sage", "mbgnn"} {
		for layers := 1; layers <= 3; layers++ {
			m, err := core.BuildModel(model, core.ModelConfig{InDim: 16, Hidden: 8, Classes: 4, Layers: layers, Heads: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{1, 17, 300} {
				seeds := make([]int32, n)
				for i := range seeds {
					seeds[i] = int32(i * (g.NumDst / n))
				}
				want, err := subgraphShapes(m, g, 16, seeds)
				if err != nil {
					t.Fatal(err)
				}
				for _, full := range []bool{true, false} {
					stamp++
					view, ends, ok := fieldShape(g, seeds, m.Config.Layers, mark, pos, stamp, full)
					if !ok {
						t.Fatalf("%s: fieldShape rejects valid seeds", model)
					}
					local := make([]int32, ends[0])
					for i := range local {
						local[i] = int32(i)
					}
					ks, err := g.KHop(seeds, m.Config.Layers)
					if err != nil {
						t.Fatal(err)
					}
					inner := ends[len(ends)-1] // full: every row's edges
					if !full {
						inner = ends[len(ends)-2]
					}
					e := ks.Offsets[inner]
					if !slices.Equal(ends, ks.HopEnds) || view.NumDst != ks.NumDst || !slices.Equal(view.Offsets[:inner+1], ks.Offsets[:inner+1]) ||
						!slices.Equal(view.Indices[:e], ks.Indices[:e]) || (full && view.NumEdges() != ks.NumEdges()) {
						t.Fatalf("%s, %d layers, %d seeds, full %v: the field's graph is not KHop's", model, layers, n, full)
					}
					got, err := shapes(m, view, 16, local, ends)
					if err != nil {
						t.Fatalf("%s, %d layers, %d seeds: %v", model, layers, n, err)
					}
					for _, c := range []struct {
						what      string
						got, want []int64
					}{{"outputs", got.out, want.out}, {"held", got.held, want.held}, {"backward peaks", got.bwdPeak, want.bwdPeak},
						{"input gradients", got.gradIn, want.gradIn}, {"output gradients", got.gradOut, want.gradOut}} {
						if !full && c.what != "outputs" && c.what != "held" {
							continue // the backward of a first layer walks its whole graph
						}
						if !slices.Equal(c.got, c.want) {
							t.Errorf("%s, %d layers, %d seeds, full %v: %s %v, want %v", model, layers, n, full, c.what, c.got, c.want)
						}
					}
				}
			}
		}
	}
}

// TestFieldShapeRejectsBadSeeds: seeds KHop rejects (out of range, listed
// twice) give no field, so UnitOuts falls back to the unit's size.
func TestFieldShapeRejectsBadSeeds(t *testing.T) {
	g, err := core.Undirected(4, []int32{0, 1, 2}, []int32{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	mark, pos := make([]int32, 4), make([]int32, 4)
	for i, seeds := range [][]int32{{0, 0}, {4}, {-1}} {
		if _, err := g.KHop(seeds, 1); err == nil {
			t.Fatalf("KHop accepts %v", seeds)
		}
		if _, _, ok := fieldShape(g, seeds, 1, mark, pos, int32(i+1), true); ok {
			t.Errorf("fieldShape accepts %v, which KHop rejects", seeds)
		}
	}
	if _, ends, ok := fieldShape(g, []int32{0}, 2, mark, pos, 9, true); !ok || !slices.Equal(ends, []int{1, 2, 3}) {
		t.Errorf("fieldShape of seed 0 over 2 hops: ends %v, ok %v; want [1 2 3]", ends, ok)
	}
}
