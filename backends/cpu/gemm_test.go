package cpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/backendtest"
)

// TestGEMMLarge checks GEMM against a float64 reference on shapes larger
// than backendtest's, so that every path of every variant runs: several
// row bands, several k blocks, k-splits (small m, long k), edge tiles in
// m and n, all four transposes, the beta cases, and dense and sparse A.
func TestGEMMLarge(t *testing.T) {
	shapes := []struct {
		m, k, n int
		zeros   float64
	}{
		{203, 300, 45, 0},      // bands, k blocks, edge tiles in m and n
		{64, 5000, 33, 0},      // k-splits
		{13, 2100, 16, 0.1},    // k-splits, one band, tile edges
		{300, 517, 130, 0.995}, // sparse A
		{97, 260, 7, 0.5},
	}
	scalars := []struct{ alpha, beta float32 }{{1, 0}, {0.5, 1}, {-1.5, 0.25}}
	for _, v := range cpu.Variants() {
		b, err := cpu.NewConfig(cpu.Config{BackendOptions: core.BackendOptions{Threads: 3}, Variant: v})
		if err != nil {
			t.Fatal(err)
		}
		k := b.Device(0).Kernels()
		r := rand.New(rand.NewPCG(3, 4))
		for _, s := range shapes {
			for _, ta := range []bool{false, true} {
				for _, tb := range []bool{false, true} {
					for _, ab := range scalars {
						name := fmt.Sprintf("%s/m=%d/k=%d/n=%d/zeros=%v/ta=%v/tb=%v/alpha=%v/beta=%v", v, s.m, s.k, s.n, s.zeros, ta, tb, ab.alpha, ab.beta)
						as, bs := []int{s.m, s.k}, []int{s.k, s.n}
						if ta {
							as = []int{s.k, s.m}
						}
						if tb {
							bs = []int{s.n, s.k}
						}
						a := randTensor(r, s.zeros, as...)
						bm := randTensor(r, 0, bs...)
						c := randTensor(r, 0, s.m, s.n)
						if ab.beta == 0 {
							for i := range c.F32() {
								c.F32()[i] = float32(math.NaN())
							}
						}
						want := refGEMM(ta, tb, s.m, s.n, s.k, ab.alpha, a.F32(), bm.F32(), ab.beta, c.F32())
						if err := k.GEMM(ta, tb, ab.alpha, a, bm, ab.beta, c); err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						for i, w := range want {
							got := float64(c.F32()[i])
							if d := math.Abs(got - w); !(d <= 1e-4*(1+math.Abs(w))) {
								t.Fatalf("%s: c[%d] = %v, want %v", name, i, got, w)
							}
						}
					}
				}
			}
		}
		b.Close()
	}
}

func randTensor(r *rand.Rand, zeros float64, shape ...int) *core.Tensor {
	x, _ := core.NewHostTensor(make([]float32, core.NumElems(shape)), shape...)
	for i := range x.F32() {
		if r.Float64() >= zeros {
			x.F32()[i] = r.Float32()*2 - 1
		}
	}
	return x
}

func refGEMM(ta, tb bool, m, n, k int, alpha float32, a, b []float32, beta float32, c []float32) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				av := a[i*k+p]
				if ta {
					av = a[p*m+i]
				}
				bv := b[p*n+j]
				if tb {
					bv = b[j*k+p]
				}
				s += float64(av) * float64(bv)
			}
			s *= float64(alpha)
			if beta != 0 {
				s += float64(beta) * float64(c[i*n+j])
			}
			out[i*n+j] = s
		}
	}
	return out
}

// TestSpMMEdgeIDWeights checks SpMM on a graph with edge ids (a reverse)
// when the same weights come back (the cached CSR order is used), when
// they change in place, and with several heads, against a naive loop.
func TestSpMMEdgeIDWeights(t *testing.T) {
	for _, v := range cpu.Variants() {
		b, err := cpu.NewConfig(cpu.Config{BackendOptions: core.BackendOptions{Threads: 3}, Variant: v})
		if err != nil {
			t.Fatal(err)
		}
		k := b.Device(0).Kernels()
		r := rand.New(rand.NewPCG(9, 9))
		g := backendtest.RMAT(300, 3000, 4).Reverse()
		for _, heads := range []int{1, 4} {
			const f = 5
			c := heads * f
			x := randTensor(r, 0, g.NumSrc, c)
			w := randTensor(r, 0, g.NumEdgeIDs(), heads)
			out := randTensor(r, 0, g.NumDst, c)
			for step := range 4 {
				if step == 2 { // change the weights in place
					w.F32()[len(w.F32())/2] += 1
				}
				if err := k.SpMM(g, core.ReduceSum, w, x, out); err != nil {
					t.Fatal(err)
				}
				for i := range g.NumDst {
					for col := range c {
						var want float64
						for e := g.Offsets[i]; e < g.Offsets[i+1]; e++ {
							want += float64(w.F32()[g.EdgeID(int(e))*heads+col/f]) * float64(x.F32()[int(g.Indices[e])*c+col])
						}
						if got := float64(out.F32()[i*c+col]); math.Abs(got-want) > 1e-4*(1+math.Abs(want)) {
							t.Fatalf("%s heads=%d step %d: out[%d,%d] = %v, want %v", v, heads, step, i, col, got, want)
						}
					}
				}
			}
		}
		b.Close()
	}
}

// TestSpMMBiasAct checks the fused aggregate-bias-ReLU against SpMM, Map
// add and Map ReLU, bit for bit, for every variant.
func TestSpMMBiasAct(t *testing.T) {
	g := backendtest.RMAT(500, 6000, 3)
	for _, v := range cpu.Variants() {
		b, err := cpu.NewConfig(cpu.Config{BackendOptions: core.BackendOptions{Threads: 2}, Variant: v})
		if err != nil {
			t.Fatal(err)
		}
		k := b.Device(0).Kernels().(*cpu.Kernels)
		r := rand.New(rand.NewPCG(1, 3))
		for _, c := range []int{7, 16, 128} {
			for _, red := range []core.Reduce{core.ReduceSum, core.ReduceMean} {
				for _, act := range []cpu.Activation{cpu.ActNone, cpu.ActReLU} {
					x := randTensor(r, 0, g.NumSrc, c)
					w := randTensor(r, 0, g.NumEdges(), 1)
					bias := randTensor(r, 0, 1, c)
					want, got := randTensor(r, 0, g.NumDst, c), randTensor(r, 0, g.NumDst, c)
					if err := k.SpMM(g, red, w, x, want); err != nil {
						t.Fatal(err)
					}
					if err := k.Map(core.MapAdd, want, bias, 0, want); err != nil {
						t.Fatal(err)
					}
					if act == cpu.ActReLU {
						if err := k.Map(core.MapReLU, want, nil, 0, want); err != nil {
							t.Fatal(err)
						}
					}
					if err := k.SpMMBiasAct(g, red, w, x, bias, act, got); err != nil {
						t.Fatal(err)
					}
					for i, wv := range want.F32() {
						if math.Float32bits(wv) != math.Float32bits(got.F32()[i]) {
							t.Fatalf("%s c=%d %v act=%d: [%d] = %v, unfused %v", v, c, red, act, i, got.F32()[i], wv)
						}
					}
				}
			}
		}
		if err := k.SpMMBiasAct(g, core.ReduceSum, nil, randTensor(r, 0, g.NumSrc, 4), randTensor(r, 0, 1, 5), cpu.ActNone, randTensor(r, 0, g.NumDst, 4)); err == nil {
			t.Error("bias of the wrong width accepted")
		}
		b.Close()
	}
}

// TestSteadyStateAllocs checks that the kernels of a training step
// allocate nothing once their pools are warm (a pool emptied by a GC
// between runs may cost an allocation, hence the average below 1).
func TestSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector empties sync.Pools at random")
	}
	b, err := cpu.NewConfig(cpu.Config{BackendOptions: core.BackendOptions{Threads: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	k := b.Device(0).Kernels()
	r := rand.New(rand.NewPCG(2, 2))
	g := backendtest.RMAT(2000, 20000, 1)
	rev := g.Reverse()
	x, w := randTensor(r, 0, g.NumSrc, 64), randTensor(r, 0, 64, 40)
	h, h2, z, lp := randTensor(r, 0, g.NumDst, 64), randTensor(r, 0, g.NumDst, 64), randTensor(r, 0, g.NumDst, 40), randTensor(r, 0, g.NumDst, 40)
	ew := randTensor(r, 0, g.NumEdges(), 1)
	mask := randTensor(r, 0, g.NumDst, 64)
	bias, db := randTensor(r, 0, 1, 40), randTensor(r, 0, 1, 40)
	m, v := randTensor(r, 0, 64, 40), randTensor(r, 0, 64, 40)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	step := 0
	avg := testing.AllocsPerRun(50, func() {
		step++
		must(k.Dropout(x, 0.5, uint64(step), nil, h, mask))
		must(k.SpMM(g, core.ReduceSum, ew, h, h2))
		must(k.GEMM(false, false, 1, h2, w, 0, z))
		must(k.Map(core.MapAdd, z, bias, 0, z))
		must(k.Map(core.MapReLU, z, nil, 0, z))
		must(k.LogSoftmax(z, lp))
		must(k.LogSoftmaxBackward(lp, z, z))
		must(k.Reduce(core.AxisRows, z, db))
		must(k.SpMM(rev, core.ReduceSum, ew, h, h2))
		must(k.GEMM(true, false, 1, h, z, 0, m))
		must(k.Adam(w, m, v, m, core.AdamParams{LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: step}))
	})
	if avg >= 1 {
		t.Errorf("%.1f allocations per training step, want 0", avg)
	}
}
