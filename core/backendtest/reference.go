package backendtest

import (
	"math"

	"github.com/gnnkit/gnnkit/core"
)

// The reference kernels: naive float64 loops written straight from the
// doc comments of core.Kernels. Each returns the expected values and, per
// element, the magnitude the value's rounding error scales with (the sum
// of the absolute values of the terms), which the comparison uses.

func f64(x float32) float64 { return float64(x) }

// refGEMM: c is m x n, a is m x k (k x m if ta), b is k x n (n x k if tb).
func refGEMM(ta, tb bool, m, n, k int, alpha float32, a, b []float32, beta float32, c []float32) (want, mag []float64) {
	want, mag = make([]float64, m*n), make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s, sa float64
			for q := range k {
				av := a[i*k+q]
				if ta {
					av = a[q*m+i]
				}
				bv := b[q*n+j]
				if tb {
					bv = b[j*k+q]
				}
				s += f64(av) * f64(bv)
				sa += math.Abs(f64(av) * f64(bv))
			}
			w, mg := f64(alpha)*s, math.Abs(f64(alpha))*sa
			if beta != 0 {
				w += f64(beta) * f64(c[i*n+j])
				mg += math.Abs(f64(beta) * f64(c[i*n+j]))
			}
			want[i*n+j], mag[i*n+j] = w, mg
		}
	}
	return want, mag
}

// refSpMM: x is NumSrc x c; w is nil or rows x heads, read at edge ids.
func refSpMM(g *core.Graph, red core.Reduce, w []float32, heads int, x []float32, c int) (want, mag []float64) {
	want, mag = make([]float64, g.NumDst*c), make([]float64, g.NumDst*c)
	f := c
	if heads > 0 {
		f = c / heads
	}
	for i := range g.NumDst {
		e0, e1 := g.Offsets[i], g.Offsets[i+1]
		for e := e0; e < e1; e++ {
			j := int(g.Indices[e])
			id := g.EdgeID(int(e))
			for col := range c {
				wv := 1.0
				if w != nil {
					wv = f64(w[id*heads+col/f])
				}
				t := wv * f64(x[j*c+col])
				want[i*c+col] += t
				mag[i*c+col] += math.Abs(t)
			}
		}
		if red == core.ReduceMean && e1 > e0 {
			for col := range c {
				want[i*c+col] /= float64(e1 - e0)
				mag[i*c+col] /= float64(e1 - e0)
			}
		}
	}
	return want, mag
}

// refSDDMM returns values for every edge id of g (rows x heads); ids not
// in g are NaN (not checked).
func refSDDMM(g *core.Graph, op core.EdgeOp, a, b []float32, cols, heads, rows int) (want, mag []float64) {
	want, mag = nanSlice(rows*heads), make([]float64, rows*heads)
	f := 0
	if heads > 0 {
		f = cols / heads
	}
	for i := range g.NumDst {
		for e := g.Offsets[i]; e < g.Offsets[i+1]; e++ {
			j := int(g.Indices[e])
			id := g.EdgeID(int(e))
			for h := range heads {
				var s, sa float64
				if op == core.EdgeAdd {
					s = f64(a[i*cols+h]) + f64(b[j*cols+h])
					sa = math.Abs(f64(a[i*cols+h])) + math.Abs(f64(b[j*cols+h]))
				} else {
					for q := range f {
						t := f64(a[i*cols+h*f+q]) * f64(b[j*cols+h*f+q])
						s += t
						sa += math.Abs(t)
					}
				}
				want[id*heads+h], mag[id*heads+h] = s, sa
			}
		}
	}
	return want, mag
}

func nanSlice(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}

func refEdgeSoftmax(g *core.Graph, s []float32, heads, rows int) (want, mag []float64) {
	want = nanSlice(rows * heads)
	for i := range g.NumDst {
		e0, e1 := g.Offsets[i], g.Offsets[i+1]
		for h := range heads {
			m := math.Inf(-1)
			for e := e0; e < e1; e++ {
				m = max(m, f64(s[g.EdgeID(int(e))*heads+h]))
			}
			var sum float64
			for e := e0; e < e1; e++ {
				sum += math.Exp(f64(s[g.EdgeID(int(e))*heads+h]) - m)
			}
			for e := e0; e < e1; e++ {
				id := g.EdgeID(int(e))
				want[id*heads+h] = math.Exp(f64(s[id*heads+h])-m) / sum
			}
		}
	}
	return want, absSlice(want)
}

func refEdgeSoftmaxBackward(g *core.Graph, y, dy []float32, heads, rows int) (want, mag []float64) {
	want, mag = nanSlice(rows*heads), make([]float64, rows*heads)
	for i := range g.NumDst {
		e0, e1 := g.Offsets[i], g.Offsets[i+1]
		for h := range heads {
			var s, sa float64
			for e := e0; e < e1; e++ {
				q := g.EdgeID(int(e))*heads + h
				s += f64(y[q]) * f64(dy[q])
				sa += math.Abs(f64(y[q]) * f64(dy[q]))
			}
			for e := e0; e < e1; e++ {
				q := g.EdgeID(int(e))*heads + h
				want[q] = f64(y[q]) * (f64(dy[q]) - s)
				mag[q] = math.Abs(f64(y[q])) * (math.Abs(f64(dy[q])) + sa)
			}
		}
	}
	return want, mag
}

func absSlice(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = math.Abs(x)
	}
	return out
}

// refMap computes one MapOp with b (br x bc) broadcast over r x c.
func refMap(op core.MapOp, a, b []float32, br, bc int, alpha float32, r, c int) (want, mag []float64) {
	want, mag = make([]float64, r*c), make([]float64, r*c)
	al := f64(alpha)
	for i := range r {
		for j := range c {
			var x, y float64
			if a != nil {
				x = f64(a[i*c+j])
			}
			if b != nil {
				bi := 0
				if br == r {
					bi = i
				}
				y = f64(b[bi*bc+j/(c/bc)])
			}
			var w, m float64
			switch op {
			case core.MapCopy:
				w, m = x, math.Abs(x)
			case core.MapFill:
				w, m = al, math.Abs(al)
			case core.MapScale:
				w, m = al*x, math.Abs(al*x)
			case core.MapAdd:
				w, m = x+y, math.Abs(x)+math.Abs(y)
			case core.MapSub:
				w, m = x-y, math.Abs(x)+math.Abs(y)
			case core.MapMul:
				w, m = x*y, math.Abs(x*y)
			case core.MapAxpy:
				w, m = x+al*y, math.Abs(x)+math.Abs(al*y)
			case core.MapBroadcast:
				w, m = y, math.Abs(y)
			case core.MapReLU:
				w = max(x, 0)
				m = math.Abs(w)
			case core.MapReLUGrad:
				if y > 0 {
					w = x
				}
				m = math.Abs(w)
			case core.MapLeakyReLU:
				w = x
				if !(x > 0) {
					w = al * x
				}
				m = math.Abs(w)
			case core.MapLeakyReLUGrad:
				w = x
				if !(y > 0) {
					w = x * al
				}
				m = math.Abs(w)
			case core.MapELU:
				w = x
				if !(x > 0) {
					w = al * math.Expm1(x)
				}
				m = math.Abs(w)
			case core.MapELUGrad:
				w = x
				if !(y > 0) {
					w = x * al * math.Exp(y)
				}
				m = math.Abs(w)
			case core.MapSigmoid:
				w = 1 / (1 + math.Exp(-x))
				m = w
			case core.MapSigmoidGrad:
				w = x * y * (1 - y)
				m = math.Abs(x*y) * (1 + math.Abs(y))
			case core.MapTanh:
				w = math.Tanh(x)
				m = math.Abs(w)
			case core.MapTanhGrad:
				w = x * (1 - y*y)
				m = math.Abs(x) * (1 + y*y)
			case core.MapExp:
				w = math.Exp(x)
				m = w
			}
			want[i*c+j], mag[i*c+j] = w, m
		}
	}
	return want, mag
}

func refReduce(axis core.ReduceAxis, a []float32, r, c, groups int) (want, mag []float64) {
	if axis == core.AxisRows {
		want, mag = make([]float64, c), make([]float64, c)
		for i := range r {
			for j := range c {
				want[j] += f64(a[i*c+j])
				mag[j] += math.Abs(f64(a[i*c+j]))
			}
		}
		return want, mag
	}
	want, mag = make([]float64, r*groups), make([]float64, r*groups)
	w := c / groups
	for i := range r {
		for j := range c {
			want[i*groups+j/w] += f64(a[i*c+j])
			mag[i*groups+j/w] += math.Abs(f64(a[i*c+j]))
		}
	}
	return want, mag
}

func refLogSoftmax(x []float32, r, c int) (want, mag []float64) {
	want, mag = make([]float64, r*c), make([]float64, r*c)
	for i := range r {
		m := math.Inf(-1)
		for j := range c {
			m = max(m, f64(x[i*c+j]))
		}
		var s float64
		for j := range c {
			s += math.Exp(f64(x[i*c+j]) - m)
		}
		lse := m + math.Log(s)
		for j := range c {
			want[i*c+j] = f64(x[i*c+j]) - lse
			mag[i*c+j] = math.Abs(f64(x[i*c+j])) + math.Abs(lse)
		}
	}
	return want, mag
}

func refLogSoftmaxBackward(y, dy []float32, r, c int) (want, mag []float64) {
	want, mag = make([]float64, r*c), make([]float64, r*c)
	for i := range r {
		var s, sa float64
		for j := range c {
			s += f64(dy[i*c+j])
			sa += math.Abs(f64(dy[i*c+j]))
		}
		for j := range c {
			p := math.Exp(f64(y[i*c+j]))
			want[i*c+j] = f64(dy[i*c+j]) - p*s
			mag[i*c+j] = math.Abs(f64(dy[i*c+j])) + p*sa
		}
	}
	return want, mag
}

func refNLL(logp []float32, c int, labels, rows []int32, scale float32, r int) (loss, lossMag float64, grad []float64) {
	grad = make([]float64, r*c)
	for _, i := range rows {
		q := int(i)*c + int(labels[i])
		loss -= f64(logp[q])
		lossMag += math.Abs(f64(logp[q]))
		grad[q] -= f64(scale)
	}
	return f64(scale) * loss, math.Abs(f64(scale)) * lossMag, grad
}

// refAdam returns the expected p, m, v after one step from the given state.
func refAdam(p, g, m, v []float32, h core.AdamParams) (wp, mp, wm, mm, wv, mv []float64) {
	n := len(p)
	wp, mp, wm, mm, wv, mv = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	b1, b2 := f64(h.Beta1), f64(h.Beta2)
	bc1 := 1 - math.Pow(b1, float64(h.Step))
	bc2 := 1 - math.Pow(b2, float64(h.Step))
	for i := range n {
		gi := f64(g[i]) + f64(h.WeightDecay)*f64(p[i])
		gm := math.Abs(f64(g[i])) + math.Abs(f64(h.WeightDecay)*f64(p[i]))
		wm[i] = b1*f64(m[i]) + (1-b1)*gi
		mm[i] = math.Abs(b1*f64(m[i])) + (1-b1)*gm
		wv[i] = b2*f64(v[i]) + (1-b2)*gi*gi
		mv[i] = math.Abs(b2*f64(v[i])) + (1-b2)*gm*gm
		upd := f64(h.LR) * (wm[i] / bc1) / (math.Sqrt(wv[i]/bc2) + f64(h.Eps))
		wp[i] = f64(p[i]) - upd
		mp[i] = math.Abs(f64(p[i])) + math.Abs(upd)*(1+mm[i]/max(math.Abs(wm[i]), 1e-30))
	}
	return
}

// refSGD returns the expected p and momentum buffer after one step.
func refSGD(p, g, buf []float32, h core.SGDParams) (wp, mp, wb, mb []float64) {
	n := len(p)
	wp, mp, wb, mb = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range n {
		gi := f64(g[i]) + f64(h.WeightDecay)*f64(p[i])
		gm := math.Abs(f64(g[i])) + math.Abs(f64(h.WeightDecay)*f64(p[i]))
		if h.Momentum != 0 {
			if h.Step > 1 {
				gm += math.Abs(f64(h.Momentum) * f64(buf[i]))
				gi += f64(h.Momentum) * f64(buf[i])
			}
			wb[i], mb[i] = gi, gm
		}
		wp[i] = f64(p[i]) - f64(h.LR)*gi
		mp[i] = math.Abs(f64(p[i])) + math.Abs(f64(h.LR))*gm
	}
	return
}
