//go:build !purego

package kern

import "unsafe"

//go:generate sh -c "cd _asm && go run . -out ../asm_amd64.s -stubs ../asm_amd64.go -pkg kern"

const haveAsm = true

// SpmmPrefetch is how many edges ahead the SpMM row kernels prefetch
// (into L2, PREFETCHT1) the row they will gather. Measured on the 1M-node,
// 16M-entry R-MAT graph x [1M x 128] (Zen 4, 2 threads): 2: 300 ms, 4:
// 275, 8: 240, 16: 220-230, 32: 230 (PREFETCHT0: 290-320 ms at best).
var SpmmPrefetch = 16

// The assembly variants, best first. Each entry wraps the generated
// kernels (asm_amd64.s) in the bounds checks the assembly does not do.
func init() {
	avx512 := Variant{
		Name: "avx512",
		Axpy: func(alpha float32, x, y []float32) { n := min(len(x), len(y)); axpyAVX512(alpha, x[:n], y[:n]) },
		Axpy4: func(a0, a1, a2, a3 float32, x0, x1, x2, x3, y []float32) {
			n := len(y)
			axpy4AVX512(a0, a1, a2, a3, x0[:n], x1[:n], x2[:n], x3[:n], y)
		},
		Add:  func(x, y []float32) { n := min(len(x), len(y)); addAVX512(x[:n], y[:n]) },
		Add4: func(x0, x1, x2, x3, y []float32) { n := len(y); add4AVX512(x0[:n], x1[:n], x2[:n], x3[:n], y) },
		Dot:  func(x, y []float32) float32 { n := min(len(x), len(y)); return dotAVX512(x[:n], y[:n]) },
		Scal: scalAVX512,
		Zero: zeroNTAVX512,
		AddRow: func(a, b, out []float32, rows, c int) {
			checkRows(rows, c, [][]float32{a, out}, -1)
			if rows > 0 && c > 0 {
				addRowAVX512(a, b[:c], out, rows, c)
			}
		},
		SubRows: func(x, out []float32, rows, c int, v []float32) {
			checkRows(rows, c, [][]float32{x, out}, len(v))
			if rows > 0 && c > 0 {
				subRowsAVX512(x, out, rows, c, v)
			}
		},
		RowMaxExpSum: func(x []float32, rows, c int, m []float32, sum []float64) {
			checkRows(rows, c, [][]float32{x}, min(len(m), len(sum)))
			if rows > 0 && c > 0 {
				rowMaxExpSumAVX512(x, rows, c, m, sum)
			}
		},
		RowSumF64: func(x []float32, rows, c int, sum []float64) {
			checkRows(rows, c, [][]float32{x}, len(sum))
			if rows > 0 && c > 0 {
				rowSumF64AVX512(x, rows, c, sum)
			}
		},
		ExpScaleSubRows: func(y, dy, dx []float32, rows, c int, sc []float32) {
			checkRows(rows, c, [][]float32{y, dy, dx}, len(sc))
			if rows > 0 && c > 0 {
				expScaleSubRowsAVX512(y, dy, dx, rows, c, sc)
			}
		},
		Adam:     adamWith(adamAVX512, adamWDAVX512),
		Relu:     func(x, out []float32) { reluAVX512(x[:len(out)], out) },
		ReluGrad: func(dy, y, out []float32) { n := len(out); reluGradAVX512(dy[:n], y[:n], out) },
		AddTo:    func(a, b, out []float32) { n := len(out); addToAVX512(a[:n], b[:n], out) },
		MulTo:    func(a, b, out []float32) { n := len(out); mulToAVX512(a[:n], b[:n], out) },
		AccF64: func(acc []float64, x []float32) {
			done := len(x) &^ 15
			accF64AVX512(acc[:len(x)], x[:done])
			AccF64Generic(acc[done:len(x)], x[done:])
		},
		PackPanels: func(dst, src []float32, lds, rows, nr, panels, pstride int) {
			checkPack(dst, src, lds, rows, nr, panels, pstride, 16)
			if rows > 0 && panels > 0 {
				packPanelsAVX512(dst, src, lds, rows, nr, panels, pstride)
			}
		},
		Dropout: func(x, out, mask []float32, seed, key, thr uint64, scale float32) {
			dropoutAsm(dropoutAVX512, 16, x, out, mask, seed, key, thr, scale)
		},
		SpmmRow: func(dst, x []float32, ldx int, idx []int32, w []float32, acc bool) {
			spmmRowAVX512(dst, x, ldx, idx, spmmW(w, idx), b2i(acc), SpmmPrefetch)
		},
		Gemm:      []GemmKernel{gemmK(12, 32, 16, gemm12x32AVX512), gemmK(12, 16, 16, gemm12x16AVX512), gemmK(8, 48, 16, gemm8x48AVX512)},
		FMAPeak:   fmaPeakAVX512,
		PeakFLOPs: 12 * 16 * 2,
		requires: func(f Features) (bool, string) {
			return need(f.AVX512F, "AVX-512F", f.AVX512DQ, "AVX-512DQ", f.AVX2, "AVX2", f.FMA3, "FMA3", f.BMI2, "BMI2")
		},
	}
	avx2 := Variant{
		Name: "avx2",
		Axpy: func(alpha float32, x, y []float32) { n := min(len(x), len(y)); axpyAVX2(alpha, x[:n], y[:n]) },
		Axpy4: func(a0, a1, a2, a3 float32, x0, x1, x2, x3, y []float32) {
			n := len(y)
			axpy4AVX2(a0, a1, a2, a3, x0[:n], x1[:n], x2[:n], x3[:n], y)
		},
		Add:  func(x, y []float32) { n := min(len(x), len(y)); addAVX2(x[:n], y[:n]) },
		Add4: func(x0, x1, x2, x3, y []float32) { n := len(y); add4AVX2(x0[:n], x1[:n], x2[:n], x3[:n], y) },
		Dot:  func(x, y []float32) float32 { n := min(len(x), len(y)); return dotAVX2(x[:n], y[:n]) },
		Scal: scalAVX2,
		Zero: zeroNTAVX2,
		AddRow: func(a, b, out []float32, rows, c int) {
			checkRows(rows, c, [][]float32{a, out}, -1)
			if rows > 0 && c > 0 {
				addRowAVX2(a, b[:c], out, rows, c)
			}
		},
		SubRows: func(x, out []float32, rows, c int, v []float32) {
			checkRows(rows, c, [][]float32{x, out}, len(v))
			if rows > 0 && c > 0 {
				subRowsAVX2(x, out, rows, c, v)
			}
		},
		RowMaxExpSum: func(x []float32, rows, c int, m []float32, sum []float64) {
			checkRows(rows, c, [][]float32{x}, min(len(m), len(sum)))
			if rows > 0 && c > 0 {
				rowMaxExpSumAVX2(x, rows, c, m, sum)
			}
		},
		RowSumF64: func(x []float32, rows, c int, sum []float64) {
			checkRows(rows, c, [][]float32{x}, len(sum))
			if rows > 0 && c > 0 {
				rowSumF64AVX2(x, rows, c, sum)
			}
		},
		ExpScaleSubRows: func(y, dy, dx []float32, rows, c int, sc []float32) {
			checkRows(rows, c, [][]float32{y, dy, dx}, len(sc))
			if rows > 0 && c > 0 {
				expScaleSubRowsAVX2(y, dy, dx, rows, c, sc)
			}
		},
		Adam:     adamWith(adamAVX2, adamWDAVX2),
		Relu:     func(x, out []float32) { reluAVX2(x[:len(out)], out) },
		ReluGrad: func(dy, y, out []float32) { n := len(out); reluGradAVX2(dy[:n], y[:n], out) },
		AddTo:    func(a, b, out []float32) { n := len(out); addToAVX2(a[:n], b[:n], out) },
		MulTo:    func(a, b, out []float32) { n := len(out); mulToAVX2(a[:n], b[:n], out) },
		AccF64: func(acc []float64, x []float32) {
			done := len(x) &^ 7
			accF64AVX2(acc[:len(x)], x[:done])
			AccF64Generic(acc[done:len(x)], x[done:])
		},
		PackPanels: func(dst, src []float32, lds, rows, nr, panels, pstride int) {
			checkPack(dst, src, lds, rows, nr, panels, pstride, 8)
			if rows > 0 && panels > 0 {
				packPanelsAVX2(dst, src, lds, rows, nr, panels, pstride)
			}
		},
		Dropout: func(x, out, mask []float32, seed, key, thr uint64, scale float32) {
			dropoutAsm(dropoutAVX2, 8, x, out, mask, seed, key, thr, scale)
		},
		SpmmRow: func(dst, x []float32, ldx int, idx []int32, w []float32, acc bool) {
			spmmRowAVX2(dst, x, ldx, idx, spmmW(w, idx), b2i(acc), SpmmPrefetch)
		},
		Gemm:      []GemmKernel{gemmK(6, 16, 8, gemm6x16AVX2)},
		FMAPeak:   fmaPeakAVX2,
		PeakFLOPs: 12 * 8 * 2,
		requires: func(f Features) (bool, string) {
			return need(f.AVX2, "AVX2", f.FMA3, "FMA3")
		},
	}
	registry = append([]Variant{avx512, avx2}, registry...)
}

// need reports whether every flag is set and names the ones missing;
// args alternate flag, name.
func need(args ...any) (bool, string) {
	var lacks string
	for i := 0; i < len(args); i += 2 {
		if !args[i].(bool) {
			if lacks != "" {
				lacks += "+"
			}
			lacks += args[i+1].(string)
		}
	}
	return lacks == "", lacks
}

// dropoutAsm runs an assembly dropout over the whole vectors of out and
// DropoutGeneric over the rest.
func dropoutAsm(asm func(x, out, mask []float32, z0, thr uint64, scale float32, nt int), w int,
	x, out, mask []float32, seed, key, thr uint64, scale float32) {
	n := len(out)
	x = x[:n]
	nt := 0
	if len(mask) > 0 {
		mask = mask[:n]
		// a large mask goes around the caches (the model reads it in the
		// backward pass, long after), when its vectors are aligned
		if n >= 1<<16 && uintptr(unsafe.Pointer(&mask[0]))%uintptr(4*w) == 0 {
			nt = 1
		}
	}
	asm(x, out, mask, seed+(key+1)*0x9E3779B97F4A7C15, thr, scale, nt)
	if done := n &^ (w - 1); done < n {
		var mt []float32
		if len(mask) > 0 {
			mt = mask[done:]
		}
		DropoutGeneric(x[done:], out[done:], mt, seed, key+uint64(done), thr, scale)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// spmmW checks SpmmRow's weights: none, or at least one per edge.
func spmmW(w []float32, idx []int32) []float32 {
	if len(w) == 0 {
		return nil
	}
	return w[:len(idx)]
}

// gemmK wraps an assembly micro-kernel in gemmCheck.
func gemmK(mr, nr, vw int, asm func(k int, a []float32, rs, cs int, b []float32, ldb int, c []float32, ldc, cols int, alpha float32, load int)) GemmKernel {
	return GemmKernel{MR: mr, NR: nr, VW: vw, Raw: asm, Fn: func(k int, a []float32, rs, cs int, b []float32, ldb int, c []float32, ldc, cols int, alpha float32, load bool) {
		gemmCheck(mr, nr, vw, k, a, rs, cs, b, ldb, c, ldc, cols)
		asm(k, a, rs, cs, b, ldb, c, ldc, cols, alpha, b2i(load))
	}}
}

// gemmCheck panics unless every element a micro-kernel call reads or
// writes is inside its slice (the assembly does not check).
func gemmCheck(mr, nr, vw, k int, a []float32, rs, cs int, b []float32, ldb int, c []float32, ldc, cols int) {
	if k < 0 || rs < 0 || cs < 0 || ldb < nr || ldc < cols {
		panic("kern: gemm: negative size or stride, ldb < NR or ldc < cols")
	}
	if cols <= nr-vw || cols > nr {
		panic("kern: gemm: cols outside (NR-VW, NR]")
	}
	if k > 0 && (mr-1)*rs+(k-1)*cs >= len(a) {
		panic("kern: gemm: a too short")
	}
	if k > 0 && (k-1)*ldb+nr > len(b) {
		panic("kern: gemm: b too short")
	}
	if (mr-1)*ldc+cols > len(c) {
		panic("kern: gemm: c too short")
	}
}

// adamKernel is a generated Adam kernel (see adam in _asm).
type adamKernel func(p, g, m, v []float32, b1, omb1, b2, omb2, eps, wd, step, bc2 float32)

// adamWith wraps a variant's Adam kernels, without and with the weight
// decay term, in the bounds checks and the 1-b constants the loop
// computes in float32.
func adamWith(plain, decay adamKernel) func(p, g, m, v []float32, b1, b2, eps, wd, step, bc2 float32) {
	return func(p, g, m, v []float32, b1, b2, eps, wd, step, bc2 float32) {
		n := len(p)
		checkAdam(n, g, m, v)
		g, m, v = g[:n], m[:n], v[:n]
		if n == 0 {
			return
		}
		k := plain
		if wd != 0 {
			k = decay
		}
		k(p, g, m, v, b1, 1-b1, b2, 1-b2, eps, wd, step, bc2)
	}
}
