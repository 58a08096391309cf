package cpu_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/backendtest"
)

// benchDevice opens a device with the variant named by GNN_CPU (default:
// the best), pinned when GNN_CPU_PIN=1.
func benchDevice(b *testing.B) core.Device {
	be, err := cpu.New(core.BackendOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	return be.Devices()[0]
}

// randT allocates a tensor with uniform values, a fraction zeros of them 0.
func randT(b *testing.B, d core.Device, r *rand.Rand, zeros float64, shape ...int) *core.Tensor {
	x, err := d.Alloc(shape...)
	if err != nil {
		b.Fatal(err)
	}
	for i := range x.F32() {
		if r.Float64() >= zeros {
			x.F32()[i] = r.Float32()*2 - 1
		}
	}
	return x
}

// BenchmarkGEMM covers the GCN-on-Cora shapes: X(2708x1433, 98.7% zeros)
// times W1, its weight gradient X^T*dY, dH*W^T, and dense square cases.
func BenchmarkGEMM(b *testing.B) {
	cases := []struct {
		m, k, n int
		ta, tb  bool
		zeros   float64
	}{
		{2708, 1433, 16, false, false, 0.987}, // Cora layer 1: X * W1
		{1433, 2708, 16, true, false, 0.987},  // dW1 = X^T * dH
		{2708, 16, 1433, false, true, 0},      // dX = dH * W1^T
		{2708, 16, 7, false, false, 0},        // layer 2
		{2708, 1433, 16, false, false, 0},     // dense features
		{512, 512, 512, false, false, 0},
		{512, 512, 512, true, true, 0},
		{100000, 128, 128, false, false, 0}, // GCN 100k layer 1: X * W1
		{100000, 128, 40, false, false, 0},  // layer 2
		{100000, 40, 128, false, true, 0},   // dH = dZ * W2^T
		{128, 100000, 128, true, false, 0},  // dW1 = X^T * dXW
		{1024, 1024, 1024, false, false, 0},
	}
	for _, c := range cases {
		name := fmt.Sprintf("m=%d/k=%d/n=%d", c.m, c.k, c.n)
		if c.ta || c.tb {
			name += fmt.Sprintf("/ta=%v/tb=%v", c.ta, c.tb)
		}
		if c.zeros > 0 {
			name += fmt.Sprintf("/zeros=%v", c.zeros)
		}
		b.Run(name, func(b *testing.B) {
			d := benchDevice(b)
			r := rand.New(rand.NewPCG(1, 1))
			as, bs := []int{c.m, c.k}, []int{c.k, c.n}
			if c.ta {
				as = []int{c.k, c.m}
			}
			if c.tb {
				bs = []int{c.n, c.k}
			}
			x := randT(b, d, r, c.zeros, as...)
			w := randT(b, d, r, 0, bs...)
			out := randT(b, d, r, 0, c.m, c.n)
			k := d.Kernels()
			b.ReportAllocs()
			for b.Loop() {
				if err := k.GEMM(c.ta, c.tb, 1, x, w, 0, out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(2*float64(c.m)*float64(c.k)*float64(c.n)*(1-c.zeros)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkSpMM runs on a Cora-sized R-MAT graph (2708 nodes, ~10.5k
// edges plus self-loops) and a larger power-law graph.
func BenchmarkSpMM(b *testing.B) {
	graphs := []struct {
		name string
		g    func() *core.Graph
	}{
		{"graph=rmat-cora", sync.OnceValue(func() *core.Graph { return withLoops(backendtest.RMAT(2708, 10556, 1)) })},
		{"graph=rmat-100k", sync.OnceValue(func() *core.Graph { return backendtest.RMAT(100000, 1000000, 2) })},
	}
	for _, gc := range graphs {
		for _, c := range []int{16, 64} {
			for _, w := range []string{"none", "e1", "e4"} {
				b.Run(fmt.Sprintf("%s/cols=%d/weights=%s", gc.name, c, w), func(b *testing.B) {
					d := benchDevice(b)
					r := rand.New(rand.NewPCG(1, 1))
					g := gc.g()
					x := randT(b, d, r, 0, g.NumSrc, c)
					out := randT(b, d, r, 0, g.NumDst, c)
					var wt *core.Tensor
					switch w {
					case "e1":
						wt = randT(b, d, r, 0, g.NumEdges(), 1)
					case "e4":
						wt = randT(b, d, r, 0, g.NumEdges(), 4)
					}
					k := d.Kernels()
					b.ReportAllocs()
					for b.Loop() {
						if err := k.SpMM(g, core.ReduceSum, wt, x, out); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(g.NumEdges())*float64(b.N)/b.Elapsed().Seconds()/1e6, "Medges/s")
				})
			}
		}
	}
}

func withLoops(g *core.Graph) *core.Graph {
	s, err := g.WithSelfLoops()
	if err != nil {
		panic(err)
	}
	return s
}

func BenchmarkSDDMM(b *testing.B) {
	g := withLoops(backendtest.RMAT(2708, 10556, 1))
	for _, h := range []int{1, 8} {
		b.Run(fmt.Sprintf("graph=rmat-cora/op=dot/heads=%d/cols=64", h), func(b *testing.B) {
			d := benchDevice(b)
			r := rand.New(rand.NewPCG(1, 1))
			x := randT(b, d, r, 0, g.NumDst, 64)
			out := randT(b, d, r, 0, g.NumEdges(), h)
			k := d.Kernels()
			b.ReportAllocs()
			for b.Loop() {
				if err := k.SDDMM(g, core.EdgeDot, x, x, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkMap(b *testing.B) {
	d := benchDevice(b)
	r := rand.New(rand.NewPCG(1, 1))
	x := randT(b, d, r, 0, 2708, 16)
	bias := randT(b, d, r, 0, 1, 16)
	out := randT(b, d, r, 0, 2708, 16)
	k := d.Kernels()
	for _, op := range []core.MapOp{core.MapAdd, core.MapReLU, core.MapELU} {
		b.Run(fmt.Sprintf("op=%v/shape=2708x16", op), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := k.Map(op, x, bias, 0.1, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGCNEpoch is one full-graph training epoch of a 2-layer GCN
// (1433 -> 16 -> 7) on a Cora-sized graph with 98.7%-zero features,
// written directly against the kernels: forward, backward (SpMM on the
// reverse graph, X^T*dY weight gradients) and four Adam steps. The
// acceptance bar is 200 epochs well under 60 s.
func BenchmarkGCNEpoch(b *testing.B) {
	const n, f, hid, cls = 2708, 1433, 16, 7
	g := withLoops(backendtest.RMAT(n, 10556, 1))
	d := benchDevice(b)
	k := d.Kernels()
	r := rand.New(rand.NewPCG(1, 1))
	ew, _ := d.Alloc(g.NumEdges(), 1)
	_ = d.Upload(ew, g.GCNNorm())
	x := randT(b, d, r, 0.987, n, f)
	alloc := func(shape ...int) *core.Tensor {
		t, err := d.Alloc(shape...)
		if err != nil {
			b.Fatal(err)
		}
		return t
	}
	w1, b1, w2, b2 := randT(b, d, r, 0, f, hid), alloc(1, hid), randT(b, d, r, 0, hid, cls), alloc(1, cls)
	params := []*core.Tensor{w1, b1, w2, b2}
	var grads, ms, vs []*core.Tensor
	for _, p := range params {
		grads = append(grads, alloc(p.Shape...))
		ms = append(ms, alloc(p.Shape...))
		vs = append(vs, alloc(p.Shape...))
	}
	xw, h, hd, mask := alloc(n, hid), alloc(n, hid), alloc(n, hid), alloc(n, hid)
	hw, z, lp, dlp := alloc(n, cls), alloc(n, cls), alloc(n, cls), alloc(n, cls)
	dz, dhd, dh, dxw := alloc(n, cls), alloc(n, hid), alloc(n, hid), alloc(n, hid)
	labels := make([]int32, n)
	train := make([]int32, 140)
	for i := range labels {
		labels[i] = int32(r.IntN(cls))
	}
	for i := range train {
		train[i] = int32(i)
	}
	rev := g.Reverse()
	step := 0
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		step++
		// forward
		must(k.GEMM(false, false, 1, x, w1, 0, xw))
		must(k.SpMM(g, core.ReduceSum, ew, xw, h))
		must(k.Map(core.MapAdd, h, b1, 0, h))
		must(k.Map(core.MapReLU, h, nil, 0, h))
		must(k.Dropout(h, 0.5, uint64(step), nil, hd, mask))
		must(k.GEMM(false, false, 1, hd, w2, 0, hw))
		must(k.SpMM(g, core.ReduceSum, ew, hw, z))
		must(k.Map(core.MapAdd, z, b2, 0, z))
		must(k.LogSoftmax(z, lp))
		_, err := k.NLLLoss(lp, labels, train, 1.0/140, dlp)
		must(err)
		// backward
		must(k.LogSoftmaxBackward(lp, dlp, dz))
		must(k.Reduce(core.AxisRows, dz, grads[3]))
		must(k.SpMM(rev, core.ReduceSum, ew, dz, hw)) // d(hw)
		must(k.GEMM(true, false, 1, hd, hw, 0, grads[2]))
		must(k.GEMM(false, true, 1, hw, w2, 0, dhd))
		must(k.Map(core.MapMul, dhd, mask, 0, dh))
		must(k.Map(core.MapReLUGrad, dh, h, 0, dh))
		must(k.Reduce(core.AxisRows, dh, grads[1]))
		must(k.SpMM(rev, core.ReduceSum, ew, dh, dxw))
		must(k.GEMM(true, false, 1, x, dxw, 0, grads[0]))
		for i, p := range params {
			must(k.Adam(p, grads[i], ms[i], vs[i], core.AdamParams{LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 5e-4, Step: step}))
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*200, "s/200epochs")
}
