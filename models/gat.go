package models

import (
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/models/nn"
)

// GAT builds the graph attention network of Veličković et al. (2018) with
// the semantics of PyG's GATConv and its GAT example. Each layer is
//
//	dropout(x) → z = Linear(W)                          N x H*F
//	el = HeadDot(z, att_dst), er = HeadDot(z, att_src)  N x H
//	e  = LeakyReLU_0.2(el[dst] + er[src])               E x H
//	α  = dropout_attn(EdgeSoftmax(e))                   E x H
//	y  = Aggregate(adj, α, z) + b                       N x H*F
//
// Hidden layers have cfg.Heads heads of cfg.Hidden features, concatenated,
// followed by ELU; the last layer has one head of cfg.Classes features
// (PyG's concat=False over one head is the identity). The graph gets
// self-loops and no weights. Weight decay applies to every parameter, as
// in the reference (Adam's weight_decay over model.parameters()).
func GAT(cfg core.ModelConfig) (*core.Model, error) {
	cfg, err := withDefaults("gat", cfg, 8)
	if err != nil {
		return nil, err
	}
	if cfg.Heads == 0 {
		cfg.Heads = 8
	}
	b := newBuilder("gat", cfg, core.GraphSpec{Name: Adj, SelfLoops: true, Weights: core.WeightsNone})
	h, in := Features, cfg.InDim
	for l := 0; l < cfg.Layers; l++ {
		last := l == cfg.Layers-1
		heads, feats := cfg.Heads, cfg.Hidden
		if last {
			heads, feats = 1, cfg.Classes
		}
		out := heads * feats
		conv := layerName("conv", l)
		w := b.param(conv+".weight", core.InitGlorot, true, in, out)
		attSrc := b.param(conv+".att_src", core.InitGlorot, true, 1, out)
		attDst := b.param(conv+".att_dst", core.InitGlorot, true, 1, out)
		bias := b.param(conv+".bias", core.InitZeros, true, 1, out)

		drop, lin := layerName("drop", l), layerName("lin", l)
		el, er := layerName("att_dst", l), layerName("att_src", l)
		score, leaky, alpha, adrop := layerName("score", l), layerName("leaky", l), layerName("softmax", l), layerName("attn_drop", l)
		agg, y := layerName("agg", l), layerName("bias", l)
		if last {
			y = Logits
		}
		b.op(nn.NewDropout(drop, h, drop, cfg.Dropout, in))
		b.op(nn.NewLinear(lin, drop, w, lin, in, out))
		// The layer's block: its output is read within L-1-l hops of the
		// targets (the whole graph unless the runtime trims rows); the
		// destination scores keep the block's destination rows.
		hop := cfg.Layers - 1 - l
		adj, elDst := core.AtHop(Adj, hop), layerName("att_dst_rows", l)
		b.op(nn.NewHeadDot(el, lin, attDst, el, heads, feats))
		b.op(nn.NewTrim(elDst, el, elDst, hop, heads))
		b.op(nn.NewHeadDot(er, lin, attSrc, er, heads, feats))
		b.op(nn.NewEdgeScore(score, adj, elDst, er, score, heads))
		b.op(nn.NewLeakyReLU(leaky, score, leaky, 0.2, heads).OnEdges())
		b.op(nn.NewEdgeSoftmax(alpha, adj, leaky, alpha, heads))
		b.op(nn.NewDropout(adrop, alpha, adrop, cfg.AttnDropout, heads).OnEdges())
		b.op(nn.NewAggregate(agg, adj, core.ReduceSum, lin, adrop, agg, out, heads))
		b.op(nn.NewBias(layerName("bias", l), agg, bias, y, out))
		h, in = y, out
		if !last {
			elu := layerName("elu", l)
			b.op(nn.NewELU(elu, h, elu, 1, out))
			h = elu
		}
		b.m.LayerOutputs = append(b.m.LayerOutputs, h)
	}
	return b.finish()
}
