package nn_test

import (
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/models/internal/gradcheck"
	"github.com/gnnkit/gnnkit/models/nn"
)

func TestGradRecurrentOps(t *testing.T) {
	dev := device(t)
	for _, c := range []struct {
		name string
		op   core.Op
		ins  []string
	}{
		{"sigmoid", nn.NewSigmoid("sig", "a", "y", 4), []string{"a"}},
		{"tanh", nn.NewTanh("tanh", "a", "y", 4), []string{"a"}},
		{"mul", nn.NewMul("mul", "a", "b", "y", 4), []string{"a", "b"}},
		{"mul-self", nn.NewMul("mul", "a", "a", "y", 4), []string{"a"}},
		{"sub", nn.NewSub("sub", "a", "b", "y", 4), []string{"a", "b"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rng(11)
			vals := map[string]*gradcheck.Data{}
			for _, in := range c.ins {
				vals[in] = gradcheck.Rand(r, 0, 5, 4)
			}
			check(t, &gradcheck.Case{Dev: dev, Ops: []core.Op{c.op}, Values: vals,
				Seeds: map[string]*gradcheck.Data{"y": gradcheck.Rand(r, 0, 5, 4)}}, gradcheck.Options{})
		})
	}
}

func TestGradPairScore(t *testing.T) {
	gs := graphs(t)
	dev := device(t)
	for _, gname := range graphNames {
		g := gs[gname]
		for _, same := range []bool{false, true} {
			if same && g.NumDst != g.NumSrc {
				continue
			}
			t.Run(gname, func(t *testing.T) {
				r := rng(12)
				b := "b"
				vals := map[string]*gradcheck.Data{"a": gradcheck.Rand(r, 0, g.NumDst, 3)}
				if same {
					b = "a"
				} else {
					vals["b"] = gradcheck.Rand(r, 0, g.NumSrc, 3)
				}
				check(t, &gradcheck.Case{Dev: dev, Ops: []core.Op{nn.NewPairScore("ps", "pairs", "a", b, "y", 3)},
					Graphs: map[string]*core.Graph{"pairs": g}, Values: vals,
					Seeds: map[string]*gradcheck.Data{"y": gradcheck.Rand(r, 0, g.NumEdgeIDs(), 2)}}, gradcheck.Options{})
			})
		}
	}
}

// TestPairScoreLoss: the pair logits under CrossEntropy are binary
// cross-entropy with logit <a_u, b_v>, and the gradient checks through
// the loss.
func TestPairScoreLoss(t *testing.T) {
	dev := device(t)
	g, err := core.FromEdges(3, 3, []int32{1, 2, 0}, []int32{0, 0, 2})
	if err != nil {
		t.Fatal(err)
	}
	r := rng(13)
	check(t, &gradcheck.Case{Dev: dev,
		Ops:    []core.Op{nn.NewPairScore("ps", "pairs", "a", "a", "y", 2), nn.NewCrossEntropy("loss", "y", "loss", 2)},
		Graphs: map[string]*core.Graph{"pairs": g}, Values: map[string]*gradcheck.Data{"a": gradcheck.Rand(r, 0, 3, 2)},
		Labels: []int32{1, 0, 1}, Targets: []int32{0, 1, 2}, LossScale: 1.0 / 3}, gradcheck.Options{})
}
