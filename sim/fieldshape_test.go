package sim

import (
	"math"
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
	g := synthetic(t, "rmat,nodes=3000,edges=20000,feat=16,classes=4")
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
					if got.readRoot != want.readRoot || want.readRoot != (model == "mbgnn") {
						t.Errorf("%s: reads the field's whole graph: %v (KHop's: %v); only the multi-branch GNN's towers should", model, got.readRoot, want.readRoot)
					}
					for _, c := range []struct {
						what      string
						got, want []int64
					}{{"outputs", got.out, want.out}, {"held", got.held, want.held}, {"edges read", got.edges, want.edges}, {"backward peaks", got.bwdPeak, want.bwdPeak},
						{"input gradients", got.gradIn, want.gradIn}, {"output gradients", got.gradOut, want.gradOut}} {
						if !full && (got.readRoot || c.what != "outputs" && c.what != "held" && c.what != "edges read") {
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

// TestGraphOpsPricedByTheirEdges: a subgraph unit's aggregation is priced
// by the edges of the hop block it reads, not by its output rows — on a
// power-law graph a 1-hop block holds the hubs' edges, far more per row
// than the whole graph. With a roofline profile (an aggregation's cost
// linear in its edges) the unit's first aggregation costs the whole
// graph's in the ratio of their edges; priced by its output rows it came
// out 6x under.
func TestGraphOpsPricedByTheirEdges(t *testing.T) {
	g := synthetic(t, "rmat,nodes=20000,edges=200000,feat=16,classes=4")
	m, err := core.BuildModel("gcn", core.ModelConfig{InDim: 16, Hidden: 16, Classes: 4, Layers: 2})
	if err != nil {
		t.Fatal(err)
	}
	targets := make([]int32, 200)
	for i := range targets {
		targets[i] = int32(i * (g.NumDst / len(targets)))
	}
	c, err := Preset("pcie-a100", 1)
	if err != nil {
		t.Fatal(err)
	}
	w := core.NewWorkload(m, g, 16, targets, c.Infos(), 1)
	prof, err := Roofline(w, c.Devices[0])
	if err != nil {
		t.Fatal(err)
	}
	cm, err := NewCostModel(w, prof, c)
	if err != nil {
		t.Fatal(err)
	}
	u := core.Unit{Targets: targets, LossWeight: 1, Subgraph: true}
	out, opEdges := cm.unitShape(u)
	if out == nil {
		t.Fatal("no shape for the unit")
	}
	agg := -1
	for o, op := range w.Ops {
		if op.Kind == core.KindGraph {
			agg = o // the first aggregation: into the 1-hop rows
			break
		}
	}
	e, E := opEdges[agg], int64(g.NumEdges())
	rowsFrac := float64(out[agg]) / float64(prof.Ops[agg].Points[len(prof.Ops[agg].Points)-1].OutBytes)
	if edgesFrac := float64(e) / float64(E); edgesFrac < 2*rowsFrac {
		t.Fatalf("the 1-hop block has %.3f of the edges and %.3f of the rows: not a test of edges against rows", edgesFrac, rowsFrac)
	}
	got := cm.UnitOps(c.Devices[0].ID, u)[agg]
	if got.OutBytes != out[agg] {
		t.Errorf("the unit's first aggregation outputs %d bytes priced, %d shaped: sizes follow the output, not the edges", got.OutBytes, out[agg])
	}
	whole := prof.Ops[agg].At(int64(g.NumDst), E)
	launch := c.Devices[0].Launch
	ratio := float64(got.Fwd+got.Bwd-2*launch) / float64(whole.Fwd+whole.Bwd-2*launch)
	if want := float64(e) / float64(E); math.Abs(ratio-want) > 0.05*want {
		t.Errorf("the unit's first aggregation costs %.3f of the whole graph's; its block has %.3f of the edges (%.3f of the rows)", ratio, want, rowsFrac)
	}
}

// synthetic is the graph of a generated dataset (data.Open of
// "synthetic:"+spec).
func synthetic(t *testing.T, spec string) *core.Graph {
	t.Helper()
	ds, err := data.Open("synthetic:" + spec)
	if err != nil {
		t.Fatal(err)
	}
	return ds.Graph
}

// subgraphShapes is shapes over core.Graph.KHop's view of targets' field:
// the reference fieldShape is checked against.
func subgraphShapes(m *core.Model, g *core.Graph, featDim int, targets []int32) (*shapeOut, error) {
	ks, err := g.KHop(targets, max(m.Config.Layers, 0))
	if err != nil {
		return nil, err
	}
	local := make([]int32, len(targets))
	for i := range local {
		local[i] = int32(i)
	}
	view := &core.Graph{NumDst: ks.NumDst, NumSrc: ks.NumSrc, Offsets: ks.Offsets, Indices: ks.Indices}
	return shapes(m, view, featDim, local, ks.HopEnds)
}
