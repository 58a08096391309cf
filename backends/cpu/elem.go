package cpu

import (
	"math"

	"github.com/gnnkit/gnnkit/backends/cpu/internal/kern"
	"github.com/gnnkit/gnnkit/core"
)

// Map applies an elementwise op, broadcasting b as core.MapOp describes.
// out may alias a.
func (k *Kernels) Map(mop core.MapOp, a, b *core.Tensor, alpha float32, out *core.Tensor) error {
	const op = "Map"
	od, err := hostData(op, "out", out)
	if err != nil {
		return err
	}
	var ad, bd []float32
	if mop != core.MapFill && mop != core.MapBroadcast {
		if ad, err = hostData(op, "a", a); err != nil {
			return err
		}
	}
	if !mop.Unary() {
		if bd, err = hostData(op, "b", b); err != nil {
			return err
		}
	}
	br, bc, err := core.CheckMap(mop, a, b, out)
	if err != nil {
		return wrap(err)
	}
	r, c := out.Rows(), out.Cols()
	n := r * c
	if n == 0 {
		return nil
	}
	pieces := k.dev.pool.pieces(r, int64(n)*4)
	var fn func(t *task, p int)
	switch {
	case mop.Unary():
		fn = mapUnary
	case br == r && bc == c:
		fn = mapSame
	default:
		fn = mapBroadcast
	}
	t := k.newTask(fn, pieces)
	t.op, t.r, t.c, t.a, t.b, t.out, t.alpha, t.br, t.bc = mop, r, c, ad, bd, od, alpha, br, bc
	k.runTask(t)
	return nil
}

// mapUnary is Map's piece for unary ops over flat ranges (a and out are
// contiguous and the same shape).
func mapUnary(t *task, p int) {
	lo, hi := p*t.r/t.pieces*t.c, (p+1)*t.r/t.pieces*t.c
	var as []float32
	if t.a != nil {
		as = t.a[lo:hi]
	}
	unary(&t.k.v, t.op, t.out[lo:hi], as, t.alpha)
}

// mapSame is Map's piece for a b of out's shape.
func mapSame(t *task, p int) {
	lo, hi := p*t.r/t.pieces*t.c, (p+1)*t.r/t.pieces*t.c
	var as []float32
	if t.a != nil {
		as = t.a[lo:hi]
	}
	binaryVec(&t.k.v, t.op, t.out[lo:hi], as, t.b[lo:hi], t.alpha)
}

// mapBroadcast is Map's piece for a broadcast b (a row, a column, per
// head values or a scalar), row by row; a bias row added to every row
// (GCN's y = x + b) goes to the variant's AddRow in one call.
func mapBroadcast(t *task, p int) {
	r, c, bc := t.r, t.c, t.bc
	if t.op == core.MapAdd && t.br == 1 && bc == c && t.a != nil {
		r0, r1 := p*r/t.pieces, (p+1)*r/t.pieces
		t.k.v.AddRow(t.a[r0*c:r1*c], t.b, t.out[r0*c:r1*c], r1-r0, c)
		return
	}
	grp := c / bc
	for i := p * r / t.pieces; i < (p+1)*r/t.pieces; i++ {
		bi := 0
		if t.br == r {
			bi = i
		}
		orow := t.out[i*c : i*c+c]
		var arow []float32
		if t.a != nil {
			arow = t.a[i*c : i*c+c]
		}
		brow := t.b[bi*bc : bi*bc+bc]
		if grp == 1 {
			binaryVec(&t.k.v, t.op, orow, arow, brow, t.alpha)
			continue
		}
		for q, bv := range brow {
			var as []float32
			if arow != nil {
				as = arow[q*grp : q*grp+grp]
			}
			binaryScalar(t.op, orow[q*grp:q*grp+grp], as, bv, t.alpha)
		}
	}
}

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

// unary applies a unary op to a into out (len(a) == len(out) unless a is
// unused).
func unary(v *kern.Variant, op core.MapOp, out, a []float32, alpha float32) {
	switch op {
	case core.MapCopy:
		copy(out, a)
	case core.MapFill:
		for i := range out {
			out[i] = alpha
		}
	case core.MapScale:
		a = a[:len(out)]
		for i, x := range a {
			out[i] = alpha * x
		}
	case core.MapReLU:
		// branch-free (activations are negative at random); NaN and -0
		// pass as with "if x < 0 { 0 }"
		v.Relu(a, out)
	case core.MapLeakyReLU:
		a = a[:len(out)]
		for i, x := range a {
			f := alpha
			if x > 0 {
				f = 1
			}
			out[i] = f * x
		}
	case core.MapELU:
		a = a[:len(out)]
		for i, x := range a {
			if x > 0 {
				out[i] = x
			} else {
				out[i] = alpha * kern.Expm1f(x)
			}
		}
	case core.MapSigmoid:
		a = a[:len(out)]
		for i, x := range a {
			out[i] = sigmoid(x)
		}
	case core.MapTanh:
		a = a[:len(out)]
		for i, x := range a {
			out[i] = float32(math.Tanh(float64(x)))
		}
	case core.MapExp:
		a = a[:len(out)]
		for i, x := range a {
			out[i] = float32(math.Exp(float64(x)))
		}
	}
}

// binaryVec applies a binary op with b of the same length as out.
func binaryVec(v *kern.Variant, op core.MapOp, out, a, b []float32, alpha float32) {
	b = b[:len(out)]
	if op == core.MapBroadcast {
		copy(out, b)
		return
	}
	a = a[:len(out)]
	switch op {
	case core.MapAdd:
		v.AddTo(a, b, out)
	case core.MapSub:
		for i, x := range a {
			out[i] = x - b[i]
		}
	case core.MapMul:
		v.MulTo(a, b, out)
	case core.MapAxpy:
		for i, x := range a {
			out[i] = x + alpha*b[i]
		}
	case core.MapReLUGrad:
		// a where b > 0, else +0 (branch-free)
		v.ReluGrad(a, b, out)
	case core.MapLeakyReLUGrad:
		for i, x := range a {
			f := alpha
			if b[i] > 0 {
				f = 1
			}
			out[i] = x * f
		}
	default:
		for i, x := range a {
			out[i] = binaryOne(op, x, b[i], alpha)
		}
	}
}

// binaryScalar applies a binary op with one value of b for all of out.
func binaryScalar(op core.MapOp, out, a []float32, bv, alpha float32) {
	if op == core.MapBroadcast {
		for i := range out {
			out[i] = bv
		}
		return
	}
	a = a[:len(out)]
	switch op {
	case core.MapAdd:
		for i, x := range a {
			out[i] = x + bv
		}
	case core.MapSub:
		for i, x := range a {
			out[i] = x - bv
		}
	case core.MapMul:
		for i, x := range a {
			out[i] = x * bv
		}
	case core.MapAxpy:
		s := alpha * bv
		for i, x := range a {
			out[i] = x + s
		}
	default:
		for i, x := range a {
			out[i] = binaryOne(op, x, bv, alpha)
		}
	}
}

// binaryOne is the scalar definition of the gradient ops.
func binaryOne(op core.MapOp, a, b, alpha float32) float32 {
	switch op {
	case core.MapReLUGrad:
		if b > 0 {
			return a
		}
		return 0
	case core.MapLeakyReLUGrad:
		if b > 0 {
			return a
		}
		return a * alpha
	case core.MapELUGrad:
		if b > 0 {
			return a
		}
		return a * alpha * kern.Expf(b)
	case core.MapSigmoidGrad:
		return a * b * (1 - b)
	case core.MapTanhGrad:
		return a * (1 - b*b)
	}
	return 0
}

// reduceBlock is the fixed row block of Reduce(AxisRows): partial sums
// per block are combined in block order, whatever the thread count.
const reduceBlock = 256

// Reduce sums a over rows (out 1 x C) or over groups of columns (out R x G).
func (k *Kernels) Reduce(axis core.ReduceAxis, a, out *core.Tensor) error {
	const op = "Reduce"
	ad, err := hostData(op, "a", a)
	if err != nil {
		return err
	}
	od, err := hostData(op, "out", out)
	if err != nil {
		return err
	}
	if err := core.CheckReduce(axis, a, out); err != nil {
		return wrap(err)
	}
	r, c := a.Rows(), a.Cols()
	switch axis {
	case core.AxisRows:
		if c == 0 {
			return nil
		}
		// Sums are accumulated in float64 in fixed blocks combined in
		// order: bias gradients are sums of many cancelling terms, and
		// micro-batched training must reproduce the full batch's sum.
		blocks := (r + reduceBlock - 1) / reduceBlock
		psb := getScratch64(blocks * c)
		ps := *psb
		clear(ps)
		t := k.newTask(reduceRows, k.dev.pool.pieces(blocks, int64(r)*int64(c)))
		t.r, t.c, t.n, t.a, t.ps = r, c, blocks, ad, ps
		k.runTask(t)
		for j := range c {
			var sum float64
			for bl := range blocks {
				sum += ps[bl*c+j]
			}
			od[j] = float32(sum)
		}
		putScratch64(psb)
		return nil
	case core.AxisCols:
		gcols := out.Cols()
		if r == 0 || gcols == 0 {
			return nil
		}
		t := k.newTask(reduceCols, k.dev.pool.pieces(r, int64(r)*int64(c)))
		t.r, t.c, t.w, t.a, t.out = r, c, gcols, ad, od
		k.runTask(t)
	}
	return nil
}

// reduceRows sums the row blocks of t.a (t.r x t.c, t.n blocks) into
// t.ps, one float64 row per block.
func reduceRows(t *task, p int) {
	c := t.c
	for bl := p * t.n / t.pieces; bl < (p+1)*t.n/t.pieces; bl++ {
		acc := t.ps[bl*c : bl*c+c]
		for i := bl * reduceBlock; i < min(t.r, (bl+1)*reduceBlock); i++ {
			t.k.v.AccF64(acc, t.a[i*c:i*c+c])
		}
	}
}

// reduceCols sums each of the t.w column groups of t.a's rows into t.out.
func reduceCols(t *task, p int) {
	r, c, gcols := t.r, t.c, t.w
	w := c / gcols
	for i := p * r / t.pieces; i < (p+1)*r/t.pieces; i++ {
		for g := range gcols {
			var s float32
			for _, x := range t.a[i*c+g*w : i*c+g*w+w] {
				s += x
			}
			t.out[i*gcols+g] = s
		}
	}
}

// Gather sets out[k,:] = x[idx[k],:].
func (k *Kernels) Gather(x *core.Tensor, idx []int32, out *core.Tensor) error {
	const op = "Gather"
	xd, err := hostData(op, "x", x)
	if err != nil {
		return err
	}
	od, err := hostData(op, "out", out)
	if err != nil {
		return err
	}
	if err := core.CheckGather(x, idx, out); err != nil {
		return wrap(err)
	}
	c := x.Cols()
	n := len(idx)
	t := k.newTask(gather, k.dev.pool.pieces(n, int64(n)*int64(c)))
	t.n, t.c, t.idx, t.a, t.out = n, c, idx, xd, od
	k.runTask(t)
	return nil
}

func gather(t *task, p int) {
	c := t.c
	for q := p * t.n / t.pieces; q < (p+1)*t.n/t.pieces; q++ {
		j := int(t.idx[q])
		copy(t.out[q*c:q*c+c], t.a[j*c:j*c+c])
	}
}

// ScatterAdd adds x[k,:] into out[idx[k],:]. Duplicate indices accumulate
// in index order; pieces split the columns, so no two threads touch one
// element and the order of the sums is fixed.
func (k *Kernels) ScatterAdd(x *core.Tensor, idx []int32, out *core.Tensor) error {
	const op = "ScatterAdd"
	xd, err := hostData(op, "x", x)
	if err != nil {
		return err
	}
	od, err := hostData(op, "out", out)
	if err != nil {
		return err
	}
	if err := core.CheckScatterAdd(x, idx, out); err != nil {
		return wrap(err)
	}
	c := x.Cols()
	if c == 0 {
		return nil
	}
	cb := (c + scatterColBlock - 1) / scatterColBlock
	t := k.newTask(scatterAdd, k.dev.pool.pieces(cb, int64(len(idx))*int64(c)))
	t.n, t.c, t.idx, t.a, t.out = cb, c, idx, xd, od
	k.runTask(t)
	return nil
}

// scatterColBlock is the column granule ScatterAdd's pieces split.
const scatterColBlock = 16

func scatterAdd(t *task, p int) {
	c, cb := t.c, t.n
	j0, j1 := p*cb/t.pieces*scatterColBlock, min(c, (p+1)*cb/t.pieces*scatterColBlock)
	add := t.k.v.Add
	for q, j := range t.idx {
		add(t.a[q*c+j0:q*c+j1], t.out[int(j)*c+j0:int(j)*c+j1])
	}
}

// Dropout keeps element (r, c) when core.DropoutKeep(seed, id(r)*cols+c, p)
// (id(r) = rows[r], or r when rows is nil) and scales it by 1/(1-p). mask
// may be nil when the caller needs no mask; out may alias x.
func (k *Kernels) Dropout(x *core.Tensor, p float32, seed uint64, rows []int32, out, mask *core.Tensor) error {
	const op = "Dropout"
	xd, err := hostData(op, "x", x)
	if err != nil {
		return err
	}
	od, err := hostData(op, "out", out)
	if err != nil {
		return err
	}
	var md []float32
	if mask != nil {
		if md, err = hostData(op, "mask", mask); err != nil {
			return err
		}
	}
	if err := core.CheckDropout(x, p, rows, out, mask); err != nil {
		return wrap(err)
	}
	n := len(xd)
	if n == 0 {
		return nil
	}
	cols := x.Cols()
	var scale float32
	if p < 1 {
		scale = 1 / (1 - p)
	}
	if p == 0 {
		copy(od, xd)
		for i := range md {
			md[i] = 1
		}
		return nil
	}
	blocks := (n + dropoutBlock - 1) / dropoutBlock
	t := k.newTask(dropout, k.dev.pool.pieces(blocks, int64(n)*8))
	t.n, t.r, t.c, t.a, t.out, t.aux, t.rows, t.seed, t.prob, t.alpha = n, blocks, cols, xd, od, md, rows, seed, p, scale
	k.runTask(t)
	return nil
}

// dropoutBlock is the element granule of Dropout's pieces.
const dropoutBlock = 4096

// dropout is Dropout's piece: t.a into t.out (and the factor into t.aux
// when set), elements of blocks [p*r/pieces, (p+1)*r/pieces). Keys are
// consecutive within a row (id(r)*cols + c), so the range goes to the
// variant's Dropout one row segment at a time (the whole range at once
// when rows is nil), which compares each element's 24-bit draw with an
// integer threshold (kern.DropThreshold), branch-free.
func dropout(t *task, q int) {
	xd, od, md, rows, cols := t.a, t.out, t.aux, t.rows, t.c
	thr := kern.DropThreshold(t.prob)
	lo, hi := q*t.r/t.pieces*dropoutBlock, min(t.n, (q+1)*t.r/t.pieces*dropoutBlock)
	drop := t.k.v.Dropout
	for i := lo; i < hi; {
		end, key := hi, uint64(i)
		if rows != nil {
			r := i / cols
			end = min(hi, (r+1)*cols)
			key = uint64(rows[r])*uint64(cols) + uint64(i-r*cols)
		}
		var m []float32
		if md != nil {
			m = md[i:end]
		}
		drop(xd[i:end], od[i:end], m, t.seed, key, thr, t.alpha)
		i = end
	}
}
