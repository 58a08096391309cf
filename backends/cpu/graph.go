package cpu

import (
	"bytes"
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/gnnkit/gnnkit/backends/cpu/internal/kern"
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
	return k.spmm("SpMM", g, red, w, x, nil, ActNone, out)
}

// Activation is the function SpMMBiasAct applies last.
type Activation uint8

const (
	ActNone Activation = iota // identity
	ActReLU                   // max(x, 0), as Map(MapReLU)
)

// FusedAggregator is an optional fast path of the CPU backend for the
// aggregate-bias-activation of a GCN or SAGE layer:
//
//	out = act(SpMM(g, red, w, x) + bias)     (bias 1 x C, or nil)
//
// in one pass over out (each row gets its bias and activation while it is
// still in L1) instead of three (SpMM, Map(MapAdd), Map(MapReLU)); on the
// 100k-node graph at width 128 that saves two reads and two writes of a
// 51 MB tensor per layer. The result equals the unfused kernels' bit for
// bit. core.Kernels does not include it: a model op would find it by a
// type assertion on env.K and fall back to the three kernels,
//
//	if f, ok := env.K.(cpu.FusedAggregator); ok {
//		err = f.SpMMBiasAct(g, core.ReduceSum, w, x, b, cpu.ActReLU, y)
//	} else { /* SpMM, Map(MapAdd, y, b), Map(MapReLU, y) */ }
//
// and keep y (the activation's output) for ReLU's backward, as Map's
// MapReLUGrad accepts y or x.
type FusedAggregator interface {
	SpMMBiasAct(g *core.Graph, red core.Reduce, w, x, bias *core.Tensor, act Activation, out *core.Tensor) error
}

var _ FusedAggregator = (*Kernels)(nil)

// SpMMBiasAct computes act(SpMM(g, red, w, x) + bias) into out (see
// FusedAggregator).
func (k *Kernels) SpMMBiasAct(g *core.Graph, red core.Reduce, w, x, bias *core.Tensor, act Activation, out *core.Tensor) error {
	const op = "SpMMBiasAct"
	var bd []float32
	if bias != nil {
		var err error
		if bd, err = hostData(op, "bias", bias); err != nil {
			return err
		}
		if x == nil || bias.Rows() != 1 || bias.Cols() != x.Cols() {
			return shapeErr(op, "bias is %dx%d, want 1 x x's columns", bias.Rows(), bias.Cols())
		}
	}
	if act > ActReLU {
		return shapeErr(op, "unknown activation %d", act)
	}
	return k.spmm(op, g, red, w, x, bd, act, out)
}

func (k *Kernels) spmm(op string, g *core.Graph, red core.Reduce, w, x *core.Tensor, bias []float32, act Activation, out *core.Tensor) error {
	if err := core.CheckGraph(op, g); err != nil {
		return wrap(err)
	}
	xd, err := hostData(op, "x", x)
	if err != nil {
		return err
	}
	od, err := hostData(op, "out", out)
	if err != nil {
		return err
	}
	var wd []float32
	if w != nil {
		if wd, err = hostData(op, "w", w); err != nil {
			return err
		}
	}
	heads, err := core.CheckSpMM(op, g, red, w, x, out)
	if err != nil {
		return wrap(err)
	}
	c := x.Cols()
	f := c / heads
	if g.NumDst == 0 {
		return nil
	}
	j := spmmJobs.get()
	*j = spmmJob{k: k, g: g, red: red, wd: wd, xd: xd, od: od, c: c, heads: heads, f: f, bias: bias, act: act}
	j.bounds = k.graphPieces(g, c, j.bbuf[:0])
	var fresh *edgeWeights
	if wd != nil && g.EIDs != nil && len(wd) <= maxCachedWeights {
		// weights read through edge ids: gathered into CSR order once
		// per distinct weights (see edgeWeights)
		if ew := k.ewCache.Load(); ew.matches(g, heads, wd) {
			j.csr = ew.csr
		} else {
			fresh = newEdgeWeights(g, heads, wd)
			j.csr, j.build = fresh.csr, fresh
		}
	}
	k.dev.pool.run(len(j.bounds)-1, j)
	bad := j.bad.Load()
	spmmJobs.put(j)
	if fresh != nil && !bad {
		k.ewCache.Store(fresh)
	}
	if bad {
		return fmt.Errorf("cpu: %s: %w: a column index is outside [0,%d)", op, core.ErrInvalidGraph, g.NumSrc)
	}
	return nil
}

// spmmJob is one SpMM call; piece p computes the rows
// [bounds[p], bounds[p+1]), each with one SpmmRow call per head (and per
// spmmChunk edges when the weights must be gathered first).
type spmmJob struct {
	k          *Kernels
	g          *core.Graph
	red        core.Reduce
	wd, xd, od []float32
	c          int
	heads, f   int
	bias       []float32 // SpMMBiasAct's, or nil
	act        Activation
	bounds     []int
	bbuf       [piecesPerThread*64 + 1]int
	bad        atomic.Bool
	// csr holds the weights in CSR order (csr[e*heads+h] = wd[EdgeID(e)*
	// heads+h]) when the graph has edge ids; build, when set, is a cache
	// entry whose csr and copy the pieces fill as they go.
	csr   []float32
	build *edgeWeights
}

var spmmJobs statePool[spmmJob]

// maxCachedWeights bounds the weights (in floats) SpMM caches in CSR order.
const maxCachedWeights = 1 << 26

// edgeWeights is SpMM's cache of edge weights read through edge ids (the
// reverse graph of a backward pass, a subgraph): gathering them costs a
// random access per edge, reading them in CSR order a sequential one, and
// GCN's normalisation is the same tensor every epoch. An entry holds the
// graph, a copy of the weights it was built from (compared element by
// element, by memequal, on every use) and the gathered weights.
type edgeWeights struct {
	g     *core.Graph
	heads int
	src   []float32
	csr   []float32
}

func newEdgeWeights(g *core.Graph, heads int, wd []float32) *edgeWeights {
	return &edgeWeights{g: g, heads: heads, src: make([]float32, len(wd)), csr: make([]float32, g.NumEdges()*heads)}
}

func (w *edgeWeights) matches(g *core.Graph, heads int, wd []float32) bool {
	if w == nil || w.g != g || w.heads != heads || len(w.src) != len(wd) {
		return false
	}
	if len(wd) == 0 {
		return true
	}
	a := unsafe.Slice((*byte)(unsafe.Pointer(&w.src[0])), 4*len(wd))
	b := unsafe.Slice((*byte)(unsafe.Pointer(&wd[0])), 4*len(wd))
	return bytes.Equal(a, b)
}

// spmmChunk is how many edge weights a row gathers into a stack buffer
// per kernel call, when they are not contiguous (reverse graphs read them
// through edge ids, attention has several heads).
const spmmChunk = 256

func (j *spmmJob) run(p int) {
	g, v, c, xd, wd := j.g, &j.k.v, j.c, j.xd, j.wd
	r0, r1 := j.bounds[p], j.bounds[p+1]
	off := g.Offsets
	// The kernels do not check bounds: check the piece's column indices
	// once (the graph's own invariant, but a Graph is a plain struct).
	if !indicesBelow(g.Indices[off[r0]:off[r1]], g.NumSrc) {
		j.bad.Store(true)
		return
	}
	if b := j.build; b != nil {
		// fill this piece's share of a new cache entry
		n, pieces := len(wd), len(j.bounds)-1
		copy(b.src[p*n/pieces:(p+1)*n/pieces], wd[p*n/pieces:(p+1)*n/pieces])
		h := j.heads
		if h == 1 {
			for e, id := range g.EIDs[off[r0]:off[r1]] {
				b.csr[int(off[r0])+e] = wd[id]
			}
		} else {
			for e := int(off[r0]); e < int(off[r1]); e++ {
				copy(b.csr[e*h:e*h+h], wd[int(g.EIDs[e])*h:int(g.EIDs[e])*h+h])
			}
		}
	}
	if j.csr != nil {
		wd = j.csr // CSR order from here on
	}
	var wbuf *[]float32 // one head's weights, taken when first needed
	for i := r0; i < r1; i++ {
		orow := j.od[i*c : i*c+c]
		e0, e1 := int(off[i]), int(off[i+1])
		if c == 0 {
			continue
		}
		idx := g.Indices[e0:e1]
		switch {
		case wd == nil:
			v.SpmmRow(orow, xd, c, idx, nil, false)
		case j.heads == 1 && (g.EIDs == nil || j.csr != nil):
			v.SpmmRow(orow, xd, c, idx, wd[e0:e1], false)
		default:
			h, f := j.heads, j.f
			for hd := range h {
				dst := orow[hd*f : hd*f+f]
				if e0 == e1 {
					clear(dst) // x may have no rows at all (bipartite blocks)
					continue
				}
				x := xd[hd*f:]
				for q0 := e0; q0 < e1; q0 += spmmChunk {
					q1 := min(e1, q0+spmmChunk)
					if wbuf == nil {
						wbuf = getScratch(spmmChunk)
					}
					w := (*wbuf)[:q1-q0]
					if j.csr != nil {
						for q := range w {
							w[q] = wd[(q0+q)*h+hd]
						}
					} else {
						for q := range w {
							w[q] = wd[g.EdgeID(q0+q)*h+hd]
						}
					}
					v.SpmmRow(dst, x, c, g.Indices[q0:q1], w, q0 > e0)
				}
			}
		}
		if j.red == core.ReduceMean && e1 > e0 {
			v.Scal(float32(1/float64(e1-e0)), orow)
		}
		if j.bias != nil {
			v.Add(j.bias, orow)
		}
		if j.act == ActReLU {
			v.Relu(orow, orow)
		}
	}
	if wbuf != nil {
		putScratch(wbuf)
	}
}

// indicesBelow reports whether every index is in [0, n).
func indicesBelow(idx []int32, n int) bool {
	var m uint32
	for _, x := range idx {
		m = max(m, uint32(x))
	}
	return len(idx) == 0 || int64(m) < int64(n)
}

// SDDMM computes out[id(e), h] for every edge from a[dst(e)] and b[src(e)].
func (k *Kernels) SDDMM(g *core.Graph, eop core.EdgeOp, a, b, out *core.Tensor) error {
	const op = "SDDMM"
	if err := core.CheckGraph(op, g); err != nil {
		return wrap(err)
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
	heads, err := core.CheckSDDMM(g, eop, a, b, out)
	if err != nil {
		return wrap(err)
	}
	if err := core.CheckEdgeRows(op, "out", g, out, heads); err != nil {
		return wrap(err)
	}
	cols := a.Cols()
	if g.NumDst == 0 || heads == 0 {
		return nil
	}
	t := k.newTask(sddmm, 0)
	t.bounds = k.graphPieces(g, cols, t.bbuf[:0])
	t.pieces = len(t.bounds) - 1
	t.g, t.a, t.b, t.out, t.c, t.w, t.first = g, ad, bd, od, cols, heads, eop == core.EdgeAdd
	k.runTask(t)
	return nil
}

// sddmm is SDDMM's piece over rows [bounds[p], bounds[p+1]): a = t.a, b =
// t.b, out = t.out, t.c columns, t.w heads; t.first selects EdgeAdd.
func sddmm(t *task, p int) {
	g, ad, bd, od, cols, heads := t.g, t.a, t.b, t.out, t.c, t.w
	f := cols / heads
	dot := t.k.v.Dot
	off, idx := g.Offsets, g.Indices
	for i := t.bounds[p]; i < t.bounds[p+1]; i++ {
		arow := ad[i*cols : i*cols+cols]
		for e := off[i]; e < off[i+1]; e++ {
			j := int(idx[e])
			brow := bd[j*cols : j*cols+cols]
			id := g.EdgeID(int(e))
			orow := od[id*heads : id*heads+heads]
			if t.first {
				for h := range orow {
					orow[h] = arow[h] + brow[h]
				}
				continue
			}
			if f > 16 {
				for h := range orow {
					orow[h] = dot(arow[h*f:h*f+f], brow[h*f:h*f+f])
				}
				continue
			}
			// short heads (GAT: 8 of 8): inline, no call per head
			for h := range orow {
				as, bs := arow[h*f:h*f+f], brow[h*f:h*f+f]
				bs = bs[:len(as)]
				var s float32
				for q, x := range as {
					s += x * bs[q]
				}
				orow[h] = s
			}
		}
	}
}

// EdgeSoftmax computes the softmax of s over each row's edges, per head.
// out may alias s.
func (k *Kernels) EdgeSoftmax(g *core.Graph, s, out *core.Tensor) error {
	const op = "EdgeSoftmax"
	if err := core.CheckGraph(op, g); err != nil {
		return wrap(err)
	}
	sd, err := hostData(op, "s", s)
	if err != nil {
		return err
	}
	od, err := hostData(op, "out", out)
	if err != nil {
		return err
	}
	if err := core.CheckEdgeSoftmax(g, s, out); err != nil {
		return wrap(err)
	}
	heads := s.Cols()
	if g.NumDst == 0 || heads == 0 {
		return nil
	}
	t := k.newTask(edgeSoftmax, 0)
	t.bounds = k.graphPieces(g, heads, t.bbuf[:0])
	t.pieces = len(t.bounds) - 1
	t.g, t.a, t.out, t.w = g, sd, od, heads
	k.runTask(t)
	return nil
}

// edgeSoftmax is EdgeSoftmax's piece: s = t.a, out = t.out, t.w heads.
func edgeSoftmax(t *task, p int) {
	g, sd, od, heads := t.g, t.a, t.out, t.w
	off := g.Offsets
	var stack [16]float64
	mx, sum := stack[:min(heads, 8)], stack[8:8+min(heads, 8)]
	var big *[]float64
	if heads > 8 {
		big = getScratch64(2 * heads)
		mx, sum = (*big)[:heads], (*big)[heads:]
	}
	for i := t.bounds[p]; i < t.bounds[p+1]; i++ {
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
				ex := kern.Expf(srow[h] - float32(mx[h]))
				sum[h] += float64(ex)
				orow[h] = ex
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
	if big != nil {
		putScratch64(big)
	}
}

// EdgeSoftmaxBackward computes dx = y * (dy - sum over the row of y*dy).
// dx may alias dy.
func (k *Kernels) EdgeSoftmaxBackward(g *core.Graph, y, dy, dx *core.Tensor) error {
	const op = "EdgeSoftmaxBackward"
	if err := core.CheckGraph(op, g); err != nil {
		return wrap(err)
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
	if err := core.CheckEdgeSoftmaxBackward(g, y, dy, dx); err != nil {
		return wrap(err)
	}
	heads := y.Cols()
	if g.NumDst == 0 || heads == 0 {
		return nil
	}
	t := k.newTask(edgeSoftmaxBackward, 0)
	t.bounds = k.graphPieces(g, heads, t.bbuf[:0])
	t.pieces = len(t.bounds) - 1
	t.g, t.a, t.b, t.out, t.w = g, yd, dyd, dxd, heads
	k.runTask(t)
	return nil
}

// edgeSoftmaxBackward is EdgeSoftmaxBackward's piece: y = t.a, dy = t.b,
// dx = t.out, t.w heads.
func edgeSoftmaxBackward(t *task, p int) {
	g, yd, dyd, dxd, heads := t.g, t.a, t.b, t.out, t.w
	off := g.Offsets
	var stack [8]float64
	sum := stack[:min(heads, len(stack))]
	var big *[]float64
	if heads > len(stack) {
		big = getScratch64(heads)
		sum = *big
	}
	for i := t.bounds[p]; i < t.bounds[p+1]; i++ {
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
	if big != nil {
		putScratch64(big)
	}
}
