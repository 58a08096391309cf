//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gnnkit/gnnkit/core"
)

// Kernels are a device's arithmetic: core.Kernels as the CUDA kernels of
// kernels/*.cu, queued on the device's stream. Arguments are checked on
// the host by core's checks (core.CheckGEMM, ...), the rules every
// backend shares; index arrays are checked before upload (core.CheckGather,
// core.CheckNLLLoss, ...), so no input can make a kernel touch memory
// outside its tensors. Every kernel but ScatterAdd computes each output
// element in a fixed order, so results repeat bit for bit.
type Kernels struct{ d *Device }

func shapeErr(op, format string, args ...any) error {
	return fmt.Errorf("%w: cuda: %s: %s", core.ErrShape, op, fmt.Sprintf(format, args...))
}

// fitsInt32 reports whether every n is below 2^31 (kernel int parameters).
func fitsInt32(n ...int) bool {
	for _, v := range n {
		if v < 0 || v > math.MaxInt32 {
			return false
		}
	}
	return true
}

// lanesFor is the lanes a warp kernel gives one row or item of n units:
// the smallest power of two >= n, at most 32 (1 for n <= 1).
func lanesFor(n int) int {
	if n <= 1 {
		return 1
	}
	if n >= 32 {
		return 32
	}
	return 1 << bits.Len(uint(n-1))
}

// wrap prefixes an error of a core argument check (core.CheckGEMM, ...)
// with the backend's name.
func wrap(err error) error {
	return fmt.Errorf("cuda: %w", err)
}

// fill sets every element of b to v (cuMemsetD32Async). Worker only.
func (d *Device) fill(b *Buffer, v float32) error {
	if b.n == 0 {
		return nil
	}
	return cu.MemsetD32Async(b.ptr, uint(math.Float32bits(v)), int64(b.n), d.stream)
}

// GEMM computes c = alpha*op(a)*op(b) + beta*c with the tiled fp32
// kernels (gemm.cu) — 128x128 tiles when c has enough of them to fill
// the GPU, 64x64 when it is at least 64 in each dimension, 32x32 else —
// or, after SetTF32(true), with TF32 tensor cores. With alpha == 0 or an
// empty inner dimension it only scales c (beta == 0: zeroes).
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
	if !fitsInt32(m, n, kk) {
		return fmt.Errorf("cuda: %s: %dx%dx%d exceeds the kernels' int32 dimensions: %w", op, m, n, kk, core.ErrUnsupported)
	}
	if alpha == 0 || kk == 0 {
		switch beta {
		case 0:
			return d.w.do(func() error { return d.fill(cb, 0) })
		case 1:
			return nil
		}
		return d.w.do(func() error {
			return d.launch("map_op", d.threads(int64(cb.n)), int32(core.MapScale), int64(cb.n), int32(n), int32(0), int32(0), beta, cb, cb, cb)
		})
	}
	tr := "nn"
	switch {
	case transA && transB:
		tr = "tt"
	case transA:
		tr = "tn"
	case transB:
		tr = "nt"
	}
	var name string
	var tile int
	switch {
	case d.tf32.Load():
		name, tile = "gemm_tf32_"+tr, 128
	case m >= 128 && n >= 128 && int64((m+127)/128)*int64((n+127)/128) >= int64(d.sms):
		name, tile = "gemm_f32_l_"+tr, 128
	case m >= 64 && n >= 64:
		name, tile = "gemm_f32_m_"+tr, 64
	default:
		name, tile = "gemm_f32_s_"+tr, 32
	}
	g := dim{gx: (m + tile - 1) / tile, gy: (n + tile - 1) / tile, block: 256}
	if g.gy > 65535 {
		return fmt.Errorf("cuda: %s: c has %d columns, more than the grid's %d tiles of %d: %w", op, n, 65535, tile, core.ErrUnsupported)
	}
	return d.w.do(func() error {
		return d.launch(name, g, int32(m), int32(n), int32(kk), alpha, ab, bb, beta, cb)
	})
}

// SpMM computes out[i,:] = reduce over the edges e of row i of
// w(e) * x[src(e),:] with the warp-per-row or the balanced kernel (see
// SpMMVariant).
func (k *Kernels) SpMM(g *core.Graph, red core.Reduce, w, x, out *core.Tensor) error {
	return k.spmm("SpMM", g, red, w, x, nil, ActNone, out)
}

// spmm is SpMM with SpMMBiasAct's optional epilogue.
func (k *Kernels) spmm(op string, g *core.Graph, red core.Reduce, w, x, bias *core.Tensor, act Activation, out *core.Tensor) error {
	d := k.d
	if g == nil {
		return shapeErr(op, "graph is nil")
	}
	xb, err := d.buffer(op, "x", x)
	if err != nil {
		return err
	}
	ob, err := d.buffer(op, "out", out)
	if err != nil {
		return err
	}
	var wb *Buffer
	if w != nil {
		if wb, err = d.buffer(op, "w", w); err != nil {
			return err
		}
	}
	heads, err := core.CheckSpMM(op, g, red, w, x, out)
	if err != nil {
		return wrap(err)
	}
	c := x.Cols()
	var biasb *Buffer
	if bias != nil {
		if biasb, err = d.buffer(op, "bias", bias); err != nil {
			return err
		}
		if bias.Rows() != 1 || bias.Cols() != c {
			return shapeErr(op, "bias is %dx%d, want 1x%d", bias.Rows(), bias.Cols(), c)
		}
	}
	if !fitsInt32(c) {
		return fmt.Errorf("cuda: %s: %d columns exceed the kernels' int32 range: %w", op, c, core.ErrUnsupported)
	}
	gb, err := d.graph(op, g, false)
	if err != nil {
		return err
	}
	wmode, f := 0, c/heads
	if w != nil {
		wmode = 1
		if heads > 1 {
			wmode = 2
		}
	}
	if g.NumDst == 0 || c == 0 {
		return nil
	}
	// float4 units when every unit of 4 columns is 16-byte aligned in x
	// and out and lies inside one head
	vec := c%4 == 0 && (wmode != 2 || f%4 == 0)
	units := c
	if vec {
		units = c / 4
	}
	lanes := lanesFor(units)
	variant := SpMMVariant(d.spmm.Load())
	if variant == SpMMAuto {
		variant = SpMMWarp
		if gb.skewed(d.sms) {
			variant = SpMMBalanced
		}
	}
	if gb.nnz == 0 {
		variant = SpMMWarp
	}
	suffix := ""
	if vec {
		suffix = "_vec4"
	}
	mean := int32(0)
	if red == core.ReduceMean {
		mean = 1
	}
	args := []any{int32(g.NumDst), int32(c), gb.off.ptr, gb.idx.ptr, gb.eid.ptr, wb, int32(wmode), int32(heads), int32(max(f, 1)),
		mean, xb, biasb, int32(act), ob, int32(lanes)}
	// g stays reachable until its kernels are queued: its cleanup would
	// return the device copy to the pool, where another call could take it
	defer runtime.KeepAlive(g)
	if variant == SpMMWarp {
		return d.w.do(func() error {
			return d.launch("spmm_warp"+suffix, d.warps(int64(g.NumDst)), args...)
		})
	}
	t := d.chunkSize(gb.nnz + int64(g.NumDst))
	tabs, err := d.balancedFor(op, g, gb, t)
	if err != nil {
		return err
	}
	carryBytes := 2 * tabs.nchunks * int64(c) * 4
	release, err := d.reserveTemps("balanced SpMM carries", carryBytes)
	if err != nil {
		return err
	}
	defer release()
	return d.w.do(func() error {
		carry, err := d.newTemp("balanced SpMM carries", carryBytes, nil)
		if err != nil {
			return err
		}
		defer d.freeTemp(carry)
		bargs := append(append([]any(nil), args...), gb.nnz, t, tabs.nchunks, tabs.chunkRow.ptr, carry)
		if err := d.launch("spmm_balanced"+suffix, d.warps(tabs.nchunks), bargs...); err != nil {
			return err
		}
		if tabs.nfix == 0 {
			return nil
		}
		fargs := append(append([]any(nil), args...), int32(tabs.nfix), tabs.fixRows.ptr, t, carry)
		return d.launch("spmm_fixup"+suffix, d.warps(int64(tabs.nfix)), fargs...)
	})
}

// SDDMM computes out[id(e), h] for every edge from a[dst(e)] and
// b[src(e)]: add one thread per (edge, head), dot a group of lanes per
// (edge, head) with a shuffle reduction.
func (k *Kernels) SDDMM(g *core.Graph, eop core.EdgeOp, a, b, out *core.Tensor) error {
	const op = "SDDMM"
	d := k.d
	if g == nil {
		return shapeErr(op, "graph is nil")
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
	if !fitsInt32(cols) {
		return fmt.Errorf("cuda: %s: %d columns exceed the kernels' int32 range: %w", op, cols, core.ErrUnsupported)
	}
	gb, err := d.graph(op, g, false)
	if err != nil {
		return err
	}
	if g.NumDst == 0 || heads == 0 || g.NumEdges() == 0 {
		return nil
	}
	if _, err := d.graph(op, g, true); err != nil {
		return err
	}
	defer runtime.KeepAlive(g) // see spmm
	n := int64(g.NumEdges()) * int64(heads)
	if eop == core.EdgeAdd {
		return d.w.do(func() error {
			return d.launch("sddmm_add", d.threads(n), n, int32(heads), gb.rows.ptr, gb.idx.ptr, gb.eid.ptr, ab, bb, ob)
		})
	}
	f := cols / heads
	lanes := lanesFor(f)
	return d.w.do(func() error {
		return d.launch("sddmm_dot", d.warps((n+int64(32/lanes)-1)/int64(32/lanes)), n, int32(heads), int32(f), int32(lanes),
			gb.rows.ptr, gb.idx.ptr, gb.eid.ptr, ab, bb, ob)
	})
}

// EdgeSoftmax computes the softmax of s over each row's edges, per head,
// one warp per (row, head). out may alias s.
func (k *Kernels) EdgeSoftmax(g *core.Graph, s, out *core.Tensor) error {
	const op = "EdgeSoftmax"
	d := k.d
	if g == nil {
		return shapeErr(op, "graph is nil")
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
	return d.launchRowHeads(op, "edge_softmax", g, s.Cols(), sb, ob)
}

// launchRowHeads runs an edge-softmax kernel of g, one warp per (row,
// head), on the given buffers (after its arguments were checked).
func (d *Device) launchRowHeads(op, kernel string, g *core.Graph, heads int, bufs ...any) error {
	gb, err := d.graph(op, g, false)
	if err != nil {
		return err
	}
	if g.NumDst == 0 || heads == 0 {
		return nil
	}
	if !fitsInt32(heads) {
		return fmt.Errorf("cuda: %s: %d heads exceed the kernels' int32 range: %w", op, heads, core.ErrUnsupported)
	}
	defer runtime.KeepAlive(g) // see spmm
	n := int64(g.NumDst) * int64(heads)
	args := append([]any{n, int32(heads), gb.off.ptr, gb.eid.ptr}, bufs...)
	return d.w.do(func() error {
		return d.launch(kernel, d.warps(n), args...)
	})
}

// EdgeSoftmaxBackward computes dx = y * (dy - sum over the row of y*dy),
// one warp per (row, head). dx may alias dy.
func (k *Kernels) EdgeSoftmaxBackward(g *core.Graph, y, dy, dx *core.Tensor) error {
	const op = "EdgeSoftmaxBackward"
	d := k.d
	if g == nil {
		return shapeErr(op, "graph is nil")
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
	return d.launchRowHeads(op, "edge_softmax_backward", g, y.Cols(), yb, dyb, dxb)
}

// Gather sets out[k,:] = x[idx[k],:]; idx is checked, then uploaded for
// the call.
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
	if !fitsInt32(c) {
		return fmt.Errorf("cuda: %s: %d columns exceed the kernels' int32 range: %w", op, c, core.ErrUnsupported)
	}
	return d.withIndex(op, "gather indices", idx, func(ib temp) error {
		n := int64(len(idx)) * int64(c)
		return d.launch("gather", d.threads(n), n, int32(c), ib, xb, ob)
	})
}

// withIndex uploads idx into a temporary (charged for the call) and runs
// f with it on the worker.
func (d *Device) withIndex(op, what string, idx []int32, f func(temp) error) error {
	bytes := int64(len(idx)) * 4
	release, err := d.reserveTemps(what, bytes)
	if err != nil {
		return err
	}
	defer release()
	err = d.w.do(func() error {
		ib, err := d.newTemp(what, bytes, int32Ptr(idx))
		if err != nil {
			return err
		}
		defer d.freeTemp(ib)
		return f(ib)
	})
	runtime.KeepAlive(idx)
	if err != nil {
		return fmt.Errorf("cuda: %s: %w", op, err)
	}
	return nil
}

// ScatterAdd adds x[k,:] into out[idx[k],:] with atomic adds (correct
// for repeated indices; their order, and so a repeated row's last bits,
// may differ between runs).
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
	if !fitsInt32(c) {
		return fmt.Errorf("cuda: %s: %d columns exceed the kernels' int32 range: %w", op, c, core.ErrUnsupported)
	}
	return d.withIndex(op, "scatter indices", idx, func(ib temp) error {
		n := int64(len(idx)) * int64(c)
		return d.launch("scatter_add", d.threads(n), n, int32(c), ib, xb, ob)
	})
}

// Map applies an elementwise op, broadcasting b as core.MapOp describes.
// out may alias a. MapFill is a driver memset.
func (k *Kernels) Map(mop core.MapOp, a, b *core.Tensor, alpha float32, out *core.Tensor) error {
	const op = "Map"
	d := k.d
	ob, err := d.buffer(op, "out", out)
	if err != nil {
		return err
	}
	ab := ob
	if mop != core.MapFill && mop != core.MapBroadcast {
		if ab, err = d.buffer(op, "a", a); err != nil {
			return err
		}
	}
	bb := ob
	if !mop.Unary() {
		if bb, err = d.buffer(op, "b", b); err != nil {
			return err
		}
	}
	br, bc, err := core.CheckMap(mop, a, b, out)
	if err != nil {
		return wrap(err)
	}
	r, c := out.Rows(), out.Cols()
	n := int64(r) * int64(c)
	if n == 0 {
		return nil
	}
	if !fitsInt32(c, br, bc) {
		return fmt.Errorf("cuda: %s: %d columns exceed the kernels' int32 range: %w", op, c, core.ErrUnsupported)
	}
	switch {
	case mop == core.MapFill:
		return d.w.do(func() error { return d.fill(ob, alpha) })
	case mop == core.MapCopy && ab == ob:
		return nil
	}
	return d.w.do(func() error {
		return d.launch("map_op", d.threads(n), int32(mop), n, int32(c), int32(br), int32(bc), alpha, ab, bb, ob)
	})
}

// reduceBlock is the rows per partial sum of Reduce(AxisRows): blocks of
// 256 rows (more when that would need over 65535 blocks, the grid's y
// limit), then the blocks' partial sums in order.
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
	if !fitsInt32(r, c) {
		return fmt.Errorf("cuda: %s: a %dx%d exceeds the kernels' int32 range: %w", op, r, c, core.ErrUnsupported)
	}
	if err := core.CheckReduce(axis, a, out); err != nil {
		return wrap(err)
	}
	switch axis {
	case core.AxisRows:
		if c == 0 {
			return nil
		}
		if r == 0 {
			return d.w.do(func() error { return d.fill(ob, 0) })
		}
		rb := max(reduceBlock, (r+65534)/65535)
		blocks := (r + rb - 1) / rb
		gx := int(min(int64((c+127)/128), d.maxGrid()))
		if blocks == 1 {
			return d.w.do(func() error {
				return d.launch("reduce_rows_part", dim{gx: gx, gy: 1, block: 128}, int32(r), int32(c), int32(rb), ab, ob)
			})
		}
		bytes := int64(blocks) * int64(c) * 4
		release, err := d.reserveTemps("reduce partial sums", bytes)
		if err != nil {
			return err
		}
		defer release()
		return d.w.do(func() error {
			part, err := d.newTemp("reduce partial sums", bytes, nil)
			if err != nil {
				return err
			}
			defer d.freeTemp(part)
			if err := d.launch("reduce_rows_part", dim{gx: gx, gy: blocks, block: 128}, int32(r), int32(c), int32(rb), ab, part); err != nil {
				return err
			}
			return d.launch("reduce_rows_final", d.threads(int64(c)), int32(blocks), int32(c), part, ob)
		})
	case core.AxisCols:
		gcols := out.Cols()
		if r == 0 || gcols == 0 {
			return nil
		}
		n := int64(r) * int64(gcols)
		return d.w.do(func() error {
			return d.launch("reduce_cols", d.threads(n), n, int32(gcols), int32(c/gcols), ab, ob)
		})
	}
	return nil
}

// LogSoftmax computes out[i,:] = x[i,:] - logsumexp(x[i,:]), one warp
// per row; out may alias x.
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
	if !fitsInt32(r, c) {
		return fmt.Errorf("cuda: %s: %dx%d exceeds the kernels' int32 range: %w", op, r, c, core.ErrUnsupported)
	}
	return d.w.do(func() error {
		return d.launch("log_softmax", d.warps(int64(r)), int32(r), int32(c), xb, ob)
	})
}

// LogSoftmaxBackward computes dx = dy - exp(y) * rowsum(dy), one warp per
// row; dx may alias dy.
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
	if !fitsInt32(r, c) {
		return fmt.Errorf("cuda: %s: %dx%d exceeds the kernels' int32 range: %w", op, r, c, core.ErrUnsupported)
	}
	return d.w.do(func() error {
		return d.launch("log_softmax_backward", d.warps(int64(r)), int32(r), int32(c), yb, dyb, dxb)
	})
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
	pos := make([]int64, len(rows))
	for q, i := range rows {
		pos[q] = int64(i)*int64(c) + int64(labels[i])
	}
	if grad != nil {
		// Distinct positions with the CPU backend's repeated
		// subtraction, so a duplicated row gives the same bits.
		at := map[int64]int{}
		var up []int64
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
		if err := d.scatterSet(gb, up, val); err != nil {
			return 0, err
		}
	}
	if len(pos) == 0 {
		return 0, nil
	}
	vals := make([]float32, len(pos))
	pbytes, vbytes := int64(len(pos))*8, int64(len(pos))*4
	release, err := d.reserveTemps("loss positions and values", pbytes, vbytes)
	if err != nil {
		return 0, err
	}
	defer release()
	err = d.w.do(func() error {
		pb, err := d.newTemp("loss positions", pbytes, int64Ptr(pos))
		if err != nil {
			return err
		}
		defer d.freeTemp(pb)
		vb, err := d.newTemp("loss values", vbytes, nil)
		if err != nil {
			return err
		}
		defer d.freeTemp(vb)
		n := int64(len(pos))
		if err := d.launch("nll_pick", d.threads(n), n, pb, lb, vb); err != nil {
			return err
		}
		// to pageable memory: returns once the values are here (after the
		// work queued before; the loss is read once per step)
		return cu.MemcpyDtoHAsync(unsafe.Pointer(&vals[0]), vb.ptr, vbytes, d.stream)
	})
	runtime.KeepAlive(pos)
	runtime.KeepAlive(vals)
	if err != nil {
		return 0, fmt.Errorf("cuda: %s: %w", op, err)
	}
	var sum float64
	for _, v := range vals {
		sum -= float64(v)
	}
	return float64(scale) * sum, nil
}

// scatterSet zero-fills b and writes val[k] at element pos[k] (positions
// distinct).
func (d *Device) scatterSet(b *Buffer, pos []int64, val []float32) error {
	pbytes, vbytes := int64(len(pos))*8, int64(len(val))*4
	release, err := d.reserveTemps("gradient positions and values", pbytes, vbytes)
	if err != nil {
		return err
	}
	defer release()
	var vp unsafe.Pointer
	if len(val) > 0 {
		vp = unsafe.Pointer(&val[0])
	}
	err = d.w.do(func() error {
		if err := d.fill(b, 0); err != nil {
			return err
		}
		if len(pos) == 0 {
			return nil
		}
		pb, err := d.newTemp("gradient positions", pbytes, int64Ptr(pos))
		if err != nil {
			return err
		}
		defer d.freeTemp(pb)
		vb, err := d.newTemp("gradient values", vbytes, vp)
		if err != nil {
			return err
		}
		defer d.freeTemp(vb)
		n := int64(len(pos))
		return d.launch("scatter_set", d.threads(n), n, pb, vb, b)
	})
	runtime.KeepAlive(pos)
	runtime.KeepAlive(val)
	if err != nil {
		return fmt.Errorf("cuda: NLLLoss: %w", err)
	}
	return nil
}

// Dropout keeps element (r, c) when core.DropoutKeep(seed, id(r)*Cols+c,
// p) (the same hash, in CUDA C), id(r) = rows[r] or r when rows is nil,
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
	var mb *Buffer
	if mask != nil {
		if mb, err = d.buffer(op, "mask", mask); err != nil {
			return err
		}
	}
	if err := core.CheckDropout(x, p, rows, out, mask); err != nil {
		return wrap(err)
	}
	n := int64(xb.n)
	if n == 0 {
		return nil
	}
	c := x.Cols()
	if !fitsInt32(c) {
		return fmt.Errorf("cuda: %s: %d columns exceed the kernels' int32 range: %w", op, c, core.ErrUnsupported)
	}
	var scale float32
	if p < 1 {
		scale = 1 / (1 - p)
	}
	run := func(rb any) error {
		return d.launch("dropout", d.threads(n), n, int32(c), seed, p, scale, rb, xb, ob, mb)
	}
	if rows == nil {
		return d.w.do(func() error { return run(cu.DevicePtr(0)) })
	}
	return d.withIndex(op, "dropout row ids", rows, func(ib temp) error { return run(ib) })
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
	n := int64(bs[0].n)
	if n == 0 {
		return nil
	}
	bc1 := 1 - math.Pow(float64(h.Beta1), float64(h.Step))
	bc2 := 1 - math.Pow(float64(h.Beta2), float64(h.Step))
	step := float32(float64(h.LR) / bc1)
	bc2Sqrt := float32(math.Sqrt(bc2))
	return d.w.do(func() error {
		return d.launch("adam", d.threads(n), n, step, h.Beta1, h.Beta2, h.Eps, h.WeightDecay, bc2Sqrt, bs[0], bs[1], bs[2], bs[3])
	})
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
	var mb *Buffer
	if h.Momentum != 0 && mom != nil {
		if mb, err = d.buffer(op, "mom", mom); err != nil {
			return err
		}
	}
	if err := core.CheckSGD(p, g, mom, h); err != nil {
		return wrap(err)
	}
	n := int64(bs[0].n)
	if n == 0 {
		return nil
	}
	first, hasMom := int32(0), int32(0)
	if h.Step <= 1 {
		first = 1
	}
	if mb != nil {
		hasMom = 1
	}
	return d.w.do(func() error {
		return d.launch("sgd", d.threads(n), n, h.LR, h.Momentum, h.WeightDecay, first, hasMom, bs[0], bs[1], mb)
	})
}
