package kern

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestAllVariants checks every compiled-in variant against the reference
// loops documented on the generic functions, skipping variants this CPU
// cannot run (crypto/sha256's TestAllImplementations).
func TestAllVariants(t *testing.T) {
	for _, v := range Variants() {
		t.Run(v.Name, func(t *testing.T) {
			if !v.Usable() {
				t.Skipf("%s: not supported by this CPU", v.Name)
			}
			r := rand.New(rand.NewPCG(1, 2))
			for _, n := range []int{0, 1, 3, 7, 8, 9, 16, 17, 31, 64, 100} {
				x := make([]float32, n)
				y := make([]float32, n)
				for i := range x {
					x[i] = r.Float32()*2 - 1
					y[i] = r.Float32()*2 - 1
				}
				const alpha = 0.75
				want := append([]float32(nil), y...)
				for i := range want {
					want[i] += alpha * x[i]
				}
				got := append([]float32(nil), y...)
				v.Axpy(alpha, x, got)
				near(t, "axpy", n, got, want)

				want = append(want[:0], y...)
				for i := range want {
					want[i] += x[i]
				}
				got = append(got[:0], y...)
				v.Add(x, got)
				near(t, "add", n, got, want)

				x1, x2, x3 := shuffled(r, x), shuffled(r, x), shuffled(r, x)
				want = append(want[:0], y...)
				for i := range want {
					want[i] += (0.5*x[i] + -2*x1[i]) + (0.25*x2[i] + 3*x3[i])
				}
				got = append(got[:0], y...)
				v.Axpy4(0.5, -2, 0.25, 3, x, x1, x2, x3, got)
				near(t, "axpy4", n, got, want)

				want = append(want[:0], y...)
				for i := range want {
					want[i] += (x[i] + x1[i]) + (x2[i] + x3[i])
				}
				got = append(got[:0], y...)
				v.Add4(x, x1, x2, x3, got)
				near(t, "add4", n, got, want)

				var s float64
				for i := range x {
					s += float64(x[i]) * float64(y[i])
				}
				if d := float64(v.Dot(x, y)) - s; d > 1e-5*float64(n+1) || d < -1e-5*float64(n+1) {
					t.Errorf("dot n=%d: got %v, want %v", n, v.Dot(x, y), s)
				}

				want = append(want[:0], x...)
				for i := range want {
					want[i] *= alpha
				}
				got = append(got[:0], x...)
				v.Scal(alpha, got)
				near(t, "scal", n, got, want)
			}
		})
	}
}

func near(t *testing.T, op string, n int, got, want []float32) {
	t.Helper()
	for i := range want {
		d := got[i] - want[i]
		if d > 1e-6 || d < -1e-6 {
			t.Errorf("%s n=%d: [%d] = %v, want %v", op, n, i, got[i], want[i])
			return
		}
	}
}

func TestChoose(t *testing.T) {
	for _, tc := range []struct{ pin, name, reason string }{
		{"", "generic", "generic"},
		{"generic", "generic", "pinned by GNN_CPU"},
		{"GENERIC", "generic", "pinned"},
		{"avx9000", "generic", "not built"},
	} {
		v, why := choose(tc.pin)
		if v.Name != tc.name || !strings.Contains(why, tc.reason) {
			t.Errorf("choose(%q) = %s, %q; want %s, ...%s...", tc.pin, v.Name, why, tc.name, tc.reason)
		}
	}
}

func shuffled(r *rand.Rand, x []float32) []float32 {
	out := append([]float32(nil), x...)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}
