package core

import (
	"errors"
	"testing"
)

// fuzzArgs decodes a fuzz input into small shapes, index arrays and
// graphs (a missing byte reads as 0).
type fuzzArgs struct{ b []byte }

func (r *fuzzArgs) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *fuzzArgs) dim() int { return int(r.byte() % 7) }

// tensor is nil for one byte value in 32, else a tensor of up to 6 x 6.
func (r *fuzzArgs) tensor() *Tensor {
	if r.byte()%32 == 31 {
		return nil
	}
	return mat(r.dim(), r.dim())
}

// ints is nil or up to 6 values in [-2, 8).
func (r *fuzzArgs) ints() []int32 {
	n := int(r.byte() % 8)
	if n == 7 {
		return nil
	}
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(r.byte()%10) - 2
	}
	return v
}

// graph is a valid graph of up to 6 x 6 nodes and 8 edges, with edge ids
// (a reverse or a subgraph's) when the flag byte says so.
func (r *fuzzArgs) graph() *Graph {
	nd, ns := r.dim(), r.dim()
	var src, dst []int32
	if nd > 0 && ns > 0 {
		for range int(r.byte() % 9) {
			src = append(src, int32(int(r.byte())%ns))
			dst = append(dst, int32(int(r.byte())%nd))
		}
	}
	g, err := FromEdges(nd, ns, src, dst)
	if err != nil {
		panic(err)
	}
	if r.byte()%2 == 1 {
		g.EIDs = make([]int32, len(g.Indices))
		for e := range g.EIDs {
			g.EIDs[e] = int32(r.byte() % 12)
		}
	}
	return g
}

// FuzzChecks calls the checks with random small arguments: none may
// panic, a rejection wraps ErrShape (CheckGraph: or ErrInvalidGraph),
// and whatever a check accepts keeps every index a kernel computes from
// the documented formulas in range.
func FuzzChecks(f *testing.F) {
	f.Add([]byte{0, 0, 3, 4, 0, 4, 2, 0, 3, 2})
	f.Add([]byte{1, 4, 6, 5, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 0, 0, 6, 3, 0, 1, 1, 0, 4, 3})
	f.Add([]byte{2, 3, 3, 4, 1, 2, 1, 1, 0, 0, 1, 3, 5, 0, 2, 0, 2})
	f.Add([]byte{5, 6, 0, 3, 4, 0, 1, 4, 0, 3, 4})
	f.Add([]byte{8, 3, 4, 3, 0, 3, 2, 1, 3, 0, 3, 4})
	for sel := range byte(12) {
		f.Add([]byte{sel, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &fuzzArgs{b: data}
		sel := r.byte() % 12
		var err error
		var ok func()
		switch sel {
		case 0:
			ta, tb := r.byte()%2 == 1, r.byte()%2 == 1
			a, b, c := r.tensor(), r.tensor(), r.tensor()
			var m, n, k int
			m, n, k, err = CheckGEMM(ta, tb, a, b, c)
			ok = func() {
				am, ak := a.Rows(), a.Cols()
				if ta {
					am, ak = ak, am
				}
				bk, bn := b.Rows(), b.Cols()
				if tb {
					bk, bn = bn, bk
				}
				if am != m || ak != k || bk != k || bn != n || c.Rows() != m || c.Cols() != n {
					t.Fatalf("GEMM accepted op(a) %dx%d, op(b) %dx%d, c %v as %d, %d, %d", am, ak, bk, bn, c.Shape, m, n, k)
				}
			}
		case 1:
			g := r.graph()
			red := Reduce(r.byte() % 3)
			var w *Tensor
			if r.byte()%2 == 1 {
				w = r.tensor()
			}
			x, out := r.tensor(), r.tensor()
			var heads int
			heads, err = CheckSpMM("SpMM", g, red, w, x, out)
			ok = func() {
				c := x.Cols()
				if x.Rows() != g.NumSrc || out.Rows() != g.NumDst || out.Cols() != c || heads < 1 || c%heads != 0 {
					t.Fatalf("SpMM accepted x %v, out %v, %d heads", x.Shape, out.Shape, heads)
				}
				if w != nil {
					edgeIndexed(t, g, w, heads)
				}
			}
		case 2:
			g := r.graph()
			s, out := r.tensor(), r.tensor()
			err = CheckEdgeSoftmax(g, s, out)
			ok = func() {
				edgeIndexed(t, g, s, s.Cols())
				edgeIndexed(t, g, out, s.Cols())
			}
		case 3:
			g := r.graph()
			y, dy, dx := r.tensor(), r.tensor(), r.tensor()
			err = CheckEdgeSoftmaxBackward(g, y, dy, dx)
			ok = func() {
				edgeIndexed(t, g, y, y.Cols())
				if !SameShape(y, dy) || !SameShape(y, dx) {
					t.Fatalf("EdgeSoftmaxBackward accepted %v, %v, %v", y.Shape, dy.Shape, dx.Shape)
				}
			}
		case 4, 5:
			x, idx, out := r.tensor(), r.ints(), r.tensor()
			src, dst := x, out // Gather reads x[idx[k]] into out[k]
			if sel == 4 {
				err = CheckGather(x, idx, out)
			} else {
				err = CheckScatterAdd(x, idx, out)
				src, dst = out, x // ScatterAdd adds x[k] into out[idx[k]]
			}
			ok = func() {
				if dst.Rows() != len(idx) || x.Cols() != out.Cols() {
					t.Fatalf("accepted x %v, %d indices, out %v", x.Shape, len(idx), out.Shape)
				}
				for _, j := range idx {
					if j < 0 || int(j) >= src.Rows() {
						t.Fatalf("accepted index %d for %d rows", j, src.Rows())
					}
				}
			}
		case 6:
			mop := MapOp(r.byte() % (uint8(NumMapOps) + 2))
			a, b, out := r.tensor(), r.tensor(), r.tensor()
			var br, bc int
			br, bc, err = CheckMap(mop, a, b, out)
			ok = func() {
				rr, c := out.Rows(), out.Cols()
				if mop != MapFill && mop != MapBroadcast && !SameShape(a, out) {
					t.Fatalf("Map %v accepted a %v for out %v", mop, a.Shape, out.Shape)
				}
				if mop.Unary() || rr*c == 0 {
					return
				}
				if br != b.Rows() || bc != b.Cols() {
					t.Fatalf("Map returned %dx%d for b %v", br, bc, b.Shape)
				}
				grp := c / bc // B(i,j) = b[i or 0, j/grp]
				for i := range rr {
					bi := 0
					if br == rr {
						bi = i
					}
					if bi >= br || (c-1)/grp >= bc {
						t.Fatalf("Map %v accepted b %v for out %v", mop, b.Shape, out.Shape)
					}
				}
			}
		case 7:
			axis := ReduceAxis(r.byte() % 3)
			a, out := r.tensor(), r.tensor()
			err = CheckReduce(axis, a, out)
			ok = func() {
				rr, c, g := a.Rows(), a.Cols(), out.Cols()
				switch {
				case axis == AxisRows && out.Rows() == 1 && g == c:
				case axis == AxisCols && out.Rows() == rr && (g > 0 && c%g == 0 || g == 0 && c == 0):
				default:
					t.Fatalf("Reduce %d accepted a %v, out %v", axis, a.Shape, out.Shape)
				}
			}
		case 8:
			logp, labels, rows := r.tensor(), r.ints(), r.ints()
			var grad *Tensor
			if r.byte()%2 == 1 {
				grad = r.tensor()
			}
			err = CheckNLLLoss(logp, labels, rows, grad)
			ok = func() {
				for _, i := range rows {
					if i < 0 || int(i) >= logp.Rows() || int(i) >= len(labels) || labels[i] < 0 || int(labels[i]) >= logp.Cols() {
						t.Fatalf("NLLLoss accepted row %d of %v with labels %v", i, logp.Shape, labels)
					}
				}
				if grad != nil && !SameShape(grad, logp) {
					t.Fatalf("NLLLoss accepted grad %v for logp %v", grad.Shape, logp.Shape)
				}
			}
		case 9:
			x, out := r.tensor(), r.tensor()
			var mask *Tensor
			if r.byte()%2 == 1 {
				mask = r.tensor()
			}
			p := float32(r.byte()%7)/4 - 0.25
			rows := r.ints()
			err = CheckDropout(x, p, rows, out, mask)
			ok = func() {
				if p < 0 || p > 1 || !SameShape(x, out) || mask != nil && !SameShape(x, mask) || rows != nil && len(rows) != x.Rows() {
					t.Fatalf("Dropout accepted p %v, x %v, out %v, %d row ids", p, x.Shape, out.Shape, len(rows))
				}
				for _, id := range rows {
					if id < 0 {
						t.Fatalf("Dropout accepted row id %d", id)
					}
				}
			}
		case 10:
			p, g, m, v := r.tensor(), r.tensor(), r.tensor(), r.tensor()
			h := AdamParams{Step: int(r.byte()%3) - 1}
			err = CheckAdam(p, g, m, v, h)
			ok = func() {
				if h.Step < 1 || !SameShape(p, g) || !SameShape(p, m) || !SameShape(p, v) {
					t.Fatalf("Adam accepted step %d, %v %v %v %v", h.Step, p.Shape, g.Shape, m.Shape, v.Shape)
				}
			}
		case 11:
			p, g := r.tensor(), r.tensor()
			var mom *Tensor
			if r.byte()%2 == 1 {
				mom = r.tensor()
			}
			h := SGDParams{Momentum: float32(r.byte() % 2), Step: int(r.byte()%3) - 1}
			err = CheckSGD(p, g, mom, h)
			ok = func() {
				if !SameShape(p, g) || h.Momentum != 0 && (mom == nil || h.Step < 1 || !SameShape(p, mom)) {
					t.Fatalf("SGD accepted %+v, p %v, g %v, mom %v", h, p.Shape, g.Shape, mom)
				}
			}
		}
		if err != nil {
			if !errors.Is(err, ErrShape) {
				t.Fatalf("check %d: %v does not wrap ErrShape", sel, err)
			}
			return
		}
		ok()
	})
}

// edgeIndexed fails t unless every edge id of g is a row of t, which has
// cols columns.
func edgeIndexed(t *testing.T, g *Graph, e *Tensor, cols int) {
	t.Helper()
	if e.Cols() != cols {
		t.Fatalf("accepted an edge tensor %v, want %d columns", e.Shape, cols)
	}
	for i := range g.NumEdges() {
		if g.EdgeID(i) >= e.Rows() {
			t.Fatalf("accepted an edge tensor %v for edge id %d", e.Shape, g.EdgeID(i))
		}
	}
}

// FuzzCheckGraph checks that CheckGraph never panics on a malformed CSR
// and that what it accepts has offsets that index its arrays.
func FuzzCheckGraph(f *testing.F) {
	f.Add(2, []byte{0, 1, 2}, 2)
	f.Add(3, []byte{0, 1}, 1)
	f.Add(-1, []byte{}, 0)
	f.Add(0, []byte{0}, 0)
	f.Fuzz(func(t *testing.T, numDst int, off []byte, nnz int) {
		if nnz < 0 || nnz > 1<<12 {
			return
		}
		g := &Graph{NumDst: numDst, Indices: make([]int32, nnz)}
		for _, o := range off {
			g.Offsets = append(g.Offsets, int64(o))
		}
		err := CheckGraph("SpMM", g)
		if err != nil {
			if !errors.Is(err, ErrInvalidGraph) {
				t.Fatalf("%v does not wrap ErrInvalidGraph", err)
			}
			return
		}
		if len(g.Offsets) != g.NumDst+1 || g.NumDst >= 0 && g.Offsets[g.NumDst] != int64(nnz) {
			t.Fatalf("accepted %d rows with offsets %v and %d indices", numDst, g.Offsets, nnz)
		}
	})
}
