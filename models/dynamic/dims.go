package dynamic

import (
	"strings"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/models/nn"
)

// OpDims returns the size each op of m computes for one group: an op over
// graph G (an aggregation, the pair scorer) at graphs(G) — the graph's
// destination rows and its edges as the runtime binds it (self-loops
// included; for the pairs graph, the pairs) —, every other op at the rows
// of its first input (the model's inputs: rows; an aggregation's output:
// its graph's rows; the pair scorer's: its pairs; a parameter: its first
// dimension, as EvolveGCN's LSTM over the GCN weight). An op's graph is
// what it says (GraphName), else the graph of its edge weights "G.w",
// else Pairs for the pair scorer. A simulator costs each op at these sizes
// (sim.SimulateUnits); Op.Cost(OpDims(...)[i]) estimates its work.
func OpDims(m *core.Model, rows int64, graphs func(name string) core.Dims) []core.Dims {
	d, _ := opSizes(m, rows, graphs)
	return d
}

// OpOutRows returns the rows of each op's output for the sizes OpDims
// describes (an op's output bytes are its rows times its width).
func OpOutRows(m *core.Model, rows int64, graphs func(name string) core.Dims) []int64 {
	_, o := opSizes(m, rows, graphs)
	return o
}

func opSizes(m *core.Model, rows int64, graphs func(name string) core.Dims) ([]core.Dims, []int64) {
	r := map[string]int64{}
	for _, in := range m.Inputs {
		r[in] = rows
	}
	for _, p := range m.Params {
		n := int64(1)
		if len(p.Shape) > 0 {
			n = int64(p.Shape[0])
		}
		r[p.Name] = n
	}
	out := make([]core.Dims, len(m.Ops))
	outRows := make([]int64, len(m.Ops))
	for i, op := range m.Ops {
		ins := op.Inputs()
		d := core.Dims{}
		o := int64(-1)
		if g := graphOf(op); g != "" {
			d = graphs(g)
			o = d.Nodes
			if isPairScore(op) {
				o = d.Edges
			}
		} else if len(ins) > 0 {
			d.Nodes = r[ins[0]]
		}
		if o < 0 {
			o = d.Nodes
		}
		out[i], outRows[i] = d, o
		for _, v := range op.Outputs() {
			r[v] = o
		}
	}
	return out, outRows
}

func graphOf(op core.Op) string {
	if g, ok := op.(interface{ GraphName() string }); ok {
		return g.GraphName()
	}
	switch op.(type) {
	case *nn.Aggregate:
		for _, in := range op.Inputs() {
			if g, ok := strings.CutSuffix(in, ".w"); ok {
				return g
			}
		}
	case *nn.PairScore:
		return Pairs
	}
	return ""
}

func isPairScore(op core.Op) bool {
	switch op.(type) {
	case *nn.PairScore, pairScore:
		return true
	}
	return false
}
