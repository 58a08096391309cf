package cpu

import (
	"math"

	"github.com/gnnkit/gnnkit/core"
)

// Map applies an elementwise op, broadcasting b as core.MapOp describes.
// out may alias a.
func (k *Kernels) Map(mop core.MapOp, a, b *core.Tensor, alpha float32, out *core.Tensor) error {
	const op = "Map"
	if mop >= core.NumMapOps {
		return shapeErr(op, "unknown op %v", mop)
	}
	od, err := hostData(op, "out", out)
	if err != nil {
		return err
	}
	r, c := out.Rows(), out.Cols()
	var ad, bd []float32
	if mop != core.MapFill && mop != core.MapBroadcast {
		if ad, err = hostData(op, "a", a); err != nil {
			return err
		}
		if !core.SameShape(a, out) {
			return shapeErr(op, "%v: a is %dx%d but out is %dx%d", mop, a.Rows(), a.Cols(), r, c)
		}
	}
	br, bc := 0, 0
	if !mop.Unary() {
		if bd, err = hostData(op, "b", b); err != nil {
			return err
		}
		br, bc = b.Rows(), b.Cols()
		if br != r && br != 1 {
			return shapeErr(op, "%v: b has %d rows, want %d or 1", mop, br, r)
		}
		if (bc == 0 && c != 0) || (bc > 0 && c%bc != 0) {
			return shapeErr(op, "%v: b has %d columns, which do not divide out's %d", mop, bc, c)
		}
	}
	n := r * c
	if n == 0 {
		return nil
	}
	pieces := k.dev.pool.pieces(r, int64(n)*4)
	switch {
	case mop.Unary():
		// Flat ranges: a and out are contiguous and the same shape.
		k.dev.pool.run(pieces, func(p int) {
			lo, hi := p*r/pieces*c, (p+1)*r/pieces*c
			var as []float32
			if ad != nil {
				as = ad[lo:hi]
			}
			unary(mop, od[lo:hi], as, alpha)
		})
	case br == r && bc == c:
		k.dev.pool.run(pieces, func(p int) {
			lo, hi := p*r/pieces*c, (p+1)*r/pieces*c
			var as []float32
			if ad != nil {
				as = ad[lo:hi]
			}
			binaryVec(mop, od[lo:hi], as, bd[lo:hi], alpha)
		})
	default:
		grp := c / bc
		k.dev.pool.run(pieces, func(p int) {
			for i := p * r / pieces; i < (p+1)*r/pieces; i++ {
				bi := 0
				if br == r {
					bi = i
				}
				orow := od[i*c : i*c+c]
				var arow []float32
				if ad != nil {
					arow = ad[i*c : i*c+c]
				}
				brow := bd[bi*bc : bi*bc+bc]
				if grp == 1 {
					binaryVec(mop, orow, arow, brow, alpha)
					continue
				}
				for q, bv := range brow {
					var as []float32
					if arow != nil {
						as = arow[q*grp : q*grp+grp]
					}
					binaryScalar(mop, orow[q*grp:q*grp+grp], as, bv, alpha)
				}
			}
		})
	}
	return nil
}

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

// unary applies a unary op to a into out (len(a) == len(out) unless a is
// unused).
func unary(op core.MapOp, out, a []float32, alpha float32) {
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
		a = a[:len(out)]
		for i, x := range a {
			if x < 0 {
				x = 0
			}
			out[i] = x
		}
	case core.MapLeakyReLU:
		a = a[:len(out)]
		for i, x := range a {
			if x > 0 {
				out[i] = x
			} else {
				out[i] = alpha * x
			}
		}
	case core.MapELU:
		a = a[:len(out)]
		for i, x := range a {
			if x > 0 {
				out[i] = x
			} else {
				out[i] = alpha * float32(math.Expm1(float64(x)))
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
func binaryVec(op core.MapOp, out, a, b []float32, alpha float32) {
	b = b[:len(out)]
	if op == core.MapBroadcast {
		copy(out, b)
		return
	}
	a = a[:len(out)]
	switch op {
	case core.MapAdd:
		for i, x := range a {
			out[i] = x + b[i]
		}
	case core.MapSub:
		for i, x := range a {
			out[i] = x - b[i]
		}
	case core.MapMul:
		for i, x := range a {
			out[i] = x * b[i]
		}
	case core.MapAxpy:
		for i, x := range a {
			out[i] = x + alpha*b[i]
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
		return a * alpha * float32(math.Exp(float64(b)))
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
	r, c := a.Rows(), a.Cols()
	switch axis {
	case core.AxisRows:
		if out.Rows() != 1 || out.Cols() != c {
			return shapeErr(op, "rows: out is %dx%d, want 1x%d", out.Rows(), out.Cols(), c)
		}
		if c == 0 {
			return nil
		}
		// Sums are accumulated in float64 in fixed blocks combined in
		// order: bias gradients are sums of many cancelling terms, and
		// micro-batched training must reproduce the full batch's sum.
		blocks := (r + reduceBlock - 1) / reduceBlock
		ps := make([]float64, blocks*c)
		pieces := k.dev.pool.pieces(blocks, int64(r)*int64(c))
		k.dev.pool.run(pieces, func(p int) {
			for bl := p * blocks / pieces; bl < (p+1)*blocks/pieces; bl++ {
				acc := ps[bl*c : bl*c+c]
				for i := bl * reduceBlock; i < min(r, (bl+1)*reduceBlock); i++ {
					for j, x := range ad[i*c : i*c+c] {
						acc[j] += float64(x)
					}
				}
			}
		})
		for j := range c {
			var sum float64
			for bl := range blocks {
				sum += ps[bl*c+j]
			}
			od[j] = float32(sum)
		}
		return nil
	case core.AxisCols:
		gcols := out.Cols()
		if out.Rows() != r || (gcols == 0 && c != 0) || (gcols > 0 && c%gcols != 0) {
			return shapeErr(op, "cols: out is %dx%d, want %dxG with G dividing %d", out.Rows(), gcols, r, c)
		}
		if r == 0 || gcols == 0 {
			return nil
		}
		w := c / gcols
		pieces := k.dev.pool.pieces(r, int64(r)*int64(c))
		k.dev.pool.run(pieces, func(p int) {
			for i := p * r / pieces; i < (p+1)*r/pieces; i++ {
				for g := range gcols {
					var s float32
					for _, x := range ad[i*c+g*w : i*c+g*w+w] {
						s += x
					}
					od[i*gcols+g] = s
				}
			}
		})
		return nil
	}
	return shapeErr(op, "unknown axis %d", axis)
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
	c := x.Cols()
	if out.Rows() != len(idx) || out.Cols() != c {
		return shapeErr(op, "out is %dx%d, want %dx%d", out.Rows(), out.Cols(), len(idx), c)
	}
	if err := checkIndex(op, idx, x.Rows()); err != nil {
		return err
	}
	n := len(idx)
	pieces := k.dev.pool.pieces(n, int64(n)*int64(c))
	k.dev.pool.run(pieces, func(p int) {
		for q := p * n / pieces; q < (p+1)*n/pieces; q++ {
			j := int(idx[q])
			copy(od[q*c:q*c+c], xd[j*c:j*c+c])
		}
	})
	return nil
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
	c := x.Cols()
	if x.Rows() != len(idx) || out.Cols() != c {
		return shapeErr(op, "x is %dx%d and out is %dx%d, want %dxC and ?xC", x.Rows(), c, out.Rows(), out.Cols(), len(idx))
	}
	if err := checkIndex(op, idx, out.Rows()); err != nil {
		return err
	}
	if c == 0 {
		return nil
	}
	const colBlock = 16
	cb := (c + colBlock - 1) / colBlock
	pieces := k.dev.pool.pieces(cb, int64(len(idx))*int64(c))
	add := k.v.Add
	k.dev.pool.run(pieces, func(p int) {
		j0, j1 := p*cb/pieces*colBlock, min(c, (p+1)*cb/pieces*colBlock)
		for q, j := range idx {
			add(xd[q*c+j0:q*c+j1], od[int(j)*c+j0:int(j)*c+j1])
		}
	})
	return nil
}

func checkIndex(op string, idx []int32, n int) error {
	for q, j := range idx {
		if j < 0 || int(j) >= n {
			return shapeErr(op, "index %d at position %d is outside [0,%d)", j, q, n)
		}
	}
	return nil
}

// Dropout keeps element (r, c) when core.DropoutKeep(seed, id(r)*cols+c, p)
// (id(r) = rows[r], or r when rows is nil) and scales it by 1/(1-p). mask
// may be nil when the caller needs no mask; out may alias x.
func (k *Kernels) Dropout(x *core.Tensor, p float32, seed uint64, rows []int32, out, mask *core.Tensor) error {
	const op = "Dropout"
	if !(p >= 0 && p <= 1) {
		return shapeErr(op, "probability %v outside [0,1]", p)
	}
	xd, err := hostData(op, "x", x)
	if err != nil {
		return err
	}
	od, err := hostData(op, "out", out)
	if err != nil {
		return err
	}
	if !core.SameShape(x, out) {
		return shapeErr(op, "x is %dx%d but out is %dx%d", x.Rows(), x.Cols(), out.Rows(), out.Cols())
	}
	var md []float32
	if mask != nil {
		if md, err = hostData(op, "mask", mask); err != nil {
			return err
		}
		if !core.SameShape(x, mask) {
			return shapeErr(op, "x is %dx%d but mask is %dx%d", x.Rows(), x.Cols(), mask.Rows(), mask.Cols())
		}
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
	const block = 4096
	blocks := (n + block - 1) / block
	pieces := k.dev.pool.pieces(blocks, int64(n)*8)
	k.dev.pool.run(pieces, func(q int) {
		lo, hi := q*blocks/pieces*block, min(n, (q+1)*blocks/pieces*block)
		for i := lo; i < hi; i++ {
			key := uint64(i)
			if rows != nil {
				key = uint64(rows[i/cols])*uint64(cols) + uint64(i%cols)
			}
			if core.DropoutKeep(seed, key, p) {
				od[i] = xd[i] * scale
				if md != nil {
					md[i] = scale
				}
				continue
			}
			od[i] = 0
			if md != nil {
				md[i] = 0
			}
		}
	})
	return nil
}
