package nn

import (
	"fmt"

	"github.com/gnnkit/gnnkit/core"
)

// Activation applies an elementwise nonlinearity: ReLU, LeakyReLU or ELU.
type Activation struct {
	base
	fn, grad core.MapOp
	alpha    float32
	x, y     string
	cols     int
	rows     rowKind
}

// NewReLU returns y = max(x, 0); x has cols columns.
func NewReLU(name, x, y string, cols int) *Activation {
	return newActivation(name, core.MapReLU, core.MapReLUGrad, 0, x, y, cols)
}

// NewLeakyReLU returns y = x if x > 0 else slope*x.
func NewLeakyReLU(name, x, y string, slope float32, cols int) *Activation {
	return newActivation(name, core.MapLeakyReLU, core.MapLeakyReLUGrad, slope, x, y, cols)
}

// NewELU returns y = x if x > 0 else alpha*(exp(x)-1).
func NewELU(name, x, y string, alpha float32, cols int) *Activation {
	return newActivation(name, core.MapELU, core.MapELUGrad, alpha, x, y, cols)
}

func newActivation(name string, fn, grad core.MapOp, alpha float32, x, y string, cols int) *Activation {
	return &Activation{base: newBase(name, core.KindElem, []string{x}, y), fn: fn, grad: grad, alpha: alpha, x: x, y: y, cols: cols}
}

// OnEdges marks the op's rows as edges (an edge tensor), for Cost, and
// returns the op.
func (op *Activation) OnEdges() *Activation { op.rows = onEdges; return op }

// Forward applies the function.
func (op *Activation) Forward(env *core.Env) error {
	x, err := env.Value(op.x)
	if err != nil {
		return op.errf(err)
	}
	if err := checkShape(op.x, x, -1, op.cols); err != nil {
		return op.errf(err)
	}
	return op.errf(output(env, op.y, x.Rows(), op.cols, func(y *core.Tensor) error {
		return env.K.Map(op.fn, x, nil, op.alpha, y)
	}))
}

// Backward applies the matching *_grad map to dy and the kept input.
func (op *Activation) Backward(env *core.Env) error {
	dy := env.Grad(op.y)
	if dy == nil || !env.NeedsGrad(op.x) {
		return nil
	}
	x, err := env.Value(op.x)
	if err != nil {
		return op.errf(err)
	}
	return op.errf(accum(env, op.x, x.Rows(), op.cols, func(dx *core.Tensor) error {
		return env.K.Map(op.grad, dy, x, op.alpha, dx)
	}))
}

// Cost counts one pass forward and one backward; the input is kept.
func (op *Activation) Cost(d core.Dims) core.Cost {
	nc := op.rows.count(d) * int64(op.cols)
	flops := nc
	if op.fn == core.MapELU {
		flops = 4 * nc // the exponential
	}
	c := core.Cost{FLOPs: flops, BytesMoved: f32 * 2 * nc, ActivationBytes: f32 * nc}
	if op.gradFor(op.x) {
		c = c.Add(core.Cost{FLOPs: flops, BytesMoved: f32 * 3 * nc})
	}
	return c
}

// Dropout zeroes each element with probability p in training and scales
// the rest by 1/(1-p). Out of training, or with p == 0, the output is the
// input tensor itself (bound under both names).
//
// The seed of the mask is Env.Seed mixed with a hash of the op's name, so
// two dropout ops draw different masks. Backward recomputes the mask (the
// kernel's draw depends only on the seed and the element index) by
// running the same dropout over dy, which gives dy * mask without keeping
// the mask between the passes.
type Dropout struct {
	base
	p    float32
	x, y string
	cols int
	rows rowKind
	salt uint64
}

// NewDropout returns y = dropout(x, p); x has cols columns.
func NewDropout(name, x, y string, p float32, cols int) *Dropout {
	h := uint64(14695981039346656037) // FNV-1a of the name
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * 1099511628211
	}
	return &Dropout{base: newBase(name, core.KindElem, []string{x}, y), p: p, x: x, y: y, cols: cols, salt: h}
}

// OnEdges marks the op's rows as edges (attention dropout), for Cost, and
// returns the op.
func (op *Dropout) OnEdges() *Dropout { op.rows = onEdges; return op }

func (op *Dropout) active(env *core.Env) bool { return env.Training && op.p > 0 }

// ids are the global ids of the rows the op draws for (Env.NodeIDs or,
// for attention dropout, Env.EdgeIDs), so micro-batches draw the masks
// the whole batch would.
//
// A trimmed layer's tensors (core.Env.HopRows) hold a prefix of the rows,
// so their ids are a prefix of these.
func (op *Dropout) ids(env *core.Env, rows int) []int32 {
	ids := env.NodeIDs
	if op.rows == onEdges {
		ids = env.EdgeIDs
	}
	if len(ids) > rows {
		ids = ids[:rows]
	}
	return ids
}

// seed mixes the step seed with the op's name (SplitMix64 finaliser).
func (op *Dropout) seed(env *core.Env) uint64 {
	z := env.Seed ^ op.salt
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Forward draws the mask and applies it, or binds y to x when inactive.
func (op *Dropout) Forward(env *core.Env) error {
	if op.p < 0 || op.p >= 1 {
		return op.errf(fmt.Errorf("dropout probability %g is outside [0,1)", op.p))
	}
	x, err := env.Value(op.x)
	if err != nil {
		return op.errf(err)
	}
	if err := checkShape(op.x, x, -1, op.cols); err != nil {
		return op.errf(err)
	}
	if !op.active(env) {
		env.SetValue(op.y, x)
		return nil
	}
	// No mask tensor: backward draws the same mask again from the seed
	// and the rows' ids.
	return op.errf(output(env, op.y, x.Rows(), op.cols, func(y *core.Tensor) error {
		return env.K.Dropout(x, op.p, op.seed(env), op.ids(env, x.Rows()), y, nil)
	}))
}

// Backward computes dx = dy * mask (or dy when inactive).
func (op *Dropout) Backward(env *core.Env) error {
	dy := env.Grad(op.y)
	if dy == nil || !env.NeedsGrad(op.x) {
		return nil
	}
	if !op.active(env) {
		return op.errf(accumCopy(env, op.x, dy))
	}
	return op.errf(accum(env, op.x, dy.Rows(), dy.Cols(), func(dx *core.Tensor) error {
		return env.K.Dropout(dy, op.p, op.seed(env), op.ids(env, dy.Rows()), dx, nil)
	}))
}

// Cost counts the mask draw and product forward and again backward (the
// mask is recomputed, so nothing is kept); with p == 0 only backward's
// copy of dy.
func (op *Dropout) Cost(d core.Dims) core.Cost {
	nc := op.rows.count(d) * int64(op.cols)
	pass := core.Cost{FLOPs: 2 * nc, BytesMoved: f32 * 3 * nc} // read x, write out and mask
	var c core.Cost
	if op.p > 0 {
		c = pass
	}
	if op.gradFor(op.x) {
		if op.p > 0 {
			c = c.Add(pass)
		} else {
			c = c.Add(core.Cost{BytesMoved: f32 * 2 * nc})
		}
	}
	return c
}

// HeadDot is a per-head dot product with a parameter row:
// y[i,h] = sum_f z[i,hF+f] * a[hF+f], z N x H*F, a 1 x H*F, y N x H.
// GAT uses it for the source and destination halves of its attention.
type HeadDot struct {
	base
	z, a, y      string
	heads, feats int
}

// NewHeadDot returns y = HeadDot(z, a) with heads heads of feats features.
func NewHeadDot(name, z, a, y string, heads, feats int) *HeadDot {
	return &HeadDot{base: newBase(name, core.KindElem, []string{z, a}, y), z: z, a: a, y: y, heads: heads, feats: feats}
}

func (op *HeadDot) load(env *core.Env) (z, a *core.Tensor, err error) {
	v, err := values(env, op.z, op.a)
	if err != nil {
		return nil, nil, err
	}
	c := op.heads * op.feats
	if err := checkShape(op.z, v[0], -1, c); err != nil {
		return nil, nil, err
	}
	if err := checkShape(op.a, v[1], 1, c); err != nil {
		return nil, nil, err
	}
	return v[0], v[1], nil
}

// Forward multiplies z by the broadcast row a and sums each head's columns.
func (op *HeadDot) Forward(env *core.Env) error {
	z, a, err := op.load(env)
	if err != nil {
		return op.errf(err)
	}
	s := &scratch{env: env}
	defer s.free()
	t, err := s.alloc(z.Rows(), z.Cols())
	if err != nil {
		return op.errf(err)
	}
	if err := env.K.Map(core.MapMul, z, a, 0, t); err != nil {
		return op.errf(err)
	}
	return op.errf(output(env, op.y, z.Rows(), op.heads, func(y *core.Tensor) error {
		return env.K.Reduce(core.AxisCols, t, y)
	}))
}

// Backward computes dz[i,hF+f] = dy[i,h]*a[hF+f] and
// da[hF+f] = sum_i dy[i,h]*z[i,hF+f].
func (op *HeadDot) Backward(env *core.Env) error {
	dy := env.Grad(op.y)
	if dy == nil {
		return nil
	}
	z, a, err := op.load(env)
	if err != nil {
		return op.errf(err)
	}
	if env.NeedsGrad(op.z) {
		if err := accum(env, op.z, z.Rows(), z.Cols(), func(dz *core.Tensor) error {
			if err := env.K.Map(core.MapBroadcast, nil, dy, 0, dz); err != nil {
				return err
			}
			return env.K.Map(core.MapMul, dz, a, 0, dz)
		}); err != nil {
			return op.errf(err)
		}
	}
	if env.NeedsGrad(op.a) {
		s := &scratch{env: env}
		defer s.free()
		t, err := s.alloc(z.Rows(), z.Cols())
		if err != nil {
			return op.errf(err)
		}
		if err := env.K.Map(core.MapMul, z, dy, 0, t); err != nil {
			return op.errf(err)
		}
		if err := accum(env, op.a, 1, z.Cols(), func(da *core.Tensor) error {
			return env.K.Reduce(core.AxisRows, t, da)
		}); err != nil {
			return op.errf(err)
		}
	}
	return nil
}

// Cost counts the broadcast product and grouped sum forward, and the two
// products and the column sum backward; z is kept.
func (op *HeadDot) Cost(d core.Dims) core.Cost {
	n, c, h := d.Nodes, int64(op.heads*op.feats), int64(op.heads)
	nc := n * c
	cost := core.Cost{FLOPs: 2 * nc, BytesMoved: f32 * (3*nc + c + n*h), ActivationBytes: f32 * nc, WeightBytes: f32 * c}
	if op.gradFor(op.z) {
		cost = cost.Add(core.Cost{FLOPs: nc, BytesMoved: f32 * (n*h + 3*nc + c)})
	}
	if op.gradFor(op.a) {
		cost = cost.Add(core.Cost{FLOPs: 2 * nc, BytesMoved: f32 * (3*nc + n*h + c)})
	}
	return cost
}
