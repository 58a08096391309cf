package cpu

import (
	"math"

	"github.com/gnnkit/gnnkit/core"
)

// Adam updates p in place (PyTorch torch.optim.Adam, L2 weight decay
// added to the gradient, bias-corrected moments).
func (k *Kernels) Adam(p, g, m, v *core.Tensor, h core.AdamParams) error {
	const op = "Adam"
	pd, err := hostData(op, "p", p)
	if err != nil {
		return err
	}
	gd, err := hostData(op, "g", g)
	if err != nil {
		return err
	}
	md, err := hostData(op, "m", m)
	if err != nil {
		return err
	}
	vd, err := hostData(op, "v", v)
	if err != nil {
		return err
	}
	if err := core.CheckAdam(p, g, m, v, h); err != nil {
		return wrap(err)
	}
	n := len(pd)
	if n == 0 {
		return nil
	}
	bc1 := 1 - math.Pow(float64(h.Beta1), float64(h.Step))
	bc2 := 1 - math.Pow(float64(h.Beta2), float64(h.Step))
	t := k.newTask(adam, k.dev.pool.pieces(n, int64(n)*16))
	t.n, t.out, t.a, t.b, t.aux = n, pd, gd, md, vd
	t.step = float32(float64(h.LR) / bc1)
	t.beta = float32(math.Sqrt(bc2))
	t.alpha, t.eps, t.wd = h.Beta1, h.Eps, h.WeightDecay
	t.prob = h.Beta2
	k.runTask(t)
	return nil
}

// adam is Adam's piece: p = t.out, g = t.a, m = t.b, v = t.aux; beta1 =
// t.alpha, beta2 = t.prob, the step size t.step, sqrt(bias correction 2)
// t.beta; the variant's kernel (kern.AdamGeneric's loop) does the rest.
func adam(t *task, q int) {
	lo, hi := q*t.n/t.pieces, (q+1)*t.n/t.pieces
	t.k.v.Adam(t.out[lo:hi], t.a[lo:hi], t.b[lo:hi], t.aux[lo:hi], t.alpha, t.prob, t.eps, t.wd, t.step, t.beta)
}

// SGD updates p in place (PyTorch torch.optim.SGD without dampening or
// Nesterov): g' = g + wd*p; buf = momentum*buf + g' (g' on step 1);
// p -= lr*buf.
func (k *Kernels) SGD(p, g, mom *core.Tensor, h core.SGDParams) error {
	const op = "SGD"
	pd, err := hostData(op, "p", p)
	if err != nil {
		return err
	}
	gd, err := hostData(op, "g", g)
	if err != nil {
		return err
	}
	var bd []float32
	if h.Momentum != 0 && mom != nil {
		if bd, err = hostData(op, "mom", mom); err != nil {
			return err
		}
	}
	if err := core.CheckSGD(p, g, mom, h); err != nil {
		return wrap(err)
	}
	n := len(pd)
	if n == 0 {
		return nil
	}
	t := k.newTask(sgd, k.dev.pool.pieces(n, int64(n)*8))
	t.n, t.out, t.a, t.b = n, pd, gd, bd
	t.alpha, t.beta, t.wd, t.first = h.LR, h.Momentum, h.WeightDecay, h.Step <= 1
	k.runTask(t)
	return nil
}

// sgd is SGD's piece: p = t.out, g = t.a, the momentum buffer t.b (nil
// without momentum), lr = t.alpha, momentum = t.beta.
func sgd(t *task, q int) {
	lo, hi := q*t.n/t.pieces, (q+1)*t.n/t.pieces
	pd, gd := t.out[lo:hi], t.a[lo:hi]
	var bd []float32
	if t.b != nil {
		bd = t.b[lo:hi]
	}
	lr, mu, wd, first := t.alpha, t.beta, t.wd, t.first
	for i := range pd {
		gi := gd[i]
		if wd != 0 {
			gi += wd * pd[i]
		}
		if bd != nil {
			if first {
				bd[i] = gi
			} else {
				bd[i] = mu*bd[i] + gi
			}
			gi = bd[i]
		}
		pd[i] -= lr * gi
	}
}
