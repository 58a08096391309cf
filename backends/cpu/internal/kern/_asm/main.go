// Command _asm generates the amd64 assembly of package kern with avo
// (github.com/mmcloughlin/avo v0.5.0): the AVX2+FMA and AVX-512 variants of
// the CPU backend's inner loops. It lives in its own module so that the
// main module does not depend on avo; the generated files are committed.
//
// Regenerate with `go generate ./backends/cpu/internal/kern` (see the
// //go:generate line in kern_amd64.go), which runs, in this directory:
//
//	go run . -out ../asm_amd64.s -stubs ../asm_amd64.go -pkg kern
//
// Every kernel is written once here, parameterised by the vector ISA, and
// emitted twice: with YMM registers (suffix AVX2, 8 floats per vector,
// masked tails through VMASKMOVPS) and with ZMM registers (suffix AVX512,
// 16 floats per vector, masked tails through opmask registers). Each
// stub's doc comment states the reference Go loop the kernel implements.
package main

import (
	"fmt"
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// isa describes one vector instruction set.
type isa struct {
	suffix string // AVX2 or AVX512
	w      int    // float32 lanes per vector
	vec    func() VecVirtual
}

var (
	avx2   = isa{suffix: "AVX2", w: 8, vec: YMM}
	avx512 = isa{suffix: "AVX512", w: 16, vec: ZMM}
)

func (s isa) bytes() int           { return 4 * s.w }
func (s isa) is512() bool          { return s.w == 16 }
func (s isa) name(b string) string { return b + s.suffix }

// zero clears v (VPXORD for ZMM: VXORPS on ZMM needs AVX512DQ).
func (s isa) zero(v VecVirtual) {
	if s.is512() {
		VPXORD(v, v, v)
	} else {
		VXORPS(v, v, v)
	}
}

// maskTab backs the AVX2 tail masks: 8 all-ones lanes, then 8 zero lanes;
// the mask for r < 8 lanes is the 8 lanes starting at maskTab + 4*(8-r).
var maskTab Mem

func declareMaskTab() {
	maskTab = GLOBL("maskTab", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		v := uint32(0)
		if i < 8 {
			v = 0xffffffff
		}
		DATA(4*i, U32(v))
	}
}

// tailMask prepares a mask for the r (< w) remaining lanes: an opmask K
// for AVX-512, a YMM lane mask for AVX2. r is clobbered on AVX2 only.
type tail struct {
	s isa
	k Register   // AVX-512
	m VecVirtual // AVX2
}

func newTail(s isa, r Register) tail {
	t := tail{s: s}
	if s.is512() {
		ones := GP64()
		MOVQ(I32(-1), ones)
		bits := GP64()
		BZHIQ(r, ones, bits)
		t.k = K()
		KMOVW(bits.As32(), t.k)
		return t
	}
	p := GP64()
	LEAQ(maskTab, p)
	off := GP64()
	MOVQ(U32(8), off)
	SUBQ(r, off)
	t.m = YMM()
	VMOVUPS(Mem{Base: p, Index: off, Scale: 4}, t.m)
	return t
}

// load reads the masked lanes at m into v (the others become 0).
func (t tail) load(m Mem, v VecVirtual) {
	if t.s.is512() {
		VMOVUPS_Z(m, t.k, v)
	} else {
		VMASKMOVPS(m, t.m, v)
	}
}

// store writes the masked lanes of v to m.
func (t tail) store(v VecVirtual, m Mem) {
	if t.s.is512() {
		VMOVUPS(v, t.k, m)
	} else {
		VMASKMOVPS(v, t.m, m)
	}
}

// hsum adds the lanes of v into the low lane of an XMM register.
func (s isa) hsum(v VecVirtual) VecVirtual {
	y := v
	if s.is512() {
		hi := YMM()
		VEXTRACTF64X4(U8(1), v, hi)
		y = YMM()
		VADDPS(hi, v.AsY(), y)
	}
	x := XMM()
	VEXTRACTF128(U8(1), y, x)
	lo := XMM()
	VADDPS(x, y.AsX(), lo)
	sh := XMM()
	VMOVHLPS(lo, lo, sh)
	VADDPS(sh, lo, lo)
	VSHUFPS(U8(0x55), lo, lo, sh)
	VADDSS(sh, lo, lo)
	return lo
}

func main() {
	ConstraintExpr("!purego")
	declareMaskTab()
	declareDropTab()
	declareExpTab()
	for _, s := range []isa{avx2, avx512} {
		dropout(s)
		zeroNT(s)
		packPanels(s)
		relu(s)
		reluGrad(s)
		binop(s, "addTo", "a[i] + b[i]", func(a, b Op, dst VecVirtual) { VADDPS(b, a, dst) })
		binop(s, "mulTo", "a[i] * b[i]", func(a, b Op, dst VecVirtual) { VMULPS(b, a, dst) })
		accF64(s)
		addRow(s)
		subRows(s)
		rowMaxExpSum(s)
		rowSumF64(s)
		expScaleSubRows(s)
		axpy(s)
		axpy4(s)
		add(s)
		add4(s)
		dot(s)
		scal(s)
		spmmRow(s)
		peak(s)
		adam(s, false)
		adam(s, true)
	}
	gemmKernel(avx2, 6, 2)
	gemmKernel(avx512, 12, 2)
	gemmKernel(avx512, 12, 1)
	gemmKernel(avx512, 8, 3)
	Generate()
}

// streamLoop emits the body of an elementwise loop over n floats: blocks
// of unroll vectors, then single vectors, then a masked tail. body(off,
// v) processes the vector at byte offset off (relative to the advancing
// pointers) with the load/store helpers of its kind; ptrs are advanced
// after each block.
func streamLoop(s isa, n Register, ptrs []Register, unroll int, body func(off int, full bool, t tail)) {
	blk, one, tl, done := s.name("blk"), s.name("one"), s.name("tail"), s.name("done")
	_ = blk
	Label(blk + "loop")
	CMPQ(n, U32(unroll*s.w))
	JL(LabelRef(one + "loop"))
	for i := 0; i < unroll; i++ {
		body(i*s.bytes(), true, tail{})
	}
	for _, p := range ptrs {
		ADDQ(U32(unroll*s.bytes()), p)
	}
	SUBQ(U32(unroll*s.w), n)
	JMP(LabelRef(blk + "loop"))

	Label(one + "loop")
	CMPQ(n, U32(s.w))
	JL(LabelRef(tl))
	body(0, true, tail{})
	for _, p := range ptrs {
		ADDQ(U32(s.bytes()), p)
	}
	SUBQ(U32(s.w), n)
	JMP(LabelRef(one + "loop"))

	Label(tl)
	TESTQ(n, n)
	JZ(LabelRef(done))
	t := newTail(s, n)
	body(0, false, t)
	Label(done)
}

// paramAddr is the stack address of a scalar argument, for instructions
// that take it straight from memory (MOVSS cannot reach X16-X31).
func paramAddr(name string) Mem {
	b, err := Param(name).Resolve()
	if err != nil {
		panic(err)
	}
	return b.Addr
}

// bits returns log2 of a power of two.
func bits(w int) int {
	n := 0
	for 1<<n < w {
		n++
	}
	return n
}

func ret(s isa) {
	VZEROUPPER()
	RET()
}

func axpy(s isa) {
	TEXT(s.name("axpy"), NOSPLIT, "func(alpha float32, x, y []float32)")
	Doc(s.name("axpy")+" computes y[i] += alpha * x[i] for i < len(y); len(x) >= len(y).",
		"",
		"Reference loop:",
		"",
		"\tfor i := range y {",
		"\t\ty[i] += alpha * x[i]",
		"\t}")
	av := s.vec()
	VBROADCASTSS(paramAddr("alpha"), av)
	x := Load(Param("x").Base(), GP64())
	y := Load(Param("y").Base(), GP64())
	n := Load(Param("y").Len(), GP64())
	streamLoop(s, n, []Register{x, y}, 4, func(off int, full bool, t tail) {
		v := s.vec()
		xm, ym := Mem{Base: x, Disp: off}, Mem{Base: y, Disp: off}
		if full {
			VMOVUPS(ym, v)
			VFMADD231PS(xm, av, v)
			VMOVUPS(v, ym)
			return
		}
		xv := s.vec()
		t.load(xm, xv)
		t.load(ym, v)
		VFMADD231PS(xv, av, v)
		t.store(v, ym)
	})
	ret(s)
}

func axpy4(s isa) {
	TEXT(s.name("axpy4"), NOSPLIT, "func(a0, a1, a2, a3 float32, x0, x1, x2, x3, y []float32)")
	Doc(s.name("axpy4")+" computes four rank-1 updates of y in one pass; every x is at least as long as y.",
		"",
		"Reference loop (the kernel fuses each product into the sum, in the order a0, a1, a2, a3):",
		"",
		"\tfor i := range y {",
		"\t\ty[i] += (a0*x0[i] + a1*x1[i]) + (a2*x2[i] + a3*x3[i])",
		"\t}")
	var av [4]VecVirtual
	for i := range av {
		av[i] = s.vec()
		VBROADCASTSS(paramAddr(fmt.Sprintf("a%d", i)), av[i])
	}
	var xs [4]Register
	for i := range xs {
		xs[i] = Load(Param(fmt.Sprintf("x%d", i)).Base(), GP64())
	}
	y := Load(Param("y").Base(), GP64())
	n := Load(Param("y").Len(), GP64())
	streamLoop(s, n, []Register{xs[0], xs[1], xs[2], xs[3], y}, 2, func(off int, full bool, t tail) {
		v := s.vec()
		ym := Mem{Base: y, Disp: off}
		if full {
			VMOVUPS(ym, v)
			for i := range xs {
				VFMADD231PS(Mem{Base: xs[i], Disp: off}, av[i], v)
			}
			VMOVUPS(v, ym)
			return
		}
		t.load(ym, v)
		for i := range xs {
			xv := s.vec()
			t.load(Mem{Base: xs[i], Disp: off}, xv)
			VFMADD231PS(xv, av[i], v)
		}
		t.store(v, ym)
	})
	ret(s)
}

func add(s isa) {
	TEXT(s.name("add"), NOSPLIT, "func(x, y []float32)")
	Doc(s.name("add")+" computes y[i] += x[i] for i < len(y); len(x) >= len(y).",
		"",
		"Reference loop:",
		"",
		"\tfor i := range y {",
		"\t\ty[i] += x[i]",
		"\t}")
	x := Load(Param("x").Base(), GP64())
	y := Load(Param("y").Base(), GP64())
	n := Load(Param("y").Len(), GP64())
	streamLoop(s, n, []Register{x, y}, 4, func(off int, full bool, t tail) {
		v := s.vec()
		xm, ym := Mem{Base: x, Disp: off}, Mem{Base: y, Disp: off}
		if full {
			VMOVUPS(ym, v)
			VADDPS(xm, v, v)
			VMOVUPS(v, ym)
			return
		}
		xv := s.vec()
		t.load(xm, xv)
		t.load(ym, v)
		VADDPS(xv, v, v)
		t.store(v, ym)
	})
	ret(s)
}

func add4(s isa) {
	TEXT(s.name("add4"), NOSPLIT, "func(x0, x1, x2, x3, y []float32)")
	Doc(s.name("add4")+" adds four rows into y in one pass; every x is at least as long as y.",
		"",
		"Reference loop:",
		"",
		"\tfor i := range y {",
		"\t\ty[i] += (x0[i] + x1[i]) + (x2[i] + x3[i])",
		"\t}")
	var xs [4]Register
	for i := range xs {
		xs[i] = Load(Param(fmt.Sprintf("x%d", i)).Base(), GP64())
	}
	y := Load(Param("y").Base(), GP64())
	n := Load(Param("y").Len(), GP64())
	streamLoop(s, n, []Register{xs[0], xs[1], xs[2], xs[3], y}, 2, func(off int, full bool, t tail) {
		var v [4]VecVirtual
		for i := range v {
			v[i] = s.vec()
			m := Mem{Base: xs[i], Disp: off}
			if full {
				VMOVUPS(m, v[i])
			} else {
				t.load(m, v[i])
			}
		}
		VADDPS(v[1], v[0], v[0])
		VADDPS(v[3], v[2], v[2])
		VADDPS(v[2], v[0], v[0])
		ym := Mem{Base: y, Disp: off}
		if full {
			VADDPS(ym, v[0], v[0])
			VMOVUPS(v[0], ym)
			return
		}
		yv := s.vec()
		t.load(ym, yv)
		VADDPS(yv, v[0], v[0])
		t.store(v[0], ym)
	})
	ret(s)
}

func dot(s isa) {
	TEXT(s.name("dot"), NOSPLIT, "func(x, y []float32) float32")
	Doc(s.name("dot")+" returns the sum of x[i]*y[i] for i < len(x); len(y) >= len(x).",
		"",
		"Reference loop (the kernel keeps 4 vector partial sums and fuses the products):",
		"",
		"\tvar s float32",
		"\tfor i := range x {",
		"\t\ts += x[i] * y[i]",
		"\t}",
		"\treturn s")
	x := Load(Param("x").Base(), GP64())
	y := Load(Param("y").Base(), GP64())
	n := Load(Param("x").Len(), GP64())
	var acc [4]VecVirtual
	for i := range acc {
		acc[i] = s.vec()
		s.zero(acc[i])
	}
	blk := 0
	streamLoop(s, n, []Register{x, y}, 4, func(off int, full bool, t tail) {
		v := s.vec()
		xm, ym := Mem{Base: x, Disp: off}, Mem{Base: y, Disp: off}
		a := acc[blk%4]
		blk++
		if full {
			VMOVUPS(xm, v)
			VFMADD231PS(ym, v, a)
			return
		}
		yv := s.vec()
		t.load(xm, v)
		t.load(ym, yv)
		VFMADD231PS(yv, v, a)
	})
	VADDPS(acc[1], acc[0], acc[0])
	VADDPS(acc[3], acc[2], acc[2])
	VADDPS(acc[2], acc[0], acc[0])
	r := s.hsum(acc[0])
	Store(r, ReturnIndex(0))
	ret(s)
}

func scal(s isa) {
	TEXT(s.name("scal"), NOSPLIT, "func(alpha float32, x []float32)")
	Doc(s.name("scal")+" computes x[i] *= alpha.",
		"",
		"Reference loop:",
		"",
		"\tfor i := range x {",
		"\t\tx[i] *= alpha",
		"\t}")
	av := s.vec()
	VBROADCASTSS(paramAddr("alpha"), av)
	x := Load(Param("x").Base(), GP64())
	n := Load(Param("x").Len(), GP64())
	streamLoop(s, n, []Register{x}, 4, func(off int, full bool, t tail) {
		v := s.vec()
		xm := Mem{Base: x, Disp: off}
		if full {
			VMULPS(xm, av, v)
			VMOVUPS(v, xm)
			return
		}
		t.load(xm, v)
		VMULPS(v, av, v)
		t.store(v, xm)
	})
	ret(s)
}

// spmmRow emits the SpMM row kernel: dst = (acc ? dst : 0) + sum over the
// row's edges of w[e] * x[idx[e]*ldx : ...] (w empty: weight 1). Columns
// are processed in blocks of 8 vectors held in registers across all
// edges, the last 1..8 vectors in one more pass with the last vector
// under a lane mask (40 columns: one pass of 3 vectors), so every element
// of dst is loaded and stored once per call and the edge loop reads only
// x.
func spmmRow(s isa) {
	TEXT(s.name("spmmRow"), NOSPLIT, "func(dst, x []float32, ldx int, idx []int32, w []float32, acc, pd int)")
	Doc(s.name("spmmRow")+" accumulates gathered rows of x into dst: for every column j < len(dst),",
		"dst[j] = (dst[j] if acc != 0 else 0) + sum over e < len(idx) of w[e] * x[int(idx[e])*ldx + j]",
		"(weight 1 when len(w) == 0). The caller guarantees that every gathered row",
		"x[idx[e]*ldx : idx[e]*ldx+len(dst)] is in bounds and that len(w) is 0 or len(idx).",
		"While it adds edge e it prefetches the row of edge e+pd (pd >= 1); when at",
		"least two blocks of 8 vectors remain, the prefetch covers both blocks, so the",
		"second block's pass finds its half of each row in cache.",
		"",
		"Reference loop (the kernel sums in the same edge order and fuses the products):",
		"",
		"\tfor j := range dst {",
		"\t\tvar s float32",
		"\t\tif acc != 0 {",
		"\t\t\ts = dst[j]",
		"\t\t}",
		"\t\tfor e, i := range idx {",
		"\t\t\ts += w[e] * x[int(i)*ldx+j] // or x[...] alone when w is empty",
		"\t\t}",
		"\t\tdst[j] = s",
		"\t}")
	dst := Load(Param("dst").Base(), GP64())
	cols := Load(Param("dst").Len(), GP64())
	x := Load(Param("x").Base(), GP64())
	ldx := Load(Param("ldx"), GP64())
	SHLQ(U8(2), ldx)
	idx := Load(Param("idx").Base(), GP64())
	ne := Load(Param("idx").Len(), GP64())
	w := Load(Param("w").Base(), GP64())
	nw := Load(Param("w").Len(), GP64())
	acc := Load(Param("acc"), GP64())

	// One column block of nv vectors, the last under the mask t when t is
	// set; wide prefetches twice the block's bytes of each row.
	block := func(label string, nv int, weighted, wide bool, t *tail) {
		n := nv
		masked := func(i int) bool { return t != nil && i == nv-1 }
		a := make([]VecVirtual, n)
		for i := range a {
			a[i] = s.vec()
		}
		// start values
		TESTQ(acc, acc)
		JZ(LabelRef(label + "zero"))
		for i := range a {
			m := Mem{Base: dst, Disp: i * s.bytes()}
			if masked(i) {
				t.load(m, a[i])
			} else {
				VMOVUPS(m, a[i])
			}
		}
		JMP(LabelRef(label + "edges"))
		Label(label + "zero")
		for i := range a {
			s.zero(a[i])
		}
		Label(label + "edges")
		e := GP64()
		XORQ(e, e)
		row := GP64()
		wv := s.vec()
		var tmp VecVirtual
		if t != nil {
			tmp = s.vec()
		}
		pe := GP64() // e + pd
		MOVQ(paramAddr("pd"), pe)
		pfBytes := n * s.bytes()
		if wide {
			pfBytes *= 2
		}
		body := func(prefetch bool) {
			MOVLQSX(Mem{Base: idx, Index: e, Scale: 4}, row)
			IMULQ(ldx, row)
			ADDQ(x, row)
			if prefetch {
				pr := GP64()
				MOVLQSX(Mem{Base: idx, Index: pe, Scale: 4}, pr)
				IMULQ(ldx, pr)
				ADDQ(x, pr)
				for l := 0; l < pfBytes; l += 64 {
					PREFETCHT1(Mem{Base: pr, Disp: l})
				}
				INCQ(pe)
			}
			if weighted {
				VBROADCASTSS(Mem{Base: w, Index: e, Scale: 4}, wv)
			}
			for i := range a {
				m := Mem{Base: row, Disp: i * s.bytes()}
				src := Op(m)
				if masked(i) {
					t.load(m, tmp)
					src = tmp
				}
				if weighted {
					VFMADD231PS(src, wv, a[i])
				} else {
					VADDPS(src, a[i], a[i])
				}
			}
			INCQ(e)
		}
		// edges with a prefetch target, then the last few without
		lim := GP64()
		MOVQ(ne, lim)
		SUBQ(pe, lim)
		Label(label + "pf")
		CMPQ(e, lim)
		JGE(LabelRef(label + "rest"))
		body(true)
		JMP(LabelRef(label + "pf"))
		Label(label + "rest")
		CMPQ(e, ne)
		JGE(LabelRef(label + "store"))
		body(false)
		JMP(LabelRef(label + "rest"))
		Label(label + "store")
		for i := range a {
			m := Mem{Base: dst, Disp: i * s.bytes()}
			if masked(i) {
				t.store(a[i], m)
			} else {
				VMOVUPS(a[i], m)
			}
		}
	}

	for _, weighted := range []bool{false, true} {
		p := "u"
		if weighted {
			p = "w"
		}
		if !weighted {
			TESTQ(nw, nw)
			JNZ(LabelRef("w_start"))
		} else {
			Label("w_start")
		}
		// blocks of 8 whole vectors while more than 8 remain
		lb := p + "8_"
		Label(lb + "loop")
		CMPQ(cols, U32(8*s.w))
		JLE(LabelRef(p + "rest"))
		CMPQ(cols, U32(16*s.w))
		JL(LabelRef(lb + "narrow"))
		block(lb+"w", 8, weighted, true, nil)
		JMP(LabelRef(lb + "advance"))
		Label(lb + "narrow")
		block(lb, 8, weighted, false, nil)
		Label(lb + "advance")
		ADDQ(U32(8*s.bytes()), dst)
		ADDQ(U32(8*s.bytes()), x)
		SUBQ(U32(8*s.w), cols)
		JMP(LabelRef(lb + "loop"))
		// the rest, 1..8 vectors, in one pass: the last vector masked
		// (all lanes when the width is whole)
		Label(p + "rest")
		TESTQ(cols, cols)
		JZ(LabelRef(p + "_done"))
		nvec, lanes := GP64(), GP64()
		MOVQ(cols, nvec)
		ADDQ(U32(s.w-1), nvec)
		SHRQ(U8(bits(s.w)), nvec)
		MOVQ(cols, lanes)
		DECQ(lanes)
		ANDQ(U32(s.w-1), lanes)
		INCQ(lanes)
		t := newTail(s, lanes)
		for k := 1; k <= 8; k++ {
			lk := fmt.Sprintf("%sr%d_", p, k)
			CMPQ(nvec, U32(k))
			JNE(LabelRef(lk + "skip"))
			block(lk, k, weighted, false, &t)
			JMP(LabelRef(p + "_done"))
			Label(lk + "skip")
		}
		Label(p + "_done")
		ret(s)
	}
}

// peak emits a register-only FMA loop for measuring the FMA peak.
func peak(s isa) {
	const chains = 12
	TEXT(s.name("fmaPeak"), NOSPLIT, "func(n int)")
	Doc(s.name("fmaPeak")+fmt.Sprintf(" runs n iterations of %d independent vector FMAs", chains),
		fmt.Sprintf("(%d float32 FLOPs per iteration), touching no memory.", chains*s.w*2))
	n := Load(Param("n"), GP64())
	a := make([]VecVirtual, chains)
	for i := range a {
		a[i] = s.vec()
		s.zero(a[i])
	}
	b := s.vec()
	s.zero(b)
	Label("loop")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	for i := range a {
		VFMADD231PS(b, b, a[i])
	}
	DECQ(n)
	JMP(LabelRef("loop"))
	Label("done")
	ret(s)
}

// gemmKernel emits the GEMM micro-kernel for an mr x (nv vectors) tile:
//
//	C[i][j] = (load ? C[i][j] : 0) + alpha * sum over p < k of A(i, p) * B[p*ldb + j]
//
// for j < cols (cols > nr - lanes: only the last vector of a row may be
// partial, stored and loaded under a mask). A(i, p) is read in place at
// a + i*rs + p*cs (elements), so both A and A^T are handled without
// packing; B is a packed panel (ldb = nr) or in place; C has row stride
// ldc.
func gemmKernel(s isa, mr, nv int) {
	nr := nv * s.w
	name := s.name(fmt.Sprintf("gemm%dx%d", mr, nr))
	TEXT(name, NOSPLIT, "func(k int, a []float32, rs, cs int, b []float32, ldb int, c []float32, ldc, cols int, alpha float32, load int)")
	Doc(fmt.Sprintf("%s is the %dx%d GEMM micro-kernel. For i < %d and j < cols (%d < cols <= %d):", name, mr, nr, mr, nr-s.w, nr),
		"",
		"\tc[i*ldc+j] = (c[i*ldc+j] if load != 0 else 0) + alpha * sum over p < k of a[i*rs+p*cs] * b[p*ldb+j]",
		"",
		"The caller guarantees every index is in bounds.",
		"",
		"Reference loop (the kernel sums over p in order, fusing each product):",
		"",
		fmt.Sprintf("\tfor i := range %d {", mr),
		"\t\tfor j := range cols {",
		"\t\t\tvar s float32",
		"\t\t\tfor p := range k {",
		"\t\t\t\ts += a[i*rs+p*cs] * b[p*ldb+j]",
		"\t\t\t}",
		"\t\t\tif load != 0 {",
		"\t\t\t\tc[i*ldc+j] += alpha * s",
		"\t\t\t} else {",
		"\t\t\t\tc[i*ldc+j] = alpha * s",
		"\t\t\t}",
		"\t\t}",
		"\t}")
	k := Load(Param("k"), GP64())
	a := Load(Param("a").Base(), GP64())
	rs := Load(Param("rs"), GP64())
	SHLQ(U8(2), rs)
	cs := Load(Param("cs"), GP64())
	SHLQ(U8(2), cs)
	b := Load(Param("b").Base(), GP64())
	ldb := Load(Param("ldb"), GP64())
	SHLQ(U8(2), ldb)
	// row base pointers: rows 3q+{0,1,2} are (base_q), (base_q)(rs*1), (base_q)(rs*2)
	nb := (mr + 2) / 3
	bases := make([]Register, nb)
	bases[0] = a
	rs3 := GP64()
	LEAQ(Mem{Base: rs, Index: rs, Scale: 2}, rs3)
	for q := 1; q < nb; q++ {
		bases[q] = GP64()
		LEAQ(Mem{Base: bases[q-1], Index: rs3, Scale: 1}, bases[q])
	}
	rowMem := func(i int) Mem {
		base := bases[i/3]
		switch i % 3 {
		case 0:
			return Mem{Base: base}
		case 1:
			return Mem{Base: base, Index: rs, Scale: 1}
		}
		return Mem{Base: base, Index: rs, Scale: 2}
	}
	acc := make([][]VecVirtual, mr)
	for i := range acc {
		acc[i] = make([]VecVirtual, nv)
		for j := range acc[i] {
			acc[i][j] = s.vec()
			s.zero(acc[i][j])
		}
	}
	bv := make([]VecVirtual, nv)
	for j := range bv {
		bv[j] = s.vec()
	}
	av := s.vec()
	TESTQ(k, k)
	JZ(LabelRef("store"))
	Label("loop")
	for j := range bv {
		VMOVUPS(Mem{Base: b, Disp: j * s.bytes()}, bv[j])
	}
	for i := 0; i < mr; i++ {
		VBROADCASTSS(rowMem(i), av)
		for j := range bv {
			VFMADD231PS(bv[j], av, acc[i][j])
		}
	}
	for q := range bases {
		ADDQ(cs, bases[q])
	}
	ADDQ(ldb, b)
	DECQ(k)
	JNZ(LabelRef("loop"))

	Label("store")
	al := s.vec()
	VBROADCASTSS(paramAddr("alpha"), al)
	c := Load(Param("c").Base(), GP64())
	ldc := Load(Param("ldc"), GP64())
	SHLQ(U8(2), ldc)
	load := Load(Param("load"), GP64())
	cols := Load(Param("cols"), GP64())
	last := (nv - 1) * s.bytes()
	// store emits the stores of every row; the last vector under t when
	// masked.
	store := func(withLoad bool, t *tail) {
		for i := 0; i < mr; i++ {
			for j := range bv {
				m := Mem{Base: c, Disp: j * s.bytes()}
				masked := t != nil && j*s.bytes() == last
				if withLoad {
					if masked {
						tmp := s.vec()
						t.load(m, tmp)
						VFMADD213PS(tmp, al, acc[i][j])
					} else {
						VFMADD213PS(m, al, acc[i][j])
					}
				} else {
					VMULPS(al, acc[i][j], acc[i][j])
				}
				if masked {
					t.store(acc[i][j], m)
				} else {
					VMOVUPS(acc[i][j], m)
				}
			}
			if i < mr-1 {
				ADDQ(ldc, c)
			}
		}
		ret(s)
	}
	CMPQ(cols, U32(nr))
	JL(LabelRef("partial"))
	TESTQ(load, load)
	JZ(LabelRef("overwrite"))
	store(true, nil)
	Label("overwrite")
	store(false, nil)
	Label("partial")
	SUBQ(U32(nr-s.w), cols) // lanes of the last vector
	t := newTail(s, cols)
	TESTQ(load, load)
	JZ(LabelRef("poverwrite"))
	store(true, &t)
	Label("poverwrite")
	store(false, &t)
}

// The SplitMix64 constants of core.DropoutKeep.
const (
	golden = 0x9E3779B97F4A7C15
	mix1   = 0xBF58476D1CE4E5B9
	mix2   = 0x94D049BB133111EB
)

// dropTab holds dropout's 64-bit constants (qword offsets): even lanes
// (2j)*golden at 0, odd lanes (2j+1)*golden at 8, the per-block steps
// 8*golden at 16 and 16*golden at 17, mix1 and mix2 at 18 and 19, and
// their low and high 32 bits (for AVX2's emulated multiply) at 20..23.
var dropTab Mem

func declareDropTab() {
	dropTab = GLOBL("dropTab", RODATA|NOPTR)
	var q [24]uint64
	g := uint64(golden)
	for j := uint64(0); j < 8; j++ {
		q[j] = 2 * j * g
		q[8+j] = (2*j + 1) * g
	}
	q[16], q[17] = 8*g, 16*g
	q[18], q[19] = mix1, mix2
	q[20], q[21] = mix1&0xffffffff, mix1>>32
	q[22], q[23] = mix2&0xffffffff, mix2>>32
	for i, v := range q {
		DATA(8*i, U64(v))
	}
}

func tab(q int) Mem { return dropTab.Offset(8 * q) }

// dropout emits the vectorised dropout of Kernels.Dropout: element i of a
// call has the SplitMix64 state z0 + i*golden (z0 = seed + (key+1)*golden
// for the call's first key), is kept when its 24-bit draw is at least thr
// (core.DropoutKeep's u >= p, exactly), and gets x*scale (or +0) in out
// and scale (or +0) in mask. Keys are hashed 8 (AVX-512) or 4 (AVX2) per
// 64-bit vector, even and odd elements apart, so the two vectors' draws
// interleave into one vector of 32-bit lanes in element order.
func dropout(s isa) {
	name := s.name("dropout")
	TEXT(name, NOSPLIT, "func(x, out, mask []float32, z0, thr uint64, scale float32, nt int)")
	Doc(name+fmt.Sprintf(" is dropout over the first len(out) &^ %d elements; len(x) >= len(out), and", s.w-1),
		"len(mask) is 0 (no mask written) or >= len(out). With nt != 0 (mask aligned to a",
		"vector) the mask is written with non-temporal stores: nothing reads it soon.",
		"",
		"Reference loop (the draw of core.DropoutKeep; thr = ceil(p * 2^24)):",
		"",
		"\tfor i := range out {",
		"\t\tz := z0 + uint64(i)*0x9E3779B97F4A7C15",
		"\t\tz = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9",
		"\t\tz = (z ^ (z >> 27)) * 0x94D049BB133111EB",
		"\t\tif (z^(z>>31))>>40 >= thr {",
		"\t\t\tout[i], mask[i] = x[i]*scale, scale",
		"\t\t} else {",
		"\t\t\tout[i], mask[i] = 0, 0",
		"\t\t}",
		"\t}")
	x := Load(Param("x").Base(), GP64())
	out := Load(Param("out").Base(), GP64())
	n := Load(Param("out").Len(), GP64())
	msk := Load(Param("mask").Base(), GP64())
	nm := Load(Param("mask").Len(), GP64())
	ANDQ(I32(-s.w), n)
	zb := s.vec()
	VPBROADCASTQ(paramAddr("z0"), zb)
	sc := s.vec()
	VBROADCASTSS(paramAddr("scale"), sc)
	thr := s.vec()
	if s.is512() {
		VPBROADCASTD(paramAddr("thr"), thr) // thr <= 2^24: its low 32 bits
	} else {
		// AVX2 compares signed: keep when draw > thr-1
		t := GP64()
		MOVQ(paramAddr("thr"), t)
		DECQ(t)
		tx := XMM()
		MOVQ(t, tx)
		VPBROADCASTD(tx, thr)
	}
	step := s.vec()
	if s.is512() {
		VPBROADCASTQ(tab(17), step)
	} else {
		VPBROADCASTQ(tab(16), step)
	}
	lanesA, lanesB := s.vec(), s.vec()
	if s.is512() {
		VMOVDQU64(tab(0), lanesA)
		VMOVDQU64(tab(8), lanesB)
	} else {
		VMOVDQU(tab(0), lanesA)
		VMOVDQU(tab(8), lanesB)
	}
	// multiplier constants
	var m1, m2, m1lo, m1hi, m2lo, m2hi VecVirtual
	if s.is512() {
		m1, m2 = s.vec(), s.vec()
		VPBROADCASTQ(tab(18), m1)
		VPBROADCASTQ(tab(19), m2)
	} else {
		m1lo, m1hi, m2lo, m2hi = s.vec(), s.vec(), s.vec(), s.vec()
		VPBROADCASTQ(tab(20), m1lo)
		VPBROADCASTQ(tab(21), m1hi)
		VPBROADCASTQ(tab(22), m2lo)
		VPBROADCASTQ(tab(23), m2hi)
	}
	xor := func(a, b, dst VecVirtual) {
		if s.is512() {
			VPXORQ(a, b, dst)
		} else {
			VPXOR(a, b, dst)
		}
	}
	// z *= M (mod 2^64)
	mul := func(z VecVirtual, m, lo, hi VecVirtual) {
		if s.is512() {
			VPMULLQ(m, z, z)
			return
		}
		t1, t2, t3 := s.vec(), s.vec(), s.vec()
		VPMULUDQ(lo, z, t1) // lo(z)*lo(M)
		VPSRLQ(U8(32), z, t2)
		VPMULUDQ(lo, t2, t2) // hi(z)*lo(M)
		VPMULUDQ(hi, z, t3)  // lo(z)*hi(M)
		VPADDQ(t3, t2, t2)
		VPSLLQ(U8(32), t2, t2)
		VPADDQ(t2, t1, z)
	}
	// hash: z -> 24-bit draw in the low dword of each qword
	hash := func(z VecVirtual) {
		t := s.vec()
		VPSRLQ(U8(30), z, t)
		xor(t, z, z)
		mul(z, m1, m1lo, m1hi)
		VPSRLQ(U8(27), z, t)
		xor(t, z, z)
		mul(z, m2, m2lo, m2hi)
		VPSRLQ(U8(31), z, t)
		xor(t, z, z)
		VPSRLQ(U8(40), z, z)
	}
	i := GP64()
	XORQ(i, i)
	Label("loop")
	CMPQ(i, n)
	JGE(LabelRef("done"))
	a, b := s.vec(), s.vec()
	VPADDQ(lanesA, zb, a)
	VPADDQ(lanesB, zb, b)
	hash(a)
	hash(b)
	VPSLLQ(U8(32), b, b)
	if s.is512() {
		VPORQ(b, a, a)
	} else {
		VPOR(b, a, a)
	}
	xv := s.vec()
	VMULPS(Mem{Base: x, Index: i, Scale: 4}, sc, xv)
	if s.is512() {
		k := K()
		VPCMPUD(U8(5), thr, a, k) // a >= thr
		VMOVUPS_Z(xv, k, xv)
		VMOVUPS(xv, Mem{Base: out, Index: i, Scale: 4})
		TESTQ(nm, nm)
		JZ(LabelRef("next"))
		mv := s.vec()
		VMOVUPS_Z(sc, k, mv)
		CMPQ(paramAddr("nt"), U8(0))
		JNE(LabelRef("ntmask"))
		VMOVUPS(mv, Mem{Base: msk, Index: i, Scale: 4})
		JMP(LabelRef("next"))
		Label("ntmask")
		VMOVNTPS(mv, Mem{Base: msk, Index: i, Scale: 4})
	} else {
		VPCMPGTD(thr, a, a) // a > thr-1
		VANDPS(a, xv, xv)
		VMOVUPS(xv, Mem{Base: out, Index: i, Scale: 4})
		TESTQ(nm, nm)
		JZ(LabelRef("next"))
		VANDPS(a, sc, a)
		CMPQ(paramAddr("nt"), U8(0))
		JNE(LabelRef("ntmask"))
		VMOVUPS(a, Mem{Base: msk, Index: i, Scale: 4})
		JMP(LabelRef("next"))
		Label("ntmask")
		VMOVNTPS(a, Mem{Base: msk, Index: i, Scale: 4})
	}
	Label("next")
	VPADDQ(step, zb, zb)
	ADDQ(U32(s.w), i)
	JMP(LabelRef("loop"))
	Label("done")
	SFENCE() // order the non-temporal mask stores
	ret(s)
}

// expTab holds exp's float32 constants, each repeated 16 times (64 bytes),
// so an AVX2 or AVX-512 instruction can take any of them as a memory
// operand: Cephes expf's range reduction and polynomial.
var expTab Mem

const (
	eMin = iota // -87.3365447505531: e^x below is not a normal float32
	eMax        // 88: keeps 2^n finite
	eLog2e
	eMagic // 1.5 * 2^23: adding it rounds to an integer
	eC1
	eC2
	eP0
	eP1
	eP2
	eP3
	eP4
	eP5
	eOne
	eBias   // int32 127
	eNegInf // -Inf (maxF32's start)
	eCount
)

func declareExpTab() {
	expTab = GLOBL("expTab", RODATA|NOPTR)
	vals := [eCount]float32{-87.33654475055310898657, 88, 1.44269504088896341, 12582912, 0.693359375, -2.12194440e-4,
		1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1, 1}
	for c := 0; c < eCount; c++ {
		for l := 0; l < 16; l++ {
			if c == eBias {
				DATA(64*c+4*l, U32(127))
			} else if c == eNegInf {
				DATA(64*c+4*l, U32(0xff800000))
			} else {
				// as bits: avo prints F32(1) as $(1), which the Go
				// assembler reads as the integer 1
				DATA(64*c+4*l, U32(math.Float32bits(vals[c])))
			}
		}
	}
}

func ec(c int) Mem { return expTab.Offset(64 * c) }

// vexp sets v = e^v lane-wise (Cephes expf: clamp to [eMin, eMax], x =
// n*ln2 + r, e^r by a degree-7 polynomial, times 2^n from bits). NaN
// lanes stay NaN: the clamps keep v when a comparison is unordered.
func vexp(s isa, v VecVirtual) {
	t, n, r, p := s.vec(), s.vec(), s.vec(), s.vec()
	VMOVUPS(ec(eMin), t)
	VMAXPS(v, t, v) // NaN in v: v
	VMOVUPS(ec(eMax), t)
	VMINPS(v, t, v)
	VMOVUPS(ec(eMagic), t)
	VFMADD231PS(ec(eLog2e), v, t) // t = v*log2e + magic
	VSUBPS(ec(eMagic), t, n)      // n = round(v*log2e)
	VMOVUPS(v, r)
	VFNMADD231PS(ec(eC1), n, r) // r = v - n*c1
	VFNMADD231PS(ec(eC2), n, r) // r -= n*c2
	VMOVUPS(ec(eP0), p)
	for _, c := range []int{eP1, eP2, eP3, eP4, eP5} {
		VFMADD213PS(ec(c), r, p) // p = p*r + c
	}
	VMULPS(r, r, t)        // t = r*r
	VADDPS(ec(eOne), r, r) // r = r + 1
	VFMADD213PS(r, t, p)   // p = p*r^2 + r + 1
	VCVTPS2DQ(n, n)
	VPADDD(ec(eBias), n, n)
	VPSLLD(U8(23), n, n) // 2^n
	VMULPS(n, p, v)
}

// addF64 adds the float32 lanes of v, widened to float64, into a and b.
func addF64(s isa, v, a, b VecVirtual) {
	if s.is512() {
		lo, hi := ZMM(), YMM()
		VCVTPS2PD(v.AsY(), lo)
		VEXTRACTF64X4(U8(1), v, hi)
		hd := ZMM()
		VCVTPS2PD(hi, hd)
		VADDPD(lo, a, a)
		VADDPD(hd, b, b)
		return
	}
	lo, hx := YMM(), XMM()
	VCVTPS2PD(v.AsX(), lo)
	VEXTRACTF128(U8(1), v, hx)
	hd := YMM()
	VCVTPS2PD(hx, hd)
	VADDPD(lo, a, a)
	VADDPD(hd, b, b)
}

// expSum emits sum over i of e^(x[i]-sub), accumulated in float64.
func expSum(s isa) {
	name := s.name("expSum")
	TEXT(name, NOSPLIT, "func(x []float32, sub float32) float64")
	Doc(name+" returns the sum of e^(x[i]-sub) over x, each term rounded to float32",
		"(within 2 ulp of e^(x[i]-sub)) and the sum kept in float64 lanes.",
		"",
		"Reference loop:",
		"",
		"\tvar s float64",
		"\tfor _, v := range x {",
		"\t\ts += float64(float32(math.Exp(float64(v - sub))))",
		"\t}",
		"\treturn s")
	x := Load(Param("x").Base(), GP64())
	n := Load(Param("x").Len(), GP64())
	sub := s.vec()
	VBROADCASTSS(paramAddr("sub"), sub)
	a, b := s.vec(), s.vec()
	s.zero(a)
	s.zero(b)
	Label("loop")
	CMPQ(n, U32(s.w))
	JL(LabelRef("tail"))
	v := s.vec()
	VMOVUPS(Mem{Base: x}, v)
	VSUBPS(sub, v, v)
	vexp(s, v)
	addF64(s, v, a, b)
	ADDQ(U32(s.bytes()), x)
	SUBQ(U32(s.w), n)
	JMP(LabelRef("loop"))
	Label("tail")
	TESTQ(n, n)
	JZ(LabelRef("sum"))
	t := newTail(s, n)
	w := s.vec()
	t.load(Mem{Base: x}, w)
	VSUBPS(sub, w, w)
	vexp(s, w)
	if s.is512() {
		VMOVAPS_Z(w, t.k, w)
	} else {
		VANDPS(t.m, w, w)
	}
	addF64(s, w, a, b)
	Label("sum")
	VADDPD(b, a, a)
	var y VecVirtual = a
	if s.is512() {
		hi := YMM()
		VEXTRACTF64X4(U8(1), a, hi)
		y = YMM()
		VADDPD(hi, a.AsY(), y)
	}
	hx := XMM()
	VEXTRACTF128(U8(1), y, hx)
	lo := XMM()
	VADDPD(hx, y.AsX(), lo)
	VHADDPD(lo, lo, lo)
	Store(lo, ReturnIndex(0))
	ret(s)
}

// expScaleSub emits dx = dy - e^y * sc (LogSoftmax's backward).
func expScaleSub(s isa) {
	name := s.name("expScaleSub")
	TEXT(name, NOSPLIT, "func(y, dy, dx []float32, sc float32)")
	Doc(name+" sets dx[i] = dy[i] - e^y[i] * sc for i < len(dx); len(y), len(dy) >= len(dx).",
		"",
		"Reference loop (e^y within 2 ulp, the product fused into the difference):",
		"",
		"\tfor i := range dx {",
		"\t\tdx[i] = dy[i] - float32(math.Exp(float64(y[i])))*sc",
		"\t}")
	y := Load(Param("y").Base(), GP64())
	dy := Load(Param("dy").Base(), GP64())
	dx := Load(Param("dx").Base(), GP64())
	n := Load(Param("dx").Len(), GP64())
	sc := s.vec()
	VBROADCASTSS(paramAddr("sc"), sc)
	streamLoop(s, n, []Register{y, dy, dx}, 1, func(off int, full bool, t tail) {
		v, d := s.vec(), s.vec()
		ym, dym, dxm := Mem{Base: y, Disp: off}, Mem{Base: dy, Disp: off}, Mem{Base: dx, Disp: off}
		if full {
			VMOVUPS(ym, v)
			vexp(s, v)
			VMOVUPS(dym, d)
			VFNMADD231PS(v, sc, d)
			VMOVUPS(d, dxm)
			return
		}
		t.load(ym, v)
		vexp(s, v)
		t.load(dym, d)
		VFNMADD231PS(v, sc, d)
		t.store(d, dxm)
	})
	ret(s)
}

// zeroNT emits a clear of a large buffer with non-temporal stores, which
// write whole lines without reading them first (half the memory traffic
// of ordinary stores) and leave the caches to the data in use.
func zeroNT(s isa) {
	name := s.name("zeroNT")
	TEXT(name, NOSPLIT, "func(x []float32)")
	Doc(name+" sets every x[i] to +0 with non-temporal stores (for buffers much larger",
		"than the caches), then fences them.",
		"",
		"Reference loop:",
		"",
		"\tfor i := range x {",
		"\t\tx[i] = 0",
		"\t}")
	x := Load(Param("x").Base(), GP64())
	n := Load(Param("x").Len(), GP64())
	z := s.vec()
	s.zero(z)
	// head: single floats up to vector alignment
	Label("head")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	TESTQ(U32(s.bytes()-1), x)
	JZ(LabelRef("body"))
	MOVL(U32(0), Mem{Base: x})
	ADDQ(U32(4), x)
	DECQ(n)
	JMP(LabelRef("head"))
	Label("body")
	CMPQ(n, U32(4*s.w))
	JL(LabelRef("tail"))
	for i := 0; i < 4; i++ {
		VMOVNTPS(z, Mem{Base: x, Disp: i * s.bytes()})
	}
	ADDQ(U32(4*s.bytes()), x)
	SUBQ(U32(4*s.w), n)
	JMP(LabelRef("body"))
	Label("tail")
	TESTQ(n, n)
	JZ(LabelRef("done"))
	MOVL(U32(0), Mem{Base: x})
	ADDQ(U32(4), x)
	DECQ(n)
	JMP(LabelRef("tail"))
	Label("done")
	SFENCE()
	ret(s)
}

// packPanels emits the copy of row-major B into GEMM's NR-wide panels.
func packPanels(s isa) {
	name := s.name("packPanels")
	TEXT(name, NOSPLIT, "func(dst, src []float32, lds, rows, nr, panels, pstride int)")
	Doc(name+fmt.Sprintf(" copies rows x (panels*nr) floats of src (row stride lds) into panels of nr columns (nr a multiple of %d):", s.w),
		"panel jp starts at dst[jp*pstride] and holds row p at offset p*nr. The caller guarantees the bounds.",
		"",
		"Reference loop:",
		"",
		"\tfor p := range rows {",
		"\t\tfor jp := range panels {",
		"\t\t\tcopy(dst[jp*pstride+p*nr:jp*pstride+p*nr+nr], src[p*lds+jp*nr:])",
		"\t\t}",
		"\t}")
	dst := Load(Param("dst").Base(), GP64())
	src := Load(Param("src").Base(), GP64())
	lds := Load(Param("lds"), GP64())
	SHLQ(U8(2), lds)
	rows := Load(Param("rows"), GP64())
	nr := Load(Param("nr"), GP64())
	SHLQ(U8(2), nr) // bytes
	pst := Load(Param("pstride"), GP64())
	SHLQ(U8(2), pst)
	Label("row")
	TESTQ(rows, rows)
	JZ(LabelRef("done"))
	panels := Load(Param("panels"), GP64())
	sp, dp := GP64(), GP64()
	MOVQ(src, sp)
	MOVQ(dst, dp)
	Label("panel")
	TESTQ(panels, panels)
	JZ(LabelRef("nextrow"))
	q := GP64()
	XORQ(q, q)
	Label("vec")
	v := s.vec()
	VMOVUPS(Mem{Base: sp, Index: q, Scale: 1}, v)
	VMOVUPS(v, Mem{Base: dp, Index: q, Scale: 1})
	ADDQ(U32(s.bytes()), q)
	CMPQ(q, nr)
	JL(LabelRef("vec"))
	ADDQ(nr, sp)
	ADDQ(pst, dp)
	DECQ(panels)
	JMP(LabelRef("panel"))
	Label("nextrow")
	ADDQ(lds, src)
	ADDQ(nr, dst)
	DECQ(rows)
	JMP(LabelRef("row"))
	Label("done")
	ret(s)
}

// relu emits out[i] = x[i] < 0 ? 0 : x[i]. VMAXPS returns its second
// source when either is NaN or both are zeros, so with x second NaN and
// -0 pass through as in the Go loop "if x < 0 { x = 0 }".
func relu(s isa) {
	name := s.name("relu")
	TEXT(name, NOSPLIT, "func(x, out []float32)")
	Doc(name+" sets out[i] = max(x[i], 0) for i < len(out) (NaN and -0 kept); len(x) >= len(out).",
		"",
		"Reference loop:",
		"",
		"\tfor i := range out {",
		"\t\tv := x[i]",
		"\t\tif v < 0 {",
		"\t\t\tv = 0",
		"\t\t}",
		"\t\tout[i] = v",
		"\t}")
	x := Load(Param("x").Base(), GP64())
	out := Load(Param("out").Base(), GP64())
	n := Load(Param("out").Len(), GP64())
	z := s.vec()
	s.zero(z)
	streamLoop(s, n, []Register{x, out}, 4, func(off int, full bool, t tail) {
		v := s.vec()
		xm, om := Mem{Base: x, Disp: off}, Mem{Base: out, Disp: off}
		if full {
			VMAXPS(xm, z, v) // (0 > x) ? 0 : x
			VMOVUPS(v, om)
			return
		}
		xv := s.vec()
		t.load(xm, xv)
		VMAXPS(xv, z, v)
		t.store(v, om)
	})
	ret(s)
}

// reluGrad emits out[i] = y[i] > 0 ? dy[i] : 0 (an ordered compare:
// NaN in y gives 0, as in the Go loop).
func reluGrad(s isa) {
	name := s.name("reluGrad")
	TEXT(name, NOSPLIT, "func(dy, y, out []float32)")
	Doc(name+" sets out[i] = dy[i] where y[i] > 0, else +0, for i < len(out); len(dy), len(y) >= len(out).",
		"",
		"Reference loop:",
		"",
		"\tfor i := range out {",
		"\t\tif y[i] > 0 {",
		"\t\t\tout[i] = dy[i]",
		"\t\t} else {",
		"\t\t\tout[i] = 0",
		"\t\t}",
		"\t}")
	dy := Load(Param("dy").Base(), GP64())
	y := Load(Param("y").Base(), GP64())
	out := Load(Param("out").Base(), GP64())
	n := Load(Param("out").Len(), GP64())
	z := s.vec()
	s.zero(z)
	const gtOQ = 0x1e
	streamLoop(s, n, []Register{dy, y, out}, 2, func(off int, full bool, t tail) {
		d, yv := s.vec(), s.vec()
		dm, ym, om := Mem{Base: dy, Disp: off}, Mem{Base: y, Disp: off}, Mem{Base: out, Disp: off}
		if full {
			VMOVUPS(ym, yv)
			VMOVUPS(dm, d)
		} else {
			t.load(ym, yv)
			t.load(dm, d)
		}
		if s.is512() {
			k := K()
			VCMPPS(U8(gtOQ), z, yv, k) // y > 0
			VMOVUPS_Z(d, k, d)
		} else {
			VCMPPS(U8(gtOQ), z, yv, yv)
			VANDPS(yv, d, d)
		}
		if full {
			VMOVUPS(d, om)
		} else {
			t.store(d, om)
		}
	})
	ret(s)
}

// binop emits out[i] = op(a[i], b[i]).
func binop(s isa, base, expr string, op func(a, b Op, dst VecVirtual)) {
	name := s.name(base)
	TEXT(name, NOSPLIT, "func(a, b, out []float32)")
	Doc(name+" sets out[i] = "+expr+" for i < len(out); len(a), len(b) >= len(out); out may alias a or b.",
		"",
		"Reference loop:",
		"",
		"\tfor i := range out {",
		"\t\tout[i] = "+expr,
		"\t}")
	a := Load(Param("a").Base(), GP64())
	b := Load(Param("b").Base(), GP64())
	out := Load(Param("out").Base(), GP64())
	n := Load(Param("out").Len(), GP64())
	streamLoop(s, n, []Register{a, b, out}, 4, func(off int, full bool, t tail) {
		v := s.vec()
		am, bm, om := Mem{Base: a, Disp: off}, Mem{Base: b, Disp: off}, Mem{Base: out, Disp: off}
		if full {
			VMOVUPS(am, v)
			op(v, bm, v)
			VMOVUPS(v, om)
			return
		}
		bv := s.vec()
		t.load(am, v)
		t.load(bm, bv)
		op(v, bv, v)
		t.store(v, om)
	})
	ret(s)
}

// subScalar emits out[i] = x[i] - c.
func subScalar(s isa) {
	name := s.name("subScalar")
	TEXT(name, NOSPLIT, "func(x, out []float32, c float32)")
	Doc(name+" sets out[i] = x[i] - c for i < len(out); len(x) >= len(out); out may alias x.",
		"",
		"Reference loop:",
		"",
		"\tfor i := range out {",
		"\t\tout[i] = x[i] - c",
		"\t}")
	x := Load(Param("x").Base(), GP64())
	out := Load(Param("out").Base(), GP64())
	n := Load(Param("out").Len(), GP64())
	cv := s.vec()
	VBROADCASTSS(paramAddr("c"), cv)
	streamLoop(s, n, []Register{x, out}, 4, func(off int, full bool, t tail) {
		v := s.vec()
		xm, om := Mem{Base: x, Disp: off}, Mem{Base: out, Disp: off}
		if full {
			VMOVUPS(xm, v)
			VSUBPS(cv, v, v) // x - c
			VMOVUPS(v, om)
			return
		}
		t.load(xm, v)
		VSUBPS(cv, v, v)
		t.store(v, om)
	})
	ret(s)
}

// maxF32 emits the maximum of the whole vectors of x (-Inf when none).
func maxF32(s isa) {
	name := s.name("maxF32")
	TEXT(name, NOSPLIT, "func(x []float32) float32")
	Doc(name+fmt.Sprintf(" returns the largest of x[:len(x) &^ %d], or -Inf when that is empty; which", s.w-1),
		"NaN comes out of a row holding NaNs is unspecified.",
		"",
		"Reference loop:",
		"",
		"\tm := float32(math.Inf(-1))",
		fmt.Sprintf("\tfor _, v := range x[:len(x)&^%d] {", s.w-1),
		"\t\tm = max(m, v)",
		"\t}",
		"\treturn m")
	x := Load(Param("x").Base(), GP64())
	n := Load(Param("x").Len(), GP64())
	var acc [2]VecVirtual
	for i := range acc {
		acc[i] = s.vec()
		VBROADCASTSS(ec(eNegInf), acc[i])
	}
	Label("loop2")
	CMPQ(n, U32(2*s.w))
	JL(LabelRef("loop1"))
	VMAXPS(Mem{Base: x}, acc[0], acc[0])
	VMAXPS(Mem{Base: x, Disp: s.bytes()}, acc[1], acc[1])
	ADDQ(U32(2*s.bytes()), x)
	SUBQ(U32(2*s.w), n)
	JMP(LabelRef("loop2"))
	Label("loop1")
	CMPQ(n, U32(s.w))
	JL(LabelRef("reduce"))
	VMAXPS(Mem{Base: x}, acc[0], acc[0])
	Label("reduce")
	VMAXPS(acc[1], acc[0], acc[0])
	y := acc[0]
	if s.is512() {
		hi := YMM()
		VEXTRACTF64X4(U8(1), acc[0], hi)
		y = YMM()
		VMAXPS(hi, acc[0].AsY(), y)
	}
	hx := XMM()
	VEXTRACTF128(U8(1), y, hx)
	lo := XMM()
	VMAXPS(hx, y.AsX(), lo)
	sh := XMM()
	VMOVHLPS(lo, lo, sh)
	VMAXPS(sh, lo, lo)
	VSHUFPS(U8(0x55), lo, lo, sh)
	VMAXSS(sh, lo, lo)
	Store(lo, ReturnIndex(0))
	ret(s)
}

// accF64 emits acc[i] += float64(x[i]) over the whole vectors of x.
func accF64(s isa) {
	name := s.name("accF64")
	TEXT(name, NOSPLIT, "func(acc []float64, x []float32)")
	Doc(name+fmt.Sprintf(" adds x[i], widened to float64, into acc[i] for i < len(x) &^ %d; len(acc) >= len(x).", s.w-1),
		"",
		"Reference loop:",
		"",
		fmt.Sprintf("\tfor i, v := range x[:len(x)&^%d] {", s.w-1),
		"\t\tacc[i] += float64(v)",
		"\t}")
	acc := Load(Param("acc").Base(), GP64())
	x := Load(Param("x").Base(), GP64())
	n := Load(Param("x").Len(), GP64())
	Label("loop")
	CMPQ(n, U32(s.w))
	JL(LabelRef("done"))
	v := s.vec()
	VMOVUPS(Mem{Base: x}, v)
	half := s.bytes() // bytes of w/2 float64s
	if s.is512() {
		lo, hy, hi := ZMM(), YMM(), ZMM()
		VCVTPS2PD(v.AsY(), lo)
		VEXTRACTF64X4(U8(1), v, hy)
		VCVTPS2PD(hy, hi)
		VADDPD(Mem{Base: acc}, lo, lo)
		VADDPD(Mem{Base: acc, Disp: half}, hi, hi)
		VMOVUPD(lo, Mem{Base: acc})
		VMOVUPD(hi, Mem{Base: acc, Disp: half})
	} else {
		lo, hx, hi := YMM(), XMM(), YMM()
		VCVTPS2PD(v.AsX(), lo)
		VEXTRACTF128(U8(1), v, hx)
		VCVTPS2PD(hx, hi)
		VADDPD(Mem{Base: acc}, lo, lo)
		VADDPD(Mem{Base: acc, Disp: half}, hi, hi)
		VMOVUPD(lo, Mem{Base: acc})
		VMOVUPD(hi, Mem{Base: acc, Disp: half})
	}
	ADDQ(U32(s.bytes()), x)
	ADDQ(U32(2*s.bytes()), acc)
	SUBQ(U32(s.w), n)
	JMP(LabelRef("loop"))
	Label("done")
	ret(s)
}

// rowLoop emits a loop over rows rows of c floats: pre() starts a row,
// body(off, full, t) handles the vector at byte offset off of the row
// (the last c % lanes columns under the tail mask t, computed once),
// post() ends it; then each pointer advances by its stride (bytes).
func rowLoop(s isa, rows, c Register, ptrs, strides []Register, pre, post func(), body func(off Register, full bool, t tail)) {
	tl := GP64()
	MOVQ(c, tl)
	ANDQ(U32(s.w-1), tl)
	t := newTail(s, tl) // harmless when tl == 0: an all-clear mask
	full := GP64()
	MOVQ(c, full)
	ANDQ(I32(-s.w), full)
	SHLQ(U8(2), full) // bytes of whole vectors per row
	Label("row")
	TESTQ(rows, rows)
	JZ(LabelRef("done"))
	if pre != nil {
		pre()
	}
	off := GP64()
	XORQ(off, off)
	Label("vec")
	CMPQ(off, full)
	JGE(LabelRef("rowtail"))
	body(off, true, t)
	ADDQ(U32(s.bytes()), off)
	JMP(LabelRef("vec"))
	Label("rowtail")
	TESTQ(tl, tl)
	JZ(LabelRef("rowdone"))
	body(off, false, t)
	Label("rowdone")
	if post != nil {
		post()
	}
	for i, p := range ptrs {
		ADDQ(strides[i], p)
	}
	DECQ(rows)
	JMP(LabelRef("row"))
	Label("done")
}

// addRow emits out[r*c+j] = a[r*c+j] + b[j]: a bias row added to rows.
func addRow(s isa) {
	name := s.name("addRow")
	TEXT(name, NOSPLIT, "func(a, b, out []float32, rows, c int)")
	Doc(name+" adds the row b[:c] to each of rows rows of c floats of a into out; out may alias a.",
		"The caller guarantees the bounds.",
		"",
		"Reference loop:",
		"",
		"\tfor r := range rows {",
		"\t\tfor j := range c {",
		"\t\t\tout[r*c+j] = a[r*c+j] + b[j]",
		"\t\t}",
		"\t}")
	a := Load(Param("a").Base(), GP64())
	b := Load(Param("b").Base(), GP64())
	out := Load(Param("out").Base(), GP64())
	rows := Load(Param("rows"), GP64())
	c := Load(Param("c"), GP64())
	stride := GP64()
	MOVQ(c, stride)
	SHLQ(U8(2), stride)
	rowLoop(s, rows, c, []Register{a, out}, []Register{stride, stride}, nil, nil, func(off Register, full bool, t tail) {
		v, w := s.vec(), s.vec()
		am, bm, om := Mem{Base: a, Index: off, Scale: 1}, Mem{Base: b, Index: off, Scale: 1}, Mem{Base: out, Index: off, Scale: 1}
		if full {
			VMOVUPS(am, v)
			VADDPS(bm, v, v)
			VMOVUPS(v, om)
			return
		}
		t.load(am, v)
		t.load(bm, w)
		VADDPS(w, v, v)
		t.store(v, om)
	})
	ret(s)
}

// subRows emits out[r*c+j] = x[r*c+j] - v[r]: LogSoftmax's last step.
func subRows(s isa) {
	name := s.name("subRows")
	TEXT(name, NOSPLIT, "func(x, out []float32, rows, c int, v []float32)")
	Doc(name+" subtracts v[r] from row r of rows rows of c floats of x into out; out may alias x.",
		"The caller guarantees the bounds.",
		"",
		"Reference loop:",
		"",
		"\tfor r := range rows {",
		"\t\tfor j := range c {",
		"\t\t\tout[r*c+j] = x[r*c+j] - v[r]",
		"\t\t}",
		"\t}")
	x := Load(Param("x").Base(), GP64())
	out := Load(Param("out").Base(), GP64())
	rows := Load(Param("rows"), GP64())
	c := Load(Param("c"), GP64())
	vp := Load(Param("v").Base(), GP64())
	stride, four := GP64(), GP64()
	MOVQ(c, stride)
	SHLQ(U8(2), stride)
	MOVQ(U32(4), four)
	sv := s.vec()
	rowLoop(s, rows, c, []Register{x, out, vp}, []Register{stride, stride, four},
		func() { VBROADCASTSS(Mem{Base: vp}, sv) }, nil,
		func(off Register, full bool, t tail) {
			w := s.vec()
			xm, om := Mem{Base: x, Index: off, Scale: 1}, Mem{Base: out, Index: off, Scale: 1}
			if full {
				VMOVUPS(xm, w)
				VSUBPS(sv, w, w)
				VMOVUPS(w, om)
				return
			}
			t.load(xm, w)
			VSUBPS(sv, w, w)
			t.store(w, om)
		})
	ret(s)
}

// rowMaxExpSum emits, for each row r of rows rows of c floats, m[r] =
// max of the row and sum[r] = sum of e^(x - m[r]) in float64: the two
// reductions of LogSoftmax, whose log the caller takes.
func rowMaxExpSum(s isa) {
	name := s.name("rowMaxExpSum")
	TEXT(name, NOSPLIT, "func(x []float32, rows, c int, m []float32, sum []float64)")
	Doc(name+" sets m[r] to the largest of row r (rows rows of c > 0 floats of x; which NaN",
		"a row holding NaNs gives is unspecified) and sum[r] to the sum over the row of",
		"e^(x-m[r]), each term within 2 ulp and the sum in float64. The caller",
		"guarantees the bounds.",
		"",
		"Reference loop:",
		"",
		"\tfor r := range rows {",
		"\t\trow := x[r*c : r*c+c]",
		"\t\tm[r] = slices.Max(row)",
		"\t\tsum[r] = 0",
		"\t\tfor _, v := range row {",
		"\t\t\tsum[r] += float64(float32(math.Exp(float64(v - m[r]))))",
		"\t\t}",
		"\t}")
	x := Load(Param("x").Base(), GP64())
	rows := Load(Param("rows"), GP64())
	c := Load(Param("c"), GP64())
	mp := Load(Param("m").Base(), GP64())
	sp := Load(Param("sum").Base(), GP64())
	stride, four, eight := GP64(), GP64(), GP64()
	MOVQ(c, stride)
	SHLQ(U8(2), stride)
	MOVQ(U32(4), four)
	MOVQ(U32(8), eight)
	tl := GP64()
	MOVQ(c, tl)
	ANDQ(U32(s.w-1), tl)
	t := newTail(s, tl)
	full := GP64()
	MOVQ(c, full)
	ANDQ(I32(-s.w), full)
	SHLQ(U8(2), full)
	mx, ma, mb := s.vec(), s.vec(), s.vec()
	Label("row")
	TESTQ(rows, rows)
	JZ(LabelRef("done"))
	// pass 1: the row's max
	VBROADCASTSS(ec(eNegInf), mx)
	off := GP64()
	XORQ(off, off)
	Label("mvec")
	CMPQ(off, full)
	JGE(LabelRef("mtail"))
	VMAXPS(Mem{Base: x, Index: off, Scale: 1}, mx, mx)
	ADDQ(U32(s.bytes()), off)
	JMP(LabelRef("mvec"))
	Label("mtail")
	TESTQ(tl, tl)
	JZ(LabelRef("mred"))
	w := s.vec()
	VBROADCASTSS(ec(eNegInf), w)
	if s.is512() {
		VMOVUPS(Mem{Base: x, Index: off, Scale: 1}, t.k, w) // masked merge: -Inf elsewhere
	} else {
		v2 := s.vec()
		t.load(Mem{Base: x, Index: off, Scale: 1}, v2)
		VBLENDVPS(t.m, v2, w, w) // v2 where the mask is set
	}
	VMAXPS(w, mx, mx)
	Label("mred")
	// horizontal max, broadcast back
	y := mx
	if s.is512() {
		hi := YMM()
		VEXTRACTF64X4(U8(1), mx, hi)
		y = YMM()
		VMAXPS(hi, mx.AsY(), y)
	}
	hx := XMM()
	VEXTRACTF128(U8(1), y, hx)
	lo := XMM()
	VMAXPS(hx, y.AsX(), lo)
	sh := XMM()
	VMOVHLPS(lo, lo, sh)
	VMAXPS(sh, lo, lo)
	VSHUFPS(U8(0x55), lo, lo, sh)
	VMAXSS(sh, lo, lo)
	VMOVSS(lo, Mem{Base: mp})
	VBROADCASTSS(Mem{Base: mp}, mx)
	// pass 2: sum of e^(x-m) in float64
	s.zero(ma)
	s.zero(mb)
	XORQ(off, off)
	Label("evec")
	CMPQ(off, full)
	JGE(LabelRef("etail"))
	v := s.vec()
	VMOVUPS(Mem{Base: x, Index: off, Scale: 1}, v)
	VSUBPS(mx, v, v)
	vexp(s, v)
	addF64(s, v, ma, mb)
	ADDQ(U32(s.bytes()), off)
	JMP(LabelRef("evec"))
	Label("etail")
	TESTQ(tl, tl)
	JZ(LabelRef("ered"))
	u := s.vec()
	t.load(Mem{Base: x, Index: off, Scale: 1}, u)
	VSUBPS(mx, u, u)
	vexp(s, u)
	if s.is512() {
		VMOVAPS_Z(u, t.k, u)
	} else {
		VANDPS(t.m, u, u)
	}
	addF64(s, u, ma, mb)
	Label("ered")
	VADDPD(mb, ma, ma)
	var yd VecVirtual = ma
	if s.is512() {
		hi := YMM()
		VEXTRACTF64X4(U8(1), ma, hi)
		yd = YMM()
		VADDPD(hi, ma.AsY(), yd)
	}
	hd := XMM()
	VEXTRACTF128(U8(1), yd, hd)
	ld := XMM()
	VADDPD(hd, yd.AsX(), ld)
	VHADDPD(ld, ld, ld)
	VMOVSD(ld, Mem{Base: sp})
	ADDQ(stride, x)
	ADDQ(four, mp)
	ADDQ(eight, sp)
	DECQ(rows)
	JMP(LabelRef("row"))
	Label("done")
	ret(s)
}

// rowSumF64 emits sum[r] = the sum of row r in float64.
func rowSumF64(s isa) {
	name := s.name("rowSumF64")
	TEXT(name, NOSPLIT, "func(x []float32, rows, c int, sum []float64)")
	Doc(name+" sets sum[r] to the sum of row r (rows rows of c > 0 floats of x), in float64.",
		"The caller guarantees the bounds.",
		"",
		"Reference loop (the kernel adds in float64 lanes, then across them):",
		"",
		"\tfor r := range rows {",
		"\t\tsum[r] = 0",
		"\t\tfor _, v := range x[r*c : r*c+c] {",
		"\t\t\tsum[r] += float64(v)",
		"\t\t}",
		"\t}")
	x := Load(Param("x").Base(), GP64())
	rows := Load(Param("rows"), GP64())
	c := Load(Param("c"), GP64())
	sp := Load(Param("sum").Base(), GP64())
	stride, eight := GP64(), GP64()
	MOVQ(c, stride)
	SHLQ(U8(2), stride)
	MOVQ(U32(8), eight)
	ma, mb := s.vec(), s.vec()
	rowLoop(s, rows, c, []Register{x, sp}, []Register{stride, eight},
		func() { s.zero(ma); s.zero(mb) },
		func() {
			VADDPD(mb, ma, mb)
			var yd VecVirtual = mb
			if s.is512() {
				hi := YMM()
				VEXTRACTF64X4(U8(1), mb, hi)
				yd = YMM()
				VADDPD(hi, mb.AsY(), yd)
			}
			hd := XMM()
			VEXTRACTF128(U8(1), yd, hd)
			ld := XMM()
			VADDPD(hd, yd.AsX(), ld)
			VHADDPD(ld, ld, ld)
			VMOVSD(ld, Mem{Base: sp})
		},
		func(off Register, full bool, t tail) {
			v := s.vec()
			m := Mem{Base: x, Index: off, Scale: 1}
			if full {
				VMOVUPS(m, v)
			} else {
				t.load(m, v) // zeros in the masked lanes
			}
			addF64(s, v, ma, mb)
		})
	ret(s)
}

// expScaleSubRows emits dx[r*c+j] = dy[r*c+j] - e^y[r*c+j] * sc[r].
func expScaleSubRows(s isa) {
	name := s.name("expScaleSubRows")
	TEXT(name, NOSPLIT, "func(y, dy, dx []float32, rows, c int, sc []float32)")
	Doc(name+" sets dx = dy - e^y * sc[r] on each row r of rows rows of c floats (LogSoftmax's",
		"backward); dx may alias dy. The caller guarantees the bounds.",
		"",
		"Reference loop (e^y within 2 ulp, the product fused into the difference):",
		"",
		"\tfor r := range rows {",
		"\t\tfor j := r * c; j < r*c+c; j++ {",
		"\t\t\tdx[j] = dy[j] - float32(math.Exp(float64(y[j])))*sc[r]",
		"\t\t}",
		"\t}")
	y := Load(Param("y").Base(), GP64())
	dy := Load(Param("dy").Base(), GP64())
	dx := Load(Param("dx").Base(), GP64())
	rows := Load(Param("rows"), GP64())
	c := Load(Param("c"), GP64())
	scp := Load(Param("sc").Base(), GP64())
	stride, four := GP64(), GP64()
	MOVQ(c, stride)
	SHLQ(U8(2), stride)
	MOVQ(U32(4), four)
	sv := s.vec()
	rowLoop(s, rows, c, []Register{y, dy, dx, scp}, []Register{stride, stride, stride, four},
		func() { VBROADCASTSS(Mem{Base: scp}, sv) }, nil,
		func(off Register, full bool, t tail) {
			v, d := s.vec(), s.vec()
			ym, dym, dxm := Mem{Base: y, Index: off, Scale: 1}, Mem{Base: dy, Index: off, Scale: 1}, Mem{Base: dx, Index: off, Scale: 1}
			if full {
				VMOVUPS(ym, v)
				vexp(s, v)
				VMOVUPS(dym, d)
				VFNMADD231PS(v, sv, d)
				VMOVUPS(d, dxm)
				return
			}
			t.load(ym, v)
			vexp(s, v)
			t.load(dym, d)
			VFNMADD231PS(v, sv, d)
			t.store(d, dxm)
		})
	ret(s)
}

// adam emits Adam's update, the Go loop of AdamGeneric op for op (no
// FMA: each product and sum rounds as Go's does), with or without the
// weight-decay term (skipping it, as the loop does for wd == 0, keeps a
// -0 gradient's sign). omb1 and omb2 are 1-b1 and 1-b2, computed by the
// caller in float32 as the loop does.
func adam(s isa, decay bool) {
	base := "adam"
	if decay {
		base = "adamWD"
	}
	name := s.name(base)
	TEXT(name, NOSPLIT, "func(p, g, m, v []float32, b1, omb1, b2, omb2, eps, wd, step, bc2 float32)")
	wdLine := "\t\tgi := g[i]"
	if decay {
		wdLine = "\t\tgi := g[i] + wd*p[i]"
	}
	Doc(name+" applies one Adam step to p for i < len(p) (len(g), len(m), len(v) >= len(p)).",
		"",
		"Reference loop:",
		"",
		"\tfor i := range p {",
		wdLine,
		"\t\tm[i] = b1*m[i] + omb1*gi",
		"\t\tv[i] = b2*v[i] + omb2*gi*gi",
		"\t\tp[i] -= step * m[i] / (sqrt(v[i])/bc2 + eps)",
		"\t}")
	bcast := func(name string) VecVirtual {
		x := s.vec()
		VBROADCASTSS(paramAddr(name), x)
		return x
	}
	b1, omb1, b2, omb2 := bcast("b1"), bcast("omb1"), bcast("b2"), bcast("omb2")
	eps, step, bc2 := bcast("eps"), bcast("step"), bcast("bc2")
	var wd VecVirtual
	if decay {
		wd = bcast("wd")
	}
	p := Load(Param("p").Base(), GP64())
	g := Load(Param("g").Base(), GP64())
	m := Load(Param("m").Base(), GP64())
	v := Load(Param("v").Base(), GP64())
	n := Load(Param("p").Len(), GP64())
	streamLoop(s, n, []Register{p, g, m, v}, 2, func(off int, full bool, t tail) {
		pm, gm, mm, vm := Mem{Base: p, Disp: off}, Mem{Base: g, Disp: off}, Mem{Base: m, Disp: off}, Mem{Base: v, Disp: off}
		load := func(src Mem) VecVirtual {
			x := s.vec()
			if full {
				VMOVUPS(src, x)
			} else {
				t.load(src, x)
			}
			return x
		}
		store := func(x VecVirtual, dst Mem) {
			if full {
				VMOVUPS(x, dst)
			} else {
				t.store(x, dst)
			}
		}
		gv, pv := load(gm), load(pm)
		if decay {
			d := s.vec()
			VMULPS(pv, wd, d) // wd*p
			VADDPS(d, gv, gv) // g + wd*p
		}
		mv, tm := load(mm), s.vec()
		VMULPS(mv, b1, mv)   // b1*m
		VMULPS(gv, omb1, tm) // omb1*g
		VADDPS(tm, mv, mv)
		store(mv, mm)
		vv, tv := load(vm), s.vec()
		VMULPS(vv, b2, vv)   // b2*v
		VMULPS(gv, omb2, tv) // omb2*g
		VMULPS(gv, tv, tv)   // (omb2*g)*g
		VADDPS(tv, vv, vv)
		store(vv, vm)
		den := s.vec()
		VSQRTPS(vv, den)
		VDIVPS(bc2, den, den) // sqrt(v)/bc2
		VADDPS(eps, den, den)
		u := s.vec()
		VMULPS(mv, step, u) // step*m
		VDIVPS(den, u, u)   // (step*m)/den
		VSUBPS(u, pv, pv)   // p - u
		store(pv, pm)
	})
	ret(s)
}
