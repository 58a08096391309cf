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
	if err := core.CheckLogSoftmax(x, out); err != nil {
		return wrap(err)
	}
	r, c := x.Rows(), x.Cols()
	if r == 0 || c == 0 {
		return nil
	}
	t := k.newTask(logSoftmax, k.dev.pool.pieces(r, int64(r)*int64(c)*8))
	t.r, t.c, t.a, t.out = r, c, xd, od
	k.runTask(t)
	return nil
}

// logSoftmax is LogSoftmax's piece, in blocks of logSoftmaxBlock rows:
// the variant's RowMaxExpSum gives each row's max m and sum of e^(x-m)
// (in float64), Go takes lse = m + log(sum), and SubRows writes x - lse.
func logSoftmax(t *task, p int) {
	r, c, v := t.r, t.c, &t.k.v
	mb, sb := getScratch(logSoftmaxBlock), getScratch64(logSoftmaxBlock)
	defer putScratch(mb)
	defer putScratch64(sb)
	m, s := *mb, *sb
	for i0 := p * r / t.pieces; i0 < (p+1)*r/t.pieces; i0 += logSoftmaxBlock {
		n := min(logSoftmaxBlock, (p+1)*r/t.pieces-i0)
		v.RowMaxExpSum(t.a[i0*c:(i0+n)*c], n, c, m[:n], s[:n])
		for q := range n {
			m[q] = float32(float64(m[q]) + math.Log(s[q]))
		}
		v.SubRows(t.a[i0*c:(i0+n)*c], t.out[i0*c:(i0+n)*c], n, c, m[:n])
	}
}

// logSoftmaxBlock is how many rows logSoftmax reduces per kernel call.
const logSoftmaxBlock = 256

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
	if err := core.CheckLogSoftmaxBackward(y, dy, dx); err != nil {
		return wrap(err)
	}
	r, c := y.Rows(), y.Cols()
	if r == 0 || c == 0 {
		return nil
	}
	t := k.newTask(logSoftmaxBackward, k.dev.pool.pieces(r, int64(r)*int64(c)*8))
	t.r, t.c, t.a, t.b, t.out = r, c, yd, dyd, dxd
	k.runTask(t)
	return nil
}

// logSoftmaxBackward is LogSoftmaxBackward's piece, in blocks of
// logSoftmaxBlock rows: RowSumF64 gives each row's sum s of dy, and
// ExpScaleSubRows writes dy - e^y * s. A row outside the loss's rows has
// s = 0 and gets dy back exactly (e^y is finite for y <= 0; NaN and Inf
// in y give NaN as the formula does).
func logSoftmaxBackward(t *task, p int) {
	r, c, v := t.r, t.c, &t.k.v
	sb, fb := getScratch64(logSoftmaxBlock), getScratch(logSoftmaxBlock)
	defer putScratch64(sb)
	defer putScratch(fb)
	s, sc := *sb, *fb
	for i0 := p * r / t.pieces; i0 < (p+1)*r/t.pieces; i0 += logSoftmaxBlock {
		n := min(logSoftmaxBlock, (p+1)*r/t.pieces-i0)
		v.RowSumF64(t.b[i0*c:(i0+n)*c], n, c, s[:n])
		for q := range n {
			sc[q] = float32(s[q])
		}
		v.ExpScaleSubRows(t.a[i0*c:(i0+n)*c], t.b[i0*c:(i0+n)*c], t.out[i0*c:(i0+n)*c], n, c, sc[:n])
	}
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
	var gd []float32
	if grad != nil {
		if gd, err = hostData(op, "grad", grad); err != nil {
			return 0, err
		}
	}
	if err := core.CheckNLLLoss(logp, labels, rows, grad); err != nil {
		return 0, wrap(err)
	}
	clear(gd)
	c := logp.Cols()
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
