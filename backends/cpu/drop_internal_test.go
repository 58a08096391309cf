package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu/internal/kern"
	"github.com/gnnkit/gnnkit/core"
)

// TestDropHash checks the integer form of the dropout draw against
// core.DropoutKeep, including probabilities whose threshold is exact.
func TestDropHash(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ps := []float32{0, 1, 0.5, 0.25, 0.6, 0.1, 1.0 / 3, math.Nextafter32(0.5, 1), math.Nextafter32(0.5, 0), 1.0 / (1 << 24), 0.99999994}
	for range 20 {
		ps = append(ps, r.Float32())
	}
	for _, p := range ps {
		thr := kern.DropThreshold(p)
		for range 20000 {
			seed, k := r.Uint64(), r.Uint64()>>r.IntN(64)
			if got, want := kern.DropHash(seed, k) >= thr, core.DropoutKeep(seed, k, p); got != want {
				t.Fatalf("p=%v seed=%d k=%d: integer draw keeps=%v, DropoutKeep %v", p, seed, k, got, want)
			}
		}
		// the draws at the threshold itself
		for _, h := range []uint64{thr - 1, thr, thr + 1} {
			u := float32(h) / float32(1<<24)
			if h < 1<<24 && (h >= thr) != (u >= p) {
				t.Fatalf("p=%v: draw %d: integer %v, float %v", p, h, h >= thr, u >= p)
			}
		}
	}
}
