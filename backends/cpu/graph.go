package cpu

import (
	"math"

	"github.com/gnnkit/gnnkit/core"
)

// graphPieces returns degree-aware row bounds for a kernel over g whose
// per-edge work is width floats.
func (k *Kernels) graphPieces(g *core.Graph, width int, buf []int) []int {
	work := (int64(g.NumEdges()) + int64(g.NumDst)) * int64(max(width, 1))
	return rowBounds(g, k.dev.pool.pieces(g.NumDst, work), buf)
}

// SpMM computes out[i,:] = reduce over the edges e of row i of
// w(e) * x[src(e),:], reading w at the edge's id.
func (k *Kernels) SpMM(g *core.Graph, red core.Reduce, w, x, out *core.Tensor) error {
	const op = "SpMM"
	if err := checkGraph(op, g); err != nil {
		return err
	}
	if red != core.ReduceSum && red != core.ReduceMean {
		return shapeErr(op, "unknown reduce %v", red)
	}
	xd, err := hostData(op, "x", x)
	if err != nil {
		return err
	}
	od, err := hostData(op, "out", out)
	if err != nil {
		return err
	}
	c := x.Cols()
	if x.Rows() != g.NumSrc {
		return shapeErr(op, "x has %d rows, want NumSrc=%d", x.Rows(), g.NumSrc)
	}
	if out.Rows() != g.NumDst || out.Cols() != c {
		return shapeErr(op, "out is %dx%d, want %dx%d", out.Rows(), out.Cols(), g.NumDst, c)
	}
	var wd []float32
	heads, f := 1, c
	if w != nil {
		if wd, err = hostData(op, "w", w); err != nil {
			return err
		}
		heads = w.Cols()
		if heads < 1 || c%heads != 0 {
			return shapeErr(op, "w has %d columns (heads), which do not divide x's %d", heads, c)
		}
		if err := edgeRows(op, "w", g, w, heads); err != nil {
			return err
		}
		f = c / heads
	}
	if g.NumDst == 0 {
		return nil
	}
	var bbuf [4*64 + 1]int
	bounds := k.graphPieces(g, c, bbuf[:0])
	v := k.v
	off, idx := g.Offsets, g.Indices
	k.dev.pool.run(len(bounds)-1, func(p int) {
		for i := bounds[p]; i < bounds[p+1]; i++ {
			orow := od[i*c : i*c+c]
			clear(orow)
			e0, e1 := int(off[i]), int(off[i+1])
			if c == 0 {
				continue
			}
			row := func(e int) []float32 { j := int(idx[e]); return xd[j*c : j*c+c] }
			switch {
			case wd == nil:
				e := e0
				for ; e+4 <= e1; e += 4 {
					v.Add4(row(e), row(e+1), row(e+2), row(e+3), orow)
				}
				for ; e < e1; e++ {
					v.Add(row(e), orow)
				}
			case heads == 1:
				e := e0
				for ; e+4 <= e1; e += 4 {
					v.Axpy4(wd[g.EdgeID(e)], wd[g.EdgeID(e+1)], wd[g.EdgeID(e+2)], wd[g.EdgeID(e+3)],
						row(e), row(e+1), row(e+2), row(e+3), orow)
				}
				for ; e < e1; e++ {
					v.Axpy(wd[g.EdgeID(e)], row(e), orow)
				}
			default:
				e := e0
				for ; e+4 <= e1; e += 4 {
					x0, x1, x2, x3 := row(e), row(e+1), row(e+2), row(e+3)
					w0, w1 := wd[g.EdgeID(e)*heads:], wd[g.EdgeID(e+1)*heads:]
					w2, w3 := wd[g.EdgeID(e+2)*heads:], wd[g.EdgeID(e+3)*heads:]
					for h := range heads {
						lo, hi := h*f, h*f+f
						v.Axpy4(w0[h], w1[h], w2[h], w3[h], x0[lo:hi], x1[lo:hi], x2[lo:hi], x3[lo:hi], orow[lo:hi])
					}
				}
				for ; e < e1; e++ {
					x0, w0 := row(e), wd[g.EdgeID(e)*heads:]
					for h := range heads {
						v.Axpy(w0[h], x0[h*f:h*f+f], orow[h*f:h*f+f])
					}
				}
			}
			if red == core.ReduceMean && e1 > e0 {
				v.Scal(float32(1/float64(e1-e0)), orow)
			}
		}
	})
	return nil
}

// SDDMM computes out[id(e), h] for every edge from a[dst(e)] and b[src(e)].
func (k *Kernels) SDDMM(g *core.Graph, eop core.EdgeOp, a, b, out *core.Tensor) error {
	const op = "SDDMM"
	if err := checkGraph(op, g); err != nil {
		return err
	}
	ad, err := hostData(op, "a", a)
	if err != nil {
		return err
	}
	bd, err := hostData(op, "b", b)
	if err != nil {
		return err
	}
	od, err := hostData(op, "out", out)
	if err != nil {
		return err
	}
	if a.Rows() != g.NumDst {
		return shapeErr(op, "a has %d rows, want NumDst=%d", a.Rows(), g.NumDst)
	}
	if b.Rows() != g.NumSrc {
		return shapeErr(op, "b has %d rows, want NumSrc=%d", b.Rows(), g.NumSrc)
	}
	if a.Cols() != b.Cols() {
		return shapeErr(op, "a has %d columns but b has %d", a.Cols(), b.Cols())
	}
	heads, cols := out.Cols(), a.Cols()
	switch eop {
	case core.EdgeAdd:
		if cols != heads {
			return shapeErr(op, "add: a and b have %d columns, out has %d heads", cols, heads)
		}
	case core.EdgeDot:
		if (heads == 0 && cols != 0) || (heads > 0 && cols%heads != 0) {
			return shapeErr(op, "dot: a and b have %d columns, not a multiple of out's %d heads", cols, heads)
		}
	default:
		return shapeErr(op, "unknown edge op %v", eop)
	}
	if err := edgeRows(op, "out", g, out, heads); err != nil {
		return err
	}
	if g.NumDst == 0 || heads == 0 {
		return nil
	}
	f := cols / heads
	var bbuf [4*64 + 1]int
	bounds := k.graphPieces(g, cols, bbuf[:0])
	dot := k.v.Dot
	off, idx := g.Offsets, g.Indices
	k.dev.pool.run(len(bounds)-1, func(p int) {
		for i := bounds[p]; i < bounds[p+1]; i++ {
			arow := ad[i*cols : i*cols+cols]
			for e := off[i]; e < off[i+1]; e++ {
				j := int(idx[e])
				brow := bd[j*cols : j*cols+cols]
				id := g.EdgeID(int(e))
				orow := od[id*heads : id*heads+heads]
				if eop == core.EdgeAdd {
					for h := range orow {
						orow[h] = arow[h] + brow[h]
					}
					continue
				}
				for h := range orow {
					orow[h] = dot(arow[h*f:h*f+f], brow[h*f:h*f+f])
				}
			}
		}
	})
	return nil
}

// EdgeSoftmax computes the softmax of s over each row's edges, per head.
// out may alias s.
func (k *Kernels) EdgeSoftmax(g *core.Graph, s, out *core.Tensor) error {
	const op = "EdgeSoftmax"
	if err := checkGraph(op, g); err != nil {
		return err
	}
	sd, err := hostData(op, "s", s)
	if err != nil {
		return err
	}
	od, err := hostData(op, "out", out)
	if err != nil {
		return err
	}
	heads := s.Cols()
	if err := edgeRows(op, "s", g, s, -1); err != nil {
		return err
	}
	if err := edgeRows(op, "out", g, out, heads); err != nil {
		return err
	}
	if !core.SameShape(s, out) {
		return shapeErr(op, "s is %dx%d but out is %dx%d", s.Rows(), s.Cols(), out.Rows(), out.Cols())
	}
	if g.NumDst == 0 || heads == 0 {
		return nil
	}
	var bbuf [4*64 + 1]int
	bounds := k.graphPieces(g, heads, bbuf[:0])
	off := g.Offsets
	k.dev.pool.run(len(bounds)-1, func(p int) {
		var stack [16]float64
		mx, sum := stack[:min(heads, 8)], stack[8:8+min(heads, 8)]
		if heads > 8 {
			mx, sum = make([]float64, heads), make([]float64, heads)
		}
		for i := bounds[p]; i < bounds[p+1]; i++ {
			e0, e1 := off[i], off[i+1]
			if e0 == e1 {
				continue
			}
			for h := range mx {
				mx[h] = math.Inf(-1)
				sum[h] = 0
			}
			for e := e0; e < e1; e++ {
				id := g.EdgeID(int(e))
				for h, x := range sd[id*heads : id*heads+heads] {
					mx[h] = max(mx[h], float64(x))
				}
			}
			for e := e0; e < e1; e++ {
				id := g.EdgeID(int(e))
				srow, orow := sd[id*heads:id*heads+heads], od[id*heads:id*heads+heads]
				for h := range orow {
					ex := math.Exp(float64(srow[h]) - mx[h])
					sum[h] += ex
					orow[h] = float32(ex)
				}
			}
			for h := range sum {
				sum[h] = 1 / sum[h]
			}
			for e := e0; e < e1; e++ {
				id := g.EdgeID(int(e))
				for h := range heads {
					od[id*heads+h] = float32(float64(od[id*heads+h]) * sum[h])
				}
			}
		}
	})
	return nil
}

// EdgeSoftmaxBackward computes dx = y * (dy - sum over the row of y*dy).
// dx may alias dy.
func (k *Kernels) EdgeSoftmaxBackward(g *core.Graph, y, dy, dx *core.Tensor) error {
	const op = "EdgeSoftmaxBackward"
	if err := checkGraph(op, g); err != nil {
		return err
	}
	yd, err := hostData(op, "y", y)
	if err != nil {
		return err
	}
	dyd, err := hostData(op, "dy", dy)
	if err != nil {
		return err
	}
	dxd, err := hostData(op, "dx", dx)
	if err != nil {
		return err
	}
	heads := y.Cols()
	if err := edgeRows(op, "y", g, y, -1); err != nil {
		return err
	}
	if !core.SameShape(y, dy) || !core.SameShape(y, dx) {
		return shapeErr(op, "y is %dx%d, dy %dx%d, dx %dx%d; want all equal", y.Rows(), y.Cols(), dy.Rows(), dy.Cols(), dx.Rows(), dx.Cols())
	}
	if g.NumDst == 0 || heads == 0 {
		return nil
	}
	var bbuf [4*64 + 1]int
	bounds := k.graphPieces(g, heads, bbuf[:0])
	off := g.Offsets
	k.dev.pool.run(len(bounds)-1, func(p int) {
		var stack [8]float64
		sum := stack[:min(heads, len(stack))]
		if heads > len(stack) {
			sum = make([]float64, heads)
		}
		for i := bounds[p]; i < bounds[p+1]; i++ {
			e0, e1 := off[i], off[i+1]
			clear(sum)
			for e := e0; e < e1; e++ {
				id := g.EdgeID(int(e))
				for h := range heads {
					sum[h] += float64(yd[id*heads+h]) * float64(dyd[id*heads+h])
				}
			}
			for e := e0; e < e1; e++ {
				id := g.EdgeID(int(e))
				for h := range heads {
					q := id*heads + h
					dxd[q] = float32(float64(yd[q]) * (float64(dyd[q]) - sum[h]))
				}
			}
		}
	})
	return nil
}
