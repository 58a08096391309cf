package backendtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

// Tolerance is the fp32 acceptance rule: a result r of a computation
// whose float64 reference is w passes when
//
//	|r - w| <= RelTol(L) * mag + AbsTol
//
// where mag is the sum of the absolute values of the terms that made w
// (so cancellation does not demand impossible relative accuracy) and L is
// the reduction length (the number of terms summed in sequence). RelTol
// grows linearly with L: 1e-5 * (1 + L/64), which is more than twice the
// worst-case rounding bound L * 2^-24 of a float32 sum and leaves room
// for FMA and reassociated (SIMD, tree) sums.
func RelTol(l int) float64 { return 1e-5 * (1 + float64(l)/64) }

// AbsTol is the absolute slack of the comparison (denormals, exp of very
// negative numbers).
const AbsTol = 1e-30

// Run runs the conformance suite against the backend open returns. open
// is called once per top-level group; the suite closes what it opens.
// Kernels run on the first device, the device contract on every device.
func Run(t *testing.T, open func(t *testing.T) core.Backend) {
	t.Helper()
	groups := []struct {
		name string
		fn   func(t *testing.T, b core.Backend)
	}{
		{"Device", testDevice},
		{"GEMM", testGEMM},
		{"SpMM", testSpMM},
		{"SDDMM", testSDDMM},
		{"EdgeSoftmax", testEdgeSoftmax},
		{"Gather", testGather},
		{"ScatterAdd", testScatterAdd},
		{"Map", testMap},
		{"Reduce", testReduce},
		{"LogSoftmax", testLogSoftmax},
		{"NLLLoss", testNLLLoss},
		{"Dropout", testDropout},
		{"Adam", testAdam},
		{"SGD", testSGD},
		{"Shapes", testShapes},
		{"Properties", testProperties},
		{"Fuzz", testFuzz},
		{"EveryDevice", testEveryDevice},
	}
	for _, gr := range groups {
		t.Run(gr.name, func(t *testing.T) {
			b := open(t)
			if b == nil {
				t.Fatal("backendtest: open returned a nil backend")
			}
			t.Cleanup(func() {
				if err := b.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			if len(b.Devices()) == 0 {
				t.Fatal("backend has no devices")
			}
			gr.fn(t, b)
		})
	}
}

// env is one device under test with helpers that allocate, upload and
// free tensors.
type env struct {
	t   testing.TB
	dev core.Device
	k   core.Kernels
	rng *rand.Rand
}

func newEnv(t testing.TB, dev core.Device, seed uint64) *env {
	return &env{t: t, dev: dev, k: dev.Kernels(), rng: rand.New(rand.NewPCG(seed, 0xbac4e17d))}
}

// tensor allocates a device tensor holding data (shape product ==
// len(data)), freed when the test ends.
func (e *env) tensor(data []float32, shape ...int) *core.Tensor {
	e.t.Helper()
	x, err := e.dev.Alloc(shape...)
	if err != nil {
		e.t.Fatalf("Alloc%v: %v", shape, err)
	}
	e.t.Cleanup(func() { e.dev.Free(x) })
	if len(data) > 0 {
		if err := e.dev.Upload(x, data); err != nil {
			e.t.Fatalf("Upload %v: %v", shape, err)
		}
	}
	return x
}

// rand returns a tensor with uniform values in [-scale, scale) and its
// host copy; about zeroFrac of them are exactly 0.
func (e *env) rand(scale, zeroFrac float64, shape ...int) (*core.Tensor, []float32) {
	e.t.Helper()
	data := e.vals(core.NumElems(shape), scale, zeroFrac)
	return e.tensor(data, shape...), data
}

func (e *env) vals(n int, scale, zeroFrac float64) []float32 {
	data := make([]float32, n)
	for i := range data {
		if zeroFrac > 0 && e.rng.Float64() < zeroFrac {
			continue
		}
		data[i] = float32((2*e.rng.Float64() - 1) * scale)
	}
	return data
}

// fill returns a tensor of the shape holding v everywhere (garbage for
// outputs that must be overwritten).
func (e *env) fill(v float32, shape ...int) *core.Tensor {
	data := make([]float32, core.NumElems(shape))
	for i := range data {
		data[i] = v
	}
	return e.tensor(data, shape...)
}

func (e *env) get(x *core.Tensor) []float32 {
	e.t.Helper()
	out := make([]float32, x.Len())
	if err := e.dev.Download(out, x); err != nil {
		e.t.Fatalf("Download %v: %v", x, err)
	}
	return out
}

// call runs f, turning a panic into a test error.
func call(t testing.TB, what string, f func() error) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

// mustCall runs f and fails the test on an error or panic.
func mustCall(t testing.TB, what string, f func() error) bool {
	t.Helper()
	if err := call(t, what, f); err != nil {
		t.Errorf("%s: %v", what, err)
		return false
	}
	return true
}

// check compares got with want under the tolerance for reduction length
// l; NaN in want marks elements the contract leaves unspecified.
func check(t testing.TB, what string, got []float32, want, mag []float64, l int) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: got %d values, want %d", what, len(got), len(want))
		return
	}
	tol := RelTol(l)
	bad := 0
	for i, w := range want {
		if math.IsNaN(w) {
			continue
		}
		g := float64(got[i])
		lim := tol*mag[i] + AbsTol
		if math.IsInf(w, 0) && g == w {
			continue
		}
		if !(math.Abs(g-w) <= lim) {
			if bad < 5 {
				t.Errorf("%s: [%d] = %v, want %v (±%.3g)", what, i, got[i], w, lim)
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d values wrong", what, bad, len(want))
	}
}

// edgeRowsFor is the row count of an edge tensor for g.
func edgeRowsFor(g *core.Graph) int { return g.NumEdgeIDs() }

// maxDegree is the longest row of g (the reduction length of its kernels).
func maxDegree(g *core.Graph) int {
	m := 0
	for i := range g.NumDst {
		m = max(m, int(g.Offsets[i+1]-g.Offsets[i]))
	}
	return m
}
