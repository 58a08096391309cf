package cpu

import (
	"math"

	"github.com/gnnkit/gnnkit/backends/cpu/internal/kern"
)

// Cache blocking of the zero-skipping GEMM. A panel of B of gemmKC x
// gemmNC floats (128 KiB) stays in L2 while every row of a piece of C
// streams through it; each row of C is updated by axpy over gemmNC
// contiguous floats.
const (
	gemmKC = 256
	gemmNC = 128
	// gemmTNRows is the number of C rows a transA piece keeps hot (rows
	// x gemmNC floats, 32 KiB).
	gemmTNRows = 64
	// gemmTNMaxRows bounds a transA piece's rows (and its stack of
	// per-row pending updates).
	gemmTNMaxRows = 512
)

// gemmSparse is the zero-skipping GEMM: C[i,:] += (alpha*A[i,k]) * B[k,:]
// over A's non-zeros only, as reference BLAS does. transA walks A's rows
// in place (no transpose is materialised); transB transposes B once into
// scratch, O(N*K) against the product's O(M*N*K). Non-zeros are applied
// four at a time (kern Axpy4: one pass over the row of C for four rows of
// B). C is split by rows over the device's threads; the order in which
// each element of C accumulates its terms depends only on k and on where
// A's zeros are.
func (k *Kernels) gemmSparse(transA, transB bool, m, n, kk int, alpha float32, ad, bd []float32, beta float32, cd []float32) {
	var bt *[]float32
	if transB {
		// B is n x kk; make B^T (kk x n) so rows of op(b) are contiguous.
		bt = getScratch(kk * n)
		transpose(*bt, bd, n, kk)
		bd = *bt
	}
	if transA {
		k.gemmTN(m, n, kk, alpha, ad, bd, beta, cd)
	} else {
		k.gemmNN(m, n, kk, alpha, ad, bd, beta, cd)
	}
	if bt != nil {
		putScratch(bt)
	}
}

// transpose writes dst (cols x rows) = src (rows x cols)^T, in tiles.
func transpose(dst, src []float32, rows, cols int) {
	const tile = 32
	for i0 := 0; i0 < rows; i0 += tile {
		i1 := min(i0+tile, rows)
		for j0 := 0; j0 < cols; j0 += tile {
			j1 := min(j0+tile, cols)
			for i := i0; i < i1; i++ {
				s := src[i*cols : i*cols+cols]
				for j := j0; j < j1; j++ {
					dst[j*rows+i] = s[j]
				}
			}
		}
	}
}

// nz reports whether any of four floats is non-zero, with one branch
// (-0 counts as non-zero here; the per-element test then skips it).
func nz(a, b, c, d float32) bool {
	return math.Float32bits(a)|math.Float32bits(b)|math.Float32bits(c)|math.Float32bits(d) != 0
}

// pending collects up to four rank-1 updates of one row of C, so they are
// applied in a single pass over the row (kern Axpy4).
type pending struct {
	a [4]float32
	k [4]int32
	n int
}

// push adds the update a*B[k,:]; when four are pending it applies them to
// crow, reading B's row k at b[k*ldb+j0 : k*ldb+j0+len(crow)].
func (p *pending) push(v *kern.Variant, a float32, k int, b []float32, ldb, j0 int, crow []float32) {
	p.a[p.n], p.k[p.n] = a, int32(k)
	p.n++
	if p.n == 4 {
		w := len(crow)
		r0, r1, r2, r3 := int(p.k[0])*ldb+j0, int(p.k[1])*ldb+j0, int(p.k[2])*ldb+j0, int(p.k[3])*ldb+j0
		v.Axpy4(p.a[0], p.a[1], p.a[2], p.a[3], b[r0:r0+w], b[r1:r1+w], b[r2:r2+w], b[r3:r3+w], crow)
		p.n = 0
	}
}

// flush applies the remaining updates one by one.
func (p *pending) flush(v *kern.Variant, b []float32, ldb, j0 int, crow []float32) {
	w := len(crow)
	for t := range p.n {
		r := int(p.k[t])*ldb + j0
		v.Axpy(p.a[t], b[r:r+w], crow)
	}
	p.n = 0
}

// gemmNN: C (m x n) = alpha * A (m x kk) * B (kk x n) + beta * C.
// Each piece owns a band of C's rows; for each panel of B (gemmKC rows x
// gemmNC columns, kept in cache) it scans its rows of A, skipping zeros,
// and applies the non-zeros four at a time.
func (k *Kernels) gemmNN(m, n, kk int, alpha float32, a, b []float32, beta float32, c []float32) {
	work := int64(m) * int64(n) * int64(max(kk, 1))
	j := sparseJobs.get()
	*j = sparseJob{k: k, m: m, n: n, kk: kk, alpha: alpha, a: a, b: b, beta: beta, c: c, pieces: k.dev.pool.pieces(m, work)}
	k.dev.pool.run(j.pieces, j)
	sparseJobs.put(j)
}

// sparseJob is one zero-skipping GEMM call (gemmNN or, with trans, gemmTN).
type sparseJob struct {
	k           *Kernels
	m, n, kk    int
	alpha, beta float32
	a, b, c     []float32
	pieces      int
	trans       bool
}

var sparseJobs statePool[sparseJob]

func (j *sparseJob) run(p int) {
	if j.trans {
		j.runTN(p)
	} else {
		j.runNN(p)
	}
}

func (j *sparseJob) runNN(p int) {
	k, m, n, kk, alpha, a, b, c, beta, pieces := j.k, j.m, j.n, j.kk, j.alpha, j.a, j.b, j.c, j.beta, j.pieces
	v := &k.v
	i0, i1 := p*m/pieces, (p+1)*m/pieces
	k.scaleRows(c[i0*n:i1*n], beta)
	if alpha == 0 {
		return
	}
	var pd pending
	for k0 := 0; k0 < kk; k0 += gemmKC {
		k1 := min(k0+gemmKC, kk)
		for j0 := 0; j0 < n; j0 += gemmNC {
			j1 := min(j0+gemmNC, n)
			for i := i0; i < i1; i++ {
				crow := c[i*n+j0 : i*n+j1]
				arow := a[i*kk+k0 : i*kk+k1]
				q := 0
				for ; q+4 <= len(arow); q += 4 {
					a4 := arow[q : q+4 : q+4]
					if !nz(a4[0], a4[1], a4[2], a4[3]) {
						continue
					}
					if pd.n == 0 && a4[0] != 0 && a4[1] != 0 && a4[2] != 0 && a4[3] != 0 {
						// dense stretch: four consecutive rows of B
						r := (k0+q)*n + j0
						w := j1 - j0
						v.Axpy4(alpha*a4[0], alpha*a4[1], alpha*a4[2], alpha*a4[3],
							b[r:r+w], b[r+n:r+n+w], b[r+2*n:r+2*n+w], b[r+3*n:r+3*n+w], crow)
						continue
					}
					for t, av := range a4 {
						if av != 0 {
							pd.push(v, alpha*av, k0+q+t, b, n, j0, crow)
						}
					}
				}
				for ; q < len(arow); q++ {
					if av := arow[q]; av != 0 {
						pd.push(v, alpha*av, k0+q, b, n, j0, crow)
					}
				}
				pd.flush(v, b, n, j0, crow)
			}
		}
	}
}

// gemmTN: C (m x n) = alpha * A^T * B + beta * C with A stored kk x m.
// Each piece owns C rows [i0, i1) (at most gemmTNMaxRows, sized to stay
// in cache) and walks all kk rows of A, reading the contiguous slice
// A[k, i0:i1] of each and skipping zeros; every C row keeps its own
// queue of pending updates, applied four at a time.
func (k *Kernels) gemmTN(m, n, kk int, alpha float32, a, b []float32, beta float32, c []float32) {
	work := int64(m) * int64(n) * int64(max(kk, 1))
	nc := min(n, gemmNC)
	rows := min(gemmTNMaxRows, max(8, gemmTNRows*gemmNC/max(nc, 1)))
	pieces := max(k.dev.pool.pieces(m, work), (m+rows-1)/rows)
	pieces = min(pieces, m)
	j := sparseJobs.get()
	*j = sparseJob{k: k, m: m, n: n, kk: kk, alpha: alpha, a: a, b: b, beta: beta, c: c, pieces: pieces, trans: true}
	k.dev.pool.run(pieces, j)
	sparseJobs.put(j)
}

func (j *sparseJob) runTN(p int) {
	k, m, n, kk, alpha, a, b, c, beta, pieces := j.k, j.m, j.n, j.kk, j.alpha, j.a, j.b, j.c, j.beta, j.pieces
	v := &k.v
	i0, i1 := p*m/pieces, (p+1)*m/pieces
	k.scaleRows(c[i0*n:i1*n], beta)
	if alpha == 0 {
		return
	}
	var pds [gemmTNMaxRows]pending
	pd := pds[:i1-i0]
	for j0 := 0; j0 < n; j0 += gemmNC {
		j1 := min(j0+gemmNC, n)
		w := j1 - j0
		q := 0
		for ; q+4 <= kk; q += 4 {
			// four rows of A (columns of A^T) against four rows of B
			a0, a1 := a[q*m+i0:q*m+i1], a[(q+1)*m+i0:(q+1)*m+i1]
			a2, a3 := a[(q+2)*m+i0:(q+2)*m+i1], a[(q+3)*m+i0:(q+3)*m+i1]
			a1, a2, a3 = a1[:len(a0)], a2[:len(a0)], a3[:len(a0)]
			rb := q*n + j0
			b0, b1, b2, b3 := b[rb:rb+w], b[rb+n:rb+n+w], b[rb+2*n:rb+2*n+w], b[rb+3*n:rb+3*n+w]
			for ii, v0 := range a0 {
				v1, v2, v3 := a1[ii], a2[ii], a3[ii]
				if !nz(v0, v1, v2, v3) {
					continue
				}
				r := (i0+ii)*n + j0
				crow := c[r : r+w]
				if pd[ii].n == 0 && v0 != 0 && v1 != 0 && v2 != 0 && v3 != 0 {
					v.Axpy4(alpha*v0, alpha*v1, alpha*v2, alpha*v3, b0, b1, b2, b3, crow)
					continue
				}
				for t, av := range [4]float32{v0, v1, v2, v3} {
					if av != 0 {
						pd[ii].push(v, alpha*av, q+t, b, n, j0, crow)
					}
				}
			}
		}
		for ; q < kk; q++ {
			acol := a[q*m+i0 : q*m+i1]
			for ii, av := range acol {
				if av != 0 {
					r := (i0+ii)*n + j0
					pd[ii].push(v, alpha*av, q, b, n, j0, c[r:r+w])
				}
			}
		}
		for ii := range pd {
			r := (i0 + ii) * n
			pd[ii].flush(v, b, n, j0, c[r+j0:r+j1])
		}
	}
}
