package opencl_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"

	"github.com/gnnkit/gnnkit/backends/opencl"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/backendtest"
)

// open opens the backend or skips the test when OpenCL is unavailable.
func open(t testing.TB, opts core.BackendOptions) *opencl.Backend {
	t.Helper()
	b, err := opencl.New(opts)
	if errors.Is(err, opencl.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformance(t *testing.T) {
	open(t, core.BackendOptions{}).Close()
	backendtest.Run(t, func(t *testing.T) core.Backend { return open(t, core.BackendOptions{}) })
}

// TestConformanceTwoDevices runs the suite on two logical devices (two
// contexts on one physical device when there is only one).
func TestConformanceTwoDevices(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	open(t, core.BackendOptions{}).Close()
	backendtest.Run(t, func(t *testing.T) core.Backend { return open(t, core.BackendOptions{Devices: 2}) })
}

func TestOptions(t *testing.T) {
	open(t, core.BackendOptions{}).Close()
	backendtest.RunOptions(t, func(t *testing.T, opts core.BackendOptions) core.Backend {
		return open(t, opts)
	})
}

// TestUnavailable runs the backend in a subprocess without OpenCL, two
// ways: an ICD loader that finds no ICD (OCL_ICD_VENDORS pointing at an
// empty directory) and no library at all (GNN_OPENCL_LIB naming a
// missing file). Opening must fail with ErrUnavailable and its message.
func TestUnavailable(t *testing.T) {
	if os.Getenv("GNN_OPENCL_HELPER") == "1" {
		return
	}
	empty := t.TempDir()
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"no-icd", []string{"OCL_ICD_VENDORS=" + empty}},
		{"no-library", []string{"GNN_OPENCL_LIB=" + filepath.Join(empty, "libOpenCL.so.1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperOpen$", "-test.count=1")
			cmd.Env = append(append(os.Environ(), "GNN_OPENCL_HELPER=1"), tc.env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			got := string(out)
			if !strings.Contains(got, "unavailable=true") || !strings.Contains(got, "opencl: unavailable (no OpenCL ICD found)") {
				t.Errorf("helper output:\n%s\nwant an ErrUnavailable error saying %q", got, "opencl: unavailable (no OpenCL ICD found)")
			}
		})
	}
}

// TestHelperOpen is the subprocess of TestUnavailable: it opens the
// backend through the registry and prints the outcome.
func TestHelperOpen(t *testing.T) {
	if os.Getenv("GNN_OPENCL_HELPER") != "1" {
		t.Skip("helper process for TestUnavailable")
	}
	_, err := core.OpenBackend("opencl", core.BackendOptions{})
	fmt.Printf("unavailable=%v\nerror: %v\n", errors.Is(err, opencl.ErrUnavailable), err)
}

func TestRegistered(t *testing.T) {
	if !slices.Contains(core.Backends(), "opencl") {
		t.Fatalf("backends %v lack opencl", core.Backends())
	}
	b, err := core.OpenBackend("opencl", core.BackendOptions{Devices: 2, MemCap: 1 << 20})
	if errors.Is(err, opencl.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	devs := b.Devices()
	if len(devs) != 2 || devs[0].ID() != "opencl:0" || devs[1].ID() != "opencl:1" {
		t.Fatalf("devices %v, want opencl:0 and opencl:1", devs)
	}
	info := devs[1].Info()
	if info.MemCap != 1<<20 || info.Name == "" || info.Kernel == "" || info.MemTotal <= 0 || len(info.Features) == 0 {
		t.Errorf("Info() = %+v", info)
	}
	if _, err := opencl.New(core.BackendOptions{Devices: -1}); err == nil {
		t.Error("New with -1 devices succeeded")
	}
}

// TestForeignTensors checks that kernels decline tensors of the host or
// of another device with core.ErrUnsupported, and Free ignores them.
func TestForeignTensors(t *testing.T) {
	b := open(t, core.BackendOptions{Devices: 2})
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

func TestClosed(t *testing.T) {
	b := open(t, core.BackendOptions{})
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
// same device's stream and on another device's.
func TestStreams(t *testing.T) {
	b := open(t, core.BackendOptions{Devices: 2})
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
	s0.Wait(ev) // same device: a barrier
	s1.Wait(ev) // other device: a host wait
	ev.Wait()
	ev.Wait() // twice is fine
	if err := s0.Sync(); err != nil {
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

// TestConcurrentCallers runs kernels on one device from several
// goroutines: launches must not interleave their arguments.
func TestConcurrentCallers(t *testing.T) {
	b := open(t, core.BackendOptions{})
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
					// another kernel with other arguments in between
					if err := d.Kernels().Map(core.MapScale, out, nil, 1, out); err != nil {
						errs <- err
						return
					}
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

// TestAgreesWithCPU runs the kernels a GCN and a GAT use on both backends
// with the same inputs: dropout masks, gathers and scatter-adds (summed
// in the same order) must agree bit for bit, the rest within float32
// rounding.
func TestAgreesWithCPU(t *testing.T) {
	o := open(t, core.BackendOptions{})
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
				t.Errorf("%s: [%d] = %v on opencl, %v on cpu (want the same bits)", rc[i].name, j, got, want)
				break
			}
			if !exact && math.Abs(float64(got-want)) > 1e-4*(1+math.Abs(float64(want))) {
				t.Errorf("%s: [%d] = %v on opencl, %v on cpu", rc[i].name, j, got, want)
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
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	rnd := func(shape ...int) *core.Tensor {
		x, err := d.Alloc(shape...)
		must(err)
		v := make([]float32, x.Len())
		for i := range v {
			if r.IntN(4) > 0 {
				v[i] = r.Float32()*2 - 1
			}
		}
		must(d.Upload(x, v))
		return x
	}
	var res []result
	out := func(name string, exact bool, f func(o *core.Tensor) error, shape ...int) *core.Tensor {
		o, err := d.Alloc(shape...)
		must(err)
		must(f(o))
		v := make([]float32, o.Len())
		must(d.Download(v, o))
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
		must(err)
		return k.Dropout(x, 0.3, 7, rows, o, mask)
	}, n, 64)
	mv := make([]float32, mask.Len())
	must(d.Download(mv, mask))
	res = append(res, result{"dropout mask", true, mv})
	idx := make([]int32, 5000)
	for i := range idx {
		idx[i] = int32(r.IntN(n))
	}
	out("gather", true, func(o *core.Tensor) error { return k.Gather(x, idx, o) }, len(idx), 64)
	src := rnd(len(idx), 64)
	out("scatter add", true, func(o *core.Tensor) error { return k.ScatterAdd(src, idx, o) }, n, 64)
	return res
}

// TestExampleFlow is Example's computation with its output checked.
func TestExampleFlow(t *testing.T) {
	b := open(t, core.BackendOptions{})
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
	if got := fmt.Sprint(dev.ID(), " ", out); got != "opencl:0 [4 4 4]" {
		t.Errorf("got %q, want %q", got, "opencl:0 [4 4 4]")
	}
	// x and h (24 B each), w (8 B), y (12 B), and the graph's offsets
	// (4 x 4 B) and indices (4 x 4 B)
	if used := dev.Mem().Stats().Used; used != 24+24+8+12+16+16 {
		t.Errorf("%d bytes in use", used)
	}
}

// TestNewOptionBounds: bad options are refused before any OpenCL object
// is made, with or without a driver (opencl:100000 opened contexts
// until the host ran out of memory).
func TestNewOptionBounds(t *testing.T) {
	for _, c := range []struct {
		name string
		opts core.BackendOptions
		want string
	}{
		{"negative devices", core.BackendOptions{Devices: -1}, "negative option"},
		{"one past the limit", core.BackendOptions{Devices: opencl.MaxDevices + 1}, "65 logical devices asked for; the opencl backend has at most 64 (opencl:0 to opencl:63)"},
		{"huge", core.BackendOptions{Devices: 100001}, "at most 64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := opencl.New(c.opts)
			if err == nil {
				b.Close()
				t.Fatalf("New(%+v) succeeded", c.opts)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("New(%+v) = %v, want it to say %q", c.opts, err, c.want)
			}
		})
	}
}
