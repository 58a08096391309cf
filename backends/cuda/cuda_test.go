//go:build cuda

package cuda_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/backends/cuda"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/backendtest"
)

// open opens the backend with cfg or fails the test.
func open(t testing.TB, cfg cuda.Config) *cuda.Backend {
	t.Helper()
	b, err := cuda.NewConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestConformance runs core/backendtest on the CUDA devices with the
// default kernels (exact fp32 GEMM, automatic SpMM variant).
func TestConformance(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) core.Backend { return open(t, cuda.Config{}) })
}

// TestConformanceBalanced runs the suite with the balanced SpMM forced
// and chunks of 7 path items (rows plus entries), so most rows of the
// corpus span chunk boundaries and go through the carry fix-up.
func TestConformanceBalanced(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) core.Backend {
		return open(t, cuda.Config{SpMM: cuda.SpMMBalanced, Chunk: 7})
	})
}

// TestConformanceWarp runs the suite with the warp-per-row SpMM forced.
func TestConformanceWarp(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	backendtest.Run(t, func(t *testing.T) core.Backend { return open(t, cuda.Config{SpMM: cuda.SpMMWarp}) })
}

// TestConformanceTwoDevices runs the suite on two logical devices (two
// streams on one GPU when there is only one).
func TestConformanceTwoDevices(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	backendtest.Run(t, func(t *testing.T) core.Backend {
		return open(t, cuda.Config{BackendOptions: core.BackendOptions{Devices: 2}})
	})
}

func TestOptions(t *testing.T) {
	backendtest.RunOptions(t, func(t *testing.T, opts core.BackendOptions) core.Backend {
		return open(t, cuda.Config{BackendOptions: opts})
	})
}

func TestRegistered(t *testing.T) {
	if !slices.Contains(core.Backends(), "cuda") {
		t.Fatalf("backends %v lack cuda", core.Backends())
	}
	b, err := core.OpenBackend("cuda", core.BackendOptions{Devices: 2, MemCap: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	devs := b.Devices()
	if len(devs) != 2 || devs[0].ID() != "cuda:0" || devs[1].ID() != "cuda:1" {
		t.Fatalf("devices %v, want cuda:0 and cuda:1", devs)
	}
	info := devs[1].Info()
	t.Logf("%+v", info)
	if info.MemCap != 1<<20 || info.Name == "" || info.Kernel == "" || info.MemTotal <= 0 || len(info.Features) == 0 {
		t.Errorf("Info() = %+v", info)
	}
	if !slices.ContainsFunc(info.Features, func(f string) bool { return len(f) > 3 && f[:3] == "sm_" }) {
		t.Errorf("features %v name no sm_XY", info.Features)
	}
	for _, bad := range []cuda.Config{{BackendOptions: core.BackendOptions{Devices: -1}}, {Chunk: -1}, {SpMM: 9}} {
		if _, err := cuda.NewConfig(bad); err == nil {
			t.Errorf("NewConfig(%+v) succeeded", bad)
		}
	}
	if v, err := cuda.ParseSpMMVariant("Balanced"); err != nil || v != cuda.SpMMBalanced {
		t.Errorf("ParseSpMMVariant(Balanced) = %v, %v", v, err)
	}
	if _, err := cuda.ParseSpMMVariant("fast"); err == nil {
		t.Error("ParseSpMMVariant(fast) succeeded")
	}
}

// TestForeignTensors checks that kernels decline tensors of the host or
// of another device with core.ErrUnsupported, and Free ignores them.
func TestForeignTensors(t *testing.T) {
	b := open(t, cuda.Config{BackendOptions: core.BackendOptions{Devices: 2}})
	defer b.Close()
	d0, d1 := b.Devices()[0], b.Devices()[1]
	a, _ := d0.Alloc(2, 2)
	other, _ := d1.Alloc(2, 2)
	host, _ := core.NewHostTensor(make([]float32, 4), 2, 2)
	k := d0.Kernels()
	for name, x := range map[string]*core.Tensor{"host": host, "other device": other} {
		if err := k.GEMM(false, false, 1, a, x, 0, a); !errors.Is(err, core.ErrUnsupported) {
			t.Errorf("GEMM with a tensor on the %s: %v, want ErrUnsupported", name, err)
		}
		if err := d0.Upload(x, make([]float32, 4)); !errors.Is(err, core.ErrUnsupported) {
			t.Errorf("Upload to a tensor on the %s: %v, want ErrUnsupported", name, err)
		}
	}
	d0.Free(other)
	if err := d1.Download(make([]float32, 4), other); err != nil {
		t.Errorf("foreign Free released the tensor: %v", err)
	}
	d0.Free(a)
	if err := k.Map(core.MapCopy, a, nil, 0, a); err == nil {
		t.Error("Map on a freed tensor succeeded")
	}
}

// TestInvalidGraph checks that a malformed graph (out-of-range source,
// bad offsets) is an ErrInvalidGraph error, not a fault that would break
// the device's context, and that the device works afterwards.
func TestInvalidGraph(t *testing.T) {
	b := open(t, cuda.Config{})
	defer b.Close()
	d := b.Devices()[0]
	k := d.Kernels()
	x, _ := d.Alloc(3, 4)
	out, _ := d.Alloc(2, 4)
	for name, g := range map[string]*core.Graph{
		"source out of range": {NumDst: 2, NumSrc: 3, Offsets: []int64{0, 1, 2}, Indices: []int32{0, 3}},
		"negative source":     {NumDst: 2, NumSrc: 3, Offsets: []int64{0, 1, 2}, Indices: []int32{-1, 0}},
		"offsets decrease":    {NumDst: 2, NumSrc: 3, Offsets: []int64{0, 2, 1}, Indices: []int32{0}},
		"offsets short":       {NumDst: 2, NumSrc: 3, Offsets: []int64{0, 1}, Indices: []int32{0}},
		"negative edge id":    {NumDst: 2, NumSrc: 3, Offsets: []int64{0, 1, 2}, Indices: []int32{0, 1}, EIDs: []int32{0, -4}},
	} {
		if err := k.SpMM(g, core.ReduceSum, nil, x, out); !errors.Is(err, core.ErrInvalidGraph) {
			t.Errorf("%s: SpMM: %v, want ErrInvalidGraph", name, err)
		}
	}
	g, _ := core.FromEdges(2, 3, []int32{0, 1, 2}, []int32{0, 1, 1})
	if err := d.Upload(x, []float32{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}); err != nil {
		t.Fatal(err)
	}
	if err := k.SpMM(g, core.ReduceSum, nil, x, out); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 8)
	if err := d.Download(got, out); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[1 1 1 1 5 5 5 5]" {
		t.Errorf("SpMM after the errors = %v", got)
	}
}

func TestClosed(t *testing.T) {
	b := open(t, cuda.Config{})
	d := b.Devices()[0]
	x, _ := d.Alloc(3)
	s := d.NewStream()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := d.Alloc(3); err == nil {
		t.Error("Alloc after Close succeeded")
	}
	if err := d.Download(make([]float32, 3), x); err == nil {
		t.Error("Download after Close succeeded")
	}
	if err := d.Kernels().Map(core.MapFill, nil, nil, 1, x); err == nil {
		t.Error("Map after Close succeeded")
	}
	d.Free(x) // no-op
	s.Record().Wait()
	if err := s.Sync(); err != nil {
		t.Errorf("Sync after Close: %v", err)
	}
	if used := d.Mem().Stats().Used; used != 0 {
		t.Errorf("%d bytes in use after Close", used)
	}
}

// TestStreams records events on one device and waits for them on the
// same device's stream and on another device's (a GPU-side wait).
func TestStreams(t *testing.T) {
	b := open(t, cuda.Config{BackendOptions: core.BackendOptions{Devices: 2}})
	defer b.Close()
	d0, d1 := b.Devices()[0], b.Devices()[1]
	s0, s1 := d0.NewStream(), d1.NewStream()
	x, _ := d0.Alloc(1000, 100)
	if err := d0.Kernels().Map(core.MapFill, nil, nil, 2, x); err != nil {
		t.Fatal(err)
	}
	if err := d0.Kernels().Map(core.MapExp, x, nil, 0, x); err != nil {
		t.Fatal(err)
	}
	ev := s0.Record()
	s0.Wait(ev) // same device: nothing to do
	s1.Wait(ev) // other device: cuStreamWaitEvent
	ev.Wait()
	ev.Wait() // twice is fine
	s1.Wait(backendtestDone{})
	if err := s0.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s1.Sync(); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, x.Len())
	if err := d0.Download(got, x); err != nil {
		t.Fatal(err)
	}
	if want := float32(math.Exp(2)); math.Abs(float64(got[len(got)-1]-want)) > 1e-5 {
		t.Errorf("exp(2) = %v, want %v", got[len(got)-1], want)
	}
	for range 100 {
		s1.Record() // never waited: the cleanup releases the events
	}
	runtime.GC()
}

// backendtestDone is a foreign event (waited on the host).
type backendtestDone struct{}

func (backendtestDone) Wait() {}

// TestConcurrentCallers runs kernels on one device from several
// goroutines: launches and transfers must not interfere.
func TestConcurrentCallers(t *testing.T) {
	b := open(t, cuda.Config{})
	defer b.Close()
	d := b.Devices()[0]
	g := backendtest.RMAT(500, 5000, 1)
	x, _ := d.Alloc(500, 16)
	xs := make([]float32, x.Len())
	for i := range xs {
		xs[i] = float32(i % 7)
	}
	d.Upload(x, xs)
	want, _ := d.Alloc(500, 16)
	if err := d.Kernels().SpMM(g, core.ReduceSum, nil, x, want); err != nil {
		t.Fatal(err)
	}
	wv := make([]float32, want.Len())
	d.Download(wv, want)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, _ := d.Alloc(500, 16)
			defer d.Free(out)
			for i := range 20 {
				if err := d.Kernels().SpMM(g, core.ReduceSum, nil, x, out); err != nil {
					errs <- err
					return
				}
				if i%2 == w%2 {
					tmp, err := d.Alloc(500, 16) // pool reuse under concurrency
					if err != nil {
						errs <- err
						return
					}
					if err := d.Kernels().Map(core.MapScale, out, nil, 1, tmp); err != nil {
						errs <- err
						return
					}
					d.Free(tmp)
				}
			}
			got := make([]float32, out.Len())
			if err := d.Download(got, out); err != nil {
				errs <- err
				return
			}
			for i, v := range got {
				if v != wv[i] {
					errs <- fmt.Errorf("worker %d: element %d = %v, want %v", w, i, v, wv[i])
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestPoolReuse frees dirty tensors and checks that allocations that
// reuse their memory are zero-filled and accounted for.
func TestPoolReuse(t *testing.T) {
	b := open(t, cuda.Config{})
	defer b.Close()
	d := b.Devices()[0]
	base := d.Mem().Stats().Used
	for round := range 5 {
		var ts []*core.Tensor
		for i := range 10 {
			x, err := d.Alloc(1000 + i*37)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]float32, x.Len())
			if err := d.Download(got, x); err != nil {
				t.Fatal(err)
			}
			for j, v := range got {
				if v != 0 {
					t.Fatalf("round %d: Alloc(%d)[%d] = %v, want 0", round, x.Len(), j, v)
				}
			}
			if err := d.Kernels().Map(core.MapFill, nil, nil, float32(round+1), x); err != nil {
				t.Fatal(err)
			}
			ts = append(ts, x)
		}
		for _, x := range ts {
			d.Free(x)
		}
		if used := d.Mem().Stats().Used; used != base {
			t.Fatalf("round %d: %d bytes in use after freeing everything, want %d", round, used, base)
		}
	}
}

// TestFusedAggregator checks SpMMBiasAct against SpMM + Map(add) +
// Map(relu), bit for bit, for both SpMM variants.
func TestFusedAggregator(t *testing.T) {
	for _, v := range []cuda.SpMMVariant{cuda.SpMMWarp, cuda.SpMMBalanced} {
		t.Run(v.String(), func(t *testing.T) {
			b := open(t, cuda.Config{SpMM: v, Chunk: 13})
			defer b.Close()
			d := b.Device(0)
			var _ cuda.FusedAggregator = d.CUDAKernels()
			k := d.CUDAKernels()
			g := backendtest.RMAT(300, 3000, 4)
			r := rand.New(rand.NewPCG(1, 1))
			for _, c := range []int{3, 16, 64, 130} {
				x := randT(t, d, r, g.NumSrc, c)
				w := randT(t, d, r, g.NumEdges(), 1)
				bias := randT(t, d, r, 1, c)
				for _, red := range []core.Reduce{core.ReduceSum, core.ReduceMean} {
					for _, act := range []cuda.Activation{cuda.ActNone, cuda.ActReLU} {
						fused, _ := d.Alloc(g.NumDst, c)
						if err := k.SpMMBiasAct(g, red, w, x, bias, act, fused); err != nil {
							t.Fatal(err)
						}
						un, _ := d.Alloc(g.NumDst, c)
						must(t, k.SpMM(g, red, w, x, un))
						must(t, k.Map(core.MapAdd, un, bias, 0, un))
						if act == cuda.ActReLU {
							must(t, k.Map(core.MapReLU, un, nil, 0, un))
						}
						a, bb := get(t, d, fused), get(t, d, un)
						for i := range a {
							if math.Float32bits(a[i]) != math.Float32bits(bb[i]) {
								t.Fatalf("cols=%d %v act=%d: [%d] fused %v, unfused %v", c, red, act, i, a[i], bb[i])
							}
						}
						d.Free(fused)
						d.Free(un)
					}
				}
			}
			x := randT(t, d, r, g.NumSrc, 4)
			out, _ := d.Alloc(g.NumDst, 4)
			if err := k.SpMMBiasAct(g, core.ReduceSum, nil, x, randT(t, d, r, 1, 3), cuda.ActReLU, out); !errors.Is(err, core.ErrShape) {
				t.Errorf("bias of the wrong width: %v, want ErrShape", err)
			}
			if err := k.SpMMBiasAct(g, core.ReduceSum, nil, x, nil, cuda.Activation(7), out); !errors.Is(err, core.ErrShape) {
				t.Errorf("unknown activation: %v, want ErrShape", err)
			}
		})
	}
}

// TestSpMMVariants runs both SpMM variants on a skewed R-MAT graph (hub
// rows of thousands of entries) and a regular one: they agree within
// fp32 rounding, and each repeats bit for bit.
func TestSpMMVariants(t *testing.T) {
	b := open(t, cuda.Config{})
	defer b.Close()
	d := b.Device(0)
	k := d.Kernels()
	r := rand.New(rand.NewPCG(2, 2))
	for _, g := range []*core.Graph{backendtest.RMAT(1<<14, 400000, 7), backendtest.RMAT(5000, 50000, 8).Reverse()} {
		for _, c := range []int{1, 7, 32, 128} {
			x := randT(t, d, r, g.NumSrc, c)
			w := randT(t, d, r, g.NumEdges(), 1)
			var res [][]float32
			for _, v := range []cuda.SpMMVariant{cuda.SpMMWarp, cuda.SpMMBalanced, cuda.SpMMBalanced} {
				d.SetSpMMVariant(v)
				out, _ := d.Alloc(g.NumDst, c)
				must(t, k.SpMM(g, core.ReduceMean, w, x, out))
				res = append(res, get(t, d, out))
				d.Free(out)
			}
			for i := range res[0] {
				if math.Abs(float64(res[0][i]-res[1][i])) > 1e-4*(1+math.Abs(float64(res[0][i]))) {
					t.Fatalf("cols=%d: [%d] warp %v, balanced %v", c, i, res[0][i], res[1][i])
				}
				if math.Float32bits(res[1][i]) != math.Float32bits(res[2][i]) {
					t.Fatalf("cols=%d: balanced twice: [%d] %v then %v", c, i, res[1][i], res[2][i])
				}
			}
		}
	}
	d.SetSpMMVariant(cuda.SpMMAuto)
}

// TestGEMMTF32 checks the tensor-core GEMM against the exact one, within
// TF32's rounding (inputs keep 10 of 23 mantissa bits).
func TestGEMMTF32(t *testing.T) {
	b := open(t, cuda.Config{})
	defer b.Close()
	d := b.Device(0)
	k := d.Kernels()
	r := rand.New(rand.NewPCG(3, 3))
	for _, s := range []struct{ m, k, n int }{{1, 1, 1}, {130, 300, 17}, {257, 64, 300}, {1000, 128, 128}} {
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			as, bs := []int{s.m, s.k}, []int{s.k, s.n}
			if tr[0] {
				as = []int{s.k, s.m}
			}
			if tr[1] {
				bs = []int{s.n, s.k}
			}
			a, bm := randT(t, d, r, as...), randT(t, d, r, bs...)
			c0 := randT(t, d, r, s.m, s.n)
			c1, _ := d.Alloc(s.m, s.n)
			must(t, k.Map(core.MapCopy, c0, nil, 0, c1))
			d.SetTF32(false)
			must(t, k.GEMM(tr[0], tr[1], 1.5, a, bm, 0.5, c0))
			d.SetTF32(true)
			must(t, k.GEMM(tr[0], tr[1], 1.5, a, bm, 0.5, c1))
			want, got := get(t, d, c0), get(t, d, c1)
			scale := 1.5 * math.Sqrt(float64(s.k)) // |sum| grows like sqrt(k) for random signs
			for i := range want {
				if math.Abs(float64(got[i]-want[i])) > 3e-3*(scale+1) {
					t.Fatalf("%dx%dx%d %v: [%d] tf32 %v, fp32 %v", s.m, s.k, s.n, tr, i, got[i], want[i])
				}
			}
		}
	}
	d.SetTF32(false)
}

// TestAgreesWithCPU runs the kernels a GCN and a GAT use on both backends
// with the same inputs: dropout masks and gathers must agree bit for bit,
// the rest within float32 rounding.
func TestAgreesWithCPU(t *testing.T) {
	o := open(t, cuda.Config{})
	defer o.Close()
	c, err := cpu.New(core.BackendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g := backendtest.RMAT(3000, 40000, 9)
	sub, err := g.KHop([]int32{1, 100, 2000}, 1)
	if err != nil {
		t.Fatal(err)
	}
	ro := runKernels(t, o.Devices()[0], g, sub.Graph)
	rc := runKernels(t, c.Devices()[0], g, sub.Graph)
	for i := range rc {
		exact := ro[i].exact
		for j, want := range rc[i].v {
			got := ro[i].v[j]
			if exact && math.Float32bits(got) != math.Float32bits(want) {
				t.Errorf("%s: [%d] = %v on cuda, %v on cpu (want the same bits)", rc[i].name, j, got, want)
				break
			}
			if !exact && math.Abs(float64(got-want)) > 1e-4*(1+math.Abs(float64(want))) {
				t.Errorf("%s: [%d] = %v on cuda, %v on cpu", rc[i].name, j, got, want)
				break
			}
		}
	}
}

type result struct {
	name  string
	exact bool
	v     []float32
}

func runKernels(t *testing.T, d core.Device, g, sub *core.Graph) []result {
	k := d.Kernels()
	r := rand.New(rand.NewPCG(1, 2))
	rnd := func(shape ...int) *core.Tensor {
		x, err := d.Alloc(shape...)
		must(t, err)
		v := make([]float32, x.Len())
		for i := range v {
			if r.IntN(4) > 0 {
				v[i] = r.Float32()*2 - 1
			}
		}
		must(t, d.Upload(x, v))
		return x
	}
	var res []result
	out := func(name string, exact bool, f func(o *core.Tensor) error, shape ...int) *core.Tensor {
		o, err := d.Alloc(shape...)
		must(t, err)
		must(t, f(o))
		v := make([]float32, o.Len())
		must(t, d.Download(v, o))
		res = append(res, result{name, exact, v})
		return o
	}
	n, e := g.NumDst, g.NumEdges()
	x := rnd(n, 64)
	w := rnd(400, 64)
	ew := rnd(e, 4)
	xs := rnd(n, 400)
	out("gemm nn", false, func(o *core.Tensor) error { return k.GEMM(false, false, 1, xs, w, 0, o) }, n, 64)
	out("gemm tn", false, func(o *core.Tensor) error { return k.GEMM(true, false, 1, xs, x, 0, o) }, 400, 64)
	out("gemm nt", false, func(o *core.Tensor) error { return k.GEMM(false, true, 0.5, x, w, 0, o) }, n, 400)
	out("spmm mean heads", false, func(o *core.Tensor) error { return k.SpMM(g, core.ReduceMean, ew, x, o) }, n, 64)
	out("spmm reverse", false, func(o *core.Tensor) error { return k.SpMM(g.Reverse(), core.ReduceSum, nil, x, o) }, n, 64)
	sx := rnd(sub.NumDst, 8)
	out("spmm khop", false, func(o *core.Tensor) error { return k.SpMM(sub, core.ReduceSum, ew, sx, o) }, sub.NumDst, 8)
	out("sddmm dot", false, func(o *core.Tensor) error { return k.SDDMM(g, core.EdgeDot, x, x, o) }, e, 4)
	s := out("edge softmax", false, func(o *core.Tensor) error { return k.EdgeSoftmax(g, ew, o) }, e, 4)
	out("edge softmax backward", false, func(o *core.Tensor) error { return k.EdgeSoftmaxBackward(g, s, ew, o) }, e, 4)
	out("reduce rows", false, func(o *core.Tensor) error { return k.Reduce(core.AxisRows, x, o) }, 1, 64)
	out("reduce cols", false, func(o *core.Tensor) error { return k.Reduce(core.AxisCols, x, o) }, n, 4)
	out("elu grad", false, func(o *core.Tensor) error { return k.Map(core.MapELUGrad, x, x, 0.5, o) }, n, 64)
	out("log softmax", false, func(o *core.Tensor) error { return k.LogSoftmax(x, o) }, n, 64)
	rows := make([]int32, n)
	for i := range rows {
		rows[i] = int32(3*i + 1)
	}
	var mask *core.Tensor
	out("dropout", true, func(o *core.Tensor) error {
		var err error
		mask, err = d.Alloc(n, 64)
		must(t, err)
		return k.Dropout(x, 0.3, 7, rows, o, mask)
	}, n, 64)
	mv := make([]float32, mask.Len())
	must(t, d.Download(mv, mask))
	res = append(res, result{"dropout mask", true, mv})
	idx := make([]int32, 5000)
	for i := range idx {
		idx[i] = int32(r.IntN(n))
	}
	out("gather", true, func(o *core.Tensor) error { return k.Gather(x, idx, o) }, len(idx), 64)
	src := rnd(len(idx), 64)
	// atomic adds: the order of a repeated row's terms may differ
	out("scatter add", false, func(o *core.Tensor) error { return k.ScatterAdd(src, idx, o) }, n, 64)
	return res
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// randT allocates a tensor of uniform values in [-1, 1).
func randT(t testing.TB, d core.Device, r *rand.Rand, shape ...int) *core.Tensor {
	t.Helper()
	x, err := d.Alloc(shape...)
	must(t, err)
	v := make([]float32, x.Len())
	for i := range v {
		v[i] = r.Float32()*2 - 1
	}
	must(t, d.Upload(x, v))
	return x
}

func get(t testing.TB, d core.Device, x *core.Tensor) []float32 {
	t.Helper()
	v := make([]float32, x.Len())
	must(t, d.Download(v, x))
	return v
}

// TestExampleFlow is Example's computation with its output and memory
// accounting checked.
func TestExampleFlow(t *testing.T) {
	b := open(t, cuda.Config{})
	defer b.Close()
	dev := b.Devices()[0]
	k := dev.Kernels()
	g, _ := core.Undirected(3, []int32{0, 1}, []int32{1, 2})
	x, _ := dev.Alloc(3, 2)
	_ = dev.Upload(x, []float32{1, 10, 2, 20, 3, 30})
	h, _ := dev.Alloc(3, 2)
	if err := k.SpMM(g, core.ReduceMean, nil, x, h); err != nil {
		t.Fatal(err)
	}
	w, _ := dev.Alloc(2, 1)
	_ = dev.Upload(w, []float32{1, 0.1})
	y, _ := dev.Alloc(3, 1)
	if err := k.GEMM(false, false, 1, h, w, 0, y); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, 3)
	if err := dev.Download(out, y); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(dev.ID(), " ", out); got != "cuda:0 [4 4 4]" {
		t.Errorf("got %q, want %q", got, "cuda:0 [4 4 4]")
	}
	// x and h (24 B each), w (8 B), y (12 B), and the graph's offsets
	// (4 x 8 B) and indices (4 x 4 B)
	if used := dev.Mem().Stats().Used; used != 24+24+8+12+32+16 {
		t.Errorf("%d bytes in use", used)
	}
}
