package dynamic

import (
	"fmt"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/models/nn"
)

// registered are the models this package registers with core, in the
// order Models lists them.
var registered = []struct {
	name string
	f    core.ModelFactory
}{
	{"tgcn", func(c core.ModelConfig) (*core.Model, error) { return TGCN(Config{ModelConfig: c}) }},
	{"evolvegcn", func(c core.ModelConfig) (*core.Model, error) { return EvolveGCN(Config{ModelConfig: c}) }},
}

func init() {
	for _, r := range registered {
		core.RegisterModel(r.name, r.f)
	}
}

// Models returns the names of the dynamic models this package registers
// with core.RegisterModel (the models engine/dyntrain trains): "tgcn"
// and "evolvegcn". core.Models lists them among the static ones.
func Models() []string {
	out := make([]string, len(registered))
	for i, r := range registered {
		out[i] = r.name
	}
	return out
}

// Value names the dynamic models share.
const (
	Features = "x"
	Pairs    = "pairs"
	Logits   = "logits"
	Loss     = "loss"
)

// Adj is the graph name of window step t.
func Adj(t int) string { return fmt.Sprintf("adj.t%d", t) }

// Config is a dynamic model's configuration: the core fields (InDim,
// Hidden; Layers is the window length w) and the width of the pair
// embeddings the head scores.
type Config struct {
	core.ModelConfig
	// Embed is the width of the two pair-embedding projections (default Hidden).
	Embed int
}

// Window is the BPTT length the config asks for.
func (c Config) Window() int { return c.Layers }

func (c *Config) defaults(model string) error {
	if c.InDim <= 0 {
		return fmt.Errorf("models/dynamic: %s: InDim must be positive, got %d", model, c.InDim)
	}
	if c.Hidden < 0 || c.Layers < 0 || c.Embed < 0 {
		return fmt.Errorf("models/dynamic: %s: Hidden, Layers (window) and Embed must not be negative", model)
	}
	if c.Classes != 0 && c.Classes != 2 {
		return fmt.Errorf("models/dynamic: %s scores pairs: Classes must be 2 (or 0), got %d", model, c.Classes)
	}
	if c.Dropout != 0 {
		return fmt.Errorf("models/dynamic: %s has no dropout; got %g", model, c.Dropout)
	}
	c.Classes = 2
	if c.Hidden == 0 {
		c.Hidden = 32
	}
	if c.Layers == 0 {
		c.Layers = 5
	}
	if c.Embed == 0 {
		c.Embed = c.Hidden
	}
	return nil
}

type builder struct{ m *core.Model }

func newBuilder(name string, cfg Config, graphs []int) *builder {
	m := &core.Model{Name: name, Config: cfg.ModelConfig, Inputs: []string{Features}, Output: Logits}
	for _, t := range graphs {
		m.Graphs = append(m.Graphs, core.GraphSpec{Name: Adj(t), SelfLoops: true, Weights: core.WeightsGCN})
	}
	m.Graphs = append(m.Graphs, core.GraphSpec{Name: Pairs})
	return &builder{m: m}
}

func (b *builder) param(name string, init core.InitKind, shape ...int) string {
	b.m.Params = append(b.m.Params, core.ParamSpec{Name: name, Shape: shape, Init: init})
	return name
}

func (b *builder) op(op core.Op) string {
	b.m.Ops = append(b.m.Ops, op)
	return op.Outputs()[0]
}

// affine adds y = x·W + bias as two ops and returns y.
func (b *builder) affine(name, x, w, bias string, in, out int) string {
	l := b.op(nn.NewLinear(name+".lin", x, w, name+".lin", in, out))
	return b.op(nn.NewBias(name, l, bias, name, out))
}

// head adds the pair scorer over node states h (N x hidden) and the loss.
func (b *builder) head(h string, cfg Config) (*core.Model, error) {
	wa := b.param("head.a", core.InitGlorot, cfg.Hidden, cfg.Embed)
	wb := b.param("head.b", core.InitGlorot, cfg.Hidden, cfg.Embed)
	bias := b.param("head.bias", core.InitZeros, 1, 2)
	ea := b.op(nn.NewLinear("head.ea", h, wa, "head.ea", cfg.Hidden, cfg.Embed))
	eb := b.op(nn.NewLinear("head.eb", h, wb, "head.eb", cfg.Hidden, cfg.Embed))
	s := b.op(nn.NewPairScore("head.score", Pairs, ea, eb, "head.score", cfg.Embed))
	b.op(nn.NewBias("head.logits", s, bias, Logits, 2))
	b.op(nn.NewCrossEntropy(Loss, Logits, Loss, 2))
	nn.AnnotateGrads(b.m)
	if err := b.m.Validate(); err != nil {
		return nil, err
	}
	return b.m, nil
}

// TGCN builds T-GCN (Zhao et al. 2019): a GCN over each snapshot feeds a
// GRU whose hidden state runs across the window, starting at zero (reset
// per group). With g_t = ReLU(Â_t·X·W + b):
//
//	z = σ(g_t Wz + h Uz + bz)   r = σ(g_t Wr + h Ur + br)
//	n = tanh(g_t Wn + (r⊙h) Un + bn)   h' = n + z⊙(h − n)
//
// (at t = 0, h = 0: h' = n − z⊙n). The final state feeds the pair head.
// All graph ops (x·W once, then Â_t· for every t) come first in the op
// list: they do not depend on the hidden state.
func TGCN(cfg Config) (*core.Model, error) {
	if err := cfg.defaults("tgcn"); err != nil {
		return nil, err
	}
	w, f, h := cfg.Layers, cfg.InDim, cfg.Hidden
	steps := make([]int, w)
	for t := range steps {
		steps[t] = t
	}
	b := newBuilder("tgcn", cfg, steps)
	gw := b.param("gcn.weight", core.InitGlorot, f, h)
	gb := b.param("gcn.bias", core.InitZeros, 1, h)
	W, U, B := map[string]string{}, map[string]string{}, map[string]string{}
	for _, g := range []string{"z", "r", "n"} {
		W[g] = b.param("gru.w"+g, core.InitGlorot, h, h)
		U[g] = b.param("gru.u"+g, core.InitGlorot, h, h)
		B[g] = b.param("gru.b"+g, core.InitZeros, 1, h)
	}
	xw := b.op(nn.NewLinear("gcn.xw", Features, gw, "gcn.xw", f, h))
	agg := make([]string, w)
	for t := 0; t < w; t++ {
		agg[t] = b.op(nn.NewAggregate(fmt.Sprintf("gcn.agg.t%d", t), Adj(t), core.ReduceSum, xw, Adj(t)+".w", fmt.Sprintf("gcn.agg.t%d", t), h, 1))
	}
	prev := b.gru("", agg, gb, W, U, B, h)
	return b.head(prev, cfg)
}

// gru adds T-GCN's per-step GCN activation and GRU over the aggregations
// agg (one per window step), op and value names prefixed, and returns the
// final hidden state.
func (b *builder) gru(prefix string, agg []string, gb string, W, U, B map[string]string, h int) string {
	prev := ""
	for t := range agg {
		p := func(s string) string { return fmt.Sprintf("%st%d.%s", prefix, t, s) }
		g := b.op(nn.NewBias(p("gcn"), agg[t], gb, p("gcn"), h))
		g = b.op(nn.NewReLU(p("relu"), g, p("relu"), h))
		gate := func(name, act string) string {
			x := b.op(nn.NewLinear(p(name+".x"), g, W[name], p(name+".x"), h, h))
			if prev != "" {
				in := prev
				if name == "n" {
					in = b.op(nn.NewMul(p("rh"), p("r"), prev, p("rh"), h))
				}
				hu := b.op(nn.NewLinear(p(name+".h"), in, U[name], p(name+".h"), h, h))
				x = b.op(nn.NewAdd(p(name+".sum"), x, hu, p(name+".sum"), h))
			}
			x = b.op(nn.NewBias(p(name+".pre"), x, B[name], p(name+".pre"), h))
			if act == "tanh" {
				return b.op(nn.NewTanh(p(name), x, p(name), h))
			}
			return b.op(nn.NewSigmoid(p(name), x, p(name), h))
		}
		z := gate("z", "sig")
		if prev != "" {
			gate("r", "sig")
		}
		n := gate("n", "tanh")
		if prev == "" {
			zn := b.op(nn.NewMul(p("zn"), z, n, p("zn"), h))
			prev = b.op(nn.NewSub(p("h"), n, zn, p("h"), h))
		} else {
			d := b.op(nn.NewSub(p("d"), prev, n, p("d"), h))
			zd := b.op(nn.NewMul(p("zd"), z, d, p("zd"), h))
			prev = b.op(nn.NewAdd(p("h"), n, zd, p("h"), h))
		}
	}
	return prev
}

// EvolveGCN builds EvolveGCN-O (Pareja et al. 2020): the GCN weight
// W (InDim x Hidden, its rows a batch of InDim vectors) is evolved by an
// LSTM once per window step, input and hidden both being W:
//
//	i, f, o = σ(W U· + b·)   c̃ = tanh(W Uc + bc)
//	c_t = f⊙c_{t−1} + i⊙c̃   W_t = o⊙tanh(c_t)     (c_{−1} = 0)
//
// and the node states are ReLU(Â·X·W_{w−1} + b) on the window's last
// snapshot, which the pair head scores. As in the reference for link
// prediction only the last snapshot's embedding reaches the loss, so the
// model applies the GCN there only (the GCNs of earlier steps would be
// dead ops); its graph spec is "adj.t{w-1}".
func EvolveGCN(cfg Config) (*core.Model, error) {
	if err := cfg.defaults("evolvegcn"); err != nil {
		return nil, err
	}
	w, f, h := cfg.Layers, cfg.InDim, cfg.Hidden
	b := newBuilder("evolvegcn", cfg, []int{w - 1})
	cur := b.param("gcn.weight", core.InitGlorot, f, h)
	gb := b.param("gcn.bias", core.InitZeros, 1, h)
	U, B := map[string]string{}, map[string]string{}
	for _, g := range []string{"i", "f", "o", "c"} {
		U[g] = b.param("lstm.u"+g, core.InitGlorot, h, h)
		B[g] = b.param("lstm.b"+g, core.InitZeros, 1, h)
	}
	cell := ""
	for t := 0; t < w; t++ {
		p := func(s string) string { return fmt.Sprintf("t%d.%s", t, s) }
		gate := func(name string) string {
			x := b.affine(p(name+".pre"), cur, U[name], B[name], h, h)
			if name == "c" {
				return b.op(nn.NewTanh(p(name), x, p(name), h))
			}
			return b.op(nn.NewSigmoid(p(name), x, p(name), h))
		}
		i, o, c := gate("i"), gate("o"), gate("c")
		ic := b.op(nn.NewMul(p("ic"), i, c, p("ic"), h))
		if cell == "" {
			cell = ic // c_{-1} = 0: the forget gate has nothing to act on
		} else {
			fg := gate("f")
			fc := b.op(nn.NewMul(p("fc"), fg, cell, p("fc"), h))
			cell = b.op(nn.NewAdd(p("cell"), fc, ic, p("cell"), h))
		}
		tc := b.op(nn.NewTanh(p("tanhc"), cell, p("tanhc"), h))
		cur = b.op(nn.NewMul(p("w"), o, tc, p("w"), h))
	}
	last := Adj(w - 1)
	xw := b.op(nn.NewLinear("gcn.xw", Features, cur, "gcn.xw", f, h))
	agg := b.op(nn.NewAggregate("gcn.agg", last, core.ReduceSum, xw, last+".w", "gcn.agg", h, 1))
	g := b.op(nn.NewBias("gcn", agg, gb, "gcn", h))
	g = b.op(nn.NewReLU("relu", g, "relu", h))
	return b.head(g, cfg)
}
