//go:build cuda

package cuda_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cuda"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/backendtest"
)

func benchDevice(b *testing.B) *cuda.Device {
	bk, err := cuda.New(core.BackendOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bk.Close() })
	return bk.Device(0)
}

// waitIdle waits for the device (a stream Sync: part of what is timed).
func waitIdle(b *testing.B, d *cuda.Device) {
	if err := d.NewStream().Sync(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkGEMM times c = a*b for a GCN layer on Cora, a square product
// and a tall one, with the fp32 and TF32 kernels.
func BenchmarkGEMM(b *testing.B) {
	d := benchDevice(b)
	for _, s := range []struct{ m, k, n int }{{2708, 1433, 16}, {1024, 1024, 1024}, {100000, 128, 128}} {
		for _, tf := range []bool{false, true} {
			b.Run(fmt.Sprintf("m=%d/k=%d/n=%d/tf32=%v", s.m, s.k, s.n, tf), func(b *testing.B) {
				r := rand.New(rand.NewPCG(1, 2))
				a, w, c := randT(b, d, r, s.m, s.k), randT(b, d, r, s.k, s.n), randT(b, d, r, s.m, s.n)
				d.SetTF32(tf)
				defer d.SetTF32(false)
				k := d.Kernels()
				must(b, k.GEMM(false, false, 1, a, w, 0, c))
				waitIdle(b, d)
				for b.Loop() {
					must(b, k.GEMM(false, false, 1, a, w, 0, c))
				}
				waitIdle(b, d)
				b.ReportMetric(2*float64(s.m)*float64(s.k)*float64(s.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkSpMM times a weighted sum aggregation on a power-law R-MAT
// graph of 50k nodes and about 500k edges with both kernel variants.
func BenchmarkSpMM(b *testing.B) {
	d := benchDevice(b)
	g := backendtest.RMAT(50000, 500000, 3)
	for _, v := range []cuda.SpMMVariant{cuda.SpMMWarp, cuda.SpMMBalanced} {
		for _, c := range []int{16, 64, 128} {
			b.Run(fmt.Sprintf("variant=%v/edges=%d/cols=%d", v, g.NumEdges(), c), func(b *testing.B) {
				r := rand.New(rand.NewPCG(3, 4))
				x, w, out := randT(b, d, r, g.NumSrc, c), randT(b, d, r, g.NumEdges(), 1), randT(b, d, r, g.NumDst, c)
				d.SetSpMMVariant(v)
				defer d.SetSpMMVariant(cuda.SpMMAuto)
				k := d.Kernels()
				must(b, k.SpMM(g, core.ReduceSum, w, x, out))
				waitIdle(b, d)
				b.SetBytes(int64(g.NumEdges())*int64(c+2)*4 + int64(g.NumDst*c)*4)
				for b.Loop() {
					must(b, k.SpMM(g, core.ReduceSum, w, x, out))
				}
				waitIdle(b, d)
			})
		}
	}
}
