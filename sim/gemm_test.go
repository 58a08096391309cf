package sim

import (
	"math"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

func TestGEMMEfficiency(t *testing.T) {
	tests := []struct {
		name   string
		g      core.GEMM
		sms    int
		lo, hi float64
	}{
		{"no model", core.GEMM{M: 1, N: 1, K: 1}, 0, 1, 1},
		{"empty product", core.GEMM{M: 0, N: 8, K: 8}, 108, 1, 1},
		{"thin: a GNN's 32-wide layer is not modelled", core.GEMM{M: 20000, N: 32, K: 32}, 132, 1, 1},
		{"thin K: an input gradient through a 2-class layer", core.GEMM{M: 512, N: 2048, K: 2}, 108, 1, 1},
		{"large square", core.GEMM{M: 4096, N: 4096, K: 4096}, 108, 0.9, 1},
		{"micro-batch 512", core.GEMM{M: 512, N: 2048, K: 4096}, 108, 0.8, 0.88},
		{"micro-batch 128", core.GEMM{M: 128, N: 2048, K: 4096}, 108, 0.6, 0.67},
		{"micro-batch 32", core.GEMM{M: 32, N: 2048, K: 4096}, 108, 0.18, 0.25},
		{"one row runs at the 32-row rate", core.GEMM{M: 1, N: 2048, K: 4096}, 108, 0.18, 0.25},
		{"weight gradient over 512 rows", core.GEMM{M: 4096, N: 2048, K: 512}, 108, 0.8, 0.9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := GEMMEfficiency(tc.g, tc.sms)
			if e < tc.lo || e > tc.hi {
				t.Errorf("GEMMEfficiency(%+v, %d) = %.3f, want in [%.2f, %.2f]", tc.g, tc.sms, e, tc.lo, tc.hi)
			}
		})
	}
	// More rows never lower the rate, and a product larger than the GPU
	// reaches most of it.
	prev := 0.0
	for m := int64(16); m <= 16384; m *= 2 {
		e := GEMMEfficiency(core.GEMM{M: m, N: 2048, K: 2048}, 108)
		if e < prev {
			t.Errorf("M=%d: efficiency %.3f fell from %.3f", m, e, prev)
		}
		prev = e
	}
	if prev < 0.9 {
		t.Errorf("large products reach %.3f, want >= 0.9", prev)
	}
}

// TestGEMMEfficiencyPublished holds the model to the one public sweep we
// have: cuBLAS SGEMM on an NVIDIA L4 (58 SMs), square products, 7.92,
// 12.17 and 15.83 TFLOP/s at 512³, 1024³ and 2048³
// (huggingface.co/datasets/rtferraz/cuda-kernel-engineering,
// profiles/04-tiled-gemm-benchmark.csv): the rates relative to 2048³'s
// within 10%.
func TestGEMMEfficiencyPublished(t *testing.T) {
	sq := func(n int64) float64 { return GEMMEfficiency(core.GEMM{M: n, N: n, K: n}, 58) }
	for _, c := range []struct {
		n        int64
		measured float64
	}{{512, 7.92 / 15.83}, {1024, 12.17 / 15.83}} {
		got := sq(c.n) / sq(2048)
		if math.Abs(got/c.measured-1) > 0.1 {
			t.Errorf("%d³: modelled %.3f of 2048³'s rate, measured %.3f", c.n, got, c.measured)
		}
	}
}
