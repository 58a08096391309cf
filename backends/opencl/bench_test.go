package opencl_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/backends/opencl"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/backendtest"
)

// benchDevices opens the first device of each backend compared: the CPU
// backend (all cores) and OpenCL (skipped when unavailable).
func benchDevices(b *testing.B) []core.Device {
	c, err := cpu.New(core.BackendOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	devs := []core.Device{c.Devices()[0]}
	if o, err := opencl.New(core.BackendOptions{}); err == nil {
		b.Cleanup(func() { o.Close() })
		devs = append(devs, o.Devices()[0])
	} else {
		b.Log(err)
	}
	return devs
}

func randTensor(b *testing.B, d core.Device, r *rand.Rand, zeros float64, shape ...int) *core.Tensor {
	t, err := d.Alloc(shape...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Free(t) })
	v := make([]float32, t.Len())
	for i := range v {
		if r.Float64() >= zeros {
			v[i] = r.Float32()*2 - 1
		}
	}
	if err := d.Upload(t, v); err != nil {
		b.Fatal(err)
	}
	return t
}

// waitFor waits for the device's queued work by downloading t (the
// transfer is part of what is timed, on both backends).
func waitFor(b *testing.B, d core.Device, t *core.Tensor) {
	one := make([]float32, t.Len())
	if err := d.Download(one, t); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkGEMM times c = a*b for the shapes of a GCN layer on Cora
// (dense and with bag-of-words sparsity) and a square product.
func BenchmarkGEMM(b *testing.B) {
	shapes := []struct {
		m, k, n int
		zeros   float64
	}{{2708, 1433, 16, 0}, {2708, 1433, 16, 0.987}, {1024, 1024, 1024, 0}}
	for _, d := range benchDevices(b) {
		for _, s := range shapes {
			name := fmt.Sprintf("backend=%s/m=%d/k=%d/n=%d/zeros=%v", d.Info().Backend, s.m, s.k, s.n, s.zeros)
			b.Run(name, func(b *testing.B) {
				r := rand.New(rand.NewPCG(1, 2))
				a := randTensor(b, d, r, s.zeros, s.m, s.k)
				w := randTensor(b, d, r, 0, s.k, s.n)
				c := randTensor(b, d, r, 0, s.m, s.n)
				k := d.Kernels()
				if err := k.GEMM(false, false, 1, a, w, 0, c); err != nil { // warm-up: PoCL compiles on first launch
					b.Fatal(err)
				}
				waitFor(b, d, c)
				b.SetBytes(int64(s.m*s.k+s.k*s.n+s.m*s.n) * 4)
				for b.Loop() {
					if err := k.GEMM(false, false, 1, a, w, 0, c); err != nil {
						b.Fatal(err)
					}
					waitFor(b, d, c)
				}
				b.ReportMetric(2*float64(s.m)*float64(s.k)*float64(s.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkSpMM times a weighted sum aggregation on a power-law R-MAT
// graph of 50k nodes and about 500k edges, 64 features.
func BenchmarkSpMM(b *testing.B) {
	g := backendtest.RMAT(50000, 500000, 3)
	for _, d := range benchDevices(b) {
		for _, c := range []int{16, 64} {
			b.Run(fmt.Sprintf("backend=%s/graph=rmat50k/edges=%d/cols=%d", d.Info().Backend, g.NumEdges(), c), func(b *testing.B) {
				r := rand.New(rand.NewPCG(3, 4))
				x := randTensor(b, d, r, 0, g.NumSrc, c)
				w := randTensor(b, d, r, 0, g.NumEdges(), 1)
				out := randTensor(b, d, r, 0, g.NumDst, c)
				k := d.Kernels()
				if err := k.SpMM(g, core.ReduceSum, w, x, out); err != nil { // warm-up: uploads the graph, compiles
					b.Fatal(err)
				}
				waitFor(b, d, out)
				b.SetBytes(int64(g.NumEdges())*int64(c+2)*4 + int64(g.NumDst*c)*4)
				for b.Loop() {
					if err := k.SpMM(g, core.ReduceSum, w, x, out); err != nil {
						b.Fatal(err)
					}
					waitFor(b, d, out)
				}
			})
		}
	}
}
