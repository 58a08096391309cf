package cpu

import (
	"math"

	"github.com/gnnkit/gnnkit/core"
)

// LogSoftmax computes out[i,:] = x[i,:] - logsumexp(x[i,:]); out may alias x.
func (k *Kernels) LogSoftmax(x, out *core.Tensor) error {
	const op = "LogSoftmax"
	xd, err := hostData(op, "x", x)
	if err != nil {
		return err
	}
	od, err := hostData(op, "out", out)
	if err != nil {
		return err
	}
	if !core.SameShape(x, out) {
		return shapeErr(op, "x is %dx%d but out is %dx%d", x.Rows(), x.Cols(), out.Rows(), out.Cols())
	}
	r, c := x.Rows(), x.Cols()
	if r == 0 || c == 0 {
		return nil
	}
	pieces := k.dev.pool.pieces(r, int64(r)*int64(c)*8)
	k.dev.pool.run(pieces, func(p int) {
		for i := p * r / pieces; i < (p+1)*r/pieces; i++ {
			xs, os := xd[i*c:i*c+c], od[i*c:i*c+c]
			m := math.Inf(-1)
			for _, v := range xs {
				m = max(m, float64(v))
			}
			var s float64
			for _, v := range xs {
				s += math.Exp(float64(v) - m)
			}
			lse := m + math.Log(s)
			for j, v := range xs {
				os[j] = float32(float64(v) - lse)
			}
		}
	})
	return nil
}

// LogSoftmaxBackward computes dx = dy - exp(y) * rowsum(dy); dx may alias dy.
func (k *Kernels) LogSoftmaxBackward(y, dy, dx *core.Tensor) error {
	const op = "LogSoftmaxBackward"
	yd, err := hostData(op, "y", y)
	if err != nil {
		return err
	}
	dyd, err := hostData(op, "dy", dy)
	if err != nil {
		return err
	}
	dxd, err := hostData(op, "dx", dx)
	if err != nil {
		return err
	}
	if !core.SameShape(y, dy) || !core.SameShape(y, dx) {
		return shapeErr(op, "y is %dx%d, dy %dx%d, dx %dx%d; want all equal", y.Rows(), y.Cols(), dy.Rows(), dy.Cols(), dx.Rows(), dx.Cols())
	}
	r, c := y.Rows(), y.Cols()
	if r == 0 || c == 0 {
		return nil
	}
	pieces := k.dev.pool.pieces(r, int64(r)*int64(c)*8)
	k.dev.pool.run(pieces, func(p int) {
		for i := p * r / pieces; i < (p+1)*r/pieces; i++ {
			ys, dys, dxs := yd[i*c:i*c+c], dyd[i*c:i*c+c], dxd[i*c:i*c+c]
			var s float64
			for _, v := range dys {
				s += float64(v)
			}
			for j, v := range ys {
				dxs[j] = float32(float64(dys[j]) - math.Exp(float64(v))*s)
			}
		}
	})
	return nil
}

// NLLLoss returns scale * sum over rows r of -logp[r, labels[r]] and, if
// grad is not nil, overwrites grad with its gradient. A row listed twice
// counts twice, in the loss and in the gradient. The sum is in float64,
// in the order of rows.
func (k *Kernels) NLLLoss(logp *core.Tensor, labels, rows []int32, scale float32, grad *core.Tensor) (float64, error) {
	const op = "NLLLoss"
	ld, err := hostData(op, "logp", logp)
	if err != nil {
		return 0, err
	}
	r, c := logp.Rows(), logp.Cols()
	for q, i := range rows {
		if i < 0 || int(i) >= r {
			return 0, shapeErr(op, "row %d at position %d is outside [0,%d)", i, q, r)
		}
		if int(i) >= len(labels) {
			return 0, shapeErr(op, "row %d has no label (%d labels)", i, len(labels))
		}
		if l := labels[i]; l < 0 || int(l) >= c {
			return 0, shapeErr(op, "row %d has label %d, outside [0,%d)", i, l, c)
		}
	}
	var gd []float32
	if grad != nil {
		if gd, err = hostData(op, "grad", grad); err != nil {
			return 0, err
		}
		if !core.SameShape(grad, logp) {
			return 0, shapeErr(op, "grad is %dx%d but logp is %dx%d", grad.Rows(), grad.Cols(), r, c)
		}
		clear(gd)
	}
	var sum float64
	for _, i := range rows {
		q := int(i)*c + int(labels[i])
		sum -= float64(ld[q])
		if gd != nil {
			gd[q] -= scale
		}
	}
	return float64(scale) * sum, nil
}
