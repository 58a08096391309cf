package kern

import (
	"fmt"
	"math"
)

// AxpyGeneric computes y[i] += alpha * x[i] for i < min(len(x), len(y)).
//
// Reference loop (what every SIMD variant must match, up to rounding of
// fused multiply-add):
//
//	for i := range y {
//		y[i] += alpha * x[i]
//	}
func AxpyGeneric(alpha float32, x, y []float32) {
	n := min(len(x), len(y))
	x, y = x[:n], y[:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		xs, ys := x[i:i+8:i+8], y[i:i+8:i+8]
		ys[0] += alpha * xs[0]
		ys[1] += alpha * xs[1]
		ys[2] += alpha * xs[2]
		ys[3] += alpha * xs[3]
		ys[4] += alpha * xs[4]
		ys[5] += alpha * xs[5]
		ys[6] += alpha * xs[6]
		ys[7] += alpha * xs[7]
	}
	for ; i < n; i++ {
		y[i] += alpha * x[i]
	}
}

// AddGeneric computes y[i] += x[i] for i < min(len(x), len(y)).
//
// Reference loop:
//
//	for i := range y {
//		y[i] += x[i]
//	}
func AddGeneric(x, y []float32) {
	n := min(len(x), len(y))
	x, y = x[:n], y[:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		xs, ys := x[i:i+8:i+8], y[i:i+8:i+8]
		ys[0] += xs[0]
		ys[1] += xs[1]
		ys[2] += xs[2]
		ys[3] += xs[3]
		ys[4] += xs[4]
		ys[5] += xs[5]
		ys[6] += xs[6]
		ys[7] += xs[7]
	}
	for ; i < n; i++ {
		y[i] += x[i]
	}
}

// DotGeneric returns sum_i x[i]*y[i] over i < min(len(x), len(y)), with
// four partial sums combined as (s0+s1)+(s2+s3) and the tail added last.
//
// Reference loop (a variant may associate the sum differently):
//
//	var s float32
//	for i := range x {
//		s += x[i] * y[i]
//	}
//	return s
func DotGeneric(x, y []float32) float32 {
	n := min(len(x), len(y))
	x, y = x[:n], y[:n]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= n; i += 4 {
		xs, ys := x[i:i+4:i+4], y[i:i+4:i+4]
		s0 += xs[0] * ys[0]
		s1 += xs[1] * ys[1]
		s2 += xs[2] * ys[2]
		s3 += xs[3] * ys[3]
	}
	s := (s0 + s1) + (s2 + s3)
	for ; i < n; i++ {
		s += x[i] * y[i]
	}
	return s
}

// ScalGeneric computes x[i] *= alpha.
//
// Reference loop:
//
//	for i := range x {
//		x[i] *= alpha
//	}
func ScalGeneric(alpha float32, x []float32) {
	i := 0
	n := len(x)
	for ; i+8 <= n; i += 8 {
		xs := x[i : i+8 : i+8]
		xs[0] *= alpha
		xs[1] *= alpha
		xs[2] *= alpha
		xs[3] *= alpha
		xs[4] *= alpha
		xs[5] *= alpha
		xs[6] *= alpha
		xs[7] *= alpha
	}
	for ; i < n; i++ {
		x[i] *= alpha
	}
}

// Axpy4Generic computes four rank-1 updates of y in one pass. Every x must
// be at least as long as y.
//
// Reference loop:
//
//	for i := range y {
//		y[i] += (a0*x0[i] + a1*x1[i]) + (a2*x2[i] + a3*x3[i])
//	}
func Axpy4Generic(a0, a1, a2, a3 float32, x0, x1, x2, x3, y []float32) {
	n := len(y)
	x0, x1, x2, x3 = x0[:n], x1[:n], x2[:n], x3[:n]
	for i := range y {
		y[i] += (a0*x0[i] + a1*x1[i]) + (a2*x2[i] + a3*x3[i])
	}
}

// Add4Generic adds four rows into y in one pass. Every x must be at least
// as long as y.
//
// Reference loop:
//
//	for i := range y {
//		y[i] += (x0[i] + x1[i]) + (x2[i] + x3[i])
//	}
func Add4Generic(x0, x1, x2, x3, y []float32) {
	n := len(y)
	x0, x1, x2, x3 = x0[:n], x1[:n], x2[:n], x3[:n]
	for i := range y {
		y[i] += (x0[i] + x1[i]) + (x2[i] + x3[i])
	}
}

// SpmmRowGeneric sets dst[j] = (dst[j] if acc else 0) + sum over e of
// w[e] * x[int(idx[e])*ldx + j] for j < len(dst) (w empty: weight 1;
// otherwise len(w) >= len(idx)). Edges are added four at a time (Add4,
// Axpy4), so the sum associates as ((x0+x1)+(x2+x3)) per group.
//
// Reference loop:
//
//	for j := range dst {
//		var s float32
//		if acc {
//			s = dst[j]
//		}
//		for e, i := range idx {
//			s += w[e] * x[int(i)*ldx+j] // or x[...] alone when w is empty
//		}
//		dst[j] = s
//	}
func SpmmRowGeneric(dst, x []float32, ldx int, idx []int32, w []float32, acc bool) {
	if !acc {
		clear(dst)
	}
	c := len(dst)
	if c == 0 {
		return
	}
	row := func(e int) []float32 { j := int(idx[e]) * ldx; return x[j : j+c] }
	e, n := 0, len(idx)
	if len(w) == 0 {
		for ; e+4 <= n; e += 4 {
			Add4Generic(row(e), row(e+1), row(e+2), row(e+3), dst)
		}
		for ; e < n; e++ {
			AddGeneric(row(e), dst)
		}
		return
	}
	w = w[:n]
	for ; e+4 <= n; e += 4 {
		Axpy4Generic(w[e], w[e+1], w[e+2], w[e+3], row(e), row(e+1), row(e+2), row(e+3), dst)
	}
	for ; e < n; e++ {
		AxpyGeneric(w[e], row(e), dst)
	}
}

// peakGenericFLOPs is the work of one FMAPeakGeneric iteration.
const peakGenericFLOPs = 16

// FMAPeakGeneric runs n iterations of eight independent scalar
// multiply-adds (16 FLOPs), the most plain Go code issues per cycle.
func FMAPeakGeneric(n int) {
	var a0, a1, a2, a3, a4, a5, a6, a7 float32
	b := float32(n) * 1e-30
	for range n {
		a0 = a0*b + b
		a1 = a1*b + b
		a2 = a2*b + b
		a3 = a3*b + b
		a4 = a4*b + b
		a5 = a5*b + b
		a6 = a6*b + b
		a7 = a7*b + b
	}
	peakSink = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7
}

//lint:ignore U1000 written, never read: the sink keeps the compiler from removing the peak loop
var peakSink float32

// gemmRef is the reference of Variant.Gemm for tests: the loop stated on
// every micro-kernel, with float64 sums.
func gemmRef(mr, cols, k int, a []float32, rs, cs int, b []float32, ldb int, c []float32, ldc int, alpha float32, load bool) {
	for i := range mr {
		for j := range cols {
			var s float64
			for p := range k {
				s += float64(a[i*rs+p*cs]) * float64(b[p*ldb+j])
			}
			s *= float64(alpha)
			if load {
				s += float64(c[i*ldc+j])
			}
			c[i*ldc+j] = float32(s)
		}
	}
}

// DropHash is the 24-bit draw of core.DropoutKeep for element key k:
// DropoutKeep(seed, k, p) == (DropHash(seed, k) >= DropThreshold(p)).
func DropHash(seed, k uint64) uint64 {
	z := seed + (k+1)*0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	z ^= z >> 31
	return z >> 40
}

// DropThreshold turns core.DropoutKeep's float test u >= p, with u =
// float32(h)/2^24 exact for the 24-bit draw h, into h >= ceil(p*2^24).
func DropThreshold(p float32) uint64 {
	return uint64(math.Ceil(float64(p) * (1 << 24)))
}

// DropoutGeneric keeps element i of out (x[i]*scale, and scale in mask)
// when DropHash(seed, key+i) >= thr, and sets it (and mask[i]) to +0
// otherwise; mask may be empty. Branch-free: the draws are random.
//
// Reference loop:
//
//	for i := range out {
//		if DropHash(seed, key+uint64(i)) >= thr {
//			out[i], mask[i] = x[i]*scale, scale
//		} else {
//			out[i], mask[i] = 0, 0
//		}
//	}
func DropoutGeneric(x, out, mask []float32, seed, key, thr uint64, scale float32) {
	x = x[:len(out)]
	sbits := math.Float32bits(scale)
	if len(mask) > 0 {
		mask = mask[:len(out)]
	}
	for i, v := range x {
		keep := uint32(0)
		if DropHash(seed, key+uint64(i)) >= thr {
			keep = ^uint32(0)
		}
		out[i] = math.Float32frombits(math.Float32bits(v*scale) & keep)
		if len(mask) > 0 {
			mask[i] = math.Float32frombits(sbits & keep)
		}
	}
}

// Expf returns e^x in float32 to within 2 ulp (Cephes expf: x = n*ln2 +
// r with |r| <= ln2/2 (n rounded to nearest), e^r by a degree-7
// polynomial, times 2^n built from bits), in a few nanoseconds where math.Exp in float64 takes
// several times longer. Results below the smallest normal float32
// (x < -87.33) are 0 and above the largest (x > 88.72) +Inf; NaN gives
// NaN.
func Expf(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		c1    = 0.693359375
		c2    = -2.12194440e-4
		maxX  = 88.72283905206835
		minX  = -87.33654475055310898657
		magic = 12582912 // 1.5 * 2^23: adding it rounds to an integer
	)
	if !(x >= minX && x <= maxX) { // rare: out of range or NaN
		switch {
		case x > maxX:
			return float32(math.Inf(1))
		case x < minX:
			return 0
		}
		return x
	}
	t := x*log2e + magic
	n := t - magic // x*log2e rounded to the nearest integer
	r := x - n*c1 - n*c2
	p := float32(1.9875691500e-4)
	p = p*r + 1.3981999507e-3
	p = p*r + 8.3334519073e-3
	p = p*r + 4.1665795894e-2
	p = p*r + 1.6666665459e-1
	p = p*r + 5.0000001201e-1
	p = p*r*r + r + 1
	e := int32(n)
	if e > 127 { // 2^128 is not a float32; e^x still is
		p, e = 2*p, e-1
	}
	return p * math.Float32frombits(uint32(e+127)<<23)
}

// ExpSumGeneric returns the sum over x of Expf(x[i]-sub), in float64.
//
// Reference loop:
//
//	var s float64
//	for _, v := range x {
//		s += float64(float32(math.Exp(float64(v - sub))))
//	}
//	return s
func ExpSumGeneric(x []float32, sub float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(Expf(v - sub))
	}
	return s
}

// ExpScaleSubGeneric sets dx[i] = dy[i] - Expf(y[i])*sc.
//
// Reference loop:
//
//	for i := range dx {
//		dx[i] = dy[i] - float32(math.Exp(float64(y[i])))*sc
//	}
func ExpScaleSubGeneric(y, dy, dx []float32, sc float32) {
	y, dy = y[:len(dx)], dy[:len(dx)]
	for i, v := range y {
		dx[i] = dy[i] - Expf(v)*sc
	}
}

// ZeroGeneric sets x to +0 (clear: the runtime's wide stores).
func ZeroGeneric(x []float32) { clear(x) }

// Expm1f returns e^x - 1 in float32 to within a few ulp: a degree-7
// Taylor polynomial for |x| < 0.35 (where Expf(x) - 1 would cancel), else
// Expf(x) - 1.
func Expm1f(x float32) float32 {
	if x > -0.35 && x < 0.35 {
		// x + x^2/2! + ... + x^7/7!
		p := float32(1.0 / 5040)
		p = p*x + 1.0/720
		p = p*x + 1.0/120
		p = p*x + 1.0/24
		p = p*x + 1.0/6
		p = p*x + 0.5
		return x + x*x*p
	}
	return Expf(x) - 1
}

// PackPanelsGeneric copies rows x (panels*nr) floats of src (row stride
// lds) into panels of nr columns: panel jp at dst[jp*pstride:], row p at
// offset p*nr.
//
// Reference loop:
//
//	for p := range rows {
//		for jp := range panels {
//			copy(dst[jp*pstride+p*nr:jp*pstride+p*nr+nr], src[p*lds+jp*nr:])
//		}
//	}
func PackPanelsGeneric(dst, src []float32, lds, rows, nr, panels, pstride int) {
	checkPack(dst, src, lds, rows, nr, panels, pstride, 1)
	for p := range rows {
		for jp := range panels {
			copy(dst[jp*pstride+p*nr:jp*pstride+p*nr+nr], src[p*lds+jp*nr:p*lds+jp*nr+nr])
		}
	}
}

// checkPack panics unless PackPanels' accesses are in range and nr is a
// multiple of vw.
func checkPack(dst, src []float32, lds, rows, nr, panels, pstride, vw int) {
	if rows <= 0 || panels <= 0 {
		return
	}
	if nr <= 0 || nr%vw != 0 || lds < panels*nr || pstride < rows*nr {
		panic("kern: pack: bad geometry")
	}
	if (rows-1)*lds+panels*nr > len(src) || (panels-1)*pstride+rows*nr > len(dst) {
		panic("kern: pack: out of range")
	}
}

// ReluGeneric sets out[i] = max(x[i], 0), branch-free: the bits are kept
// unless x < 0, so NaN and -0 pass as with "if x < 0 { x = 0 }".
func ReluGeneric(x, out []float32) {
	x = x[:len(out)]
	for i, v := range x {
		keep := uint32(0)
		if !(v < 0) {
			keep = ^uint32(0)
		}
		out[i] = math.Float32frombits(math.Float32bits(v) & keep)
	}
}

// ReluGradGeneric sets out[i] = dy[i] where y[i] > 0, else +0.
func ReluGradGeneric(dy, y, out []float32) {
	dy, y = dy[:len(out)], y[:len(out)]
	for i, d := range dy {
		keep := uint32(0)
		if y[i] > 0 {
			keep = ^uint32(0)
		}
		out[i] = math.Float32frombits(math.Float32bits(d) & keep)
	}
}

// AddToGeneric sets out[i] = a[i] + b[i].
func AddToGeneric(a, b, out []float32) {
	a, b = a[:len(out)], b[:len(out)]
	for i, x := range a {
		out[i] = x + b[i]
	}
}

// MulToGeneric sets out[i] = a[i] * b[i].
func MulToGeneric(a, b, out []float32) {
	a, b = a[:len(out)], b[:len(out)]
	for i, x := range a {
		out[i] = x * b[i]
	}
}

// SubScalarGeneric sets out[i] = x[i] - c.
func SubScalarGeneric(x, out []float32, c float32) {
	x = x[:len(out)]
	for i, v := range x {
		out[i] = v - c
	}
}

// MaxGeneric returns the largest element of x, -Inf for none (NaN if x
// holds one).
func MaxGeneric(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		m = max(m, v)
	}
	return m
}

// AccF64Generic adds x[i], widened to float64, into acc[i].
func AccF64Generic(acc []float64, x []float32) {
	acc = acc[:len(x)]
	for i, v := range x {
		acc[i] += float64(v)
	}
}

// checkRows panics unless rows x c floats fit in every slice given and
// rows entries in each per-row slice.
func checkRows(rows, c int, mats [][]float32, per int) {
	if rows < 0 || c < 0 {
		panic("kern: negative rows or columns")
	}
	for _, m := range mats {
		if len(m) < rows*c {
			panic("kern: matrix shorter than rows x c")
		}
	}
	if per >= 0 && per < rows {
		panic("kern: per-row slice shorter than rows")
	}
}

// AddRowGeneric sets out[r*c+j] = a[r*c+j] + b[j] for r < rows.
func AddRowGeneric(a, b, out []float32, rows, c int) {
	checkRows(rows, c, [][]float32{a, out}, -1)
	b = b[:c]
	for r := range rows {
		AddToGeneric(a[r*c:r*c+c], b, out[r*c:r*c+c])
	}
}

// SubRowsGeneric sets out[r*c+j] = x[r*c+j] - v[r] for r < rows.
func SubRowsGeneric(x, out []float32, rows, c int, v []float32) {
	checkRows(rows, c, [][]float32{x, out}, len(v))
	for r := range rows {
		SubScalarGeneric(x[r*c:r*c+c], out[r*c:r*c+c], v[r])
	}
}

// RowMaxExpSumGeneric sets m[r] = MaxGeneric(row r) and sum[r] =
// ExpSumGeneric(row r, m[r]).
func RowMaxExpSumGeneric(x []float32, rows, c int, m []float32, sum []float64) {
	checkRows(rows, c, [][]float32{x}, min(len(m), len(sum)))
	for r := range rows {
		row := x[r*c : r*c+c]
		m[r] = MaxGeneric(row)
		sum[r] = ExpSumGeneric(row, m[r])
	}
}

// RowSumF64Generic sets sum[r] = the float64 sum of row r.
func RowSumF64Generic(x []float32, rows, c int, sum []float64) {
	checkRows(rows, c, [][]float32{x}, len(sum))
	for r := range rows {
		var t float64
		for _, v := range x[r*c : r*c+c] {
			t += float64(v)
		}
		sum[r] = t
	}
}

// ExpScaleSubRowsGeneric sets dx = dy - Expf(y) * sc[r] on each row r.
func ExpScaleSubRowsGeneric(y, dy, dx []float32, rows, c int, sc []float32) {
	checkRows(rows, c, [][]float32{y, dy, dx}, len(sc))
	for r := range rows {
		ExpScaleSubGeneric(y[r*c:r*c+c], dy[r*c:r*c+c], dx[r*c:r*c+c], sc[r])
	}
}

// AdamGeneric applies one Adam step (PyTorch's torch.optim.Adam with L2
// weight decay added to the gradient) to p for i < len(p): with gi the
// gradient (plus wd*p[i] when wd != 0), m[i] = b1*m[i] + (1-b1)*gi,
// v[i] = b2*v[i] + (1-b2)*gi*gi, p[i] -= step * m[i] / (sqrt(v[i])/bc2 +
// eps), where step is the learning rate over the first moment's bias
// correction and bc2 the square root of the second's. Every operation
// rounds to float32 in this order (the assembly variants match it bit
// for bit): the explicit conversions keep the compiler from fusing a
// product and a sum into one FMA, as it may (GOAMD64=v3, arm64). It
// panics when g, m or v is shorter than p.
func AdamGeneric(p, g, m, v []float32, b1, b2, eps, wd, step, bc2 float32) {
	checkAdam(len(p), g, m, v)
	g, m, v = g[:len(p)], m[:len(p)], v[:len(p)]
	for i := range p {
		gi := g[i]
		if wd != 0 {
			gi += float32(wd * p[i])
		}
		mi := float32(b1*m[i]) + float32((1-b1)*gi)
		vi := float32(b2*v[i]) + float32((1-b2)*gi*gi)
		m[i], v[i] = mi, vi
		denom := float32(math.Sqrt(float64(vi)))/bc2 + eps
		p[i] -= step * mi / denom
	}
}

// checkAdam panics unless g, m and v each hold n values.
func checkAdam(n int, g, m, v []float32) {
	if len(g) < n || len(m) < n || len(v) < n {
		panic(fmt.Sprintf("kern: Adam over %d parameters with %d gradients, %d and %d moments", n, len(g), len(m), len(v)))
	}
}
