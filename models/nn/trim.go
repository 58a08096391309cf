package nn

import "github.com/gnnkit/gnnkit/core"

// Trim keeps the rows of x that lie within hop hops of the loss targets,
// y = x[:env.RowsAt(hop)], when the Env's rows are in hop order
// (core.Env.HopRows); otherwise y is x itself. A layer whose output is
// read only within hop hops uses it on the inputs it combines row by row
// with its aggregated messages (GraphSAGE's root weight, GAT's
// destination scores), so that every tensor of the layer has the rows of
// its trimmed block (PyG's trim_to_layer).
type Trim struct {
	base
	x, y string
	hop  int
	cols int
}

var _ core.Op = (*Trim)(nil)

// NewTrim returns y = x[:rows within hop hops]; x and y have cols columns.
func NewTrim(name, x, y string, hop, cols int) *Trim {
	return &Trim{base: newBase(name, core.KindGather, []string{x}, y), x: x, y: y, hop: hop, cols: cols}
}

// rows is how many rows Forward keeps, or -1 for all of them.
func (op *Trim) rows(env *core.Env, x *core.Tensor) int {
	n := env.RowsAt(op.hop)
	if n < 0 || n >= x.Rows() {
		return -1
	}
	return n
}

func prefix(n int) []int32 {
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(i)
	}
	return idx
}

// Forward binds y to x (no trimming) or to a copy of x's first rows.
func (op *Trim) Forward(env *core.Env) error {
	x, err := env.Value(op.x)
	if err != nil {
		return op.errf(err)
	}
	if err := checkShape(op.x, x, -1, op.cols); err != nil {
		return op.errf(err)
	}
	n := op.rows(env, x)
	if n < 0 {
		env.SetValue(op.y, x) // the same tensor, owned once, by x's producer
		return nil
	}
	return op.errf(output(env, op.y, n, op.cols, func(y *core.Tensor) error {
		return env.K.Gather(x, prefix(n), y)
	}))
}

// Backward passes dy on to x's gradient: moved as it is when y is x, else
// scattered into x's first rows (the rest get nothing).
func (op *Trim) Backward(env *core.Env) error {
	dy := env.Grad(op.y)
	if dy == nil || !env.NeedsGrad(op.x) {
		return nil
	}
	x, err := env.Value(op.x)
	if err != nil {
		return op.errf(err)
	}
	n := op.rows(env, x)
	if n < 0 {
		// Hand dy itself over: y's gradient entry is cleared first so the
		// executor's DropGrad(y) does not free what x now owns.
		env.SetGrad(op.y, nil)
		return op.errf(env.AccumGrad(op.x, dy))
	}
	return op.errf(accum(env, op.x, x.Rows(), op.cols, func(dx *core.Tensor) error {
		return env.K.ScatterAdd(dy, prefix(n), dx)
	}))
}

// Cost is zero: at the whole-graph Dims that costs describe, no row is
// trimmed and y is x itself. (Trimmed, it copies the kept rows: less
// than the rows the layer no longer computes.)
func (op *Trim) Cost(core.Dims) core.Cost { return core.Cost{} }
