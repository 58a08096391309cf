package nn

import (
	"github.com/gnnkit/gnnkit/core"
)

// Aggregate is message passing over a named graph:
//
//	y[i,:] = reduce over the edges e = (j -> i) of w(e) * x[j,:]
//
// with w absent (all ones), an E x 1 edge weight (GCN normalisation, mean
// weights) or E x H per-head weights (GAT attention, scaling column block
// h of the F = C/H columns of each head). The reduction is a sum or a
// mean. When the weights value needs a gradient (attention), Backward
// also produces dw[e,h] = sum_f dy[dst(e),hF+f] * x[src(e),hF+f].
type Aggregate struct {
	base
	graph   string
	x, w, y string
	red     core.Reduce
	cols    int
	heads   int // columns of w; 0 without w
}

// NewAggregate returns y = Aggregate(graph, red, w, x), x and y having
// cols columns. w names an edge value (E x 1 or E x heads) or is "" for
// unweighted messages; heads is w's column count (ignored when w is "").
func NewAggregate(name, graph string, red core.Reduce, x, w, y string, cols, heads int) *Aggregate {
	ins := []string{x}
	if w != "" {
		ins = append(ins, w)
	} else {
		heads = 0
	}
	return &Aggregate{base: newBase(name, core.KindGraph, ins, y), graph: graph,
		x: x, w: w, y: y, red: red, cols: cols, heads: heads}
}

// load looks up the op's graph and values. w is the edge values for g:
// when the bound value has more rows than g has edge ids (g is a trimmed
// layer block, whose edge ids are a prefix of the graph's), a scratch
// copy of its first rows, and full is the bound value.
func (op *Aggregate) load(env *core.Env, s *scratch) (g *core.Graph, x, w, full *core.Tensor, err error) {
	if g, err = env.Graph(op.graph); err != nil {
		return
	}
	if x, err = env.Value(op.x); err != nil {
		return
	}
	if err = checkShape(op.x, x, g.NumSrc, op.cols); err != nil {
		return
	}
	if op.w != "" {
		if w, err = env.Value(op.w); err != nil {
			return
		}
		full = w
		if w.Rows() < edgeRows(g) || w.Cols() != op.heads {
			err = checkShape(op.w, w, edgeRows(g), op.heads)
			return
		}
		if n := edgeRows(g); w.Rows() > n {
			if w, err = s.alloc(n, op.heads); err == nil {
				err = env.K.Gather(full, prefix(n), w)
			}
		}
	}
	return
}

// Forward runs one SpMM.
func (op *Aggregate) Forward(env *core.Env) error {
	s := &scratch{env: env}
	defer s.free()
	g, x, w, _, err := op.load(env, s)
	if err != nil {
		return op.errf(err)
	}
	return op.errf(output(env, op.y, g.NumDst, op.cols, func(y *core.Tensor) error {
		return env.K.SpMM(g, op.red, w, x, y)
	}))
}

// Backward computes dx with the transposed SpMM (over g.Reverse(), same
// edge values) and, when w needs one, dw with an SDDMM. For a mean, the
// edge values are scaled by 1/deg(dst), computed as the edge softmax of
// zeros.
func (op *Aggregate) Backward(env *core.Env) error {
	dy := env.Grad(op.y)
	if dy == nil {
		return nil
	}
	needX := env.NeedsGrad(op.x)
	needW := op.w != "" && env.NeedsGrad(op.w)
	if !needX && !needW {
		return nil
	}
	s := &scratch{env: env}
	defer s.free()
	g, x, w, full, err := op.load(env, s)
	if err != nil {
		return op.errf(err)
	}
	wt := w // the edge values of the transposed product
	var mw *core.Tensor
	if op.red == core.ReduceMean {
		rows := edgeRows(g)
		if w != nil {
			rows = w.Rows()
		}
		zeros, err := s.alloc(rows, 1)
		if err != nil {
			return op.errf(err)
		}
		if mw, err = s.alloc(rows, 1); err != nil {
			return op.errf(err)
		}
		// The softmax over a row's edges of zeros is 1/deg(dst) on each edge.
		if err := env.K.EdgeSoftmax(g, zeros, mw); err != nil {
			return op.errf(err)
		}
		wt = mw
		if w != nil && needX {
			if wt, err = s.alloc(w.Rows(), w.Cols()); err != nil {
				return op.errf(err)
			}
			if err := env.K.Map(core.MapMul, w, mw, 0, wt); err != nil {
				return op.errf(err)
			}
		}
	}
	if needX {
		if err := accum(env, op.x, g.NumSrc, op.cols, func(dx *core.Tensor) error {
			return env.K.SpMM(g.Reverse(), core.ReduceSum, wt, dy, dx)
		}); err != nil {
			return op.errf(err)
		}
	}
	if needW {
		if err := accum(env, op.w, full.Rows(), full.Cols(), func(dw *core.Tensor) error {
			part := dw // the block's rows: a prefix of dw's when trimmed
			if w != full {
				var err error
				if part, err = s.alloc(w.Rows(), w.Cols()); err != nil {
					return err
				}
			}
			if err := env.K.SDDMM(g, core.EdgeDot, dy, x, part); err != nil {
				return err
			}
			if mw != nil {
				if err := env.K.Map(core.MapMul, part, mw, 0, part); err != nil {
					return err
				}
			}
			if part != dw {
				return env.K.ScatterAdd(part, prefix(part.Rows()), dw)
			}
			return nil
		}); err != nil {
			return op.errf(err)
		}
	}
	return nil
}

// Cost counts the SpMM forward, its transpose for dx and the SDDMM for dw:
// 2*E*C FLOPs each, moving the gathered rows (E*C), the output (N*C), the
// column indices and the edge values.
func (op *Aggregate) Cost(d core.Dims) core.Cost {
	n, e, c, h := d.Nodes, d.Edges, int64(op.cols), int64(op.heads)
	spmm := core.Cost{FLOPs: 2 * e * c, BytesMoved: f32*(e*c+n*c+e*h+e) + 8*(n+1)}
	cost := spmm
	if op.w != "" {
		cost.ActivationBytes += f32 * e * h // read by the transpose
	}
	if op.red == core.ReduceMean {
		cost = cost.Add(core.Cost{FLOPs: 4 * e, BytesMoved: f32 * 3 * e})
	}
	if op.gradFor(op.x) {
		cost = cost.Add(spmm)
	}
	if op.w != "" && op.gradFor(op.w) {
		cost = cost.Add(core.Cost{FLOPs: 2 * e * c, BytesMoved: f32*(2*e*c+e*h+e) + 8*(n+1), ActivationBytes: f32 * n * c})
	}
	return cost
}

// EdgeScore is the additive attention logit of every edge:
// y[e,h] = dst[dst(e),h] + src[src(e),h] (SDDMM EdgeAdd), for GAT's
// a_dst·z_i + a_src·z_j.
type EdgeScore struct {
	base
	graph       string
	dst, src, y string
	heads       int
}

// NewEdgeScore returns y = SDDMM(graph, EdgeAdd, dst, src); dst and src are
// per-node scores with heads columns and y is E x heads.
func NewEdgeScore(name, graph, dst, src, y string, heads int) *EdgeScore {
	return &EdgeScore{base: newBase(name, core.KindGraph, []string{dst, src}, y), graph: graph,
		dst: dst, src: src, y: y, heads: heads}
}

func (op *EdgeScore) load(env *core.Env) (*core.Graph, *core.Tensor, *core.Tensor, error) {
	g, err := env.Graph(op.graph)
	if err != nil {
		return nil, nil, nil, err
	}
	v, err := values(env, op.dst, op.src)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := checkShape(op.dst, v[0], g.NumDst, op.heads); err != nil {
		return nil, nil, nil, err
	}
	if err := checkShape(op.src, v[1], g.NumSrc, op.heads); err != nil {
		return nil, nil, nil, err
	}
	return g, v[0], v[1], nil
}

// Forward runs one SDDMM.
func (op *EdgeScore) Forward(env *core.Env) error {
	g, a, b, err := op.load(env)
	if err != nil {
		return op.errf(err)
	}
	return op.errf(output(env, op.y, edgeRows(g), op.heads, func(y *core.Tensor) error {
		return env.K.SDDMM(g, core.EdgeAdd, a, b, y)
	}))
}

// Backward sums dy over each node's in-edges for dst (SpMM over g of dy
// against ones) and over its out-edges for src (the same over g.Reverse()).
func (op *EdgeScore) Backward(env *core.Env) error {
	dy := env.Grad(op.y)
	if dy == nil {
		return nil
	}
	needDst, needSrc := env.NeedsGrad(op.dst), env.NeedsGrad(op.src)
	if !needDst && !needSrc {
		return nil
	}
	g, _, _, err := op.load(env)
	if err != nil {
		return op.errf(err)
	}
	s := &scratch{env: env}
	defer s.free()
	for _, side := range []struct {
		need bool
		name string
		g    *core.Graph
	}{{needDst, op.dst, g}, {needSrc, op.src, g.Reverse()}} {
		if !side.need {
			continue
		}
		ones, err := s.ones(side.g.NumSrc, op.heads)
		if err != nil {
			return op.errf(err)
		}
		if err := accum(env, side.name, side.g.NumDst, op.heads, func(d *core.Tensor) error {
			return env.K.SpMM(side.g, core.ReduceSum, dy, ones, d)
		}); err != nil {
			return op.errf(err)
		}
	}
	return nil
}

// Cost counts the SDDMM and the two backward row sums.
func (op *EdgeScore) Cost(d core.Dims) core.Cost {
	n, e, h := d.Nodes, d.Edges, int64(op.heads)
	sddmm := core.Cost{FLOPs: e * h, BytesMoved: f32*(2*e*h+e*h+e) + 8*(n+1)}
	sum := core.Cost{FLOPs: 2 * e * h, BytesMoved: f32*(e*h+e*h+n*h+n*h+e) + 8*(n+1)}
	c := sddmm
	for _, in := range []string{op.dst, op.src} {
		if op.gradFor(in) {
			c = c.Add(sum)
		}
	}
	return c
}

// EdgeSoftmax normalises edge scores over each destination's in-edges,
// per head: y[e,h] = softmax over the edges of dst(e) of s[.,h].
type EdgeSoftmax struct {
	base
	graph string
	s, y  string
	heads int
}

// NewEdgeSoftmax returns y = EdgeSoftmax(graph, s), both E x heads.
func NewEdgeSoftmax(name, graph, s, y string, heads int) *EdgeSoftmax {
	return &EdgeSoftmax{base: newBase(name, core.KindGraph, []string{s}, y), graph: graph, s: s, y: y, heads: heads}
}

// Forward runs the edge softmax kernel.
func (op *EdgeSoftmax) Forward(env *core.Env) error {
	g, err := env.Graph(op.graph)
	if err != nil {
		return op.errf(err)
	}
	s, err := env.Value(op.s)
	if err != nil {
		return op.errf(err)
	}
	if err := checkShape(op.s, s, edgeRows(g), op.heads); err != nil {
		return op.errf(err)
	}
	return op.errf(output(env, op.y, s.Rows(), op.heads, func(y *core.Tensor) error {
		return env.K.EdgeSoftmax(g, s, y)
	}))
}

// Backward runs the edge softmax backward kernel on the kept output.
func (op *EdgeSoftmax) Backward(env *core.Env) error {
	dy := env.Grad(op.y)
	if dy == nil || !env.NeedsGrad(op.s) {
		return nil
	}
	g, err := env.Graph(op.graph)
	if err != nil {
		return op.errf(err)
	}
	y, err := env.Value(op.y)
	if err != nil {
		return op.errf(err)
	}
	return op.errf(accum(env, op.s, y.Rows(), op.heads, func(ds *core.Tensor) error {
		return env.K.EdgeSoftmaxBackward(g, y, dy, ds)
	}))
}

// Cost counts the max, exp, sum and divide passes forward and the
// weighted row sum backward; the output is kept.
func (op *EdgeSoftmax) Cost(d core.Dims) core.Cost {
	n, eh := d.Nodes, d.Edges*int64(op.heads)
	c := core.Cost{FLOPs: 5 * eh, BytesMoved: f32*3*eh + 8*(n+1), ActivationBytes: f32 * eh}
	if op.gradFor(op.s) {
		c = c.Add(core.Cost{FLOPs: 4 * eh, BytesMoved: f32*4*eh + 8*(n+1)})
	}
	return c
}
