package models

import (
	"fmt"
	"math"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/models/nn"
)

// DefaultTableRows is the rows of each of dlrm's embedding tables when
// ModelConfig.TableRows is 0.
const DefaultTableRows = 1000

func init() {
	core.RegisterModel("mbgnn", MultiBranchGNN)
	core.RegisterModel("uno", Uno)
	core.RegisterModel("dlrm", DLRM)
}

// DLRM builds a DLRM-like model: a bottom MLP (cfg.Layers layers, default
// 2) over the dense features, cfg.Branches embedding tables (default 4,
// cfg.TableRows rows of cfg.Hidden each, default 1,000; GraphPipe's
// DLRM has 10⁶ rows of 64) looked up by synthetic categorical ids
// (nn.Embedding), the dense and embedded vectors summed (the interaction;
// DLRM proper takes their pairwise dot products), and a two-layer top MLP
// to the logits. The tables and the bottom MLP are parallel branches.
// With cfg.Dropout > 0 a dropout follows every hidden ReLU of both MLPs
// (at 0 the model has no dropout ops).
func DLRM(cfg core.ModelConfig) (*core.Model, error) {
	cfg, err := withDefaults("dlrm", cfg, 64)
	if err != nil {
		return nil, err
	}
	if cfg.Branches == 0 {
		cfg.Branches = 4
	}
	if cfg.Branches < 1 {
		return nil, fmt.Errorf("models: dlrm: Branches (embedding tables) must be positive, got %d", cfg.Branches)
	}
	tableRows := cfg.TableRows
	switch {
	case tableRows == 0:
		tableRows = DefaultTableRows
	case tableRows < 0:
		return nil, fmt.Errorf("models: dlrm: TableRows must be positive, got %d", cfg.TableRows)
	}
	if int64(tableRows) > math.MaxInt32 {
		return nil, fmt.Errorf("models: dlrm: TableRows %d is over 2³¹−1 (the lookups index rows with int32)", tableRows)
	}
	b := &builder{m: &core.Model{Name: "dlrm", Config: cfg, Inputs: []string{Features}, Output: Logits}}
	h, in := Features, cfg.InDim
	for l := 0; l < cfg.Layers; l++ {
		h = dropout(b, dense(b, fmt.Sprintf("bottom.l%d.", l), h, in, cfg.Hidden, true), cfg)
		in = cfg.Hidden
	}
	branches := []string{h}
	for t := 0; t < cfg.Branches; t++ {
		table := b.param(fmt.Sprintf("emb%d.table", t), core.InitGlorot, true, tableRows, cfg.Hidden)
		y := fmt.Sprintf("emb%d", t)
		b.op(nn.NewEmbedding(y, Features, table, y, tableRows, cfg.Hidden, uint64(t+1)))
		branches = append(branches, y)
	}
	return mlpHead(b, branches, cfg, true)
}

// MultiBranchGNN builds a multi-branch GNN, a DAG-shaped model for
// pipeline schedulers: cfg.Branches towers (default 4) read the features,
// tower b propagates them over b+1 hops of the GCN-normalised graph
// (Linear, then b+1 rounds of aggregate + bias + ReLU), the towers are
// summed (the join), and a two-layer fusion MLP gives the logits. The
// model's depth (cfg.Layers, for receptive fields) is the deepest tower's.
func MultiBranchGNN(cfg core.ModelConfig) (*core.Model, error) {
	cfg, err := withDefaults("mbgnn", cfg, 16)
	if err != nil {
		return nil, err
	}
	if cfg.Branches == 0 {
		cfg.Branches = 4
	}
	if cfg.Branches < 1 {
		return nil, fmt.Errorf("models: mbgnn: Branches must be positive, got %d", cfg.Branches)
	}
	cfg.Layers = cfg.Branches
	b := newBuilder("mbgnn", cfg, core.GraphSpec{Name: Adj, SelfLoops: true, Weights: core.WeightsGCN})
	drop := "drop_in"
	b.op(nn.NewDropout(drop, Features, drop, cfg.Dropout, cfg.InDim))
	var towers []string
	for t := 0; t < cfg.Branches; t++ {
		pre := fmt.Sprintf("tower%d.", t)
		w := b.param(pre+"weight", core.InitGlorot, true, cfg.InDim, cfg.Hidden)
		h := pre + "lin"
		b.op(nn.NewLinear(h, drop, w, h, cfg.InDim, cfg.Hidden))
		for hop := 0; hop <= t; hop++ {
			bias := b.param(fmt.Sprintf("%shop%d.bias", pre, hop), core.InitZeros, true, 1, cfg.Hidden)
			agg, bb, relu := fmt.Sprintf("%sagg%d", pre, hop), fmt.Sprintf("%saddb%d", pre, hop), fmt.Sprintf("%srelu%d", pre, hop)
			b.op(nn.NewAggregate(agg, Adj, core.ReduceSum, h, AdjW, agg, cfg.Hidden, 1))
			b.op(nn.NewBias(bb, agg, bias, bb, cfg.Hidden))
			b.op(nn.NewReLU(relu, bb, relu, cfg.Hidden))
			h = relu
		}
		towers = append(towers, h)
	}
	return mlpHead(b, towers, cfg, false)
}

// Uno builds a CANDLE-Uno-like multi-branch MLP: cfg.Branches identical
// MLP branches (default 4) of cfg.Layers layers (default 2) over the
// features, summed, then a two-layer trunk to the logits. It has no graph
// input: each sample (node) is computed on its own. With cfg.Dropout > 0
// a dropout follows every hidden ReLU, the branches' and the trunk's, as
// in CANDLE's Uno (at 0 the model has no dropout ops).
func Uno(cfg core.ModelConfig) (*core.Model, error) {
	cfg, err := withDefaults("uno", cfg, 64)
	if err != nil {
		return nil, err
	}
	if cfg.Branches == 0 {
		cfg.Branches = 4
	}
	if cfg.Branches < 1 {
		return nil, fmt.Errorf("models: uno: Branches must be positive, got %d", cfg.Branches)
	}
	b := &builder{m: &core.Model{Name: "uno", Config: cfg, Inputs: []string{Features}, Output: Logits}}
	var branches []string
	for br := 0; br < cfg.Branches; br++ {
		h, in := Features, cfg.InDim
		for l := 0; l < cfg.Layers; l++ {
			pre := fmt.Sprintf("branch%d.l%d.", br, l)
			h = dropout(b, dense(b, pre, h, in, cfg.Hidden, true), cfg)
			in = cfg.Hidden
		}
		branches = append(branches, h)
	}
	return mlpHead(b, branches, cfg, true)
}

// dense adds y = act(x·W + b) with ops and params named pre*.
func dense(b *builder, pre, x string, in, out int, relu bool) string {
	w := b.param(pre+"weight", core.InitGlorot, true, in, out)
	bias := b.param(pre+"bias", core.InitZeros, true, 1, out)
	lin, bb := pre+"lin", pre+"addb"
	b.op(nn.NewLinear(lin, x, w, lin, in, out))
	y := bb
	if !relu && pre == "head.out." {
		y = Logits
	}
	b.op(nn.NewBias(bb, lin, bias, y, out))
	if relu {
		r := pre + "relu"
		b.op(nn.NewReLU(r, y, r, out))
		return r
	}
	return y
}

// dropout adds y = dropout(x, cfg.Dropout) after x, an op named x+".drop",
// and returns y; at cfg.Dropout 0 it adds nothing and returns x.
func dropout(b *builder, x string, cfg core.ModelConfig) string {
	if cfg.Dropout == 0 {
		return x
	}
	y := x + ".drop"
	b.op(nn.NewDropout(y, x, y, cfg.Dropout, cfg.Hidden))
	return y
}

// mlpHead joins the branches by summing them and adds the two-layer head,
// with a dropout after its hidden layer when drop (dropout).
func mlpHead(b *builder, branches []string, cfg core.ModelConfig, drop bool) (*core.Model, error) {
	h := branches[0]
	for i, br := range branches[1:] {
		sum := fmt.Sprintf("join%d", i)
		b.op(nn.NewAdd(sum, h, br, sum, cfg.Hidden))
		h = sum
	}
	h = dense(b, "head.hidden.", h, cfg.Hidden, cfg.Hidden, true)
	if drop {
		h = dropout(b, h, cfg)
	}
	dense(b, "head.out.", h, cfg.Hidden, cfg.Classes, false)
	return b.finish()
}
