package nn

import (
	"github.com/gnnkit/gnnkit/core"
)

// Linear is y = x·W: x is N x In, the parameter W is In x Out.
type Linear struct {
	base
	x, w, y string
	in, out int
}

// NewLinear returns the op y = x·w with w an in x out parameter.
func NewLinear(name, x, w, y string, in, out int) *Linear {
	return &Linear{base: newBase(name, core.KindDense, []string{x, w}, y), x: x, w: w, y: y, in: in, out: out}
}

// Forward computes y with one GEMM.
func (op *Linear) Forward(env *core.Env) error {
	v, err := values(env, op.x, op.w)
	if err != nil {
		return op.errf(err)
	}
	x, w := v[0], v[1]
	if err := checkShape(op.x, x, -1, op.in); err != nil {
		return op.errf(err)
	}
	if err := checkShape(op.w, w, op.in, op.out); err != nil {
		return op.errf(err)
	}
	return op.errf(output(env, op.y, x.Rows(), op.out, func(y *core.Tensor) error {
		return env.K.GEMM(false, false, 1, x, w, 0, y)
	}))
}

// Backward computes dx = dy·Wᵀ and dW = xᵀ·dy.
func (op *Linear) Backward(env *core.Env) error {
	dy := env.Grad(op.y)
	if dy == nil {
		return nil
	}
	v, err := values(env, op.x, op.w)
	if err != nil {
		return op.errf(err)
	}
	x, w := v[0], v[1]
	if env.NeedsGrad(op.x) {
		if err := accum(env, op.x, x.Rows(), op.in, func(dx *core.Tensor) error {
			return env.K.GEMM(false, true, 1, dy, w, 0, dx)
		}); err != nil {
			return op.errf(err)
		}
	}
	if env.NeedsGrad(op.w) {
		if err := accum(env, op.w, op.in, op.out, func(dw *core.Tensor) error {
			return env.K.GEMM(true, false, 1, x, dy, 0, dw)
		}); err != nil {
			return op.errf(err)
		}
	}
	return nil
}

// Cost counts one GEMM forward and one or two backward (dW always, dx
// when x needs a gradient); x is kept for dW.
func (op *Linear) Cost(d core.Dims) core.Cost {
	n, i, o := d.Nodes, int64(op.in), int64(op.out)
	gemm := 2 * n * i * o
	traffic := f32 * (n*i + i*o + n*o) // each GEMM reads two of x, W, y-sized and writes the third
	c := core.Cost{FLOPs: 2 * gemm, BytesMoved: 2 * traffic, ActivationBytes: f32 * n * i, WeightBytes: f32 * i * o}
	if op.gradFor(op.x) {
		c.FLOPs += gemm
		c.BytesMoved += traffic
	}
	return c
}

// GEMMs names Linear's products: y = x·W forward; dW = xᵀ·dy and, when x
// needs a gradient, dx = dy·Wᵀ backward.
func (op *Linear) GEMMs(d core.Dims) (fwd, bwd []core.GEMM) {
	n, i, o := d.Nodes, int64(op.in), int64(op.out)
	fwd = []core.GEMM{{M: n, N: o, K: i}}
	bwd = []core.GEMM{{M: i, N: o, K: n}}
	if op.gradFor(op.x) {
		bwd = append(bwd, core.GEMM{M: n, N: i, K: o})
	}
	return fwd, bwd
}

// Bias is y = x + b with b a 1 x C parameter broadcast over the rows.
type Bias struct {
	base
	x, b, y string
	cols    int
}

// NewBias returns the op y = x + b, b a 1 x cols parameter.
func NewBias(name, x, b, y string, cols int) *Bias {
	return &Bias{base: newBase(name, core.KindElem, []string{x, b}, y), x: x, b: b, y: y, cols: cols}
}

// Forward adds the bias row to every row of x.
func (op *Bias) Forward(env *core.Env) error {
	v, err := values(env, op.x, op.b)
	if err != nil {
		return op.errf(err)
	}
	x, b := v[0], v[1]
	if err := checkShape(op.x, x, -1, op.cols); err != nil {
		return op.errf(err)
	}
	if err := checkShape(op.b, b, 1, op.cols); err != nil {
		return op.errf(err)
	}
	return op.errf(output(env, op.y, x.Rows(), op.cols, func(y *core.Tensor) error {
		return env.K.Map(core.MapAdd, x, b, 0, y)
	}))
}

// Backward passes dy to x and sums it over the rows for b.
func (op *Bias) Backward(env *core.Env) error {
	dy := env.Grad(op.y)
	if dy == nil {
		return nil
	}
	if env.NeedsGrad(op.x) {
		if err := accumCopy(env, op.x, dy); err != nil {
			return op.errf(err)
		}
	}
	if env.NeedsGrad(op.b) {
		if err := accum(env, op.b, 1, op.cols, func(db *core.Tensor) error {
			return env.K.Reduce(core.AxisRows, dy, db)
		}); err != nil {
			return op.errf(err)
		}
	}
	return nil
}

// Cost counts the broadcast add, the column sum and the copy of dy.
func (op *Bias) Cost(d core.Dims) core.Cost {
	nc, c := d.Nodes*int64(op.cols), int64(op.cols)
	cost := core.Cost{FLOPs: 2 * nc, BytesMoved: f32 * (2*nc + c + nc + c), WeightBytes: f32 * c}
	if op.gradFor(op.x) {
		cost.BytesMoved += f32 * 2 * nc
	}
	return cost
}

// Add is y = a + b for two values of the same shape.
type Add struct {
	base
	a, b, y string
	cols    int
}

// NewAdd returns the op y = a + b; a and b are N x cols.
func NewAdd(name, a, b, y string, cols int) *Add {
	return &Add{base: newBase(name, core.KindElem, []string{a, b}, y), a: a, b: b, y: y, cols: cols}
}

// Forward adds a and b.
func (op *Add) Forward(env *core.Env) error {
	v, err := values(env, op.a, op.b)
	if err != nil {
		return op.errf(err)
	}
	a, b := v[0], v[1]
	if err := checkShape(op.a, a, -1, op.cols); err != nil {
		return op.errf(err)
	}
	if err := checkShape(op.b, b, a.Rows(), op.cols); err != nil {
		return op.errf(err)
	}
	return op.errf(output(env, op.y, a.Rows(), op.cols, func(y *core.Tensor) error {
		return env.K.Map(core.MapAdd, a, b, 0, y)
	}))
}

// Backward passes dy to both inputs.
func (op *Add) Backward(env *core.Env) error {
	dy := env.Grad(op.y)
	if dy == nil {
		return nil
	}
	for _, in := range []string{op.a, op.b} {
		if env.NeedsGrad(in) {
			if err := accumCopy(env, in, dy); err != nil {
				return op.errf(err)
			}
		}
	}
	return nil
}

// Cost counts the add and the copies of dy.
func (op *Add) Cost(d core.Dims) core.Cost {
	nc := d.Nodes * int64(op.cols)
	c := core.Cost{FLOPs: nc, BytesMoved: f32 * 3 * nc}
	for _, in := range []string{op.a, op.b} {
		if op.gradFor(in) {
			c.BytesMoved += f32 * 2 * nc
		}
	}
	return c
}
