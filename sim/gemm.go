package sim

import "github.com/gnnkit/gnnkit/core"

// gemmTiles are the output tiles a cuBLAS-like library chooses among for
// an FP32 product (NVIDIA, "Matrix Multiplication Background User's
// Guide", §2.3: 256x128 and 128x128 tiles for large products, smaller ones
// when a large tile would leave SMs idle; narrower tiles than 64 are left
// out: split-K fills the SMs better).
var gemmTiles = [][2]int64{{256, 128}, {128, 256}, {128, 128}, {128, 64}, {64, 128}, {64, 64}}

// tileRate is a tile's throughput per SM relative to a 128x128 tile's:
// its operand reuse Tm·Tn/(Tm+Tn) (FLOPs per element loaded, per step of
// K), capped at 1. A 64x64 tile loads twice the operands per FLOP and
// runs at half the rate; 256x128 is as fast as 128x128.
func tileRate(t [2]int64) float64 {
	reuse := func(m, n int64) float64 { return float64(m*n) / float64(m+n) }
	return min(1, reuse(t[0], t[1])/reuse(128, 128))
}

// tileOverheadK is a tile's fixed cost (filling its pipeline, writing
// and, split, reducing its output) in steps of K: a tile over K costs as
// much as K + tileOverheadK of a long product's steps. 64 puts the model
// within 10% of a published cuBLAS SGEMM sweep on an NVIDIA L4 (58 SMs;
// 512³ and 1024³ at 0.50 and 0.77 of 2048³'s rate, modelled 0.52 and
// 0.83); 128 would be 10% low, favouring large micro-batches more.
const tileOverheadK = 64

// GEMMEfficiency is the fraction of a large product's FLOP rate that an
// M x N x K product reaches on a GPU with sms streaming multiprocessors:
// the best over output tiles and split-K factors (K cut into s slices of
// at least 128, each slice its own tile) of
//
//	tileRate · (M·N / padded tiles' area) · tiles / (waves · sms)
//
// — the tile's rate, tile quantization (partial tiles at the edges
// compute padding) and wave quantization (the last wave of tiles leaves
// SMs idle) of the guide's §3; each tile also pays tileOverheadK.
// Products of fewer than 32 rows run at the 32-row rate (matrix-vector
// kernels; the roofline's memory term bounds them). Products with N or K
// below 128 (a GNN's hidden widths, a 2-class output layer) get 1: their
// kernels are bound by memory and launches, which the roofline prices,
// and the model was checked on square products from 512 only (with them
// in, a T-GCN's 32-wide products cost 2-4x their memory time). On 108
// SMs (A100) with N = 2048, K = 4096: 0.21 at M = 32, 0.42 at 64, 0.63 at
// 128, 0.76 at 256, 0.84 at 512, 0.89 at 1024, 0.92-0.97 from 2048.
// sms <= 0 or an empty product: 1 (no model).
//
// The rows M are the micro-batch's (forward and input-gradient products)
// or K is (weight gradients), which is what makes micro-batch size
// matter.
func GEMMEfficiency(g core.GEMM, sms int) float64 {
	if sms <= 0 || g.M <= 0 || g.N < 128 || g.K < 128 {
		return 1
	}
	g.M = max(g.M, 32)
	cdiv := func(a, b int64) int64 { return (a + b - 1) / b }
	best := 0.0
	for _, t := range gemmTiles {
		tm, tn := cdiv(g.M, t[0]), cdiv(g.N, t[1])
		useful := float64(g.M*g.N) / float64(tm*t[0]*tn*t[1])
		for s := int64(1); s == 1 || g.K/s >= 128; s *= 2 {
			tiles := tm * tn * s
			waves := cdiv(tiles, int64(sms))
			slice := float64(cdiv(g.K, s))
			best = max(best, tileRate(t)*useful*float64(tiles)/float64(waves*int64(sms))*slice/(slice+tileOverheadK))
		}
	}
	return best
}
