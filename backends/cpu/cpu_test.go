package cpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/backendtest"
)

func open(opts core.BackendOptions) func(t *testing.T) core.Backend {
	return func(t *testing.T) core.Backend {
		b, err := cpu.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, open(core.BackendOptions{}))
}

// TestConformanceVariants runs the suite on every kernel variant this
// CPU can run (crypto/sha256's TestAllImplementations), each pinned with
// Config.Variant, and with 3 threads so kernels split into pieces.
func TestConformanceVariants(t *testing.T) {
	for _, v := range cpu.Variants() {
		t.Run("variant="+v, func(t *testing.T) {
			backendtest.Run(t, func(t *testing.T) core.Backend {
				b, err := cpu.NewConfig(cpu.Config{BackendOptions: core.BackendOptions{Threads: 3}, Variant: v})
				if err != nil {
					t.Fatal(err)
				}
				if got := b.Device(0).Kernels().(*cpu.Kernels).Variant(); got != v {
					t.Fatalf("variant %s, want %s", got, v)
				}
				return b
			})
		})
	}
}

// TestConformancePinned runs the suite with worker threads pinned.
func TestConformancePinned(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	backendtest.Run(t, func(t *testing.T) core.Backend {
		b, err := cpu.NewConfig(cpu.Config{BackendOptions: core.BackendOptions{Threads: 2}, Pin: true})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

// TestConformanceMultiDevice runs the suite on two logical devices with
// one thread each (the setting of multi-device schedulers on one box).
func TestConformanceMultiDevice(t *testing.T) {
	backendtest.Run(t, open(core.BackendOptions{Devices: 2, Threads: 1}))
}

// TestConformanceManyThreads oversubscribes threads so that every kernel
// is split into many pieces even on a small machine.
func TestConformanceManyThreads(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	backendtest.Run(t, open(core.BackendOptions{Threads: 7}))
}

func TestOptions(t *testing.T) {
	backendtest.RunOptions(t, func(t *testing.T, opts core.BackendOptions) core.Backend {
		return open(opts)(t)
	})
}

func TestRegistered(t *testing.T) {
	b, err := core.OpenBackend("cpu", core.BackendOptions{Devices: 2, Threads: 1, MemCap: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	devs := b.Devices()
	if len(devs) != 2 || devs[0].ID() != "cpu:0" || devs[1].ID() != "cpu:1" {
		t.Fatalf("devices %v, want cpu:0 and cpu:1", devs)
	}
	info := devs[1].Info()
	if info.Threads != 1 || info.MemCap != 1<<20 || info.Kernel == "" || info.Name == "" {
		t.Errorf("Info() = %+v", info)
	}
	if _, err := cpu.New(core.BackendOptions{Devices: -1}); err == nil {
		t.Error("New with -1 devices succeeded")
	}
}

func TestAllocBuffer(t *testing.T) {
	b, _ := cpu.New(core.BackendOptions{})
	defer b.Close()
	d := b.Devices()[0]
	x, err := d.Alloc(2, 3)
	if err != nil {
		t.Fatal(err)
	}
	h, ok := x.Buf.(*core.HostMem)
	if !ok || h.Dev != "cpu:0" || len(h.Data) != 6 {
		t.Fatalf("Alloc buffer %#v, want *core.HostMem on cpu:0", x.Buf)
	}
	// Kernels accept plain host tensors too.
	a, _ := core.NewHostTensor([]float32{1, 2, 3, 4}, 2, 2)
	c, _ := core.NewHostTensor(make([]float32, 4), 2, 2)
	if err := d.Kernels().GEMM(false, false, 1, a, a, 0, c); err != nil {
		t.Fatal(err)
	}
	if got := c.F32(); got[0] != 7 || got[3] != 22 {
		t.Errorf("GEMM on host tensors = %v", got)
	}
}

// TestDeterminism checks that every kernel of every variant gives the
// same bits for 1, 2, 3 and 8 threads (row-partitioned work, reductions
// and GEMM k-splits in fixed blocks).
func TestDeterminism(t *testing.T) {
	for _, v := range cpu.Variants() {
		t.Run("variant="+v, func(t *testing.T) { testDeterminism(t, v) })
	}
}

func testDeterminism(t *testing.T, variant string) {
	g := backendtest.RMAT(3000, 40000, 9)
	var ref [][]float32
	for _, threads := range []int{1, 2, 3, 8} {
		b, err := cpu.NewConfig(cpu.Config{BackendOptions: core.BackendOptions{Threads: threads}, Variant: variant})
		if err != nil {
			t.Fatal(err)
		}
		got := runAll(t, b.Devices()[0], g)
		b.Close()
		if ref == nil {
			ref = got
			continue
		}
		for i := range ref {
			for j := range ref[i] {
				if math.Float32bits(ref[i][j]) != math.Float32bits(got[i][j]) {
					t.Fatalf("threads=%d: output %d differs at %d: %v vs %v", threads, i, j, got[i][j], ref[i][j])
				}
			}
		}
	}
}

func runAll(t *testing.T, d core.Device, g *core.Graph) [][]float32 {
	k := d.Kernels()
	r := rand.New(rand.NewPCG(1, 2))
	rnd := func(shape ...int) *core.Tensor {
		x, err := d.Alloc(shape...)
		if err != nil {
			t.Fatal(err)
		}
		for i := range x.F32() {
			if r.IntN(4) > 0 {
				x.F32()[i] = r.Float32()*2 - 1
			}
		}
		return x
	}
	n, e := g.NumDst, g.NumEdges()
	x := rnd(n, 64)
	w := rnd(400, 64)
	ew := rnd(e, 4)
	var outs []*core.Tensor
	out := func(shape ...int) *core.Tensor {
		o, _ := d.Alloc(shape...)
		outs = append(outs, o)
		return o
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	xs := rnd(n, 400)
	must(k.GEMM(false, false, 1, xs, w, 0, out(n, 64)))
	must(k.GEMM(true, false, 1, xs, x, 0, out(400, 64)))
	must(k.GEMM(false, true, 1, x, w, 0, out(n, 400)))
	must(k.GEMM(true, false, 1, x, xs, 0, out(64, 400))) // long k: split
	must(k.SpMM(g.Reverse(), core.ReduceSum, ew, x, out(n, 64)))
	must(k.SpMM(g.Reverse(), core.ReduceSum, ew, x, out(n, 64))) // cached CSR-order weights
	must(k.SpMM(g, core.ReduceMean, ew, x, out(n, 64)))
	must(k.SpMM(g.Reverse(), core.ReduceSum, nil, x, out(n, 64)))
	must(k.SDDMM(g, core.EdgeDot, x, x, out(e, 4)))
	s := out(e, 4)
	must(k.EdgeSoftmax(g, ew, s))
	must(k.EdgeSoftmaxBackward(g, s, ew, out(e, 4)))
	must(k.Reduce(core.AxisRows, x, out(1, 64)))
	must(k.Reduce(core.AxisCols, x, out(n, 4)))
	must(k.Map(core.MapELUGrad, x, x, 0.5, out(n, 64)))
	must(k.LogSoftmax(x, out(n, 64)))
	must(k.Dropout(x, 0.3, 7, nil, out(n, 64), out(n, 64)))
	idx := make([]int32, 5000)
	for i := range idx {
		idx[i] = int32(r.IntN(n))
	}
	sc := out(n, 64)
	must(k.ScatterAdd(rnd(5000, 64), idx, sc))
	res := make([][]float32, len(outs))
	for i, o := range outs {
		res[i] = o.F32()
	}
	return res
}

// TestConcurrentCallers runs kernels on one device from several
// goroutines at once: the pool must neither deadlock nor mix up work.
func TestConcurrentCallers(t *testing.T) {
	b, _ := cpu.New(core.BackendOptions{Threads: 3})
	defer b.Close()
	d := b.Devices()[0]
	g := backendtest.RMAT(500, 5000, 1)
	x, _ := d.Alloc(500, 16)
	for i := range x.F32() {
		x.F32()[i] = float32(i % 7)
	}
	want, _ := d.Alloc(500, 16)
	if err := d.Kernels().SpMM(g, core.ReduceSum, nil, x, want); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			out, _ := d.Alloc(500, 16)
			for range 50 {
				if err := d.Kernels().SpMM(g, core.ReduceSum, nil, x, out); err != nil {
					errs <- err
					return
				}
			}
			for i, v := range out.F32() {
				if v != want.F32()[i] {
					errs <- fmt.Errorf("element %d = %v, want %v", i, v, want.F32()[i])
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestKernelVariant(t *testing.T) {
	best := cpu.Variants()[0]
	for _, tc := range []struct{ env, want string }{
		{"generic", "generic (pinned by GNN_CPU)"},
		{"avx9000", best + " (GNN_CPU=avx9000 is not built into this binary)"},
		{"", best + " ("},
	} {
		t.Setenv("GNN_CPU", tc.env)
		b, err := cpu.New(core.BackendOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if k := b.Devices()[0].Info().Kernel; !strings.HasPrefix(k, tc.want) {
			t.Errorf("GNN_CPU=%q: Kernel = %q, want %q...", tc.env, k, tc.want)
		}
		b.Close()
	}
	t.Setenv("GNN_CPU", "")
	for _, v := range cpu.Variants() {
		b, err := cpu.NewConfig(cpu.Config{Variant: v, Pin: true})
		if err != nil {
			t.Fatal(err)
		}
		if k := b.Devices()[0].Info().Kernel; !strings.HasPrefix(k, v+" (pinned by Config.Variant); threads pinned to CPUs ") {
			t.Errorf("Kernel = %q", k)
		}
		b.Close()
	}
	if _, err := cpu.NewConfig(cpu.Config{Variant: "avx9000"}); err == nil {
		t.Error("NewConfig with an unknown variant succeeded")
	}
}

// TestThreadBound: at most MaxThreads worker threads in all, pinned or
// not (12,000 pinned threads passed the Go runtime's 10,000-thread limit
// and killed the process).
func TestThreadBound(t *testing.T) {
	cases := []struct {
		name             string
		devices, threads int
		pin              bool
		want             string // "" : opens
	}{
		{"at the limit", 1, cpu.MaxThreads, false, ""},
		{"64 devices at the limit", cpu.MaxDevices, cpu.MaxThreads / cpu.MaxDevices, false, ""},
		{"one past", 1, cpu.MaxThreads + 1, false, "4097 threads on each of 1 logical devices: the cpu backend starts at most 4096 worker threads in all"},
		{"pinned 12000", 1, 12000, true, "at most 4096 worker threads"},
		{"64 devices", cpu.MaxDevices, 65, false, "use at most 64 threads per device"},
		{"huge", 2, math.MaxInt, false, "use at most 2048 threads per device"},
		{"negative", 1, -1, false, "negative option"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := cpu.NewConfig(cpu.Config{BackendOptions: core.BackendOptions{Devices: c.devices, Threads: c.threads}, Pin: c.pin})
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				b.Close()
				return
			}
			if err == nil {
				b.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want it to say %q", err, c.want)
			}
		})
	}
	if _, err := cpu.PeakFLOPS("generic", 12000, false, 1); err == nil || !strings.Contains(err.Error(), "at most 4096") {
		t.Errorf("PeakFLOPS on 12000 threads: err = %v", err)
	}
}

// TestPinEnv: GNN_CPU_PIN is a boolean; anything else is an error naming
// the variable and the values it takes (it was ignored).
func TestPinEnv(t *testing.T) {
	cases := []struct {
		value string
		pin   bool
		bad   bool
	}{
		{"", false, false}, {"  ", false, false}, {"0", false, false}, {"false", false, false},
		{"1", true, false}, {"true", true, false}, {"TRUE", true, false}, {" 1 ", true, false},
		{"bogus", false, true}, {"yes", false, true}, {"2", false, true},
	}
	for _, c := range cases {
		t.Run(c.value, func(t *testing.T) {
			t.Setenv(cpu.PinEnvVar, c.value)
			pin, err := cpu.PinFromEnv()
			if c.bad {
				if err == nil || !strings.Contains(err.Error(), "GNN_CPU_PIN=") || !strings.Contains(err.Error(), "want 1 or true") {
					t.Errorf("err = %v, want one naming GNN_CPU_PIN and its values", err)
				}
				if b, err := cpu.New(core.BackendOptions{}); err == nil {
					b.Close()
					t.Error("New opened with a bad GNN_CPU_PIN")
				}
				return
			}
			if err != nil || pin != c.pin {
				t.Errorf("PinFromEnv = %v, %v; want %v", pin, err, c.pin)
			}
		})
	}
}

// TestEnvVariantFallback: "" when GNN_CPU is unset or followed, the
// variant used and why when it names no usable variant.
func TestEnvVariantFallback(t *testing.T) {
	best := cpu.Variants()[0]
	for _, c := range []struct{ value, want string }{
		{"", ""},
		{"generic", ""},
		{" Generic ", ""},
		{best, ""},
		{"bogus", best + " (GNN_CPU=bogus is not built into this binary)"},
	} {
		t.Run(c.value, func(t *testing.T) {
			t.Setenv(cpu.VariantEnvVar, c.value)
			if got := cpu.EnvVariantFallback(); got != c.want {
				t.Errorf("EnvVariantFallback() = %q, want %q", got, c.want)
			}
		})
	}
}
