package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// Roofline returns a modelled profile of w's ops on device d, for
// simulating without measurements: each op's forward+backward time is
// max(FLOPs / GFLOPS, bytes moved / bandwidth) from Op.Cost at the
// workload's dims, split 1:2 between forward and backward, plus d.Launch
// per direction, linear in rows (graph ops in edges). On a device with
// SMs (a GPU model), ops naming their matrix products (core.GEMMOp) have
// each product priced at GEMMEfficiency instead, with points at every
// power of two of rows, so a small micro-batch costs more per row. Output and
// activation sizes come from a shape-only forward and backward pass of
// the model when the workload carries it (in process), else from
// Cost.ActivationBytes.
func Roofline(w *core.Workload, d DeviceModel) (*Profile, error) {
	if w == nil || len(w.Ops) == 0 {
		return nil, fmt.Errorf("sim: roofline of an empty workload")
	}
	n, e := max(w.Dims.Nodes, 1), w.Dims.Edges
	if w.Dims.Nodes == 0 {
		n = int64(max(len(w.Batch), 1))
	}
	var so *shapeOut
	if w.Model != nil && len(w.Model.Ops) == len(w.Ops) {
		so, _ = shapes(w.Model, w.Graph, w.FeatureDim, w.Batch, nil) // nil: fall back to the ops' Cost
	}
	// The backward's transient memory: per op from the shape pass's
	// backward (Point.Temp, GradIn, GradOut).
	var heldSum, temp int64
	var tmps, gins, gouts, fixeds []int64
	if so != nil {
		for _, h := range so.held {
			heldSum += h
		}
		temp = max(so.peak-so.in-heldSum, 0)
		tmps, gins, gouts = so.calibrated(temp)
		fixeds = so.calibratedFixed(temp)
	}
	weighted := 0
	if w.Model != nil {
		for _, g := range w.Model.Graphs {
			if g.Weights != core.WeightsNone {
				weighted++
			}
		}
	}
	p := &Profile{Model: w.ModelName, Device: core.DeviceInfo{ID: d.ID, Name: d.Name + " (roofline)", GFLOPS: d.GFLOPS, MemGBps: d.MemGBps},
		ParamBytes: w.ParamBytes, OptStateBytes: int64(w.StateBuffers()) * w.ParamBytes,
		ResidentInputBytes: 4*n*int64(w.FeatureDim) + 4*e*int64(weighted)}
	roof := func(c core.Cost, frac float64) time.Duration {
		var t float64
		if d.GFLOPS > 0 {
			t = float64(c.FLOPs) * frac / d.GFLOPS
		}
		if d.MemGBps > 0 {
			t = max(t, float64(c.BytesMoved)*frac/d.MemGBps)
		}
		return time.Duration(math.Round(t))
	}
	ladder := roofLadder(n, d.SMs > 0)
	for i, op := range w.Ops {
		o := OpProfile{Name: op.Name, Kind: op.Kind, Preds: append([]int(nil), op.Deps...), WeightBytes: op.Cost.WeightBytes}
		ob, mem, tmp, gin, gout, fixed, memFixed := op.Cost.ActivationBytes, op.Cost.ActivationBytes, int64(0), int64(0), int64(0), int64(0), int64(0)
		if so != nil {
			ob, mem, tmp, gin, gout, fixed, memFixed = so.out[i], so.held[i], tmps[i], gins[i], gouts[i], min(fixeds[i], tmps[i]), so.heldFixed[i]
		}
		var gemms core.GEMMOp
		if d.SMs > 0 && d.GFLOPS > 0 && w.Model != nil && len(w.Model.Ops) == len(w.Ops) {
			gemms, _ = w.Model.Ops[i].(core.GEMMOp)
		}
		o.OutBytesPerRow = float64(ob) / float64(n)
		for _, rows := range ladder {
			frac := float64(rows) / float64(n)
			edges := int64(math.Round(float64(e) * frac))
			c := op.Cost
			// Weights are read whatever the rows.
			c.BytesMoved = int64(float64(max(0, c.BytesMoved-2*c.WeightBytes))*frac) + min(c.BytesMoved, 2*c.WeightBytes)
			c.FLOPs = int64(float64(c.FLOPs) * frac)
			fb := roof(c, 1)
			fwd := fb / 3
			if gemms != nil {
				fwd, fb = gemmRoof(gemms, core.Dims{Nodes: rows, Edges: edges}, c, d)
			}
			var opEdges int64
			if op.Kind == core.KindGraph {
				opEdges = edges // a whole-graph unit's op reads every edge
			}
			o.Points = append(o.Points, Point{Rows: rows, Edges: edges, OpEdges: opEdges,
				Fwd: fwd + d.Launch, Bwd: fb - fwd + d.Launch,
				Mem: memFixed + scaleUp(mem-memFixed, frac), OutBytes: scaleUp(ob, frac), Temp: fixed + scaleUp(tmp-fixed, frac),
				GradIn: scaleUp(gin, frac), GradOut: int64(float64(gout) * frac)})
		}
		p.Ops = append(p.Ops, o)
	}
	for i := range p.Ops {
		for _, q := range p.Ops[i].Preds {
			p.Ops[i].InputSize += p.Ops[q].OutBytesPerRow / 4
		}
	}
	// Units computing a subgraph bring their inputs along.
	for _, rows := range roofLadder(n, false) {
		frac := float64(rows) / float64(n)
		in := int64(float64(p.ResidentInputBytes) * frac)
		var t time.Duration
		if d.MemGBps > 0 {
			t = time.Duration(float64(in) / d.MemGBps)
		}
		p.Setup = append(p.Setup, Point{Rows: rows, Edges: int64(math.Round(float64(e) * frac)), Fwd: t, Mem: in})
	}
	return p, nil
}

// scaleUp is n bytes scaled by frac, rounded up: what a memory figure
// holds never falls short by a rounding (the freed GradOut rounds down).
func scaleUp(n int64, frac float64) int64 { return int64(math.Ceil(float64(n) * frac)) }

// roofLadder is the sizes a roofline profile has points at: n/64 and n,
// enough for costs linear in the rows; with the GEMM model (gemm), every
// power of two below n as well, so interpolation follows the efficiency
// curve.
func roofLadder(n int64, gemm bool) []int64 {
	small := max(n/64, 1)
	if !gemm {
		if small == n {
			return []int64{n}
		}
		return []int64{small, n}
	}
	var l []int64
	for r := int64(1); r < n; r *= 2 {
		l = append(l, r)
	}
	return append(l, n)
}

// gemmRoof is the roofline of an op whose work is matrix products at size
// dims: each product at GEMMEfficiency of d.GFLOPS, the op's other FLOPs
// (c minus the products') at d.GFLOPS, against the memory traffic at
// d.MemGBps; it returns the forward's share and the forward+backward time.
func gemmRoof(op core.GEMMOp, dims core.Dims, c core.Cost, d DeviceModel) (fwd, total time.Duration) {
	// timed is the products' time and FLOPs.
	timed := func(gs []core.GEMM) (t, flops float64) {
		for _, g := range gs {
			fl := 2 * float64(g.M) * float64(g.N) * float64(g.K)
			t += fl / (d.GFLOPS * GEMMEfficiency(g, d.SMs))
			flops += fl
		}
		return t, flops
	}
	f, b := op.GEMMs(dims)
	tf, ff := timed(f)
	tb, fb := timed(b)
	rest := max(0, float64(c.FLOPs)-ff-fb) / d.GFLOPS
	t := tf + tb + rest
	var mem float64
	if d.MemGBps > 0 {
		mem = float64(c.BytesMoved) / d.MemGBps
	}
	tot := max(t, mem)
	share := 1.0 / 3
	if tf+tb > 0 {
		share = tf / (tf + tb)
	}
	return time.Duration(math.Round(tot * share)), time.Duration(math.Round(tot))
}
