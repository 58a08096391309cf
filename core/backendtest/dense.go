package backendtest

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

func testGEMM(t *testing.T, b core.Backend) {
	e := newEnv(t, b.Devices()[0], 1)
	shapes := []struct {
		m, k, n int
		zeros   float64
	}{
		{1, 1, 1, 0}, {0, 3, 4, 0}, {3, 0, 4, 0}, {5, 7, 0, 0},
		{17, 33, 9, 0}, {64, 64, 64, 0.2}, {130, 300, 17, 0.9},
		{3, 600, 5, 0.5}, {40, 2, 300, 0}, {257, 19, 130, 0.98},
	}
	scalars := []struct{ alpha, beta float32 }{{1, 0}, {0.5, 2}, {-1.25, 1}, {0, 0.5}, {0, 0}, {2, -0.5}}
	for _, s := range shapes {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for _, ab := range scalars {
					gemmCase(e, ta, tb, s.m, s.k, s.n, ab.alpha, ab.beta, s.zeros)
				}
			}
		}
	}
	// 3-D tensors are matrices of Rows x (product of the rest).
	t.Run("3d", func(t *testing.T) {
		e := newEnv(t, b.Devices()[0], 2)
		a, ad := e.rand(1, 0, 6, 2, 5)
		bm, bd := e.rand(1, 0, 10, 4)
		c := e.fill(float32(math.NaN()), 6, 4)
		if mustCall(t, "GEMM", func() error { return e.k.GEMM(false, false, 1, a, bm, 0, c) }) {
			want, mag := refGEMM(false, false, 6, 4, 10, 1, ad, bd, 0, nil)
			check(t, "GEMM 3d", e.get(c), want, mag, 10)
		}
	})
}

// gemmCase checks one GEMM; beta == 0 runs on a c full of NaN.
func gemmCase(e *env, ta, tb bool, m, k, n int, alpha, beta float32, zeros float64) {
	t := e.t.(*testing.T)
	name := fmt.Sprintf("m=%d/k=%d/n=%d/ta=%v/tb=%v/alpha=%v/beta=%v", m, k, n, ta, tb, alpha, beta)
	t.Run(name, func(t *testing.T) {
		e := newEnv(t, e.dev, uint64(m*1000+k*10+n))
		as, bs := []int{m, k}, []int{k, n}
		if ta {
			as = []int{k, m}
		}
		if tb {
			bs = []int{n, k}
		}
		a, ad := e.rand(1, zeros, as...)
		bm, bd := e.rand(1, 0, bs...)
		var c *core.Tensor
		var cd []float32
		if beta == 0 {
			c = e.fill(float32(math.NaN()), m, n)
		} else {
			c, cd = e.rand(1, 0, m, n)
		}
		if !mustCall(t, "GEMM", func() error { return e.k.GEMM(ta, tb, alpha, a, bm, beta, c) }) {
			return
		}
		want, mag := refGEMM(ta, tb, m, n, k, alpha, ad, bd, beta, cd)
		check(t, "GEMM", e.get(c), want, mag, k+1)
	})
}

func testGather(t *testing.T, b core.Backend) {
	for _, c := range []int{0, 1, 3, 17, 64} {
		t.Run(fmt.Sprintf("cols=%d", c), func(t *testing.T) {
			e := newEnv(t, b.Devices()[0], uint64(c))
			x, xd := e.rand(1, 0, 11, c)
			for _, idx := range [][]int32{nil, {0}, {10, 3, 3, 0, 7, 3, 10}, {5, 5, 5, 5}} {
				out := e.fill(float32(math.NaN()), len(idx), c)
				if !mustCall(t, "Gather", func() error { return e.k.Gather(x, idx, out) }) {
					continue
				}
				want := make([]float64, len(idx)*c)
				for q, j := range idx {
					for col := range c {
						want[q*c+col] = float64(xd[int(j)*c+col])
					}
				}
				check(t, fmt.Sprintf("Gather %v", idx), e.get(out), want, absSlice(want), 1)
			}
			out := e.fill(0, 1, c)
			for _, bad := range [][]int32{{11}, {-1}} {
				if err := call(t, "Gather", func() error { return e.k.Gather(x, bad, out) }); err == nil {
					t.Errorf("Gather with index %v into 11 rows succeeded, want an error", bad)
				}
			}
		})
	}
}

func testScatterAdd(t *testing.T, b core.Backend) {
	for _, c := range []int{0, 1, 3, 17, 64} {
		t.Run(fmt.Sprintf("cols=%d", c), func(t *testing.T) {
			e := newEnv(t, b.Devices()[0], uint64(c))
			for _, idx := range [][]int32{nil, {2}, {4, 0, 4, 4, 1, 0, 5}, {3, 3, 3, 3, 3, 3, 3, 3, 3}} {
				x, xd := e.rand(1, 0, len(idx), c)
				out, od := e.rand(1, 0, 6, c)
				if !mustCall(t, "ScatterAdd", func() error { return e.k.ScatterAdd(x, idx, out) }) {
					continue
				}
				want, mag := make([]float64, 6*c), make([]float64, 6*c)
				for i, v := range od {
					want[i], mag[i] = float64(v), math.Abs(float64(v))
				}
				for q, j := range idx {
					for col := range c {
						want[int(j)*c+col] += float64(xd[q*c+col])
						mag[int(j)*c+col] += math.Abs(float64(xd[q*c+col]))
					}
				}
				check(t, fmt.Sprintf("ScatterAdd %v", idx), e.get(out), want, mag, len(idx)+1)
			}
			x := e.fill(1, 1, c)
			out := e.fill(0, 6, c)
			for _, bad := range [][]int32{{6}, {-1}} {
				if err := call(t, "ScatterAdd", func() error { return e.k.ScatterAdd(x, bad, out) }); err == nil {
					t.Errorf("ScatterAdd with index %v into 6 rows succeeded, want an error", bad)
				}
			}
		})
	}
}

// mapInputs returns a's and b's values for op: b has exact zeros (the
// boundary of the > 0 tests) and values in (-1, 1) for the grads of
// sigmoid and tanh.
func mapInput(e *env, op core.MapOp, n int, isB bool) []float32 {
	v := e.vals(n, 3, 0.15)
	if isB && (op == core.MapSigmoidGrad || op == core.MapTanhGrad) {
		for i := range v {
			v[i] /= 3
		}
	}
	return v
}

func testMap(t *testing.T, b core.Backend) {
	const alpha = 0.3
	dev := b.Devices()[0]
	type form struct {
		name   string
		br, bc int
	}
	for _, rc := range []struct{ r, c, h int }{{7, 12, 4}, {5, 17, 17}, {1, 8, 2}, {33, 64, 4}, {0, 5, 5}, {4, 0, 1}} {
		forms := []form{
			{"same", rc.r, rc.c}, {"row", 1, rc.c}, {"col", rc.r, 1},
			{"heads", rc.r, rc.h}, {"scalar", 1, 1},
		}
		if rc.c == 0 {
			forms = []form{{"same", rc.r, 0}}
		}
		for op := core.MapOp(0); op < core.NumMapOps; op++ {
			fs := forms
			if op.Unary() {
				fs = []form{{"unary", 0, 0}}
			}
			for _, f := range fs {
				for _, inPlace := range []bool{false, true} {
					if inPlace && (op == core.MapFill || op == core.MapBroadcast) {
						continue
					}
					name := fmt.Sprintf("%v/%dx%d/b=%s", op, rc.r, rc.c, f.name)
					if f.name != "unary" {
						name = fmt.Sprintf("%v/%dx%d/b=%s[%d,%d]", op, rc.r, rc.c, f.name, f.br, f.bc)
					}
					if inPlace {
						name += "/inplace"
					}
					t.Run(name, func(t *testing.T) {
						e := newEnv(t, dev, uint64(op)*7919+uint64(rc.r*100+rc.c))
						var a, bt *core.Tensor
						var ad, bd []float32
						if op != core.MapFill && op != core.MapBroadcast {
							ad = mapInput(e, op, rc.r*rc.c, false)
							a = e.tensor(ad, rc.r, rc.c)
						}
						if !op.Unary() {
							bd = mapInput(e, op, f.br*f.bc, true)
							bt = e.tensor(bd, f.br, f.bc)
						}
						out := a
						if !inPlace {
							out = e.fill(float32(math.NaN()), rc.r, rc.c)
						}
						if !mustCall(t, "Map", func() error { return e.k.Map(op, a, bt, alpha, out) }) {
							return
						}
						want, mag := refMap(op, ad, bd, f.br, f.bc, alpha, rc.r, rc.c)
						check(t, name, e.get(out), want, mag, 2)
					})
				}
			}
		}
	}
	t.Run("3d-heads", func(t *testing.T) {
		// out [R, H, F] with b [R, H]: the per-head form on a 3-D tensor.
		e := newEnv(t, dev, 99)
		a, ad := e.rand(1, 0, 6, 4, 3)
		bt, bd := e.rand(1, 0, 6, 4)
		out := e.fill(0, 6, 4, 3)
		if mustCall(t, "Map", func() error { return e.k.Map(core.MapMul, a, bt, 0, out) }) {
			want, mag := refMap(core.MapMul, ad, bd, 6, 4, 0, 6, 12)
			check(t, "mul 3d", e.get(out), want, mag, 1)
		}
	})
}

func testReduce(t *testing.T, b core.Backend) {
	dev := b.Devices()[0]
	for _, rc := range []struct{ r, c int }{{0, 4}, {1, 1}, {5, 17}, {300, 3}, {1000, 12}, {7, 0}, {2000, 64}} {
		t.Run(fmt.Sprintf("rows/%dx%d", rc.r, rc.c), func(t *testing.T) {
			e := newEnv(t, dev, uint64(rc.r+rc.c))
			a, ad := e.rand(1, 0.1, rc.r, rc.c)
			out := e.fill(float32(math.NaN()), 1, rc.c)
			if mustCall(t, "Reduce", func() error { return e.k.Reduce(core.AxisRows, a, out) }) {
				want, mag := refReduce(core.AxisRows, ad, rc.r, rc.c, 0)
				check(t, "rows", e.get(out), want, mag, rc.r)
			}
		})
		for _, g := range []int{1, 4, rc.c} {
			if g == 0 || rc.c%g != 0 {
				continue
			}
			t.Run(fmt.Sprintf("cols/%dx%d/groups=%d", rc.r, rc.c, g), func(t *testing.T) {
				e := newEnv(t, dev, uint64(rc.r+rc.c+g))
				a, ad := e.rand(1, 0.1, rc.r, rc.c)
				out := e.fill(float32(math.NaN()), rc.r, g)
				if mustCall(t, "Reduce", func() error { return e.k.Reduce(core.AxisCols, a, out) }) {
					want, mag := refReduce(core.AxisCols, ad, rc.r, rc.c, g)
					check(t, "cols", e.get(out), want, mag, rc.c/g)
				}
			})
		}
	}
}

func testLogSoftmax(t *testing.T, b core.Backend) {
	dev := b.Devices()[0]
	for _, rc := range []struct {
		r, c  int
		scale float64
	}{{0, 3, 1}, {1, 1, 1}, {7, 7, 3}, {50, 17, 10}, {9, 64, 100}, {2708, 7, 2}} {
		for _, inPlace := range []bool{false, true} {
			t.Run(fmt.Sprintf("%dx%d/scale=%v/inplace=%v", rc.r, rc.c, rc.scale, inPlace), func(t *testing.T) {
				e := newEnv(t, dev, uint64(rc.r*rc.c))
				x, xd := e.rand(rc.scale, 0, rc.r, rc.c)
				out := x
				if !inPlace {
					out = e.fill(float32(math.NaN()), rc.r, rc.c)
				}
				if !mustCall(t, "LogSoftmax", func() error { return e.k.LogSoftmax(x, out) }) {
					return
				}
				want, mag := refLogSoftmax(xd, rc.r, rc.c)
				y := e.get(out)
				check(t, "LogSoftmax", y, want, mag, rc.c)

				yt := e.tensor(y, rc.r, rc.c)
				dy, dyd := e.rand(1, 0, rc.r, rc.c)
				dx := dy
				if !inPlace {
					dx = e.fill(float32(math.NaN()), rc.r, rc.c)
				}
				if !mustCall(t, "LogSoftmaxBackward", func() error { return e.k.LogSoftmaxBackward(yt, dy, dx) }) {
					return
				}
				want, mag = refLogSoftmaxBackward(y, dyd, rc.r, rc.c)
				check(t, "LogSoftmaxBackward", e.get(dx), want, mag, rc.c)
			})
		}
	}
}

func testNLLLoss(t *testing.T, b core.Backend) {
	dev := b.Devices()[0]
	for _, rc := range []struct{ r, c int }{{1, 1}, {10, 7}, {300, 40}, {5, 3}} {
		for _, withGrad := range []bool{false, true} {
			t.Run(fmt.Sprintf("%dx%d/grad=%v", rc.r, rc.c, withGrad), func(t *testing.T) {
				e := newEnv(t, dev, uint64(rc.r*rc.c))
				lp := e.vals(rc.r*rc.c, 4, 0)
				for i := range lp {
					lp[i] = -float32(math.Abs(float64(lp[i])))
				}
				logp := e.tensor(lp, rc.r, rc.c)
				labels := make([]int32, rc.r)
				for i := range labels {
					labels[i] = int32(e.rng.IntN(rc.c))
				}
				var rows []int32
				for i := range rc.r {
					if e.rng.IntN(3) > 0 {
						rows = append(rows, int32(i))
					}
				}
				rows = append(rows, 0) // a row listed twice counts twice
				scale := float32(1 / float64(len(rows)))
				var grad *core.Tensor
				if withGrad {
					grad = e.fill(float32(math.NaN()), rc.r, rc.c)
				}
				var loss float64
				if !mustCall(t, "NLLLoss", func() (err error) {
					loss, err = e.k.NLLLoss(logp, labels, rows, scale, grad)
					return err
				}) {
					return
				}
				wl, ml, wg := refNLL(lp, rc.c, labels, rows, scale, rc.r)
				if math.Abs(loss-wl) > RelTol(len(rows))*ml+AbsTol {
					t.Errorf("loss = %v, want %v", loss, wl)
				}
				if withGrad {
					check(t, "grad", e.get(grad), wg, absSlice(wg), len(rows))
				}
				if rc.c > 1 {
					bad := append([]int32(nil), labels...)
					bad[rows[0]] = int32(rc.c)
					if err := call(t, "NLLLoss", func() error {
						_, err := e.k.NLLLoss(logp, bad, rows, 1, nil)
						return err
					}); err == nil {
						t.Errorf("NLLLoss with label %d of %d classes succeeded, want an error", rc.c, rc.c)
					}
				}
				if rc.r > 1 {
					if err := call(t, "NLLLoss", func() error {
						_, err := e.k.NLLLoss(logp, labels, []int32{int32(rc.r)}, 1, nil)
						return err
					}); err == nil {
						t.Errorf("NLLLoss with row %d of %d succeeded, want an error", rc.r, rc.r)
					}
				}
			})
		}
	}
	t.Run("empty-rows", func(t *testing.T) {
		e := newEnv(t, dev, 5)
		logp, _ := e.rand(1, 0, 4, 3)
		grad := e.fill(float32(math.NaN()), 4, 3)
		var loss float64
		if mustCall(t, "NLLLoss", func() (err error) {
			loss, err = e.k.NLLLoss(logp, []int32{0, 1, 2, 0}, nil, 1, grad)
			return err
		}) {
			if loss != 0 {
				t.Errorf("loss over no rows = %v, want 0", loss)
			}
			check(t, "grad", e.get(grad), make([]float64, 12), make([]float64, 12), 1)
		}
	})
}

func testDropout(t *testing.T, b core.Backend) {
	dev := b.Devices()[0]
	for _, rc := range []struct{ r, c int }{{0, 3}, {1, 1}, {37, 29}, {211, 97}} {
		for _, p := range []float32{0, 0.1, 0.5, 0.9} {
			for _, seed := range []uint64{1, 0xdeadbeef} {
				for _, withRows := range []bool{false, true} {
					t.Run(fmt.Sprintf("%dx%d/p=%v/seed=%d/rows=%v", rc.r, rc.c, p, seed, withRows), func(t *testing.T) {
						e := newEnv(t, dev, seed)
						x, xd := e.rand(1, 0, rc.r, rc.c)
						out := e.fill(float32(math.NaN()), rc.r, rc.c)
						mask := e.fill(float32(math.NaN()), rc.r, rc.c)
						// Global row ids: a scattered, non-monotone set.
						var rows []int32
						id := func(r int) uint64 { return uint64(r) }
						if withRows {
							rows = make([]int32, rc.r)
							for r := range rows {
								rows[r] = int32((r*7919 + 13) % 100003)
							}
							id = func(r int) uint64 { return uint64(rows[r]) }
						}
						if !mustCall(t, "Dropout", func() error { return e.k.Dropout(x, p, seed, rows, out, mask) }) {
							return
						}
						scale := 1 / (1 - float64(p))
						n := rc.r * rc.c
						wantOut, wantMask := make([]float64, n), make([]float64, n)
						keep := make([]bool, n)
						kept := 0
						for i := range n {
							key := id(i/rc.c)*uint64(rc.c) + uint64(i%rc.c)
							if keep[i] = core.DropoutKeep(seed, key, p); keep[i] {
								wantMask[i] = scale
								wantOut[i] = float64(xd[i]) * scale
								kept++
							}
						}
						gm, gout := e.get(mask), e.get(out)
						for i := range n {
							if (gm[i] != 0) != keep[i] {
								t.Fatalf("mask[%d] = %v, but DropoutKeep = %v", i, gm[i], keep[i])
							}
							if !keep[i] && gout[i] != 0 {
								t.Fatalf("out[%d] = %v for a dropped element", i, gout[i])
							}
						}
						check(t, "mask", gm, wantMask, wantMask, 2)
						check(t, "out", gout, wantOut, absSlice(wantOut), 2)
						if p == 0 && kept != n {
							t.Errorf("p=0 dropped %d elements", n-kept)
						}
						if n > 5000 {
							if frac := 1 - float64(kept)/float64(n); math.Abs(frac-float64(p)) > 0.03 {
								t.Errorf("dropped fraction %.3f, want about %v", frac, p)
							}
						}
						// no mask: the same out
						noMask := e.fill(float32(math.NaN()), rc.r, rc.c)
						if mustCall(t, "Dropout without a mask", func() error { return e.k.Dropout(x, p, seed, rows, noMask, nil) }) {
							check(t, "out without a mask", e.get(noMask), wantOut, absSlice(wantOut), 2)
						}
						// in place: out aliases x
						if mustCall(t, "Dropout in place", func() error { return e.k.Dropout(x, p, seed, rows, x, mask) }) {
							check(t, "in place", e.get(x), wantOut, absSlice(wantOut), 2)
						}
					})
				}
			}
		}
	}
	t.Run("rows length", func(t *testing.T) {
		e := newEnv(t, dev, 1)
		x, _ := e.rand(1, 0, 4, 3)
		err := e.k.Dropout(x, 0.5, 1, []int32{0, 1}, e.fill(0, 4, 3), nil)
		if !errors.Is(err, core.ErrShape) {
			t.Errorf("Dropout with 2 row ids for 4 rows: %v, want ErrShape", err)
		}
	})
}

func testAdam(t *testing.T, b core.Backend) {
	dev := b.Devices()[0]
	for _, wd := range []float32{0, 0.01} {
		for _, n := range []int{1, 17, 1433 * 16} {
			t.Run(fmt.Sprintf("n=%d/wd=%v", n, wd), func(t *testing.T) {
				e := newEnv(t, dev, uint64(n))
				p, _ := e.rand(1, 0, n)
				m := e.fill(0, n)
				v := e.fill(0, n)
				for step := 1; step <= 5; step++ {
					g, gd := e.rand(1, 0.1, n)
					h := core.AdamParams{LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: wd, Step: step}
					pd, md, vd := e.get(p), e.get(m), e.get(v)
					if !mustCall(t, "Adam", func() error { return e.k.Adam(p, g, m, v, h) }) {
						return
					}
					wp, mp, wm, mm, wv, mv := refAdam(pd, gd, md, vd, h)
					check(t, fmt.Sprintf("step %d: p", step), e.get(p), wp, mp, 8)
					check(t, fmt.Sprintf("step %d: m", step), e.get(m), wm, mm, 2)
					check(t, fmt.Sprintf("step %d: v", step), e.get(v), wv, mv, 4)
				}
			})
		}
	}
}

func testSGD(t *testing.T, b core.Backend) {
	dev := b.Devices()[0]
	for _, hp := range []struct{ mom, wd float32 }{{0, 0}, {0, 5e-4}, {0.9, 0}, {0.9, 5e-4}} {
		for _, n := range []int{1, 17, 20000} {
			t.Run(fmt.Sprintf("n=%d/momentum=%v/wd=%v", n, hp.mom, hp.wd), func(t *testing.T) {
				e := newEnv(t, dev, uint64(n))
				p, _ := e.rand(1, 0, n)
				var mom *core.Tensor
				if hp.mom != 0 {
					mom = e.fill(float32(math.NaN()), n) // step 1 must overwrite it
				}
				for step := 1; step <= 4; step++ {
					g, gd := e.rand(1, 0.1, n)
					h := core.SGDParams{LR: 0.1, Momentum: hp.mom, WeightDecay: hp.wd, Step: step}
					pd := e.get(p)
					var bd []float32
					if mom != nil {
						bd = e.get(mom)
					}
					if !mustCall(t, "SGD", func() error { return e.k.SGD(p, g, mom, h) }) {
						return
					}
					wp, mp, wb, mb := refSGD(pd, gd, bd, h)
					check(t, fmt.Sprintf("step %d: p", step), e.get(p), wp, mp, 4)
					if mom != nil {
						check(t, fmt.Sprintf("step %d: momentum", step), e.get(mom), wb, mb, 3)
					}
				}
			})
		}
	}
}
