package cpu

import "github.com/gnnkit/gnnkit/backends/cpu/internal/kern"

// Blocking of the packed GEMM (micro-tile MR x NR from the kernel
// variant). A band of packedBandTiles*MR rows of A times packedKC of k
// (<= 96 KiB for avx512's 192-row bands) stays in L2 while the NR-wide
// panels of packed B (packedKC x NR floats, 16-32 KiB) pass through L1,
// each reused by every micro-row of the band.
const (
	packedKC        = 128
	packedBandTiles = 16
	// packedSplitMin is the k a split must have at least; splits are
	// used only when C has fewer than packedMinTasks bands.
	packedSplitMin = 1024
	packedMinTasks = 16
	packedMaxSplit = 16
	// packedOneBand is the most rows C may have to be computed as a
	// single band when k is split.
	packedOneBand = 256
	// packedAMinPanels is how many panels of B make copying A worth it.
	packedAMinPanels = 16
)

// gemmPacked computes c = alpha*op(a)*op(b) + beta*c with the variant's
// micro-kernel. A is read in place (through strides, so A^T costs
// nothing). B is packed into contiguous NR-wide panels, zero-padded past
// n: read in place, B's rows would sit a power-of-two stride apart and
// fall into a few L1 sets (1024x1024: 4 KiB apart, one set). Work is cut into tasks by bands of C's rows and, when
// there are few bands and a long k (a weight gradient X^T*dY), into a
// fixed number of k-splits written to scratch and summed in split order,
// so the cut and the summation order depend only on the shapes.
func (k *Kernels) gemmPacked(g kern.GemmKernel, transA, transB bool, m, n, kk int, alpha float32, a, b []float32, beta float32, c []float32) {
	mr, nr := g.MR, g.NR
	// op(A)(i, p) = a[i*rs + p*cs]
	rs, cs := kk, 1
	if transA {
		rs, cs = 1, m
	}
	mc := mr * packedBandTiles
	bands := (m + mc - 1) / mc
	ks := 1
	if bands < packedMinTasks && kk >= 2*packedSplitMin {
		if m <= packedOneBand {
			// one band of all rows, so B is read (and packed) once
			mc, bands = m, 1
		}
		ks = min(packedMaxSplit, (packedMinTasks+bands-1)/bands, kk/packedSplitMin)
	}
	if want := 4 * k.dev.threads; ks == 1 && bands < want && m > mr {
		// Narrower bands so every thread gets several (1024 rows on 2
		// threads: 8 bands of 132 rather than 6 of 192, one of them a
		// third full). Band edges do not change any element's sums, so
		// results stay the same for every thread count; k-splits would.
		mc = max(mr, (m+want-1)/want+mr-1) / mr * mr
		bands = (m + mc - 1) / mc
	}
	panels := (n + nr - 1) / nr
	npack := panels
	// Copy A into contiguous micro-panels when it pays: many panels of B
	// reuse each copy, or A's rows sit a multiple of 2 KiB apart, where
	// the mr rows of a call would share a few L1 sets (1024x1024: 4 KiB
	// apart, one set). (Copying a transposed A costs more than it saves
	// for the weight gradients' shapes: 128x100000x128 went from 70 to
	// 66 GFLOP/s.)
	packA := panels >= packedAMinPanels || (rs*4)%2048 == 0
	j := packedJobs.get()
	*j = packedJob{k: k, g: g, m: m, n: n, kk: kk, a: a, rs: rs, cs: cs, b: b, transB: transB, alpha: alpha,
		beta: beta, c: c, mc: mc, bands: bands, ks: ks, kchunk: (kk + ks - 1) / ks, panels: panels, npack: npack, packA: packA}
	var bp, part *[]float32
	if ks == 1 {
		// one packed copy of B shared by every band
		bp = getScratch(npack * kk * nr)
		j.bp = *bp
		j.packing = true
		k.dev.pool.run(k.dev.pool.pieces(npack, int64(kk)*int64(npack*nr)), j)
		j.packing = false
	}
	if ks > 1 {
		part = getScratch(ks * m * n)
		j.part = *part
	}
	k.dev.pool.run(bands*ks, j)
	if ks > 1 {
		j.reduce()
	}
	packedJobs.put(j)
	if bp != nil {
		putScratch(bp)
	}
	if part != nil {
		putScratch(part)
	}
}

// packedJob is one packed GEMM call. With packing set, run(p) packs a
// share of B's panels into bp; otherwise run(t) computes task t.
type packedJob struct {
	k             *Kernels
	g             kern.GemmKernel
	m, n, kk      int
	a             []float32
	rs, cs        int
	b             []float32
	transB        bool
	alpha, beta   float32
	c             []float32
	mc, bands, ks int
	kchunk        int
	panels        int
	npack         int       // packed panels (all of them)
	packA         bool      // copy A's micro-panels (see gemmPacked)
	bp            []float32 // shared packed B (ks == 1): npack x kk x NR
	part          []float32 // per-split partial products (ks > 1): ks x m x n
	packing       bool
}

var packedJobs statePool[packedJob]

func (j *packedJob) run(t int) {
	if j.packing {
		pieces := j.k.dev.pool.pieces(j.npack, int64(j.kk)*int64(j.npack*j.g.NR))
		j.packB(j.bp, 0, j.kk, t*j.npack/pieces, (t+1)*j.npack/pieces)
		return
	}
	j.task(t)
}

// packB writes panels s0..s1 of op(B)[p0:p1, :] into dst: panel s at
// dst[s*(p1-p0)*NR:], row p at offset (p-p0)*NR, zero-padded past n.
func (j *packedJob) packB(dst []float32, p0, p1, s0, s1 int) {
	nr, n, kk, b := j.g.NR, j.n, j.kk, j.b
	rows := p1 - p0
	if !j.transB {
		// whole panels in one call of the variant's vector copy
		full := min(s1, n/nr) - s0
		if full > 0 {
			j.k.v.PackPanels(dst[s0*rows*nr:], b[p0*n+s0*nr:], n, rows, nr, full, rows*nr)
			s0 += full
		}
	}
	for s := s0; s < s1; s++ {
		jp := s
		j0 := jp * nr
		w := min(nr, n-j0)
		pan := dst[s*rows*nr : (s+1)*rows*nr]
		if !j.transB {
			// op(B)(p, j) = b[p*n + j]: copy row pieces
			for p := p0; p < p1; p++ {
				out, src := pan[(p-p0)*nr:(p-p0)*nr+nr], b[p*n+j0:p*n+j0+w]
				copy(out, src)
				if w < nr {
					clear(out[w:])
				}
			}
			continue
		}
		// op(B)(p, j) = b[j*kk + p]: gather columns
		for q := range w {
			src := b[(j0+q)*kk+p0 : (j0+q)*kk+p1]
			for p, x := range src {
				pan[p*nr+q] = x
			}
		}
		if w < nr {
			for p := range rows {
				clear(pan[p*nr+w : p*nr+nr])
			}
		}
	}
}

// task computes band t%bands over k-split t/bands.
func (j *packedJob) task(t int) {
	// The index arithmetic below stays inside a, the packed buffers and
	// c, whose lengths GEMM checked against the shapes: call the
	// micro-kernel without its per-call checks.
	v, raw := &j.k.v, j.g.Raw
	gemm := func(k int, a []float32, rs, cs int, b []float32, ldb int, c []float32, ldc, cols int, alpha float32, load bool) {
		l := 0
		if load {
			l = 1
		}
		raw(k, a, rs, cs, b, ldb, c, ldc, cols, alpha, l)
	}
	mr, nr := j.g.MR, j.g.NR
	band, split := t%j.bands, t/j.bands
	i0, i1 := band*j.mc, min(j.m, (band+1)*j.mc)
	p0, p1 := split*j.kchunk, min(j.kk, (split+1)*j.kchunk)
	n := j.n
	c, beta := j.c, j.beta
	if j.ks > 1 {
		c, beta = j.part[split*j.m*n:(split+1)*j.m*n], 0
	}
	if p0 >= p1 {
		clear(c[i0*n : i1*n])
		return
	}
	if beta != 0 && beta != 1 {
		v.Scal(beta, c[i0*n:i1*n])
	}
	var local *[]float32
	if j.bp == nil {
		local = getScratch(j.npack * min(packedKC, p1-p0) * nr)
	}
	tiles := (i1 - i0 + mr - 1) / mr
	tmp := getScratch(mr*nr + mr*packedKC + tiles*mr*packedKC)
	tileC, tileA := (*tmp)[:mr*nr], (*tmp)[mr*nr:mr*nr+mr*packedKC]
	packA := (*tmp)[mr*nr+mr*packedKC:]
	for pc := p0; pc < p1; pc += packedKC {
		kc := min(packedKC, p1-pc)
		load := pc > p0 || beta != 0
		// the packed B rows [pc, pc+kc) and their slot stride
		var bsrc []float32
		var boff, bstride int
		if j.bp != nil {
			bsrc, boff, bstride = j.bp, pc*nr, j.kk*nr
		} else {
			bsrc, boff, bstride = (*local)[:j.npack*kc*nr], 0, kc*nr
			j.packB(bsrc, pc, pc+kc, 0, j.npack)
		}
		if j.packA {
			j.packAPanels(packA, i0, i1, pc, kc, mr)
		}
		for jp := range j.panels {
			j0 := jp * nr
			w := min(nr, n-j0)
			bpan, ldb := bsrc[jp*bstride+boff:jp*bstride+boff+kc*nr], nr
			for i := i0; i < i1; i += mr {
				r := min(mr, i1-i)
				a, rs, cs := j.a[i*j.rs+pc*j.cs:], j.rs, j.cs
				if j.packA {
					q := (i - i0) / mr
					a, rs, cs = packA[q*mr*kc:(q+1)*mr*kc], 1, mr
				}
				if r == mr && w > nr-j.g.VW {
					// a full tile, or one whose last vector is partial
					gemm(kc, a, rs, cs, bpan, ldb, c[i*n+j0:], n, w, j.alpha, load)
					continue
				}
				// edge tile: copy the rows of A there are (zero-padded)
				// and compute into tileC
				if r < mr && !j.packA {
					for p := range kc {
						row := tileA[p*mr : p*mr+mr]
						for ii := range r {
							row[ii] = j.a[(i+ii)*j.rs+(pc+p)*j.cs]
						}
						clear(row[r:])
					}
					a, rs, cs = tileA, 1, mr
				}
				gemm(kc, a, rs, cs, bpan, ldb, tileC, nr, nr, j.alpha, false)
				for ii := range r {
					dst := c[(i+ii)*n+j0 : (i+ii)*n+j0+w]
					src := tileC[ii*nr : ii*nr+w]
					if load {
						for q, x := range src {
							dst[q] += x
						}
					} else {
						copy(dst, src)
					}
				}
			}
		}
	}
	putScratch(tmp)
	if local != nil {
		putScratch(local)
	}
}

// packAPanels copies op(A)[i0:i1, pc:pc+kc] into micro-panels of mr rows:
// panel q at dst[q*mr*kc:], element (ii, p) at p*mr + ii, rows past i1
// zero.
func (j *packedJob) packAPanels(dst []float32, i0, i1, pc, kc, mr int) {
	a, rs, cs := j.a, j.rs, j.cs
	for i := i0; i < i1; i += mr {
		pan := dst[(i-i0)/mr*mr*kc : ((i-i0)/mr+1)*mr*kc]
		r := min(mr, i1-i)
		if cs == 1 {
			// row-major A: read each row's kc contiguous floats
			for ii := range r {
				row := a[(i+ii)*rs+pc : (i+ii)*rs+pc+kc]
				for p, x := range row {
					pan[p*mr+ii] = x
				}
			}
		} else {
			// A^T: the mr values of a step are contiguous
			for p := range kc {
				copy(pan[p*mr:p*mr+r], a[i*rs+(pc+p)*cs:i*rs+(pc+p)*cs+r])
			}
		}
		if r < mr {
			for p := range kc {
				clear(pan[p*mr+r : p*mr+mr])
			}
		}
	}
}

// reduce sets c = beta*c + the sum of the k-splits' partial products, in
// split order, by rows over the device's threads.
func (j *packedJob) reduce() {
	j.packing = false
	r := reduceJobs.get()
	*r = splitReduce{j: j, pieces: j.k.dev.pool.pieces(j.m, int64(j.m)*int64(j.n)*int64(j.ks))}
	j.k.dev.pool.run(r.pieces, r)
	reduceJobs.put(r)
}

type splitReduce struct {
	j      *packedJob
	pieces int
}

var reduceJobs statePool[splitReduce]

func (r *splitReduce) run(p int) {
	j := r.j
	mn := j.m * j.n
	lo, hi := p*j.m/r.pieces*j.n, (p+1)*j.m/r.pieces*j.n
	c := j.c[lo:hi]
	switch j.beta {
	case 0:
		copy(c, j.part[lo:hi])
	case 1:
		j.k.v.Add(j.part[lo:hi], c)
	default:
		j.k.v.Scal(j.beta, c)
		j.k.v.Add(j.part[lo:hi], c)
	}
	for s := 1; s < j.ks; s++ {
		j.k.v.Add(j.part[s*mn+lo:s*mn+hi], c)
	}
}
