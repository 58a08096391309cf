package backendtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

// The feature widths and head counts every graph kernel is run with.
var (
	widths = []int{0, 1, 3, 17, 64}
	heads  = []int{1, 4}
)

// corpusWithReverse is the corpus plus the reverse of each graph (whose
// edge ids are a permutation, read through EIDs).
func corpusWithReverse() []GraphCase {
	var out []GraphCase
	for _, c := range Corpus() {
		out = append(out, c, GraphCase{Name: c.Name + "/reverse", Why: "reverse of " + c.Name, G: c.G.Reverse()})
	}
	return out
}

func testSpMM(t *testing.T, b core.Backend) {
	dev := b.Devices()[0]
	for _, gc := range corpusWithReverse() {
		t.Run(gc.Name, func(t *testing.T) {
			e := newEnv(t, dev, 11)
			for _, red := range []core.Reduce{core.ReduceSum, core.ReduceMean} {
				for _, c := range widths {
					spmmCase(e, gc.Name, gc.G, red, 0, c)
					spmmCase(e, gc.Name, gc.G, red, 1, c)
				}
				for _, f := range []int{0, 1, 3, 17} {
					spmmCase(e, gc.Name, gc.G, red, 4, 4*f)
				}
			}
		})
	}
	t.Run("3d", func(t *testing.T) { testSpMM3D(t, dev) })
}

// testSpMM3D runs SpMM with per-head weights on [N, H, F] tensors, the
// layout of multi-head attention features.
func testSpMM3D(t *testing.T, dev core.Device) {
	e := newEnv(t, dev, 14)
	g := RMAT(40, 200, 5)
	x, xd := e.rand(1, 0, g.NumSrc, 4, 3)
	w, wd := e.rand(1, 0, g.NumEdges(), 4)
	out := e.fill(float32(math.NaN()), g.NumDst, 4, 3)
	if mustCall(t, "SpMM", func() error { return e.k.SpMM(g, core.ReduceMean, w, x, out) }) {
		want, mag := refSpMM(g, core.ReduceMean, wd, 4, xd, 12)
		check(t, "SpMM 3d", e.get(out), want, mag, maxDegree(g))
	}
}

// spmmCase checks SpMM on g with no weights (h == 0) or h weights per edge.
func spmmCase(e *env, name string, g *core.Graph, red core.Reduce, h, c int) {
	t := e.t
	x, xd := e.rand(1, 0.1, g.NumSrc, c)
	var w *core.Tensor
	var wd []float32
	if h > 0 {
		w, wd = e.rand(2, 0, edgeRowsFor(g), h)
	}
	out := e.fill(float32(math.NaN()), g.NumDst, c)
	what := fmt.Sprintf("SpMM %s/%v/weights=%d/cols=%d", name, red, h, c)
	if !mustCall(t, what, func() error { return e.k.SpMM(g, red, w, x, out) }) {
		return
	}
	want, mag := refSpMM(g, red, wd, h, xd, c)
	check(t, what, e.get(out), want, mag, maxDegree(g))
}

func testSDDMM(t *testing.T, b core.Backend) {
	dev := b.Devices()[0]
	for _, gc := range corpusWithReverse() {
		t.Run(gc.Name, func(t *testing.T) {
			e := newEnv(t, dev, 12)
			for _, h := range heads {
				sddmmCase(e, gc.Name, gc.G, core.EdgeAdd, h, h)
				for _, f := range []int{0, 1, 3, 17} {
					sddmmCase(e, gc.Name, gc.G, core.EdgeDot, h, h*f)
				}
			}
		})
	}
}

func sddmmCase(e *env, name string, g *core.Graph, op core.EdgeOp, h, cols int) {
	t := e.t
	a, ad := e.rand(1, 0.1, g.NumDst, cols)
	bt, bd := e.rand(1, 0.1, g.NumSrc, cols)
	rows := edgeRowsFor(g)
	out := e.fill(float32(math.NaN()), rows, h)
	what := fmt.Sprintf("SDDMM %s/%v/heads=%d/cols=%d", name, op, h, cols)
	if !mustCall(t, what, func() error { return e.k.SDDMM(g, op, a, bt, out) }) {
		return
	}
	want, mag := refSDDMM(g, op, ad, bd, cols, h, rows)
	check(t, what, e.get(out), want, mag, max(1, cols/h))
}

func testEdgeSoftmax(t *testing.T, b core.Backend) {
	dev := b.Devices()[0]
	for _, gc := range corpusWithReverse() {
		t.Run(gc.Name, func(t *testing.T) {
			e := newEnv(t, dev, 13)
			for _, h := range heads {
				for _, scale := range []float64{1, 50} {
					for _, inPlace := range []bool{false, true} {
						edgeSoftmaxCase(e, gc.Name, gc.G, h, scale, inPlace)
					}
				}
			}
		})
	}
}

func edgeSoftmaxCase(e *env, name string, g *core.Graph, h int, scale float64, inPlace bool) {
	t := e.t
	rows := edgeRowsFor(g)
	s, sd := e.rand(scale, 0, rows, h)
	out := s
	if !inPlace {
		out = e.fill(float32(math.NaN()), rows, h)
	}
	what := fmt.Sprintf("EdgeSoftmax %s/heads=%d/scale=%v/inplace=%v", name, h, scale, inPlace)
	if !mustCall(t, what, func() error { return e.k.EdgeSoftmax(g, s, out) }) {
		return
	}
	want, mag := refEdgeSoftmax(g, sd, h, rows)
	y := e.get(out)
	check(t, what, y, want, mag, maxDegree(g)+4)

	// Backward from the backend's own y, with edge ids not in g set to 0.
	for i, w := range want {
		if math.IsNaN(w) {
			y[i] = 0
		}
	}
	yt := e.tensor(y, rows, h)
	dy, dyd := e.rand(1, 0, rows, h)
	dx := dy
	if !inPlace {
		dx = e.fill(float32(math.NaN()), rows, h)
	}
	what = fmt.Sprintf("EdgeSoftmaxBackward %s/heads=%d/inplace=%v", name, h, inPlace)
	if !mustCall(t, what, func() error { return e.k.EdgeSoftmaxBackward(g, yt, dy, dx) }) {
		return
	}
	want, mag = refEdgeSoftmaxBackward(g, y, dyd, h, rows)
	check(t, what, e.get(dx), want, mag, maxDegree(g)+1)
}

// CheckGraph runs every graph kernel (SpMM with each reduce and weight
// form, SDDMM add and dot, edge softmax and its backward) on g on dev
// against the reference, with widths and head counts drawn from seed.
// Fuzz targets call it with generated graphs.
func CheckGraph(t *testing.T, dev core.Device, g *core.Graph, seed uint64) {
	t.Helper()
	e := newEnv(t, dev, seed)
	h := heads[e.rng.IntN(len(heads))]
	f := []int{0, 1, 3, 5, 17}[e.rng.IntN(5)]
	for _, red := range []core.Reduce{core.ReduceSum, core.ReduceMean} {
		spmmCase(e, "fuzz", g, red, 0, h*f)
		spmmCase(e, "fuzz", g, red, h, h*f)
	}
	sddmmCase(e, "fuzz", g, core.EdgeAdd, h, h)
	sddmmCase(e, "fuzz", g, core.EdgeDot, h, h*f)
	edgeSoftmaxCase(e, "fuzz", g, h, 3, e.rng.IntN(2) == 0)
}

// testFuzz is a testing/quick-style loop: random graphs from a fixed seed
// (square and bipartite, repeats, self-loops, unsorted rows, foreign edge
// ids) through CheckGraph, on the graph and its reverse.
func testFuzz(t *testing.T, b core.Backend) {
	dev := b.Devices()[0]
	r := rand.New(rand.NewPCG(20240229, 1))
	n := 60
	if testing.Short() {
		n = 15
	}
	for i := range n {
		g := RandomGraph(r, 40, 200)
		t.Run(fmt.Sprintf("%d/%dx%d/e=%d", i, g.NumDst, g.NumSrc, g.NumEdges()), func(t *testing.T) {
			CheckGraph(t, dev, g, uint64(i))
			CheckGraph(t, dev, g.Reverse(), uint64(i)+1000)
		})
	}
}

// testProperties checks identities that need no reference: SpMM is linear
// in x, SpMM(mean) of ones is 1 on non-empty rows, SpMM(sum) of ones is the
// in-degree, SpMM on the reverse is the adjoint, and a kernel gives the
// same bits when called twice.
func testProperties(t *testing.T, b core.Backend) {
	dev := b.Devices()[0]
	for _, gc := range Corpus() {
		g := gc.G
		t.Run(gc.Name, func(t *testing.T) {
			e := newEnv(t, dev, 21)
			const c = 5
			w, wd := e.rand(1, 0, edgeRowsFor(g), 1)
			t.Run("Degrees", func(t *testing.T) {
				ones := e.fill(1, g.NumSrc, c)
				for _, red := range []core.Reduce{core.ReduceSum, core.ReduceMean} {
					out := e.fill(float32(math.NaN()), g.NumDst, c)
					if !mustCall(t, "SpMM", func() error { return e.k.SpMM(g, red, nil, ones, out) }) {
						continue
					}
					got := e.get(out)
					deg := g.InDegrees()
					for i := range g.NumDst {
						want := float32(deg[i])
						if red == core.ReduceMean && deg[i] > 0 {
							want = 1
						}
						for j := range c {
							if v := got[i*c+j]; math.Abs(float64(v-want)) > 1e-6*float64(want+1) {
								t.Fatalf("%v of ones: row %d = %v, want %v (in-degree %d)", red, i, v, want, deg[i])
							}
						}
					}
				}
			})
			t.Run("Linearity", func(t *testing.T) {
				x1, x1d := e.rand(1, 0, g.NumSrc, c)
				x2, x2d := e.rand(1, 0, g.NumSrc, c)
				const alpha = 0.75
				comb := make([]float32, len(x1d))
				for i := range comb {
					comb[i] = alpha*x1d[i] + x2d[i]
				}
				x3 := e.tensor(comb, g.NumSrc, c)
				o1 := e.fill(0, g.NumDst, c)
				o2 := e.fill(0, g.NumDst, c)
				o3 := e.fill(0, g.NumDst, c)
				for _, red := range []core.Reduce{core.ReduceSum, core.ReduceMean} {
					ok := mustCall(t, "SpMM", func() error { return e.k.SpMM(g, red, w, x1, o1) }) &&
						mustCall(t, "SpMM", func() error { return e.k.SpMM(g, red, w, x2, o2) }) &&
						mustCall(t, "SpMM", func() error { return e.k.SpMM(g, red, w, x3, o3) })
					if !ok {
						return
					}
					g1, g2, g3 := e.get(o1), e.get(o2), e.get(o3)
					want, mag := make([]float64, len(g3)), make([]float64, len(g3))
					_, m1 := refSpMM(g, red, wd, 1, x1d, c)
					_, m2 := refSpMM(g, red, wd, 1, x2d, c)
					for i := range want {
						want[i] = alpha*float64(g1[i]) + float64(g2[i])
						mag[i] = 4 * (alpha*m1[i] + m2[i])
					}
					check(t, fmt.Sprintf("SpMM %v linearity", red), g3, want, mag, maxDegree(g))
				}
			})
			t.Run("Adjoint", func(t *testing.T) {
				// <SpMM(g, w, x), y> == <x, SpMM(g^T, w, y)>
				x, xd := e.rand(1, 0, g.NumSrc, c)
				y, yd := e.rand(1, 0, g.NumDst, c)
				gx := e.fill(0, g.NumDst, c)
				gty := e.fill(0, g.NumSrc, c)
				if !mustCall(t, "SpMM", func() error { return e.k.SpMM(g, core.ReduceSum, w, x, gx) }) ||
					!mustCall(t, "SpMM reverse", func() error { return e.k.SpMM(g.Reverse(), core.ReduceSum, w, y, gty) }) {
					return
				}
				var lhs, rhs, mag float64
				for i, v := range e.get(gx) {
					lhs += float64(v) * float64(yd[i])
				}
				for i, v := range e.get(gty) {
					rhs += float64(v) * float64(xd[i])
				}
				for i := range g.NumDst {
					for q := g.Offsets[i]; q < g.Offsets[i+1]; q++ {
						j := int(g.Indices[q])
						for col := range c {
							mag += math.Abs(float64(wd[g.EdgeID(int(q))]) * float64(xd[j*c+col]) * float64(yd[i*c+col]))
						}
					}
				}
				if math.Abs(lhs-rhs) > 2*RelTol(maxDegree(g)+maxDegree(g.Reverse()))*mag+AbsTol {
					t.Errorf("<Ax, y> = %v but <x, A^T y> = %v", lhs, rhs)
				}
			})
			t.Run("Repeatable", func(t *testing.T) {
				x, _ := e.rand(1, 0, g.NumSrc, 17)
				o1 := e.fill(0, g.NumDst, 17)
				o2 := e.fill(0, g.NumDst, 17)
				if mustCall(t, "SpMM", func() error { return e.k.SpMM(g, core.ReduceMean, w, x, o1) }) &&
					mustCall(t, "SpMM", func() error { return e.k.SpMM(g, core.ReduceMean, w, x, o2) }) {
					a, b := e.get(o1), e.get(o2)
					for i := range a {
						if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
							t.Fatalf("SpMM twice: [%d] = %v then %v", i, a[i], b[i])
						}
					}
				}
			})
		})
	}
}
