//go:build cuda

package cuda

import "github.com/gnnkit/gnnkit/core"

// Activation is the function SpMMBiasAct applies last.
type Activation uint8

const (
	ActNone Activation = iota // identity
	ActReLU                   // max(x, 0), as Map(MapReLU)
)

// FusedAggregator is the CUDA backend's fast path for the
// aggregate-bias-activation of a GCN or SAGE layer, the same interface as
// backends/cpu's (with this package's Activation):
//
//	out = act(SpMM(g, red, w, x) + bias)     (bias 1 x C, or nil)
//
// in one kernel (the SpMM kernel's epilogue adds the bias and applies the
// activation to each output as it is stored) instead of three, which
// saves two reads and two writes of out. The result equals SpMM,
// Map(MapAdd, bias) and Map(MapReLU) bit for bit: the epilogue rounds
// each step as those kernels do. A model op finds it by a type assertion
// on env.K and falls back to the three kernels.
type FusedAggregator interface {
	SpMMBiasAct(g *core.Graph, red core.Reduce, w, x, bias *core.Tensor, act Activation, out *core.Tensor) error
}

// SpMMBiasAct computes act(SpMM(g, red, w, x) + bias) into out (see
// FusedAggregator). bias is nil or 1 x C.
func (k *Kernels) SpMMBiasAct(g *core.Graph, red core.Reduce, w, x, bias *core.Tensor, act Activation, out *core.Tensor) error {
	const op = "SpMMBiasAct"
	if act > ActReLU {
		return shapeErr(op, "unknown activation %d", act)
	}
	if x == nil {
		return shapeErr(op, "x is nil")
	}
	return k.spmm(op, g, red, w, x, bias, act, out)
}
