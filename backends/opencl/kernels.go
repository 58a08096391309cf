package opencl

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/gnnkit/gnnkit/core"
)

// Kernels are a device's arithmetic: core.Kernels as OpenCL C kernels
// (kernels/*.cl) enqueued on the device's in-order queue. Arguments are
// checked on the host by core's checks (core.CheckGEMM, ...), the rules
// and messages every backend shares. Every
// kernel computes each output element in a fixed order, so results are
// repeatable bit for bit.
type Kernels struct{ d *Device }

// wrap prefixes an error of a core argument check (core.CheckGEMM, ...)
// with the backend's name.
func wrap(err error) error {
	return fmt.Errorf("opencl: %w", err)
}

// eidArg is the edge-id buffer to pass a graph kernel (the index buffer
// as a placeholder when the graph has none; the kernel does not read it).
func (gb *graphBufs) eidArg() clMem {
	if gb.hasEID {
		return gb.eid
	}
	return gb.idx
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
	m, n, kk, err := core.CheckGEMM(transA, transB, a, b, c)
	if err != nil {
		return wrap(err)
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
	if err := core.CheckGraph(op, g); err != nil {
		return wrap(err)
	}
	xb, err := d.buffer(op, "x", x)
	if err != nil {
		return err
	}
	ob, err := d.buffer(op, "out", out)
	if err != nil {
		return err
	}
	wmode, wmem := 0, xb.mem
	if w != nil {
		wb, err := d.buffer(op, "w", w)
		if err != nil {
			return err
		}
		wmode, wmem = 1, wb.mem
	}
	heads, err := core.CheckSpMM(op, g, red, w, x, out)
	if err != nil {
		return wrap(err)
	}
	c := x.Cols()
	f := c / heads
	if heads > 1 {
		wmode = 2
	}
	gb, err := d.graph(op, g, false)
	if err != nil {
		return err
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
	if err := core.CheckGraph(op, g); err != nil {
		return wrap(err)
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
	if err != nil {
		return wrap(err)
	}
	if err := core.CheckEdgeRows(op, "out", g, out, heads); err != nil {
		return wrap(err)
	}
	cols := a.Cols()
	gb, err := d.graph(op, g, true)
	if err != nil {
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
	if err := core.CheckGraph(op, g); err != nil {
		return wrap(err)
	}
	sb, err := d.buffer(op, "s", s)
	if err != nil {
		return err
	}
	ob, err := d.buffer(op, "out", out)
	if err != nil {
		return err
	}
	if err := core.CheckEdgeSoftmax(g, s, out); err != nil {
		return wrap(err)
	}
	gb, err := d.graph(op, g, false)
	if err != nil {
		return err
	}
	heads := s.Cols()
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
	if err := core.CheckGraph(op, g); err != nil {
		return wrap(err)
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
	if err := core.CheckEdgeSoftmaxBackward(g, y, dy, dx); err != nil {
		return wrap(err)
	}
	gb, err := d.graph(op, g, false)
	if err != nil {
		return err
	}
	heads := y.Cols()
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
	if err := core.CheckGather(x, idx, out); err != nil {
		return wrap(err)
	}
	c := x.Cols()
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
	if err := core.CheckScatterAdd(x, idx, out); err != nil {
		return wrap(err)
	}
	c := x.Cols()
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
	ob, err := d.buffer(op, "out", out)
	if err != nil {
		return err
	}
	amem := ob.mem
	if mop != core.MapFill && mop != core.MapBroadcast {
		ab, err := d.buffer(op, "a", a)
		if err != nil {
			return err
		}
		amem = ab.mem
	}
	bmem := ob.mem
	if !mop.Unary() {
		bb, err := d.buffer(op, "b", b)
		if err != nil {
			return err
		}
		bmem = bb.mem
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
	if err := core.CheckReduce(axis, a, out); err != nil {
		return wrap(err)
	}
	r, c := a.Rows(), a.Cols()
	switch axis {
	case core.AxisRows:
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
		if r == 0 || gcols == 0 {
			return nil
		}
		return d.launch("reduce_cols", grid2(gcols, r), r, gcols, c/gcols, ab, ob)
	}
	return nil
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
	if err := core.CheckLogSoftmax(x, out); err != nil {
		return wrap(err)
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
	if err := core.CheckLogSoftmaxBackward(y, dy, dx); err != nil {
		return wrap(err)
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
	var gb *Buffer
	if grad != nil {
		if gb, err = d.buffer(op, "grad", grad); err != nil {
			return 0, err
		}
	}
	if err := core.CheckNLLLoss(logp, labels, rows, grad); err != nil {
		return 0, wrap(err)
	}
	c := logp.Cols()
	pos := make([]int32, len(rows))
	for q, i := range rows {
		pos[q] = int32(int(i)*c + int(labels[i]))
	}
	if grad != nil {
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
	xb, err := d.buffer(op, "x", x)
	if err != nil {
		return err
	}
	ob, err := d.buffer(op, "out", out)
	if err != nil {
		return err
	}
	mmem := ob.mem
	if mask != nil {
		mb, err := d.buffer(op, "mask", mask)
		if err != nil {
			return err
		}
		mmem = mb.mem
	}
	if err := core.CheckDropout(x, p, rows, out, mask); err != nil {
		return wrap(err)
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

// buffers returns the buffers of ts (named by names), checking each is a
// live buffer of d.
func (d *Device) buffers(op string, names []string, ts ...*core.Tensor) ([]*Buffer, error) {
	out := make([]*Buffer, len(ts))
	for i, t := range ts {
		b, err := d.buffer(op, names[i], t)
		if err != nil {
			return nil, err
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
	bs, err := d.buffers(op, []string{"p", "g", "m", "v"}, p, g, m, v)
	if err != nil {
		return err
	}
	if err := core.CheckAdam(p, g, m, v, h); err != nil {
		return wrap(err)
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
	bs, err := d.buffers(op, []string{"p", "g"}, p, g)
	if err != nil {
		return err
	}
	bmem := bs[0].mem
	if h.Momentum != 0 && mom != nil {
		mb, err := d.buffer(op, "mom", mom)
		if err != nil {
			return err
		}
		bmem = mb.mem
	}
	if err := core.CheckSGD(p, g, mom, h); err != nil {
		return wrap(err)
	}
	n := bs[0].n
	if n == 0 {
		return nil
	}
	return d.launch("sgd", grid1(n), n, h.LR, h.Momentum, h.WeightDecay, h.Step <= 1, h.Momentum != 0, bs[0], bs[1], bmem)
}
