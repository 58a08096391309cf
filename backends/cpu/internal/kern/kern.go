// Package kern holds the CPU backend's hot inner loops over float32 rows
// (axpy, dot, scale, add) and a tiny registry of their implementations.
//
// Every kernel of package cpu spends its time in these few loops, so they
// are the seam where SIMD variants plug in, following crypto/sha256's
// layout: the portable Go loops live here as the "generic" variant; a
// later change adds kern_amd64.go (//go:build !purego) with avo-generated
// assembly, registers it as "avx2" when cpuid reports AVX2 and FMA3, and
// each assembly stub's doc comment repeats the reference loop of the
// generic function it replaces.
//
// The environment variable GNN_CPU pins a variant by name
// (GNN_CPU=generic), like GODEBUG=cpu.avx2=off, so benchmarks and tests
// can compare variants on one machine.
package kern

import (
	"os"
	"strings"
)

// EnvVar is the environment variable that pins a variant by name.
const EnvVar = "GNN_CPU"

// Variant is one implementation of the inner loops. The loops run over
// y: every x must be at least as long as y (y may be shorter; Dot runs
// over the shorter of its two arguments).
type Variant struct {
	// Name is the registry key ("generic", "avx2", ...).
	Name string
	// Axpy computes y[i] += alpha * x[i].
	Axpy func(alpha float32, x, y []float32)
	// Axpy4 computes y[i] += (a0*x0[i] + a1*x1[i]) + (a2*x2[i] + a3*x3[i]):
	// four rank-1 updates with one pass over y (a quarter of the loads and
	// stores of four Axpy calls).
	Axpy4 func(a0, a1, a2, a3 float32, x0, x1, x2, x3, y []float32)
	// Add computes y[i] += x[i].
	Add func(x, y []float32)
	// Add4 computes y[i] += (x0[i] + x1[i]) + (x2[i] + x3[i]).
	Add4 func(x0, x1, x2, x3, y []float32)
	// Dot returns sum_i x[i] * y[i].
	Dot func(x, y []float32) float32
	// Scal computes x[i] *= alpha.
	Scal func(alpha float32, x []float32)
	// usable reports whether this machine can run the variant.
	usable func() bool
}

// Usable reports whether the variant can run on this machine.
func (v Variant) Usable() bool { return v.usable == nil || v.usable() }

// Generic is the portable Go variant, always usable.
var Generic = Variant{
	Name:  "generic",
	Axpy:  AxpyGeneric,
	Axpy4: Axpy4Generic,
	Add:   AddGeneric,
	Add4:  Add4Generic,
	Dot:   DotGeneric,
	Scal:  ScalGeneric,
}

// registry lists the variants compiled in, best first. Architecture
// files append to it in init (e.g. avx2 before generic).
var registry = []Variant{Generic}

// Variants returns every variant compiled into this binary, best first,
// including ones this machine cannot run (see Variant.Usable).
func Variants() []Variant { return append([]Variant(nil), registry...) }

// Lookup returns the variant registered under name.
func Lookup(name string) (Variant, bool) {
	for _, v := range registry {
		if v.Name == name {
			return v, true
		}
	}
	return Variant{}, false
}

// Select picks the variant to use: the one named by GNN_CPU if it is
// compiled in and usable, else the best usable one. The reason says why,
// for DeviceInfo.Kernel (e.g. "generic (no SIMD variant built yet)").
func Select() (Variant, string) { return choose(os.Getenv(EnvVar)) }

func choose(pin string) (Variant, string) {
	pin = strings.TrimSpace(strings.ToLower(pin))
	if pin != "" {
		v, ok := Lookup(pin)
		switch {
		case !ok:
			best, _ := choose("")
			return best, best.Name + " (" + EnvVar + "=" + pin + " is not built into this binary)"
		case !v.Usable():
			best, _ := choose("")
			return best, best.Name + " (" + EnvVar + "=" + pin + " is not supported by this CPU)"
		}
		return v, v.Name + " (pinned by " + EnvVar + ")"
	}
	for _, v := range registry {
		if v.Usable() {
			if len(registry) == 1 {
				return v, v.Name + " (no SIMD variant built yet)"
			}
			return v, v.Name
		}
	}
	return Generic, Generic.Name
}
