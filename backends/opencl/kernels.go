package opencl

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/gnnkit/gnnkit/core"
)

// Kernels are a device's arithmetic: core.Kernels as OpenCL C kernels
// (kernels/*.cl) enqueued on the device's in-order queue. Shapes are
// checked on the host, with the CPU backend's rules and messages. Every
// kernel computes each output element in a fixed order, so results are
// repeatable bit for bit.
type Kernels struct{ d *Device }

func shapeErr(op, format string, args ...any) error {
	return fmt.Errorf("%w: opencl: %s: %s", core.ErrShape, op, fmt.Sprintf(format, args...))
}

func checkGraph(op string, g *core.Graph) error {
	if g == nil {
		return shapeErr(op, "graph is nil")
	}
	if len(g.Offsets) != g.NumDst+1 || (g.NumDst >= 0 && g.Offsets[g.NumDst] != int64(len(g.Indices))) {
		return fmt.Errorf("opencl: %s: %w: malformed CSR", op, core.ErrInvalidGraph)
	}
	return nil
}

// edgeRows checks that edge tensor t can be indexed by every edge id of
// g, with cols columns (cols < 0: any): exactly NumEdges rows without
// EIDs, at least NumEdgeIDs with them.
func edgeRows(op, name string, g *core.Graph, gb *graphBufs, t *core.Tensor, cols int) error {
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
	if need := gb.numEdgeIDs; t.Rows() < need {
		return shapeErr(op, "%s has %d rows, but the graph's edge ids need %d", name, t.Rows(), need)
	}
	return nil
}

// eidArg is the edge-id buffer to pass a graph kernel (the index buffer
// as a placeholder when the graph has none; the kernel does not read it).
func (gb *graphBufs) eidArg() clMem {
	if gb.hasEID {
		return gb.eid
	}
	return gb.idx
}

func checkIndex(op string, idx []int32, n int) error {
	for q, j := range idx {
		if j < 0 || int(j) >= n {
			return shapeErr(op, "index %d at position %d is outside [0,%d)", j, q, n)
		}
	}
	return nil
}

// GEMM computes c = alpha*op(a)*op(b) + beta*c with the local-memory
// tiled, register-blocked kernels of gemm.cl (one per transpose
// combination and tiling: the large tiling when c has at least a large
// tile in each dimension). With alpha == 0 or an empty inner dimension it
// only scales c (beta == 0: zeroes).
func (k *Kernels) GEMM(transA, transB bool, alpha float32, a, b *core.Tensor, beta float32, c *core.Tensor) error {
	const op = "GEMM"
	d := k.d
	ab, err := d.buffer(op, "a", a)
	if err != nil {
		return err
	}
	bb, err := d.buffer(op, "b", b)
	if err != nil {
		return err
	}
	cb, err := d.buffer(op, "c", c)
	if err != nil {
		return err
	}
	m, kk := a.Rows(), a.Cols()
	if transA {
		m, kk = kk, m
	}
	kb, n := b.Rows(), b.Cols()
	if transB {
		kb, n = n, kb
	}
	if kk != kb {
		return shapeErr(op, "op(a) is %dx%d but op(b) is %dx%d (transA=%v, transB=%v)", m, kk, kb, n, transA, transB)
	}
	if c.Rows() != m || c.Cols() != n {
		return shapeErr(op, "c is %dx%d, want %dx%d", c.Rows(), c.Cols(), m, n)
	}
	if m == 0 || n == 0 {
		return nil
	}
	if alpha == 0 || kk == 0 {
		switch beta {
		case 0:
			return d.fill(cb, 0)
		case 1:
			return nil
		}
		return d.launch("map_op", grid1(cb.n), int(core.MapScale), cb.n, n, 0, 0, beta, cb, cb, cb)
	}
	name := "gemm_nn"
	switch {
	case transA && transB:
		name = "gemm_tt"
	case transA:
		name = "gemm_tn"
	case transB:
		name = "gemm_nt"
	}
	t, size := d.small, "_s"
	if m >= d.large.ts && n >= d.large.ts {
		t, size = d.large, "_l"
	}
	name += size
	gr := grid2((n+t.ts-1)/t.ts*t.rts(), (m+t.ts-1)/t.ts*t.rts())
	gr.local = [2]int{t.rts(), t.rts()}
	return d.launch(name, gr, m, n, kk, alpha, ab, bb, beta, cb)
}

// SpMM computes out[i,:] = reduce over the edges e of row i of
// w(e) * x[src(e),:], one work-item per output element.
func (k *Kernels) SpMM(g *core.Graph, red core.Reduce, w, x, out *core.Tensor) error {
	const op = "SpMM"
	d := k.d
	if err := checkGraph(op, g); err != nil {
		return err
	}
	if red != core.ReduceSum && red != core.ReduceMean {
		return shapeErr(op, "unknown reduce %v", red)
	}
	xb, err := d.buffer(op, "x", x)
	if err != nil {
		return err
	}
	ob, err := d.buffer(op, "out", out)
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
	gb, err := d.graph(op, g, false)
	if err != nil {
		return err
	}
	wmode, heads, f := 0, 1, c
	wmem := xb.mem
	if w != nil {
		wb, err := d.buffer(op, "w", w)
		if err != nil {
			return err
		}
		heads = w.Cols()
		if heads < 1 || c%heads != 0 {
			return shapeErr(op, "w has %d columns (heads), which do not divide x's %d", heads, c)
		}
		if err := edgeRows(op, "w", g, gb, w, heads); err != nil {
			return err
		}
		f = c / heads
		wmem = wb.mem
		wmode = 1
		if heads > 1 {
			wmode = 2
		}
	}
	if g.NumDst == 0 || c == 0 {
		return nil
	}
	return d.launch("spmm", grid2(c, g.NumDst), g.NumDst, c, gb.off, gb.idx, gb.eidArg(), gb.hasEID,
		wmem, wmode, heads, max(f, 1), red == core.ReduceMean, xb, ob)
}

// SDDMM computes out[id(e), h] for every edge from a[dst(e)] and
// b[src(e)], one work-item per (edge, head).
func (k *Kernels) SDDMM(g *core.Graph, eop core.EdgeOp, a, b, out *core.Tensor) error {
	const op = "SDDMM"
	d := k.d
	if err := checkGraph(op, g); err != nil {
		return err
	}
	ab, err := d.buffer(op, "a", a)
	if err != nil {
		return err
	}
	bb, err := d.buffer(op, "b", b)
	if err != nil {
		return err
	}
	ob, err := d.buffer(op, "out", out)
	if err != nil {
		return err
	}
	heads, err := core.CheckSDDMM(g, eop, a, b, out)
	cols := a.Cols()
	if err != nil {
		return fmt.Errorf("%s: %w", "opencl", err)
	}
	gb, err := d.graph(op, g, true)
	if err != nil {
		return err
	}
	if err := edgeRows(op, "out", g, gb, out, heads); err != nil {
		return err
	}
	if g.NumDst == 0 || heads == 0 || g.NumEdges() == 0 {
		return nil
	}
	f := cols / heads
	return d.launch("sddmm", grid2(heads, g.NumEdges()), g.NumEdges(), heads, f, eop == core.EdgeDot,
		gb.rows, gb.idx, gb.eidArg(), gb.hasEID, ab, bb, ob)
}

// EdgeSoftmax computes the softmax of s over each row's edges, per head,
// one work-item per (row, head). out may alias s.
func (k *Kernels) EdgeSoftmax(g *core.Graph, s, out *core.Tensor) error {
	const op = "EdgeSoftmax"
	d := k.d
	if err := checkGraph(op, g); err != nil {
		return err
	}
	sb, err := d.buffer(op, "s", s)
	if err != nil {
		return err
	}
	ob, err := d.buffer(op, "out", out)
	if err != nil {
		return err
	}
	gb, err := d.graph(op, g, false)
	if err != nil {
		return err
	}
	heads := s.Cols()
	if err := edgeRows(op, "s", g, gb, s, -1); err != nil {
		return err
	}
	if err := edgeRows(op, "out", g, gb, out, heads); err != nil {
		return err
	}
	if !core.SameShape(s, out) {
		return shapeErr(op, "s is %dx%d but out is %dx%d", s.Rows(), s.Cols(), out.Rows(), out.Cols())
	}
	if g.NumDst == 0 || heads == 0 {
		return nil
	}
	return d.launch("edge_softmax", grid2(heads, g.NumDst), g.NumDst, heads, gb.off, gb.eidArg(), gb.hasEID, sb, ob)
}

// EdgeSoftmaxBackward computes dx = y * (dy - sum over the row of y*dy).
// dx may alias dy.
func (k *Kernels) EdgeSoftmaxBackward(g *core.Graph, y, dy, dx *core.Tensor) error {
	const op = "EdgeSoftmaxBackward"
	d := k.d
	if err := checkGraph(op, g); err != nil {
		return err
	}
	yb, err := d.buffer(op, "y", y)
	if err != nil {
		return err
	}
	dyb, err := d.buffer(op, "dy", dy)
	if err != nil {
		return err
	}
	dxb, err := d.buffer(op, "dx", dx)
	if err != nil {
		return err
	}
	gb, err := d.graph(op, g, false)
	if err != nil {
		return err
	}
	heads := y.Cols()
	if err := edgeRows(op, "y", g, gb, y, -1); err != nil {
		return err
	}
	if !core.SameShape(y, dy) || !core.SameShape(y, dx) {
		return shapeErr(op, "y is %dx%d, dy %dx%d, dx %dx%d; want all equal", y.Rows(), y.Cols(), dy.Rows(), dy.Cols(), dx.Rows(), dx.Cols())
	}
	if g.NumDst == 0 || heads == 0 {
		return nil
	}
	return d.launch("edge_softmax_backward", grid2(heads, g.NumDst), g.NumDst, heads, gb.off, gb.eidArg(), gb.hasEID, yb, dyb, dxb)
}

// Gather sets out[k,:] = x[idx[k],:]; idx is uploaded for the call.
func (k *Kernels) Gather(x *core.Tensor, idx []int32, out *core.Tensor) error {
	const op = "Gather"
	d := k.d
	xb, err := d.buffer(op, "x", x)
	if err != nil {
		return err
	}
	ob, err := d.buffer(op, "out", out)
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
	if len(idx) == 0 || c == 0 {
		return nil
	}
	ib, err := d.tempInt32("gather indices", idx)
	if err != nil {
		return err
	}
	defer d.freeTemp(ib)
	return d.launch("gather", grid2(c, len(idx)), len(idx), c, ib.mem, xb, ob)
}

// ScatterAdd adds x[k,:] into out[idx[k],:]. The host groups positions
// by target row (keeping index order), and one work-item per (touched
// row, column) adds them in that order: deterministic, no atomics, and
// the same sums as a sequential loop.
func (k *Kernels) ScatterAdd(x *core.Tensor, idx []int32, out *core.Tensor) error {
	const op = "ScatterAdd"
	d := k.d
	xb, err := d.buffer(op, "x", x)
	if err != nil {
		return err
	}
	ob, err := d.buffer(op, "out", out)
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
	if c == 0 || len(idx) == 0 {
		return nil
	}
	trow, toff, list := groupByRow(idx, out.Rows())
	tr, err := d.tempInt32("scatter rows", trow)
	if err != nil {
		return err
	}
	defer d.freeTemp(tr)
	to, err := d.tempInt32("scatter offsets", toff)
	if err != nil {
		return err
	}
	defer d.freeTemp(to)
	tl, err := d.tempInt32("scatter positions", list)
	if err != nil {
		return err
	}
	defer d.freeTemp(tl)
	return d.launch("scatter_add", grid2(c, len(trow)), len(trow), c, tr.mem, to.mem, tl.mem, xb, ob)
}

// groupByRow returns the distinct targets of idx (ascending), offsets
// into list for each, and list: the positions q grouped by idx[q], each
// group in increasing q.
func groupByRow(idx []int32, rows int) (trow, toff, list []int32) {
	n := len(idx)
	list = make([]int32, n)
	if rows <= 4*n+4096 {
		// counting sort over the rows
		cnt := make([]int32, rows+1)
		for _, j := range idx {
			cnt[j+1]++
		}
		for j := range rows {
			if cnt[j+1] > 0 {
				trow = append(trow, int32(j))
			}
			cnt[j+1] += cnt[j]
		}
		pos := cnt[:rows]
		for q, j := range idx {
			list[pos[j]] = int32(q)
			pos[j]++
		}
	} else {
		for q := range list {
			list[q] = int32(q)
		}
		slices.SortStableFunc(list, func(p, q int32) int { return int(idx[p]) - int(idx[q]) })
		for k, q := range list {
			if k == 0 || idx[q] != idx[list[k-1]] {
				trow = append(trow, idx[q])
			}
		}
	}
	toff = make([]int32, 0, len(trow)+1)
	for k, q := range list {
		if k == 0 || idx[q] != idx[list[k-1]] {
			toff = append(toff, int32(k))
		}
	}
	toff = append(toff, int32(n))
	return trow, toff, list
}

// Map applies an elementwise op, broadcasting b as core.MapOp describes.
// out may alias a.
func (k *Kernels) Map(mop core.MapOp, a, b *core.Tensor, alpha float32, out *core.Tensor) error {
	const op = "Map"
	d := k.d
	if mop >= core.NumMapOps {
		return shapeErr(op, "unknown op %v", mop)
	}
	ob, err := d.buffer(op, "out", out)
	if err != nil {
		return err
	}
	r, c := out.Rows(), out.Cols()
	amem := ob.mem
	if mop != core.MapFill && mop != core.MapBroadcast {
		ab, err := d.buffer(op, "a", a)
		if err != nil {
			return err
		}
		if !core.SameShape(a, out) {
			return shapeErr(op, "%v: a is %dx%d but out is %dx%d", mop, a.Rows(), a.Cols(), r, c)
		}
		amem = ab.mem
	}
	br, bc := 0, 0
	bmem := ob.mem
	if !mop.Unary() {
		bb, err := d.buffer(op, "b", b)
		if err != nil {
			return err
		}
		br, bc = b.Rows(), b.Cols()
		if br != r && br != 1 {
			return shapeErr(op, "%v: b has %d rows, want %d or 1", mop, br, r)
		}
		if (bc == 0 && c != 0) || (bc > 0 && c%bc != 0) {
			return shapeErr(op, "%v: b has %d columns, which do not divide out's %d", mop, bc, c)
		}
		bmem = bb.mem
	}
	n := r * c
	if n == 0 {
		return nil
	}
	switch {
	case mop == core.MapFill:
		return d.fill(ob, alpha)
	case mop == core.MapCopy && amem == ob.mem:
		return nil
	}
	return d.launch("map_op", grid1(n), int(mop), n, c, br, bc, alpha, amem, bmem, ob)
}

// reduceBlock is REDUCE_BLOCK of elem.cl: Reduce(AxisRows) sums blocks
// of this many rows, then the blocks' partial sums in order.
const reduceBlock = 256

// Reduce sums a over rows (out 1 x C) or over groups of columns (out R x G).
func (k *Kernels) Reduce(axis core.ReduceAxis, a, out *core.Tensor) error {
	const op = "Reduce"
	d := k.d
	ab, err := d.buffer(op, "a", a)
	if err != nil {
		return err
	}
	ob, err := d.buffer(op, "out", out)
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
		if r == 0 {
			return d.fill(ob, 0)
		}
		blocks := (r + reduceBlock - 1) / reduceBlock
		if blocks == 1 {
			return d.launch("reduce_rows_part", grid2(c, 1), r, c, 1, ab, ob)
		}
		part, err := d.newTemp("reduce partial sums", int64(blocks)*int64(c)*4, nil)
		if err != nil {
			return err
		}
		defer d.freeTemp(part)
		if err := d.launch("reduce_rows_part", grid2(c, blocks), r, c, blocks, ab, part.mem); err != nil {
			return err
		}
		return d.launch("reduce_rows_final", grid1(c), blocks, c, part.mem, ob)
	case core.AxisCols:
		gcols := out.Cols()
		if out.Rows() != r || (gcols == 0 && c != 0) || (gcols > 0 && c%gcols != 0) {
			return shapeErr(op, "cols: out is %dx%d, want %dxG with G dividing %d", out.Rows(), gcols, r, c)
		}
		if r == 0 || gcols == 0 {
			return nil
		}
		return d.launch("reduce_cols", grid2(gcols, r), r, gcols, c/gcols, ab, ob)
	}
	return shapeErr(op, "unknown axis %d", axis)
}

// LogSoftmax computes out[i,:] = x[i,:] - logsumexp(x[i,:]), one
// work-item per row; out may alias x.
func (k *Kernels) LogSoftmax(x, out *core.Tensor) error {
	const op = "LogSoftmax"
	d := k.d
	xb, err := d.buffer(op, "x", x)
	if err != nil {
		return err
	}
	ob, err := d.buffer(op, "out", out)
	if err != nil {
		return err
	}
	if !core.SameShape(x, out) {
		return shapeErr(op, "x is %dx%d but out is %dx%d", x.Rows(), x.Cols(), out.Rows(), out.Cols())
	}
	r, c := x.Rows(), x.Cols()
	if r == 0 || c == 0 {
		return nil
	}
	return d.launch("log_softmax", grid1(r), r, c, xb, ob)
}

// LogSoftmaxBackward computes dx = dy - exp(y) * rowsum(dy); dx may alias dy.
func (k *Kernels) LogSoftmaxBackward(y, dy, dx *core.Tensor) error {
	const op = "LogSoftmaxBackward"
	d := k.d
	yb, err := d.buffer(op, "y", y)
	if err != nil {
		return err
	}
	dyb, err := d.buffer(op, "dy", dy)
	if err != nil {
		return err
	}
	dxb, err := d.buffer(op, "dx", dx)
	if err != nil {
		return err
	}
	if !core.SameShape(y, dy) || !core.SameShape(y, dx) {
		return shapeErr(op, "y is %dx%d, dy %dx%d, dx %dx%d; want all equal", y.Rows(), y.Cols(), dy.Rows(), dy.Cols(), dx.Rows(), dx.Cols())
	}
	r, c := y.Rows(), y.Cols()
	if r == 0 || c == 0 {
		return nil
	}
	return d.launch("log_softmax_backward", grid1(r), r, c, yb, dyb, dxb)
}

// NLLLoss returns scale * sum over rows r of -logp[r, labels[r]] and, if
// grad is not nil, overwrites grad with its gradient. The picked values
// are read back and summed on the host in float64, in the order of rows
// (the CPU backend's sum); a row listed twice counts twice.
func (k *Kernels) NLLLoss(logp *core.Tensor, labels, rows []int32, scale float32, grad *core.Tensor) (float64, error) {
	const op = "NLLLoss"
	d := k.d
	lb, err := d.buffer(op, "logp", logp)
	if err != nil {
		return 0, err
	}
	r, c := logp.Rows(), logp.Cols()
	pos := make([]int32, len(rows))
	for q, i := range rows {
		if i < 0 || int(i) >= r {
			return 0, shapeErr(op, "row %d at position %d is outside [0,%d)", i, q, r)
		}
		if int(i) >= len(labels) {
			return 0, shapeErr(op, "row %d has no label (%d labels)", i, len(labels))
		}
		if l := labels[i]; l < 0 || int(l) >= c {
			return 0, shapeErr(op, "row %d has label %d, outside [0,%d)", i, l, c)
		}
		pos[q] = int32(int(i)*c + int(labels[i]))
	}
	if grad != nil {
		gb, err := d.buffer(op, "grad", grad)
		if err != nil {
			return 0, err
		}
		if !core.SameShape(grad, logp) {
			return 0, shapeErr(op, "grad is %dx%d but logp is %dx%d", grad.Rows(), grad.Cols(), r, c)
		}
		if err := d.fill(gb, 0); err != nil {
			return 0, err
		}
		if len(pos) > 0 {
			// Distinct positions with the CPU backend's repeated
			// subtraction, so a duplicated row gives the same bits.
			at := map[int32]int{}
			var up []int32
			var val []float32
			for _, p := range pos {
				k, ok := at[p]
				if !ok {
					k = len(up)
					at[p] = k
					up = append(up, p)
					val = append(val, 0)
				}
				val[k] -= scale
			}
			if err := d.scatterSet(up, val, gb); err != nil {
				return 0, err
			}
		}
	}
	if len(pos) == 0 {
		return 0, nil
	}
	pb, err := d.tempInt32("loss positions", pos)
	if err != nil {
		return 0, err
	}
	defer d.freeTemp(pb)
	vb, err := d.newTemp("loss values", int64(len(pos))*4, nil)
	if err != nil {
		return 0, err
	}
	defer d.freeTemp(vb)
	if err := d.launch("nll_pick", grid1(len(pos)), len(pos), pb.mem, lb, vb.mem); err != nil {
		return 0, err
	}
	vals := make([]float32, len(pos))
	if err := d.read(vb.mem, unsafe.Pointer(&vals[0]), vb.bytes); err != nil {
		return 0, fmt.Errorf("opencl: %s: %w", op, err)
	}
	var sum float64
	for _, v := range vals {
		sum -= float64(v)
	}
	return float64(scale) * sum, nil
}

// scatterSet writes val[k] at element pos[k] of b (positions distinct).
func (d *Device) scatterSet(pos []int32, val []float32, b *Buffer) error {
	pb, err := d.tempInt32("scatter positions", pos)
	if err != nil {
		return err
	}
	defer d.freeTemp(pb)
	vb, err := d.newTemp("scatter values", int64(len(val))*4, unsafe.Pointer(&val[0]))
	if err != nil {
		return err
	}
	defer d.freeTemp(vb)
	return d.launch("scatter_set", grid1(len(pos)), len(pos), pb.mem, vb.mem, b)
}

// Dropout keeps element (r, c) when core.DropoutKeep(seed, id(r)*Cols+c,
// p) (the same hash, in OpenCL C), id(r) = rows[r] or r when rows is nil,
// and scales it by 1/(1-p). mask may be nil; out may alias x. rows is
// uploaded for the call.
func (k *Kernels) Dropout(x *core.Tensor, p float32, seed uint64, rows []int32, out, mask *core.Tensor) error {
	const op = "Dropout"
	d := k.d
	if !(p >= 0 && p <= 1) {
		return shapeErr(op, "probability %v outside [0,1]", p)
	}
	xb, err := d.buffer(op, "x", x)
	if err != nil {
		return err
	}
	ob, err := d.buffer(op, "out", out)
	if err != nil {
		return err
	}
	if !core.SameShape(x, out) {
		return shapeErr(op, "x is %dx%d but out is %dx%d", x.Rows(), x.Cols(), out.Rows(), out.Cols())
	}
	mmem := ob.mem
	if mask != nil {
		mb, err := d.buffer(op, "mask", mask)
		if err != nil {
			return err
		}
		if !core.SameShape(x, mask) {
			return shapeErr(op, "x is %dx%d but mask is %dx%d", x.Rows(), x.Cols(), mask.Rows(), mask.Cols())
		}
		mmem = mb.mem
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
	n := xb.n
	if n == 0 {
		return nil
	}
	var scale float32
	if p < 1 {
		scale = 1 / (1 - p)
	}
	rmem := xb.mem
	if rows != nil {
		rb, err := d.tempInt32("dropout row ids", rows)
		if err != nil {
			return err
		}
		defer d.freeTemp(rb)
		rmem = rb.mem
	}
	return d.launch("dropout", grid1(n), n, x.Cols(), seed, p, scale, rows != nil, rmem, mask != nil, xb, ob, mmem)
}

func (d *Device) sameAll(op string, p *core.Tensor, names []string, ts ...*core.Tensor) ([]*Buffer, error) {
	out := make([]*Buffer, len(ts))
	for i, t := range ts {
		b, err := d.buffer(op, names[i], t)
		if err != nil {
			return nil, err
		}
		if i > 0 && !core.SameShape(t, p) {
			return nil, shapeErr(op, "%s has shape %v, want %v like p", names[i], t.Shape, p.Shape)
		}
		out[i] = b
	}
	return out, nil
}

// Adam updates p in place (PyTorch torch.optim.Adam, L2 weight decay
// added to the gradient, bias-corrected moments).
func (k *Kernels) Adam(p, g, m, v *core.Tensor, h core.AdamParams) error {
	const op = "Adam"
	d := k.d
	if h.Step < 1 {
		return shapeErr(op, "step %d, want >= 1", h.Step)
	}
	bs, err := d.sameAll(op, p, []string{"p", "g", "m", "v"}, p, g, m, v)
	if err != nil {
		return err
	}
	n := bs[0].n
	if n == 0 {
		return nil
	}
	bc1 := 1 - math.Pow(float64(h.Beta1), float64(h.Step))
	bc2 := 1 - math.Pow(float64(h.Beta2), float64(h.Step))
	step := float32(float64(h.LR) / bc1)
	bc2Sqrt := float32(math.Sqrt(bc2))
	return d.launch("adam", grid1(n), n, step, h.Beta1, h.Beta2, h.Eps, h.WeightDecay, bc2Sqrt, bs[0], bs[1], bs[2], bs[3])
}

// SGD updates p in place (PyTorch torch.optim.SGD without dampening or
// Nesterov); mom may be nil when h.Momentum == 0.
func (k *Kernels) SGD(p, g, mom *core.Tensor, h core.SGDParams) error {
	const op = "SGD"
	d := k.d
	bs, err := d.sameAll(op, p, []string{"p", "g"}, p, g)
	if err != nil {
		return err
	}
	bmem := bs[0].mem
	if h.Momentum != 0 {
		if mom == nil {
			return shapeErr(op, "momentum %v needs a momentum buffer", h.Momentum)
		}
		if h.Step < 1 {
			return shapeErr(op, "step %d, want >= 1", h.Step)
		}
		ms, err := d.sameAll(op, p, []string{"p", "mom"}, p, mom)
		if err != nil {
			return err
		}
		bmem = ms[1].mem
	}
	n := bs[0].n
	if n == 0 {
		return nil
	}
	return d.launch("sgd", grid1(n), n, h.LR, h.Momentum, h.WeightDecay, h.Step <= 1, h.Momentum != 0, bs[0], bs[1], bmem)
}
