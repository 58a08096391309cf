package cpu

import (
	"math"

	"github.com/gnnkit/gnnkit/core"
)

func sameAll(op string, p *core.Tensor, names []string, ts ...*core.Tensor) ([][]float32, error) {
	out := make([][]float32, len(ts))
	for i, t := range ts {
		d, err := hostData(op, names[i], t)
		if err != nil {
			return nil, err
		}
		if i > 0 && !core.SameShape(t, p) {
			return nil, shapeErr(op, "%s has shape %v, want %v like p", names[i], t.Shape, p.Shape)
		}
		out[i] = d
	}
	return out, nil
}

// Adam updates p in place (PyTorch torch.optim.Adam, L2 weight decay
// added to the gradient, bias-corrected moments).
func (k *Kernels) Adam(p, g, m, v *core.Tensor, h core.AdamParams) error {
	const op = "Adam"
	if h.Step < 1 {
		return shapeErr(op, "step %d, want >= 1", h.Step)
	}
	ds, err := sameAll(op, p, []string{"p", "g", "m", "v"}, p, g, m, v)
	if err != nil {
		return err
	}
	pd, gd, md, vd := ds[0], ds[1], ds[2], ds[3]
	n := len(pd)
	if n == 0 {
		return nil
	}
	bc1 := 1 - math.Pow(float64(h.Beta1), float64(h.Step))
	bc2 := 1 - math.Pow(float64(h.Beta2), float64(h.Step))
	stepSize := float32(float64(h.LR) / bc1)
	bc2Sqrt := float32(math.Sqrt(bc2))
	b1, b2, eps, wd := h.Beta1, h.Beta2, h.Eps, h.WeightDecay
	pieces := k.dev.pool.pieces(n, int64(n)*16)
	k.dev.pool.run(pieces, func(q int) {
		lo, hi := q*n/pieces, (q+1)*n/pieces
		for i := lo; i < hi; i++ {
			gi := gd[i]
			if wd != 0 {
				gi += wd * pd[i]
			}
			mi := b1*md[i] + (1-b1)*gi
			vi := b2*vd[i] + (1-b2)*gi*gi
			md[i], vd[i] = mi, vi
			denom := float32(math.Sqrt(float64(vi)))/bc2Sqrt + eps
			pd[i] -= stepSize * mi / denom
		}
	})
	return nil
}

// SGD updates p in place (PyTorch torch.optim.SGD without dampening or
// Nesterov): g' = g + wd*p; buf = momentum*buf + g' (g' on step 1);
// p -= lr*buf.
func (k *Kernels) SGD(p, g, mom *core.Tensor, h core.SGDParams) error {
	const op = "SGD"
	ds, err := sameAll(op, p, []string{"p", "g"}, p, g)
	if err != nil {
		return err
	}
	pd, gd := ds[0], ds[1]
	var bd []float32
	if h.Momentum != 0 {
		if mom == nil {
			return shapeErr(op, "momentum %v needs a momentum buffer", h.Momentum)
		}
		if h.Step < 1 {
			return shapeErr(op, "step %d, want >= 1", h.Step)
		}
		ms, err := sameAll(op, p, []string{"p", "mom"}, p, mom)
		if err != nil {
			return err
		}
		bd = ms[1]
	}
	n := len(pd)
	if n == 0 {
		return nil
	}
	lr, mu, wd, first := h.LR, h.Momentum, h.WeightDecay, h.Step <= 1
	pieces := k.dev.pool.pieces(n, int64(n)*8)
	k.dev.pool.run(pieces, func(q int) {
		lo, hi := q*n/pieces, (q+1)*n/pieces
		for i := lo; i < hi; i++ {
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
	})
	return nil
}
