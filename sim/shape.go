package sim

import (
	"fmt"
	"math"
	"sort"

	"github.com/gnnkit/gnnkit/core"
)

// shapeOut is what a shape-only pass of a model learns.
type shapeOut struct {
	out  []int64 // each op's output bytes
	held []int64 // bytes each op's forward leaves allocated (outputs, masks)
	// heldFixed is, per op, the part of held whose size does not follow
	// the rows (see shapeDev.paramShapes): the loss's scalar.
	heldFixed []int64
	// edges is, per op, the edges of the largest graph its forward's
	// kernels read (a graph op's hop block; 0: none); readRoot says some
	// kernel read g itself rather than a hop block of it.
	edges    []int64
	readRoot bool
	peak     int64 // the unit's peak above the resident parameters and gradients, inputs included
	in       int64 // the unit's inputs (features, edge weights)
	// Per op, its backward: the peak above what was allocated when it
	// started, the gradient bytes it leaves for its inputs, and the
	// gradient bytes of its outputs freed after it (see Point.Temp).
	bwdPeak, gradIn, gradOut []int64
	// bwdFixed is, per op, the part of bwdPeak in buffers shaped like a
	// parameter (a weight gradient before it is added into the
	// accumulator: nn's accum), whose size does not follow the rows.
	bwdFixed []int64
}

// shapes runs model m forward and backward over graph g (rows = its
// nodes) on a shape-only device (no storage, no arithmetic), with the
// loss over targets: the allocation sequence of the executor, without its
// cost. It is how the simulator learns activation sizes without running
// the model. hopEnds, when set, says g's rows are in hop order from the
// targets (core.Subgraph.HopEnds): layers then compute only the rows a
// later layer reads, as the executor does (core.Env.HopRows).
func shapes(m *core.Model, g *core.Graph, featDim int, targets []int32, hopEnds []int) (so *shapeOut, err error) {
	if m == nil || g == nil {
		return nil, fmt.Errorf("sim: the workload carries no model or graph")
	}
	defer func() {
		if r := recover(); r != nil { // an op that cannot run on shapes alone
			so, err = nil, fmt.Errorf("sim: shape pass: %v", r)
		}
	}()
	dev := &shapeDev{mem: core.NewMemAccountant("shape", 0), root: g}
	params, grads := map[string]*core.Tensor{}, map[string]*core.Tensor{}
	for _, p := range m.Params {
		if params[p.Name], err = dev.Alloc(p.Shape...); err != nil {
			return nil, err
		}
		if grads[p.Name], err = dev.Alloc(p.Shape...); err != nil {
			return nil, err
		}
	}
	shapeOf := map[string][]int{}
	for _, p := range m.Params {
		shapeOf[p.Name] = p.Shape
	}
	opPar := m.OpParams()
	base := dev.mem.Stats().Used
	env := core.NewEnv(dev, params, grads, m.NeedsGrad())
	n := g.NumDst
	for _, gs := range m.Graphs {
		env.Graphs[gs.Name] = g
		if gs.Weights != core.WeightsNone {
			t, _ := env.Alloc(g.NumEdges(), 1)
			env.SetValue(gs.Name+".w", t)
		}
	}
	if len(hopEnds) == m.Config.Layers+1 && len(m.Graphs) == 1 && hopEnds[len(hopEnds)-1] == n {
		if err := g.BindHopBlocks(env.Graphs, m.Graphs[0].Name, hopEnds, 0); err != nil {
			return nil, fmt.Errorf("sim: shape pass: %w", err)
		}
		env.HopRows = hopEnds
	}
	for _, in := range m.Inputs {
		t, _ := env.Alloc(n, max(featDim, 1))
		env.SetValue(in, t)
	}
	so = &shapeOut{in: dev.mem.Stats().Used - base}
	env.Labels = make([]int32, n)
	for _, t := range targets {
		if t >= 0 && int(t) < n {
			env.Targets = append(env.Targets, t)
		}
	}
	if len(env.Targets) > 0 {
		env.LossScale = 1 / float32(len(env.Targets))
	}
	env.Training = true
	dev.mem.ResetPeak()
	for i, op := range m.Ops {
		before, fixed0 := dev.mem.Stats().Used, dev.fixedLive
		dev.edges = 0
		if err := op.Forward(env); err != nil {
			return nil, fmt.Errorf("sim: shape pass: %s forward: %w", op.Name(), err)
		}
		var o int64
		for _, v := range op.Outputs() {
			if t, err := env.Value(v); err == nil {
				o += t.Bytes()
			}
		}
		so.out = append(so.out, o)
		so.held = append(so.held, dev.mem.Stats().Used-before)
		so.heldFixed = append(so.heldFixed, min(max(dev.fixedLive-fixed0, 0), so.held[i]))
		so.edges = append(so.edges, dev.edges)
	}
	so.bwdPeak, so.gradIn, so.gradOut = make([]int64, len(m.Ops)), make([]int64, len(m.Ops)), make([]int64, len(m.Ops))
	so.bwdFixed = make([]int64, len(m.Ops))
	overall := dev.mem.Stats().Peak
	for i := len(m.Ops) - 1; i >= 0; i-- {
		op := m.Ops[i]
		dev.mem.ResetPeak()
		dev.setParamShapes(opPar, shapeOf, i)
		fixed0 := dev.fixedLive
		dev.fixedPeak = fixed0
		before := dev.mem.Stats().Used
		if err := op.Backward(env); err != nil {
			return nil, fmt.Errorf("sim: shape pass: %s backward: %w", op.Name(), err)
		}
		mid := dev.mem.Stats()
		for _, v := range op.Outputs() {
			env.DropGrad(v)
		}
		after := dev.mem.Stats().Used
		so.bwdPeak[i], so.gradIn[i], so.gradOut[i] = mid.Peak-before, max(mid.Used-before, 0), max(mid.Used-after, 0)
		so.bwdFixed[i] = min(dev.fixedPeak-fixed0, so.bwdPeak[i])
		overall = max(overall, mid.Peak)
	}
	so.peak = overall - base
	so.readRoot = dev.readRoot
	env.Release()
	return so, nil
}

// fieldShapes is shapes over the receptive field of targets (global
// node ids of g) over m's layers, as the executor builds a subgraph
// unit's view (fieldShape: KHop's induced graph; without full, the
// outermost hop's rows without edges), with mark, pos and stamp as
// fieldShape's; false for targets KHop rejects or a failed pass.
func fieldShapes(m *core.Model, g *core.Graph, featDim int, targets []int32, mark, pos []int32, stamp int32, full bool) (*shapeOut, bool) {
	view, ends, ok := fieldShape(g, targets, max(m.Config.Layers, 0), mark, pos, stamp, full)
	if !ok {
		return nil, false
	}
	local := make([]int32, ends[0])
	for i := range local {
		local[i] = int32(i)
	}
	so, err := shapes(m, view, featDim, local, ends)
	return so, err == nil
}

// shapeDev is a device with shapes and a memory accountant only; edges
// is the largest graph its kernels were given since it was cleared.
type shapeDev struct {
	mem      *core.MemAccountant
	edges    int64
	root     *core.Graph // the graph of the pass
	readRoot bool
	// paramShapes are the shapes (shapeKey) of the parameters the op in
	// backward reads; buffers of those shapes it allocates (a weight's
	// gradient before it is added into the accumulator; an activation of
	// such a shape elsewhere is not), and scalars (the loss), are fixed:
	// their size does not follow the rows. Live bytes fixedLive, their
	// peak since it was last set fixedPeak.
	paramShapes          map[string]bool
	fixedLive, fixedPeak int64
}

type shapeBuf struct {
	n     int
	fixed bool // shaped like a parameter or a scalar (shapeDev.paramShapes)
}

// setParamShapes sets paramShapes to those of the parameters op i reads.
func (d *shapeDev) setParamShapes(opPar [][]string, shapeOf map[string][]int, i int) {
	d.paramShapes = map[string]bool{}
	if i < len(opPar) {
		for _, name := range opPar[i] {
			d.paramShapes[shapeKey(shapeOf[name])] = true
		}
	}
}

// shapeKey names a shape for shapeDev.paramShapes.
func shapeKey(shape []int) string { return fmt.Sprint(shape) }

func (b *shapeBuf) Device() core.DeviceID { return "shape" }
func (b *shapeBuf) Len() int              { return b.n }

func (d *shapeDev) ID() core.DeviceID { return "shape" }
func (d *shapeDev) Info() core.DeviceInfo {
	return core.DeviceInfo{ID: "shape", Backend: "shape", Name: "shape"}
}
func (d *shapeDev) Kernels() core.Kernels                  { return shapeKernels{d} }
func (d *shapeDev) NewStream() core.Stream                 { return shapeStream{} }
func (d *shapeDev) Mem() *core.MemAccountant               { return d.mem }
func (d *shapeDev) Upload(*core.Tensor, []float32) error   { return nil }
func (d *shapeDev) Download([]float32, *core.Tensor) error { return nil }

func (d *shapeDev) Alloc(shape ...int) (*core.Tensor, error) {
	for _, s := range shape {
		if s < 0 {
			return nil, fmt.Errorf("%w: shape pass: negative dimension in %v", core.ErrShape, shape)
		}
	}
	b := &shapeBuf{n: core.NumElems(shape)}
	b.fixed = b.n == 1 || d.paramShapes[shapeKey(shape)]
	t := &core.Tensor{Shape: append([]int(nil), shape...), Buf: b}
	if err := d.mem.Reserve(t.Bytes(), "shape"); err != nil {
		return t, err
	}
	if b.fixed {
		d.fixedLive += t.Bytes()
		d.fixedPeak = max(d.fixedPeak, d.fixedLive)
	}
	return t, nil
}

func (d *shapeDev) Free(t *core.Tensor) {
	if t != nil {
		if b, ok := t.Buf.(*shapeBuf); ok {
			d.mem.Release(t.Bytes())
			if b.fixed {
				d.fixedLive -= t.Bytes()
			}
			t.Buf = &shapeBuf{} // a second Free releases nothing
		}
	}
}

type shapeStream struct{}

func (shapeStream) Record() core.Event { return core.DoneEvent{} }
func (shapeStream) Wait(core.Event)    {}
func (shapeStream) Sync() error        { return nil }

// shapeKernels do nothing but note the graphs they are given: only
// shapes matter.
type shapeKernels struct{ d *shapeDev }

func (k shapeKernels) saw(g *core.Graph) {
	if g != nil {
		k.d.edges = max(k.d.edges, int64(g.NumEdges()))
		k.d.readRoot = k.d.readRoot || g == k.d.root
	}
}

func (shapeKernels) GEMM(bool, bool, float32, *core.Tensor, *core.Tensor, float32, *core.Tensor) error {
	return nil
}
func (k shapeKernels) SpMM(g *core.Graph, _ core.Reduce, _, _, _ *core.Tensor) error {
	k.saw(g)
	return nil
}
func (k shapeKernels) SDDMM(g *core.Graph, _ core.EdgeOp, _, _, _ *core.Tensor) error {
	k.saw(g)
	return nil
}
func (k shapeKernels) EdgeSoftmax(g *core.Graph, _, _ *core.Tensor) error {
	k.saw(g)
	return nil
}
func (k shapeKernels) EdgeSoftmaxBackward(g *core.Graph, _, _, _ *core.Tensor) error {
	k.saw(g)
	return nil
}
func (shapeKernels) Gather(*core.Tensor, []int32, *core.Tensor) error     { return nil }
func (shapeKernels) ScatterAdd(*core.Tensor, []int32, *core.Tensor) error { return nil }
func (shapeKernels) Map(core.MapOp, *core.Tensor, *core.Tensor, float32, *core.Tensor) error {
	return nil
}
func (shapeKernels) Reduce(core.ReduceAxis, *core.Tensor, *core.Tensor) error          { return nil }
func (shapeKernels) LogSoftmax(*core.Tensor, *core.Tensor) error                       { return nil }
func (shapeKernels) LogSoftmaxBackward(*core.Tensor, *core.Tensor, *core.Tensor) error { return nil }
func (shapeKernels) NLLLoss(*core.Tensor, []int32, []int32, float32, *core.Tensor) (float64, error) {
	return 0, nil
}
func (shapeKernels) Dropout(*core.Tensor, float32, uint64, []int32, *core.Tensor, *core.Tensor) error {
	return nil
}
func (shapeKernels) Adam(*core.Tensor, *core.Tensor, *core.Tensor, *core.Tensor, core.AdamParams) error {
	return nil
}
func (shapeKernels) SGD(*core.Tensor, *core.Tensor, *core.Tensor, core.SGDParams) error { return nil }

// WalkBackward runs a backward task's ops (indices, any order: walked
// from the highest down, as the executor does) over per-op backward
// memory — temp: the peak above what was allocated at the op's start,
// gin: input gradients it leaves, gout: output gradients freed after it —
// starting with live0 gradient bytes already allocated (gradients
// received from other devices). It returns the task's peak above its
// start and the gradient bytes left at its end.
func WalkBackward(ops []int, temp, gin, gout func(o int) int64, live0 int64) (peak, live int64) {
	idx := append([]int(nil), ops...)
	sort.Sort(sort.Reverse(sort.IntSlice(idx)))
	peak, live = live0, live0
	for _, o := range idx {
		peak = max(peak, live+temp(o))
		live = max(live+gin(o)-gout(o), 0)
	}
	return peak, live
}

// calibrated scales the shape pass's per-op backward memory so that
// walking every op from nothing peaks at target (the one-device backward
// transient another measure gives), and returns it per op.
func (so *shapeOut) calibrated(target int64) (temp, gin, gout []int64) {
	n := len(so.bwdPeak)
	f := so.scale(target)
	temp, gin, gout = make([]int64, n), make([]int64, n), make([]int64, n)
	for i := range n {
		temp[i] = int64(math.Round(float64(so.bwdPeak[i]) * f))
		gin[i] = int64(math.Round(float64(so.gradIn[i]) * f))
		gout[i] = int64(math.Round(float64(so.gradOut[i]) * f))
	}
	return temp, gin, gout
}

// scale is calibrated's factor: target over the walk's peak (1 when the
// walk peaks at nothing).
func (so *shapeOut) scale(target int64) float64 {
	n := len(so.bwdPeak)
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	at := func(xs []int64) func(int) int64 { return func(o int) int64 { return xs[o] } }
	w, _ := WalkBackward(all, at(so.bwdPeak), at(so.gradIn), at(so.gradOut), 0)
	if w <= 0 {
		return 1
	}
	return float64(max(target, 0)) / float64(w)
}

// calibratedFixed is calibrated's temp's fixed part per op (bwdFixed at
// the same scale): what a unit of any size allocates.
func (so *shapeOut) calibratedFixed(target int64) []int64 {
	f := so.scale(target)
	fixed := make([]int64, len(so.bwdFixed))
	for i, b := range so.bwdFixed {
		fixed[i] = int64(math.Round(float64(b) * f))
	}
	return fixed
}
