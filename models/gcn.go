package models

import (
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/models/nn"
)

// GCN builds the graph convolutional network of Kipf & Welling (2017) as
// in PyG's GCNConv example. Each of cfg.Layers layers is
//
//	dropout → Linear(W) → Aggregate(adj, w = D^-1/2 (A+I) D^-1/2) → Bias(b)
//
// with a ReLU between layers. The graph gets self-loops and GCN weights.
// Weight decay applies to the first layer's weight and bias only, as in
// the reference (PyG's example decays conv1's parameters).
func GCN(cfg core.ModelConfig) (*core.Model, error) {
	cfg, err := withDefaults("gcn", cfg, 16)
	if err != nil {
		return nil, err
	}
	b := newBuilder("gcn", cfg, core.GraphSpec{Name: Adj, SelfLoops: true, Weights: core.WeightsGCN})
	h, in := Features, cfg.InDim
	for l := 0; l < cfg.Layers; l++ {
		last := l == cfg.Layers-1
		out := cfg.Hidden
		if last {
			out = cfg.Classes
		}
		w := b.param(layerName("conv", l)+".weight", core.InitGlorot, l == 0, in, out)
		bias := b.param(layerName("conv", l)+".bias", core.InitZeros, l == 0, 1, out)
		drop, lin, agg, y := layerName("drop", l), layerName("lin", l), layerName("agg", l), layerName("bias", l)
		if last {
			y = Logits
		}
		b.op(nn.NewDropout(drop, h, drop, cfg.Dropout, in))
		b.op(nn.NewLinear(lin, drop, w, lin, in, out))
		// The layer's block: its output is read within L-1-l hops of the
		// targets (the whole graph unless the runtime trims rows).
		adj := core.AtHop(Adj, cfg.Layers-1-l)
		b.op(nn.NewAggregate(agg, adj, core.ReduceSum, lin, AdjW, agg, out, 1))
		b.op(nn.NewBias(layerName("bias", l), agg, bias, y, out))
		h, in = y, out
		if !last {
			relu := layerName("relu", l)
			b.op(nn.NewReLU(relu, h, relu, out))
			h = relu
		}
		b.m.LayerOutputs = append(b.m.LayerOutputs, h)
	}
	return b.finish()
}
