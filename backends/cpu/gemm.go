package cpu

import (
	"github.com/gnnkit/gnnkit/core"
)

// GEMM computes c = alpha*op(a)*op(b) + beta*c.
//
// Two algorithms, chosen per call from a cheap sample of A's density:
//
//   - Packed (gemm_packed.go), for dense A when the kernel variant has
//     micro-kernels (avx2: 6x16 and 12x8, avx512: 12x32 and 12x16; the
//     one that pads n least): op(B) is packed into NR-wide panels, A is read in place through row and
//     column strides (so A and A^T need no copy), C is cut into bands of
//     rows (and, when there are few bands and a long k, into a fixed
//     number of k-splits summed in order), and an FMA micro-kernel keeps
//     an MR x NR tile of C in registers.
//   - Zero-skipping (gemm_sparse.go), for sparse A (bag-of-words features
//     are 98.7% zeros on Cora, and dropout halves what is left) or
//     variants without a micro-kernel: rank-1 row updates
//     C[i,:] += (alpha*A[i,k]) * B[k,:] over A's non-zeros only, four at a
//     time.
//
// Either way every element of C accumulates its terms in an order fixed by
// the shapes (and A's zeros), so the result does not depend on the thread
// count.
func (k *Kernels) GEMM(transA, transB bool, alpha float32, a, b *core.Tensor, beta float32, c *core.Tensor) error {
	const op = "GEMM"
	ad, err := hostData(op, "a", a)
	if err != nil {
		return err
	}
	bd, err := hostData(op, "b", b)
	if err != nil {
		return err
	}
	cd, err := hostData(op, "c", c)
	if err != nil {
		return err
	}
	m, n, kk, err := core.CheckGEMM(transA, transB, a, b, c)
	if err != nil {
		return wrap(err)
	}
	if m == 0 || n == 0 {
		return nil
	}
	if alpha == 0 || kk == 0 {
		k.scale(cd, beta)
		return nil
	}
	if g, ok := k.v.GemmFor(n); ok && (n < gemmSparseMinN || !sparseA(ad)) {
		k.gemmPacked(g, transA, transB, m, n, kk, alpha, ad, bd, beta, cd)
		return nil
	}
	k.gemmSparse(transA, transB, m, n, kk, alpha, ad, bd, beta, cd)
	return nil
}

// When the variant has a micro-kernel, the zero-skipping path is used
// only for wide outputs (n >= gemmSparseMinN) and A with fewer than
// gemmDenseMin non-zeros. Measured single-threaded on Zen 4 (avx2):
// scanning A costs about 1.5 ns per element whatever its density, while
// the micro-kernel costs about 0.02*n ns per element of A; so at n = 16
// (Cora's hidden width) the dense path wins even at 98.7% zeros (1.3 ms
// against 3.5-7 ms for 2708x1433x16), at n = 64 down to 97% zeros, and
// at n = 128 the sparse path wins below about 5% non-zeros.
const (
	gemmDenseMin   = 0.04
	gemmSparseMinN = 96
)

// sparseA reports whether A looks sparse enough for the zero-skipping
// path, from up to 1024 elements sampled at a fixed stride (the same
// data always gives the same answer).
func sparseA(a []float32) bool {
	const samples = 1024
	n := len(a)
	step := max(1, n/samples)
	nz, seen := 0, 0
	for i := step / 2; i < n; i += step {
		if a[i] != 0 {
			nz++
		}
		seen++
	}
	return float64(nz) < gemmDenseMin*float64(seen)
}

// scaleJob sets c = beta*c in pieces (beta == 0 overwrites NaN).
type scaleJob struct {
	k      *Kernels
	c      []float32
	beta   float32
	pieces int
	nt     bool
}

var scaleJobs statePool[scaleJob]

func (j *scaleJob) run(p int) {
	n := len(j.c)
	c := j.c[p*n/j.pieces : (p+1)*n/j.pieces]
	if j.nt {
		j.k.v.Zero(c)
		return
	}
	j.k.scaleRows(c, j.beta) // beta 0 clears
}

// zeroNTMin is the buffer size (floats) from which Alloc clears with
// non-temporal stores: past the L2 and most of the L3, the cleared lines
// would be evicted before use anyway, and skipping their read halves the
// traffic.
const zeroNTMin = 1 << 18

// zero clears c over the device's threads: Alloc's reused buffers, with
// the variant's non-temporal Zero when c is large.
func (k *Kernels) zero(c []float32) {
	j := scaleJobs.get()
	*j = scaleJob{k: k, c: c, nt: len(c) >= zeroNTMin, pieces: k.dev.pool.pieces(len(c)/64+1, int64(len(c)))}
	k.dev.pool.run(j.pieces, j)
	scaleJobs.put(j)
}

// scale sets c = beta*c over the device's threads.
func (k *Kernels) scale(c []float32, beta float32) {
	if beta == 1 {
		return
	}
	j := scaleJobs.get()
	*j = scaleJob{k: k, c: c, beta: beta, pieces: k.dev.pool.pieces(len(c)/64+1, int64(len(c)))}
	k.dev.pool.run(j.pieces, j)
	scaleJobs.put(j)
}

// copyJob copies src into dst in pieces.
type copyJob struct {
	dst, src []float32
	pieces   int
}

var copyJobs statePool[copyJob]

func (j *copyJob) run(p int) {
	n := len(j.dst)
	copy(j.dst[p*n/j.pieces:(p+1)*n/j.pieces], j.src[p*n/j.pieces:(p+1)*n/j.pieces])
}

// copy copies src into dst (of equal length) over the device's threads.
func (k *Kernels) copy(dst, src []float32) {
	j := copyJobs.get()
	*j = copyJob{dst: dst, src: src[:len(dst)], pieces: k.dev.pool.pieces(len(dst)/64+1, int64(len(dst)))}
	k.dev.pool.run(j.pieces, j)
	copyJobs.put(j)
}

// scaleRows sets c = beta*c (beta == 0 overwrites NaN).
func (k *Kernels) scaleRows(c []float32, beta float32) {
	switch beta {
	case 1:
	case 0:
		clear(c)
	default:
		k.v.Scal(beta, c)
	}
}
