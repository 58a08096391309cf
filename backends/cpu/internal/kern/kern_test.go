package kern

import (
	"fmt"
	"math"
	"math/rand/v2"
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
			testDropout(t, v, r)
			testPack(t, v)
			testElementwise(t, v, r)
			testRows(t, v, r)
			for _, n := range []int{0, 1, 5, 17, 100, 1000, 1<<20 + 37} {
				x := make([]float32, n+2)
				for i := range x {
					x[i] = 1
				}
				v.Zero(x[1 : n+1])
				if x[0] != 1 || x[n+1] != 1 {
					t.Fatalf("Zero n=%d wrote outside x", n)
				}
				for i := 1; i <= n; i++ {
					if x[i] != 0 {
						t.Fatalf("Zero n=%d: x[%d] = %v", n, i-1, x[i])
					}
				}
				if n > 1 { // unaligned start
					x[1], x[2] = 5, 5
					v.Zero(x[2 : n+1])
					if x[1] != 5 || x[2] != 0 {
						t.Fatalf("Zero n=%d unaligned", n)
					}
				}
			}
			testSpmmRow(t, v, r)
			testGemm(t, v, r)
			if v.FMAPeak != nil {
				v.FMAPeak(1000)
			}
		})
	}
}

// testSpmmRow checks SpmmRow against its reference loop for widths that
// cover every block size and tail of both vector widths.
func testSpmmRow(t *testing.T, v Variant, r *rand.Rand) {
	const nsrc = 50
	for _, c := range []int{0, 1, 7, 8, 15, 16, 17, 40, 64, 100, 128, 129, 200, 257} {
		for _, ne := range []int{0, 1, 3, 8, 9, 30} {
			for _, weighted := range []bool{false, true} {
				for _, acc := range []bool{false, true} {
					ldx := c + r.IntN(3)
					x := make([]float32, nsrc*ldx)
					for i := range x {
						x[i] = r.Float32()*2 - 1
					}
					idx := make([]int32, ne)
					for i := range idx {
						idx[i] = int32(r.IntN(nsrc))
					}
					var w []float32
					if weighted {
						w = make([]float32, ne)
						for i := range w {
							w[i] = r.Float32()*2 - 1
						}
					}
					dst := make([]float32, c+1) // one guard element past the row
					for i := range dst {
						dst[i] = r.Float32()
					}
					want := make([]float64, c)
					for j := range want {
						if acc {
							want[j] = float64(dst[j])
						}
						for e, i := range idx {
							wt := 1.0
							if weighted {
								wt = float64(w[e])
							}
							want[j] += wt * float64(x[int(i)*ldx+j])
						}
					}
					guard := dst[c]
					v.SpmmRow(dst[:c], x, ldx, idx, w, acc)
					for j := range want {
						if d := float64(dst[j]) - want[j]; d > 1e-5 || d < -1e-5 {
							t.Fatalf("spmmRow cols=%d edges=%d weighted=%v acc=%v: [%d] = %v, want %v", c, ne, weighted, acc, j, dst[j], want[j])
						}
					}
					if dst[c] != guard {
						t.Fatalf("spmmRow cols=%d: wrote past dst", c)
					}
				}
			}
		}
	}
}

// testGemm checks the micro-kernel against gemmRef with A read in both
// layouts (row-major, rs = lda, cs = 1; transposed, rs = 1, cs = lda).
func testGemm(t *testing.T, v Variant, r *rand.Rand) {
	for _, g := range v.Gemm {
		testGemmKernel(t, g, r)
	}
}

func testGemmKernel(t *testing.T, g GemmKernel, r *rand.Rand) {
	mr, nr := g.MR, g.NR
	for _, k := range []int{0, 1, 2, 7, 64} {
		for _, trans := range []bool{false, true} {
			for _, lc := range []struct {
				load bool
				cols int
			}{{false, nr}, {true, nr}, {false, nr - g.VW + 1}, {true, nr - 1}, {true, nr - g.VW/2}} {
				load, cols := lc.load, lc.cols
				lda := k + 3
				rs, cs := lda, 1
				alen := mr * lda
				if trans {
					lda = mr + 5
					rs, cs = 1, lda
					alen = max(k, 1) * lda
				}
				a := make([]float32, alen)
				for i := range a {
					a[i] = r.Float32()*2 - 1
				}
				ldb := nr + 5
				b := make([]float32, k*ldb)
				for i := range b {
					b[i] = r.Float32()*2 - 1
				}
				ldc := nr + 3
				c := make([]float32, mr*ldc)
				for i := range c {
					c[i] = r.Float32()
				}
				want := append([]float32(nil), c...)
				gemmRef(mr, cols, k, a, rs, cs, b, ldb, want, ldc, -1.5, load)
				g.Fn(k, a, rs, cs, b, ldb, c, ldc, cols, -1.5, load)
				for i := range mr {
					for j := range ldc {
						got, w := c[i*ldc+j], want[i*ldc+j]
						if d := got - w; d > 1e-4 || d < -1e-4 {
							t.Fatalf("gemm %dx%d k=%d trans=%v load=%v cols=%d: c[%d,%d] = %v, want %v", mr, nr, k, trans, load, cols, i, j, got, w)
						}
					}
				}
			}
		}
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

func shuffled(r *rand.Rand, x []float32) []float32 {
	out := append([]float32(nil), x...)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// testDropout checks Dropout against the reference loop, for lengths
// around the vector widths and probabilities including 0 and 1.
func testDropout(t *testing.T, v Variant, r *rand.Rand) {
	for _, n := range []int{0, 1, 7, 8, 15, 16, 17, 33, 100, 1000, 1<<16 + 17} { // the last: non-temporal mask
		for _, p := range []float32{0, 0.5, 0.6, 1, 0.123} {
			for _, withMask := range []bool{false, true} {
				x := make([]float32, n)
				for i := range x {
					x[i] = r.Float32()*2 - 1
				}
				seed, key := r.Uint64(), r.Uint64()>>8
				thr := DropThreshold(p)
				scale := float32(1 / (1 - min(p, 0.9)))
				out := make([]float32, n+1)
				var mask []float32
				if withMask {
					mask = make([]float32, n+1)
				}
				out[n] = 42
				var mv []float32
				if withMask {
					mv = mask[:n]
				}
				v.Dropout(x, out[:n], mv, seed, key, thr, scale)
				for i := range x {
					keep := DropHash(seed, key+uint64(i)) >= thr
					want, wm := float32(0), float32(0)
					if keep {
						want, wm = x[i]*scale, scale
					}
					if out[i] != want || withMask && mask[i] != wm {
						t.Fatalf("dropout n=%d p=%v: [%d] = %v (mask %v), want %v (%v)", n, p, i, out[i], mask, want, wm)
					}
				}
				if out[n] != 42 {
					t.Fatalf("dropout n=%d: wrote past out", n)
				}
			}
		}
	}
}

// TestExpf checks expf against math.Exp over LogSoftmax's range and at
// the edges.
func TestExpf(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	check := func(x float32) {
		got, want := float64(Expf(x)), math.Exp(float64(x))
		if want < 1.2e-38 {
			if got != 0 && math.Abs(got-want) > 1e-38 {
				t.Fatalf("Expf(%v) = %v, want about %v", x, got, want)
			}
			return
		}
		if math.IsInf(float64(float32(want)), 1) {
			if !math.IsInf(got, 1) {
				t.Fatalf("Expf(%v) = %v, want +Inf", x, got)
			}
			return
		}
		if rel := math.Abs(got-want) / want; rel > 3e-7 {
			t.Fatalf("Expf(%v) = %v, want %v (rel err %g)", x, got, want, rel)
		}
	}
	for range 200000 {
		check(-r.Float32() * 90)
		check(r.Float32()*20 - 10)
	}
	for _, x := range []float32{0, -0, 1, -1, 88.7, 88.8, -87.3, -87.4, -100, 100, float32(math.Inf(-1)), float32(math.Inf(1))} {
		check(x)
	}
	if x := Expf(float32(math.NaN())); x == x {
		t.Error("Expf(NaN) is not NaN")
	}
}

func TestExpm1f(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for range 100000 {
		x := r.Float32()*20 - 15
		if r.IntN(2) == 0 {
			x = (r.Float32() - 0.5) * 0.8
		}
		got, want := float64(Expm1f(x)), math.Expm1(float64(x))
		if math.Abs(got-want) > 4e-7*math.Abs(want)+1e-45 {
			t.Fatalf("Expm1f(%v) = %v, want %v", x, got, want)
		}
	}
}

func testPack(t *testing.T, v Variant) {
	for _, nr := range []int{16, 32, 48} {
		const rows, panels, lds = 5, 3, 150
		src := make([]float32, rows*lds)
		for i := range src {
			src[i] = float32(i)
		}
		pstride := rows*nr + 7
		dst := make([]float32, panels*pstride)
		v.PackPanels(dst, src, lds, rows, nr, panels, pstride)
		for p := range rows {
			for jp := range panels {
				for q := range nr {
					if got, want := dst[jp*pstride+p*nr+q], src[p*lds+jp*nr+q]; got != want {
						t.Fatalf("PackPanels nr=%d: panel %d row %d col %d = %v, want %v", nr, jp, p, q, got, want)
					}
				}
			}
		}
	}
}

// testElementwise checks the elementwise kernels against their reference
// loops, with NaN, -0 and the special values of ReLU in the input.
func testElementwise(t *testing.T, v Variant, r *rand.Rand) {
	nan := float32(math.NaN())
	for _, n := range []int{0, 1, 7, 8, 9, 16, 17, 33, 64, 100} {
		a := make([]float32, n)
		b := make([]float32, n)
		for i := range a {
			a[i], b[i] = r.Float32()*2-1, r.Float32()*2-1
		}
		if n > 4 {
			a[0], a[1], a[2], b[3] = nan, float32(math.Copysign(0, -1)), float32(math.Inf(-1)), nan
		}
		same := func(op string, got, want []float32) {
			t.Helper()
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					t.Fatalf("%s n=%d: [%d] = %v, want %v", op, n, i, got[i], want[i])
				}
			}
		}
		out, want := make([]float32, n), make([]float32, n)
		v.Relu(a, out)
		ReluGeneric(a, want)
		same("Relu", out, want)
		v.ReluGrad(a, b, out)
		ReluGradGeneric(a, b, want)
		same("ReluGrad", out, want)
		v.AddTo(a, b, out)
		AddToGeneric(a, b, want)
		same("AddTo", out, want)
		v.MulTo(a, b, out)
		MulToGeneric(a, b, want)
		same("MulTo", out, want)
		c := append([]float32(nil), b...)
		if n > 4 {
			c[3] = 5 // no NaN: Max's NaN is unspecified
		}
		acc, wacc := make([]float64, n), make([]float64, n)
		for i := range acc {
			acc[i] = float64(i)
			wacc[i] = float64(i)
		}
		v.AccF64(acc, c)
		AccF64Generic(wacc, c)
		for i := range acc {
			if acc[i] != wacc[i] {
				t.Fatalf("AccF64 n=%d: [%d] = %v, want %v", n, i, acc[i], wacc[i])
			}
		}
	}
}

// testRows checks AddRow, SubRows and RowMaxExpSum for widths around the
// vector widths.
func testRows(t *testing.T, v Variant, r *rand.Rand) {
	for _, c := range []int{1, 7, 8, 15, 16, 17, 40, 64, 100} {
		const rows = 5
		x := make([]float32, rows*c+1)
		for i := range x {
			x[i] = r.Float32()*20 - 10
		}
		b := make([]float32, c)
		vr := make([]float32, rows)
		for i := range b {
			b[i] = r.Float32()
		}
		for i := range vr {
			vr[i] = r.Float32()
		}
		out := make([]float32, rows*c+1)
		out[rows*c] = 42
		v.AddRow(x, b, out, rows, c)
		for i := range rows * c {
			if out[i] != x[i]+b[i%c] {
				t.Fatalf("AddRow c=%d: [%d] = %v, want %v", c, i, out[i], x[i]+b[i%c])
			}
		}
		v.SubRows(x, out, rows, c, vr)
		for i := range rows * c {
			if out[i] != x[i]-vr[i/c] {
				t.Fatalf("SubRows c=%d: [%d] = %v, want %v", c, i, out[i], x[i]-vr[i/c])
			}
		}
		if out[rows*c] != 42 {
			t.Fatalf("c=%d: wrote past the rows", c)
		}
		rs := make([]float64, rows)
		v.RowSumF64(x, rows, c, rs)
		for row := range rows {
			var w float64
			for _, xv := range x[row*c : row*c+c] {
				w += float64(xv)
			}
			if math.Abs(rs[row]-w) > 1e-9*(1+math.Abs(w)) {
				t.Fatalf("RowSumF64 c=%d row %d: %v, want %v", c, row, rs[row], w)
			}
		}
		dy := make([]float32, rows*c)
		for i := range dy {
			dy[i] = r.Float32()
		}
		dx := make([]float32, rows*c+1)
		dx[rows*c] = 9
		v.ExpScaleSubRows(x, dy, dx[:rows*c], rows, c, vr)
		for i := range rows * c {
			w := float64(dy[i]) - math.Exp(float64(x[i]))*float64(vr[i/c])
			if math.Abs(float64(dx[i])-w) > 2e-6*(1+math.Abs(w)) {
				t.Fatalf("ExpScaleSubRows c=%d: [%d] = %v, want %v", c, i, dx[i], w)
			}
		}
		if dx[rows*c] != 9 {
			t.Fatalf("ExpScaleSubRows c=%d wrote past dx", c)
		}
		m := make([]float32, rows)
		sum := make([]float64, rows)
		v.RowMaxExpSum(x, rows, c, m, sum)
		for row := range rows {
			xs := x[row*c : row*c+c]
			if w := MaxGeneric(xs); m[row] != w {
				t.Fatalf("RowMaxExpSum c=%d row %d: max %v, want %v", c, row, m[row], w)
			}
			var w float64
			for _, xv := range xs {
				w += math.Exp(float64(xv - m[row]))
			}
			if math.Abs(sum[row]-w) > 1e-6*w {
				t.Fatalf("RowMaxExpSum c=%d row %d: sum %v, want %v", c, row, sum[row], w)
			}
		}
	}
}

// TestAdamVariants checks every variant's Adam step against AdamGeneric
// bit for bit: lengths around the vector widths (masked tails), with and
// without weight decay, a -0 gradient (kept by the loop without decay),
// and non-finite values.
func TestAdamVariants(t *testing.T) {
	for _, v := range Variants() {
		t.Run(v.Name, func(t *testing.T) {
			if !v.Usable() {
				t.Skipf("%s: not supported by this CPU", v.Name)
			}
			r := rand.New(rand.NewPCG(3, 4))
			for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100, 1001} {
				for _, wd := range []float32{0, 5e-4} {
					p, g, m, vv := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
					for i := range p {
						p[i] = r.Float32()*2 - 1
						g[i] = (r.Float32()*2 - 1) * 0.1
						m[i] = (r.Float32()*2 - 1) * 0.01
						vv[i] = r.Float32() * 1e-4
					}
					if n > 3 {
						g[1] = float32(math.Copysign(0, -1))
						m[1], vv[1] = 0, 0
						g[2] = float32(math.Inf(1))
						p[3] = float32(math.NaN())
					}
					wp, wg, wm, wv := clone(p), clone(g), clone(m), clone(vv)
					AdamGeneric(wp, wg, wm, wv, 0.9, 0.999, 1e-8, wd, 0.01/0.19, 0.0447)
					v.Adam(p, g, m, vv, 0.9, 0.999, 1e-8, wd, 0.01/0.19, 0.0447)
					for _, c := range []struct {
						name      string
						got, want []float32
					}{{"p", p, wp}, {"m", m, wm}, {"v", vv, wv}} {
						for i := range c.got {
							if math.Float32bits(c.got[i]) != math.Float32bits(c.want[i]) {
								t.Fatalf("adam n=%d wd=%g: %s[%d] = %v (%#x), want %v (%#x)", n, wd, c.name, i, c.got[i], math.Float32bits(c.got[i]), c.want[i], math.Float32bits(c.want[i]))
							}
						}
					}
				}
			}
		})
	}
}

func clone(x []float32) []float32 { return append([]float32(nil), x...) }

// TestAdamShort: every variant refuses moments shorter than the
// parameters, even when their capacity would hold them.
func TestAdamShort(t *testing.T) {
	for _, v := range Variants() {
		if !v.Usable() {
			continue
		}
		p, g, v2 := make([]float32, 20), make([]float32, 20), make([]float32, 20)
		m := make([]float32, 19, 20)
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Adam over 20 parameters with 19 first moments did not panic", v.Name)
				}
			}()
			v.Adam(p, g, m, v2, 0.9, 0.999, 1e-8, 0, 0.01, 0.03)
		}()
	}
}

// BenchmarkAdam times one Adam step per variant over 64K parameters
// (1 MiB of state: in L2) and 1M (16 MiB: from L3 and memory).
func BenchmarkAdam(b *testing.B) {
	for _, n := range []int{1 << 16, 1 << 20} {
		p, g, m, v := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range p {
			p[i], g[i] = 0.5, 0.01
		}
		for _, vr := range Variants() {
			if !vr.Usable() {
				continue
			}
			b.Run(fmt.Sprintf("%s/n=%d", vr.Name, n), func(b *testing.B) {
				b.SetBytes(int64(7 * 4 * n)) // read p, g, m, v; write p, m, v
				for b.Loop() {
					vr.Adam(p, g, m, v, 0.9, 0.999, 1e-8, 5e-4, 0.01, 0.03)
				}
			})
		}
	}
}
