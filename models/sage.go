package models

import (
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/models/nn"
)

// SAGE builds GraphSAGE with mean aggregation (Hamilton et al., 2017) with
// the semantics of PyG's SAGEConv (root weight on, no normalisation):
//
//	h'_i = W_self·h_i + W_neigh·mean_{j→i} h_j + b
//
// with ReLU and dropout between layers. The graph has no self-loops; the
// mean is a weighted sum under the 1/deg(dst) weights the runtime prepares
// (core.WeightsMean), so nodes without in-edges get a zero neighbour term.
// The neighbour term is transformed before aggregation when that is
// cheaper (out < in), as DGL's SAGEConv does; the result is the same.
// Weight decay applies to every parameter (the optimizer's setting over
// model.parameters() in PyG's examples).
func SAGE(cfg core.ModelConfig) (*core.Model, error) {
	cfg, err := withDefaults("sage", cfg, 16)
	if err != nil {
		return nil, err
	}
	b := newBuilder("sage", cfg, core.GraphSpec{Name: Adj, SelfLoops: false, Weights: core.WeightsMean})
	h, in := Features, cfg.InDim
	for l := 0; l < cfg.Layers; l++ {
		last := l == cfg.Layers-1
		out := cfg.Hidden
		if last {
			out = cfg.Classes
		}
		conv := layerName("conv", l)
		wSelf := b.param(conv+".lin_self.weight", core.InitGlorot, true, in, out)
		wNeigh := b.param(conv+".lin_neigh.weight", core.InitGlorot, true, in, out)
		bias := b.param(conv+".bias", core.InitZeros, true, 1, out)
		self, agg, neigh, sum, y := layerName("self", l), layerName("agg", l), layerName("neigh", l), layerName("add", l), layerName("bias", l)
		if last {
			y = Logits
		}
		// The layer's block and its destination rows: the output is read
		// within L-1-l hops of the targets (all rows unless trimmed).
		hop := cfg.Layers - 1 - l
		adj, root := core.AtHop(Adj, hop), layerName("root", l)
		b.op(nn.NewTrim(root, h, root, hop, in))
		b.op(nn.NewLinear(self, root, wSelf, self, in, out))
		if out < in { // transform, then aggregate the narrower rows
			b.op(nn.NewLinear(neigh, h, wNeigh, neigh, in, out))
			b.op(nn.NewAggregate(agg, adj, core.ReduceSum, neigh, AdjW, agg, out, 1))
			b.op(nn.NewAdd(sum, self, agg, sum, out))
		} else {
			b.op(nn.NewAggregate(agg, adj, core.ReduceSum, h, AdjW, agg, in, 1))
			b.op(nn.NewLinear(neigh, agg, wNeigh, neigh, in, out))
			b.op(nn.NewAdd(sum, self, neigh, sum, out))
		}
		b.op(nn.NewBias(layerName("bias", l), sum, bias, y, out))
		h, in = y, out
		if !last {
			relu, drop := layerName("relu", l), layerName("drop", l)
			b.op(nn.NewReLU(relu, h, relu, out))
			b.op(nn.NewDropout(drop, relu, drop, cfg.Dropout, out))
			h = drop
		}
		b.m.LayerOutputs = append(b.m.LayerOutputs, h)
	}
	return b.finish()
}
