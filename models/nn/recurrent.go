package nn

import (
	"github.com/gnnkit/gnnkit/core"
)

// Compile-time checks for the ops of recurrent (dynamic-graph) models.
var (
	_ core.Op = (*Gate)(nil)
	_ core.Op = (*Mul)(nil)
	_ core.Op = (*Sub)(nil)
	_ core.Op = (*PairScore)(nil)
)

// Gate is a saturating activation whose gradient is computed from its
// output: the sigmoid or tanh of recurrent cells (GRU, LSTM gates).
type Gate struct {
	base
	fn, grad core.MapOp
	x, y     string
	cols     int
}

// NewSigmoid returns y = 1/(1+exp(-x)); x has cols columns.
func NewSigmoid(name, x, y string, cols int) *Gate {
	return &Gate{base: newBase(name, core.KindElem, []string{x}, y), fn: core.MapSigmoid, grad: core.MapSigmoidGrad, x: x, y: y, cols: cols}
}

// NewTanh returns y = tanh(x); x has cols columns.
func NewTanh(name, x, y string, cols int) *Gate {
	return &Gate{base: newBase(name, core.KindElem, []string{x}, y), fn: core.MapTanh, grad: core.MapTanhGrad, x: x, y: y, cols: cols}
}

// Forward applies the function.
func (op *Gate) Forward(env *core.Env) error {
	x, err := env.Value(op.x)
	if err != nil {
		return op.errf(err)
	}
	if err := checkShape(op.x, x, -1, op.cols); err != nil {
		return op.errf(err)
	}
	return op.errf(output(env, op.y, x.Rows(), op.cols, func(y *core.Tensor) error {
		return env.K.Map(op.fn, x, nil, 0, y)
	}))
}

// Backward computes dx from dy and the kept output.
func (op *Gate) Backward(env *core.Env) error {
	dy := env.Grad(op.y)
	if dy == nil || !env.NeedsGrad(op.x) {
		return nil
	}
	y, err := env.Value(op.y)
	if err != nil {
		return op.errf(err)
	}
	return op.errf(accum(env, op.x, y.Rows(), op.cols, func(dx *core.Tensor) error {
		return env.K.Map(op.grad, dy, y, 0, dx)
	}))
}

// Cost counts the function (a few flops per element) forward and its
// gradient backward; the output is kept.
func (op *Gate) Cost(d core.Dims) core.Cost {
	nc := d.Nodes * int64(op.cols)
	c := core.Cost{FLOPs: 4 * nc, BytesMoved: f32 * 2 * nc, ActivationBytes: f32 * nc}
	if op.gradFor(op.x) {
		c.FLOPs += 3 * nc
		c.BytesMoved += f32 * 3 * nc
	}
	return c
}

// Mul is the elementwise product y = a * b of two values of one shape.
type Mul struct {
	base
	a, b, y string
	cols    int
}

// NewMul returns y = a ⊙ b; a and b are N x cols.
func NewMul(name, a, b, y string, cols int) *Mul {
	return &Mul{base: newBase(name, core.KindElem, []string{a, b}, y), a: a, b: b, y: y, cols: cols}
}

// Forward multiplies.
func (op *Mul) Forward(env *core.Env) error {
	v, err := values(env, op.a, op.b)
	if err != nil {
		return op.errf(err)
	}
	if err := checkShape(op.a, v[0], -1, op.cols); err != nil {
		return op.errf(err)
	}
	if err := checkShape(op.b, v[1], v[0].Rows(), op.cols); err != nil {
		return op.errf(err)
	}
	return op.errf(output(env, op.y, v[0].Rows(), op.cols, func(y *core.Tensor) error {
		return env.K.Map(core.MapMul, v[0], v[1], 0, y)
	}))
}

// Backward computes da = dy ⊙ b and db = dy ⊙ a.
func (op *Mul) Backward(env *core.Env) error {
	dy := env.Grad(op.y)
	if dy == nil {
		return nil
	}
	v, err := values(env, op.a, op.b)
	if err != nil {
		return op.errf(err)
	}
	for i, in := range []string{op.a, op.b} {
		if !env.NeedsGrad(in) {
			continue
		}
		other := v[1-i]
		if err := accum(env, in, dy.Rows(), op.cols, func(d *core.Tensor) error {
			return env.K.Map(core.MapMul, dy, other, 0, d)
		}); err != nil {
			return op.errf(err)
		}
	}
	return nil
}

// Cost counts the product and the two backward products; both inputs
// are kept.
func (op *Mul) Cost(d core.Dims) core.Cost {
	nc := d.Nodes * int64(op.cols)
	c := core.Cost{FLOPs: nc, BytesMoved: f32 * 3 * nc, ActivationBytes: f32 * 2 * nc}
	for _, in := range []string{op.a, op.b} {
		if op.gradFor(in) {
			c.FLOPs += nc
			c.BytesMoved += f32 * 3 * nc
		}
	}
	return c
}

// Sub is y = a - b for two values of one shape.
type Sub struct {
	base
	a, b, y string
	cols    int
}

// NewSub returns y = a - b; a and b are N x cols.
func NewSub(name, a, b, y string, cols int) *Sub {
	return &Sub{base: newBase(name, core.KindElem, []string{a, b}, y), a: a, b: b, y: y, cols: cols}
}

// Forward subtracts.
func (op *Sub) Forward(env *core.Env) error {
	v, err := values(env, op.a, op.b)
	if err != nil {
		return op.errf(err)
	}
	if err := checkShape(op.a, v[0], -1, op.cols); err != nil {
		return op.errf(err)
	}
	if err := checkShape(op.b, v[1], v[0].Rows(), op.cols); err != nil {
		return op.errf(err)
	}
	return op.errf(output(env, op.y, v[0].Rows(), op.cols, func(y *core.Tensor) error {
		return env.K.Map(core.MapSub, v[0], v[1], 0, y)
	}))
}

// Backward passes dy to a and -dy to b.
func (op *Sub) Backward(env *core.Env) error {
	dy := env.Grad(op.y)
	if dy == nil {
		return nil
	}
	if env.NeedsGrad(op.a) {
		if err := accumCopy(env, op.a, dy); err != nil {
			return op.errf(err)
		}
	}
	if env.NeedsGrad(op.b) {
		if err := accum(env, op.b, dy.Rows(), op.cols, func(d *core.Tensor) error {
			return env.K.Map(core.MapScale, dy, nil, -1, d)
		}); err != nil {
			return op.errf(err)
		}
	}
	return nil
}

// Cost counts the subtraction and the backward copies.
func (op *Sub) Cost(d core.Dims) core.Cost {
	nc := d.Nodes * int64(op.cols)
	c := core.Cost{FLOPs: nc, BytesMoved: f32 * 3 * nc}
	for _, in := range []string{op.a, op.b} {
		if op.gradFor(in) {
			c.BytesMoved += f32 * 2 * nc
		}
	}
	return c
}

// PairScore scores node pairs for link prediction and edge-sign
// classification. The pairs are the edges of a graph (pair k is the
// edge src v_k -> dst u_k with edge id k); the score of pair k is
// s_k = <a[u_k], b[v_k]> (SDDMM EdgeDot) and the op writes the P x 2
// logits [0, s_k], so that CrossEntropy over them with labels 0/1 is the
// binary cross-entropy with logit s_k.
type PairScore struct {
	base
	graph   string
	a, b, y string
	cols    int
}

// NewPairScore returns y = [0, SDDMM(graph, EdgeDot, a, b)]; a is
// NumDst x cols, b is NumSrc x cols, y is (edge ids) x 2.
func NewPairScore(name, graph, a, b, y string, cols int) *PairScore {
	return &PairScore{base: newBase(name, core.KindGraph, []string{a, b}, y), graph: graph, a: a, b: b, y: y, cols: cols}
}

func (op *PairScore) load(env *core.Env) (*core.Graph, *core.Tensor, *core.Tensor, error) {
	g, err := env.Graph(op.graph)
	if err != nil {
		return nil, nil, nil, err
	}
	v, err := values(env, op.a, op.b)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := checkShape(op.a, v[0], g.NumDst, op.cols); err != nil {
		return nil, nil, nil, err
	}
	if err := checkShape(op.b, v[1], g.NumSrc, op.cols); err != nil {
		return nil, nil, nil, err
	}
	return g, v[0], v[1], nil
}

// selector returns the 1 x 2 matrix [0 1] (a temporary).
func selector(env *core.Env, s *scratch) (*core.Tensor, error) {
	sel, err := s.alloc(1, 2)
	if err != nil {
		return nil, err
	}
	return sel, env.Dev.Upload(sel, []float32{0, 1})
}

// Forward runs one SDDMM and one rank-1 GEMM.
func (op *PairScore) Forward(env *core.Env) error {
	g, a, b, err := op.load(env)
	if err != nil {
		return op.errf(err)
	}
	s := &scratch{env: env}
	defer s.free()
	score, err := s.alloc(edgeRows(g), 1)
	if err != nil {
		return op.errf(err)
	}
	if err := env.K.SDDMM(g, core.EdgeDot, a, b, score); err != nil {
		return op.errf(err)
	}
	sel, err := selector(env, s)
	if err != nil {
		return op.errf(err)
	}
	return op.errf(output(env, op.y, edgeRows(g), 2, func(y *core.Tensor) error {
		return env.K.GEMM(false, false, 1, score, sel, 0, y)
	}))
}

// Backward: ds = dy·[0 1]ᵀ; da[u] = Σ_k ds_k b[v_k] (SpMM over the pairs
// graph weighted by ds) and db[v] = Σ_k ds_k a[u_k] (the same over its
// reverse).
func (op *PairScore) Backward(env *core.Env) error {
	dy := env.Grad(op.y)
	if dy == nil {
		return nil
	}
	needA, needB := env.NeedsGrad(op.a), env.NeedsGrad(op.b)
	if !needA && !needB {
		return nil
	}
	g, a, b, err := op.load(env)
	if err != nil {
		return op.errf(err)
	}
	s := &scratch{env: env}
	defer s.free()
	sel, err := selector(env, s)
	if err != nil {
		return op.errf(err)
	}
	ds, err := s.alloc(dy.Rows(), 1)
	if err != nil {
		return op.errf(err)
	}
	if err := env.K.GEMM(false, true, 1, dy, sel, 0, ds); err != nil {
		return op.errf(err)
	}
	if needA {
		if err := accum(env, op.a, g.NumDst, op.cols, func(d *core.Tensor) error {
			return env.K.SpMM(g, core.ReduceSum, ds, b, d)
		}); err != nil {
			return op.errf(err)
		}
	}
	if needB {
		r := g.Reverse()
		if err := accum(env, op.b, r.NumDst, op.cols, func(d *core.Tensor) error {
			return env.K.SpMM(r, core.ReduceSum, ds, a, d)
		}); err != nil {
			return op.errf(err)
		}
	}
	return nil
}

// Cost counts the SDDMM over the pairs (Dims.Edges) and the two backward
// SpMMs; the inputs are kept by their producers.
func (op *PairScore) Cost(d core.Dims) core.Cost {
	e, c := d.Edges, int64(op.cols)
	sddmm := core.Cost{FLOPs: 2 * e * c, BytesMoved: f32*(2*e*c+2*e) + 8*(d.Nodes+1)}
	c0 := sddmm
	for _, in := range []string{op.a, op.b} {
		if op.gradFor(in) {
			c0 = c0.Add(sddmm)
		}
	}
	return c0
}
