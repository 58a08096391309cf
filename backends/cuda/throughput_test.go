//go:build cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"gorgonia.org/cu"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/backendtest"
)

// timeIt runs f warm times, then reps times between two device
// synchronisations (cuCtxSynchronize) and returns the median seconds.
func timeIt(t *testing.T, d *Device, warm, reps int, f func() error) float64 {
	t.Helper()
	sync := func() {
		if err := d.w.waitOn(cu.Synchronize); err != nil {
			t.Fatal(err)
		}
	}
	for range warm {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	sync()
	ts := make([]float64, reps)
	for i := range reps {
		t0 := time.Now()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		sync()
		ts[i] = time.Since(t0).Seconds()
	}
	slices.Sort(ts)
	return ts[reps/2]
}

func allocRand(t *testing.T, d *Device, r *rand.Rand, shape ...int) *core.Tensor {
	t.Helper()
	x, err := d.Alloc(shape...)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, x.Len())
	for i := range v {
		v[i] = r.Float32()*2 - 1
	}
	if err := d.Upload(x, v); err != nil {
		t.Fatal(err)
	}
	return x
}

// uniformGraph is n nodes with m edges of uniformly random endpoints.
func uniformGraph(n, m int, seed uint64) *core.Graph {
	r := rand.New(rand.NewPCG(seed, 0x0f0f))
	src, dst := make([]int32, m), make([]int32, m)
	for k := range m {
		src[k], dst[k] = int32(r.IntN(n)), int32(r.IntN(n))
	}
	g, err := core.FromEdges(n, n, src, dst)
	if err != nil {
		panic(err)
	}
	return g
}

// TestThroughput measures the GPU and prints a Markdown table (also
// written to $GNNKIT_BENCH_OUT when set): device-to-device copy
// bandwidth (cuMemcpyDtoD and the copy_f32 kernel), weighted SpMM on
// synthetic graphs of about 10.5M edges x 128 features with both kernel
// variants (GB/s of useful traffic: indices and weights once per entry,
// one x row per entry, the output once; and its share of the copy
// bandwidth), and GEMM 4096^3 and [1M x 128] x [128 x 128] with the fp32
// and TF32 kernels. Every figure is the median of 7 runs after 2 warm-up
// runs. It runs only with GNNKIT_GPU_BENCH=1.
func TestThroughput(t *testing.T) {
	if os.Getenv("GNNKIT_GPU_BENCH") != "1" {
		t.Skip("set GNNKIT_GPU_BENCH=1 to measure the GPU")
	}
	b, err := New(core.BackendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d := b.devs[0]
	k := d.k
	r := rand.New(rand.NewPCG(1, 2))
	const warm, reps = 2, 7
	var md strings.Builder
	info := d.Info()
	fmt.Fprintf(&md, "### CUDA throughput: %s\n\n", info.Name)
	fmt.Fprintf(&md, "%s; %s; driver %s; %d SMs. Median of %d runs after %d warm-up runs, cuCtxSynchronize around each.\n\n",
		strings.Join(info.Features[:2], ", "), core.FormatBytes(info.MemTotal), driverVersion(), d.sms, reps, warm)
	fmt.Fprintf(&md, "| measurement | shape | time | rate | note |\n|---|---|---|---|---|\n")
	row := func(what, shape string, sec float64, rate, note string) {
		fmt.Fprintf(&md, "| %s | %s | %.3f ms | %s | %s |\n", what, shape, sec*1e3, rate, note)
	}

	// copy bandwidth: 1 GiB read + 1 GiB written per copy
	const copyBytes = 1 << 30
	src := allocRand(t, d, r, copyBytes/4)
	dst, err := d.Alloc(copyBytes / 4)
	if err != nil {
		t.Fatal(err)
	}
	sb, db := src.Buf.(*Buffer), dst.Buf.(*Buffer)
	tCopy := timeIt(t, d, warm, reps, func() error {
		return d.w.do(func() error { return cu.MemcpyDtoDAsync(db.ptr, sb.ptr, copyBytes, d.stream) })
	})
	tKern := timeIt(t, d, warm, reps, func() error {
		return d.w.do(func() error {
			n := int64(copyBytes / 4)
			return d.launch("copy_f32", d.threads(n/4), n, sb, db)
		})
	})
	bwCopy, bwKern := 2*copyBytes/tCopy/1e9, 2*copyBytes/tKern/1e9
	row("copy, cuMemcpyDtoD", "1 GiB", tCopy, fmt.Sprintf("%.0f GB/s", bwCopy), "read + write")
	row("copy, copy_f32 kernel", "1 GiB", tKern, fmt.Sprintf("%.0f GB/s", bwKern), "read + write, float4")
	bw := max(bwCopy, bwKern)
	d.Free(src)
	d.Free(dst)

	// SpMM, weighted sum, 128 features
	const n, m, c = 1 << 20, 10_500_000, 128
	for _, gc := range []struct {
		name string
		g    *core.Graph
	}{{"R-MAT", backendtest.RMAT(n, m, 42)}, {"uniform", uniformGraph(n, m, 43)}} {
		g := gc.g
		x := allocRand(t, d, r, g.NumSrc, c)
		w := allocRand(t, d, r, g.NumEdges(), 1)
		out, err := d.Alloc(g.NumDst, c)
		if err != nil {
			t.Fatal(err)
		}
		gb, err := d.graph("SpMM", g, false)
		if err != nil {
			t.Fatal(err)
		}
		nnz := int64(g.NumEdges())
		useful := float64(nnz*(4+4) + nnz*c*4 + int64(g.NumDst)*c*4)
		auto := SpMMWarp
		if gb.skewed(d.sms) {
			auto = SpMMBalanced
		}
		for _, v := range []SpMMVariant{SpMMWarp, SpMMBalanced} {
			d.SetSpMMVariant(v)
			sec := timeIt(t, d, warm, reps, func() error { return k.SpMM(g, core.ReduceSum, w, x, out) })
			gbps := useful / sec / 1e9
			note := fmt.Sprintf("%.0f%% of copy bandwidth; max degree %d", 100*gbps/bw, gb.maxDeg)
			if v == auto {
				note += "; auto's choice"
			}
			if v == SpMMBalanced {
				note += fmt.Sprintf("; chunk %d", d.chunkSize(nnz+int64(g.NumDst)))
			}
			row("SpMM "+v.String(), fmt.Sprintf("%s %dk nodes, %.1fM edges x %d", gc.name, g.NumDst>>10, float64(nnz)/1e6, c), sec,
				fmt.Sprintf("%.0f GB/s", gbps), note)
		}
		d.SetSpMMVariant(SpMMAuto)
		d.Free(x)
		d.Free(w)
		d.Free(out)
	}

	// GEMM
	for _, s := range []struct{ m, k, n int }{{4096, 4096, 4096}, {1 << 20, 128, 128}} {
		a := allocRand(t, d, r, s.m, s.k)
		bm := allocRand(t, d, r, s.k, s.n)
		cm, err := d.Alloc(s.m, s.n)
		if err != nil {
			t.Fatal(err)
		}
		for _, tf := range []bool{false, true} {
			d.SetTF32(tf)
			sec := timeIt(t, d, warm, reps, func() error { return k.GEMM(false, false, 1, a, bm, 0, cm) })
			path := "fp32 tiles"
			if tf {
				path = "TF32 tensor cores"
			}
			row("GEMM "+path, fmt.Sprintf("[%d x %d] x [%d x %d]", s.m, s.k, s.k, s.n), sec,
				fmt.Sprintf("%.0f GFLOP/s", 2*float64(s.m)*float64(s.k)*float64(s.n)/sec/1e9), "")
		}
		d.SetTF32(false)
		d.Free(a)
		d.Free(bm)
		d.Free(cm)
	}
	fmt.Print(md.String())
	if p := os.Getenv("GNNKIT_BENCH_OUT"); p != "" {
		if err := os.WriteFile(p, []byte(md.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}
