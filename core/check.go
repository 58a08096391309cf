package core

import "fmt"

// Argument checks shared by the backends. Each checks one Kernels call
// against the contract documented on Kernels, reading only shapes,
// parameters and index arrays (never a buffer), and returns nil or an
// error wrapping ErrShape (CheckGraph: ErrInvalidGraph for a malformed
// CSR) of the form
//
//	core: shape mismatch: OP: what is wrong, and what was wanted
//
// so every backend rejects the same calls with the same message; a
// backend prefixes its name ("cpu: ", "opencl: ", "cuda: "). A nil
// tensor the call needs is an ErrShape error, never a panic. Whether a
// tensor is a live buffer of the device, and limits of a backend's own
// (int32 kernel parameters), remain the backend's checks: a backend
// makes those, then calls the check.

// shapeErr is a check's ErrShape error for op.
func shapeErr(op, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrShape, op, fmt.Sprintf(format, args...))
}

// notNil returns an error naming the first nil tensor of ts (named by
// the matching entry of names).
func notNil(op string, names []string, ts ...*Tensor) error {
	for i, t := range ts {
		if t == nil {
			return shapeErr(op, "%s is nil", names[i])
		}
	}
	return nil
}

// CheckGraph checks that g is not nil (ErrShape) and that its CSR arrays
// agree: NumDst+1 offsets, the last equal to the number of indices
// (ErrInvalidGraph). It reads no index: a kernel that trusts the indices
// checks them itself.
func CheckGraph(op string, g *Graph) error {
	if g == nil {
		return shapeErr(op, "graph is nil")
	}
	if len(g.Offsets) != g.NumDst+1 || (g.NumDst >= 0 && g.Offsets[g.NumDst] != int64(len(g.Indices))) {
		return fmt.Errorf("%w: %s: malformed CSR", ErrInvalidGraph, op)
	}
	return nil
}

// CheckEdgeRows checks that edge tensor t (named name in messages) can be
// indexed by every edge id of g, with cols columns (cols < 0: any). For a
// graph without EIDs t must have exactly NumEdges rows; with EIDs (a
// reverse or a subgraph, whose ids are another graph's) at least
// NumEdgeIDs.
func CheckEdgeRows(op, name string, g *Graph, t *Tensor, cols int) error {
	if g == nil {
		return shapeErr(op, "graph is nil")
	}
	if t == nil {
		return shapeErr(op, "%s is nil", name)
	}
	if cols >= 0 && t.Cols() != cols {
		return shapeErr(op, "%s has %d columns, want %d", name, t.Cols(), cols)
	}
	if g.EIDs == nil {
		if t.Rows() != g.NumEdges() {
			return shapeErr(op, "%s has %d rows, want one per edge (%d)", name, t.Rows(), g.NumEdges())
		}
		return nil
	}
	if need := g.NumEdgeIDs(); t.Rows() < need {
		return shapeErr(op, "%s has %d rows, but the graph's edge ids need %d", name, t.Rows(), need)
	}
	return nil
}

// CheckGEMM checks c = alpha*op(a)*op(b) + beta*c: op(a) is m x k, op(b)
// k x n and c m x n. It returns m, n and k.
func CheckGEMM(transA, transB bool, a, b, c *Tensor) (m, n, k int, err error) {
	const op = "GEMM"
	if err := notNil(op, []string{"a", "b", "c"}, a, b, c); err != nil {
		return 0, 0, 0, err
	}
	m, k = a.Rows(), a.Cols()
	if transA {
		m, k = k, m
	}
	kb, n := b.Rows(), b.Cols()
	if transB {
		kb, n = n, kb
	}
	if k != kb {
		return 0, 0, 0, shapeErr(op, "op(a) is %dx%d but op(b) is %dx%d (transA=%v, transB=%v)", m, k, kb, n, transA, transB)
	}
	if c.Rows() != m || c.Cols() != n {
		return 0, 0, 0, shapeErr(op, "c is %dx%d, want %dx%d", c.Rows(), c.Cols(), m, n)
	}
	return m, n, k, nil
}

// CheckSpMM checks an SpMM call, or a fused variant's named op: a graph,
// a known reduce, x NumSrc x C, out NumDst x C, and w nil or an edge
// tensor (see CheckEdgeRows) whose H columns divide C. It returns H (1
// when w is nil). The CSR itself is CheckGraph's.
func CheckSpMM(op string, g *Graph, red Reduce, w, x, out *Tensor) (heads int, err error) {
	if g == nil {
		return 0, shapeErr(op, "graph is nil")
	}
	if red != ReduceSum && red != ReduceMean {
		return 0, shapeErr(op, "unknown reduce %v", red)
	}
	if err := notNil(op, []string{"x", "out"}, x, out); err != nil {
		return 0, err
	}
	c := x.Cols()
	if x.Rows() != g.NumSrc {
		return 0, shapeErr(op, "x has %d rows, want NumSrc=%d", x.Rows(), g.NumSrc)
	}
	if out.Rows() != g.NumDst || out.Cols() != c {
		return 0, shapeErr(op, "out is %dx%d, want %dx%d", out.Rows(), out.Cols(), g.NumDst, c)
	}
	if w == nil {
		return 1, nil
	}
	heads = w.Cols()
	if heads < 1 || c%heads != 0 {
		return 0, shapeErr(op, "w has %d columns (heads), which do not divide x's %d", heads, c)
	}
	if err := CheckEdgeRows(op, "w", g, w, heads); err != nil {
		return 0, err
	}
	return heads, nil
}

// CheckEdgeSoftmax checks EdgeSoftmax: s and out are the same edge
// tensor shape, E x H.
func CheckEdgeSoftmax(g *Graph, s, out *Tensor) error {
	const op = "EdgeSoftmax"
	if err := CheckEdgeRows(op, "s", g, s, -1); err != nil {
		return err
	}
	if err := CheckEdgeRows(op, "out", g, out, s.Cols()); err != nil {
		return err
	}
	if !SameShape(s, out) {
		return shapeErr(op, "s is %dx%d but out is %dx%d", s.Rows(), s.Cols(), out.Rows(), out.Cols())
	}
	return nil
}

// CheckEdgeSoftmaxBackward checks EdgeSoftmaxBackward: y is an edge
// tensor, and dy and dx have its shape.
func CheckEdgeSoftmaxBackward(g *Graph, y, dy, dx *Tensor) error {
	const op = "EdgeSoftmaxBackward"
	if err := CheckEdgeRows(op, "y", g, y, -1); err != nil {
		return err
	}
	if err := notNil(op, []string{"dy", "dx"}, dy, dx); err != nil {
		return err
	}
	return allEqual(op, []string{"y", "dy", "dx"}, y, dy, dx)
}

// allEqual checks that three non-nil tensors have the same shape.
func allEqual(op string, names []string, a, b, c *Tensor) error {
	if !SameShape(a, b) || !SameShape(a, c) {
		return shapeErr(op, "%s is %dx%d, %s %dx%d, %s %dx%d; want all equal",
			names[0], a.Rows(), a.Cols(), names[1], b.Rows(), b.Cols(), names[2], c.Rows(), c.Cols())
	}
	return nil
}

// checkIndex checks that every index is in [0, n).
func checkIndex(op string, idx []int32, n int) error {
	for q, j := range idx {
		if j < 0 || int(j) >= n {
			return shapeErr(op, "index %d at position %d is outside [0,%d)", j, q, n)
		}
	}
	return nil
}

// CheckGather checks Gather: out is len(idx) x C for x of C columns, and
// every index is a row of x.
func CheckGather(x *Tensor, idx []int32, out *Tensor) error {
	const op = "Gather"
	if err := notNil(op, []string{"x", "out"}, x, out); err != nil {
		return err
	}
	c := x.Cols()
	if out.Rows() != len(idx) || out.Cols() != c {
		return shapeErr(op, "out is %dx%d, want %dx%d", out.Rows(), out.Cols(), len(idx), c)
	}
	return checkIndex(op, idx, x.Rows())
}

// CheckScatterAdd checks ScatterAdd: x is len(idx) x C, out has C
// columns, and every index is a row of out.
func CheckScatterAdd(x *Tensor, idx []int32, out *Tensor) error {
	const op = "ScatterAdd"
	if err := notNil(op, []string{"x", "out"}, x, out); err != nil {
		return err
	}
	c := x.Cols()
	if x.Rows() != len(idx) || out.Cols() != c {
		return shapeErr(op, "x is %dx%d and out is %dx%d, want %dxC and ?xC", x.Rows(), c, out.Rows(), out.Cols(), len(idx))
	}
	return checkIndex(op, idx, out.Rows())
}

// CheckMap checks Map(mop, a, b, alpha, out) against MapOp's broadcast
// rule: a (unless mop is MapFill or MapBroadcast) has out's shape R x C;
// b (unless mop is unary) is R' x C' with R' in {R, 1} and C' dividing C.
// It returns R' and C' (0, 0 for a unary op).
func CheckMap(mop MapOp, a, b, out *Tensor) (br, bc int, err error) {
	const op = "Map"
	if mop >= NumMapOps {
		return 0, 0, shapeErr(op, "unknown op %v", mop)
	}
	if out == nil {
		return 0, 0, shapeErr(op, "out is nil")
	}
	r, c := out.Rows(), out.Cols()
	if mop != MapFill && mop != MapBroadcast {
		if a == nil {
			return 0, 0, shapeErr(op, "a is nil")
		}
		if !SameShape(a, out) {
			return 0, 0, shapeErr(op, "%v: a is %dx%d but out is %dx%d", mop, a.Rows(), a.Cols(), r, c)
		}
	}
	if mop.Unary() {
		return 0, 0, nil
	}
	if b == nil {
		return 0, 0, shapeErr(op, "b is nil")
	}
	br, bc = b.Rows(), b.Cols()
	if br != r && br != 1 {
		return 0, 0, shapeErr(op, "%v: b has %d rows, want %d or 1", mop, br, r)
	}
	if (bc == 0 && c != 0) || (bc > 0 && c%bc != 0) {
		return 0, 0, shapeErr(op, "%v: b has %d columns, which do not divide out's %d", mop, bc, c)
	}
	return br, bc, nil
}

// CheckReduce checks Reduce: for AxisRows out is 1 x C, for AxisCols
// R x G with G dividing C (a is R x C).
func CheckReduce(axis ReduceAxis, a, out *Tensor) error {
	const op = "Reduce"
	if err := notNil(op, []string{"a", "out"}, a, out); err != nil {
		return err
	}
	r, c := a.Rows(), a.Cols()
	switch axis {
	case AxisRows:
		if out.Rows() != 1 || out.Cols() != c {
			return shapeErr(op, "rows: out is %dx%d, want 1x%d", out.Rows(), out.Cols(), c)
		}
		return nil
	case AxisCols:
		gcols := out.Cols()
		if out.Rows() != r || (gcols == 0 && c != 0) || (gcols > 0 && c%gcols != 0) {
			return shapeErr(op, "cols: out is %dx%d, want %dxG with G dividing %d", out.Rows(), gcols, r, c)
		}
		return nil
	}
	return shapeErr(op, "unknown axis %d", axis)
}

// CheckLogSoftmax checks LogSoftmax: out has x's shape.
func CheckLogSoftmax(x, out *Tensor) error {
	const op = "LogSoftmax"
	if err := notNil(op, []string{"x", "out"}, x, out); err != nil {
		return err
	}
	if !SameShape(x, out) {
		return shapeErr(op, "x is %dx%d but out is %dx%d", x.Rows(), x.Cols(), out.Rows(), out.Cols())
	}
	return nil
}

// CheckLogSoftmaxBackward checks LogSoftmaxBackward: y, dy and dx have
// one shape.
func CheckLogSoftmaxBackward(y, dy, dx *Tensor) error {
	const op = "LogSoftmaxBackward"
	if err := notNil(op, []string{"y", "dy", "dx"}, y, dy, dx); err != nil {
		return err
	}
	return allEqual(op, []string{"y", "dy", "dx"}, y, dy, dx)
}

// CheckNLLLoss checks NLLLoss: every row is a row of logp (R x C) with a
// label in [0, C), and grad, when not nil, has logp's shape.
func CheckNLLLoss(logp *Tensor, labels, rows []int32, grad *Tensor) error {
	const op = "NLLLoss"
	if logp == nil {
		return shapeErr(op, "logp is nil")
	}
	r, c := logp.Rows(), logp.Cols()
	for q, i := range rows {
		if i < 0 || int(i) >= r {
			return shapeErr(op, "row %d at position %d is outside [0,%d)", i, q, r)
		}
		if int(i) >= len(labels) {
			return shapeErr(op, "row %d has no label (%d labels)", i, len(labels))
		}
		if l := labels[i]; l < 0 || int(l) >= c {
			return shapeErr(op, "row %d has label %d, outside [0,%d)", i, l, c)
		}
	}
	if grad != nil && !SameShape(grad, logp) {
		return shapeErr(op, "grad is %dx%d but logp is %dx%d", grad.Rows(), grad.Cols(), r, c)
	}
	return nil
}

// CheckDropout checks Dropout: p in [0,1]; out, and mask when not nil,
// have x's shape; rows, when not nil, has one non-negative id per row of
// x.
func CheckDropout(x *Tensor, p float32, rows []int32, out, mask *Tensor) error {
	const op = "Dropout"
	if !(p >= 0 && p <= 1) {
		return shapeErr(op, "probability %v outside [0,1]", p)
	}
	if err := notNil(op, []string{"x", "out"}, x, out); err != nil {
		return err
	}
	if !SameShape(x, out) {
		return shapeErr(op, "x is %dx%d but out is %dx%d", x.Rows(), x.Cols(), out.Rows(), out.Cols())
	}
	if mask != nil && !SameShape(x, mask) {
		return shapeErr(op, "x is %dx%d but mask is %dx%d", x.Rows(), x.Cols(), mask.Rows(), mask.Cols())
	}
	if rows != nil {
		if len(rows) != x.Rows() {
			return shapeErr(op, "%d row ids for %d rows", len(rows), x.Rows())
		}
		for r, id := range rows {
			if id < 0 {
				return shapeErr(op, "row %d has negative id %d", r, id)
			}
		}
	}
	return nil
}

// likeP checks that each tensor of ts (named by names) has p's shape.
func likeP(op string, p *Tensor, names []string, ts ...*Tensor) error {
	if p == nil {
		return shapeErr(op, "p is nil")
	}
	for i, t := range ts {
		if t == nil {
			return shapeErr(op, "%s is nil", names[i])
		}
		if !SameShape(t, p) {
			return shapeErr(op, "%s has shape %v, want %v like p", names[i], t.Shape, p.Shape)
		}
	}
	return nil
}

// CheckAdam checks Adam: h.Step >= 1, and g, m and v have p's shape.
func CheckAdam(p, g, m, v *Tensor, h AdamParams) error {
	const op = "Adam"
	if h.Step < 1 {
		return shapeErr(op, "step %d, want >= 1", h.Step)
	}
	return likeP(op, p, []string{"g", "m", "v"}, g, m, v)
}

// CheckSGD checks SGD: g has p's shape and, with momentum, mom is not
// nil, has p's shape, and h.Step >= 1 (mom is not read without
// momentum).
func CheckSGD(p, g, mom *Tensor, h SGDParams) error {
	const op = "SGD"
	if err := likeP(op, p, []string{"g"}, g); err != nil {
		return err
	}
	if h.Momentum == 0 {
		return nil
	}
	if mom == nil {
		return shapeErr(op, "momentum %v needs a momentum buffer", h.Momentum)
	}
	if h.Step < 1 {
		return shapeErr(op, "step %d, want >= 1", h.Step)
	}
	return likeP(op, p, []string{"mom"}, mom)
}
