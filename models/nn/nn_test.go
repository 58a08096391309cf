package nn_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/models/internal/gradcheck"
	"github.com/gnnkit/gnnkit/models/nn"
)

func device(t *testing.T) core.Device {
	t.Helper()
	b, err := cpu.New(core.BackendOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b.Devices()[0]
}

// graphs is a small corpus of awkward graphs: a node without in-edges, a
// self-loop and a duplicate edge (sq); the same with permuted edge ids
// (its reverse); a bipartite block with an empty row; and a k-hop
// subgraph whose edge ids are the parent's (sparse, so edge tensors have
// more rows than edges).
func graphs(t *testing.T) map[string]*core.Graph {
	t.Helper()
	must := func(g *core.Graph, err error) *core.Graph {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	// 7 nodes; node 0 has no in-edges, 3 -> 3 is a self-loop, 2 -> 5 twice.
	src := []int32{1, 2, 2, 3, 0, 4, 6, 5, 1, 0, 2, 6}
	dst := []int32{2, 5, 5, 3, 1, 1, 4, 6, 6, 3, 4, 2}
	sq := must(core.FromEdges(7, 7, src, dst))
	bip := must(core.FromEdges(4, 6, []int32{0, 1, 5, 2, 3, 4, 0}, []int32{0, 0, 0, 2, 3, 3, 1}))
	big := must(core.FromEdges(9, 9,
		[]int32{1, 2, 3, 4, 5, 6, 7, 8, 0, 2, 4, 6, 8, 1, 3},
		[]int32{0, 0, 1, 1, 2, 2, 3, 3, 4, 5, 6, 7, 8, 8, 7}))
	sub, err := big.KHop([]int32{5, 7}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if sub.NumEdgeIDs() <= sub.NumEdges() {
		t.Fatalf("k-hop subgraph has %d edge ids for %d edges; want sparse ids", sub.NumEdgeIDs(), sub.NumEdges())
	}
	return map[string]*core.Graph{"sq": sq, "perm": sq.Reverse(), "bip": bip, "khop": sub.Graph}
}

var graphNames = []string{"sq", "perm", "bip", "khop"}

func check(t *testing.T, c *gradcheck.Case, o gradcheck.Options) {
	t.Helper()
	res, err := gradcheck.Check(c, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) == 0 {
		t.Fatal("nothing was checked")
	}
	for _, r := range res {
		t.Logf("%-8s max rel err %.2e (max abs err %.2e, grad scale %.2e)", r.Name, r.MaxRel, r.MaxAbs, r.Scale)
		for _, b := range r.Bad {
			t.Errorf("%s%s", r.Name, b)
		}
	}
}

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

func TestGradLinear(t *testing.T) {
	r := rng(1)
	c := &gradcheck.Case{Dev: device(t),
		Ops:    []core.Op{nn.NewLinear("lin", "x", "W", "y", 3, 4)},
		Values: map[string]*gradcheck.Data{"x": gradcheck.Rand(r, 0, 5, 3)},
		Params: map[string]*gradcheck.Data{"W": gradcheck.Rand(r, 0, 3, 4)},
		Seeds:  map[string]*gradcheck.Data{"y": gradcheck.Rand(r, 0, 5, 4)},
	}
	check(t, c, gradcheck.Options{})
}

func TestGradBias(t *testing.T) {
	r := rng(2)
	c := &gradcheck.Case{Dev: device(t),
		Ops:    []core.Op{nn.NewBias("bias", "x", "b", "y", 4)},
		Values: map[string]*gradcheck.Data{"x": gradcheck.Rand(r, 0, 5, 4)},
		Params: map[string]*gradcheck.Data{"b": gradcheck.Rand(r, 0, 1, 4)},
		Seeds:  map[string]*gradcheck.Data{"y": gradcheck.Rand(r, 0, 5, 4)},
	}
	check(t, c, gradcheck.Options{})
}

func TestGradAdd(t *testing.T) {
	r := rng(3)
	c := &gradcheck.Case{Dev: device(t),
		Ops:    []core.Op{nn.NewAdd("add", "a", "b", "y", 4)},
		Values: map[string]*gradcheck.Data{"a": gradcheck.Rand(r, 0, 5, 4), "b": gradcheck.Rand(r, 0, 5, 4)},
		Seeds:  map[string]*gradcheck.Data{"y": gradcheck.Rand(r, 0, 5, 4)},
	}
	check(t, c, gradcheck.Options{})
}

func TestGradAggregate(t *testing.T) {
	gs := graphs(t)
	dev := device(t)
	for _, gname := range graphNames {
		g := gs[gname]
		for _, red := range []core.Reduce{core.ReduceSum, core.ReduceMean} {
			for _, heads := range []int{0, 1, 2} {
				t.Run(fmt.Sprintf("graph=%s/reduce=%v/heads=%d", gname, red, heads), func(t *testing.T) {
					r := rng(4)
					const cols = 6
					w := ""
					vals := map[string]*gradcheck.Data{"x": gradcheck.Rand(r, 0, g.NumSrc, cols)}
					if heads > 0 {
						w = "w"
						vals["w"] = gradcheck.Rand(r, 0, g.NumEdgeIDs(), heads)
					}
					c := &gradcheck.Case{Dev: dev,
						Ops:    []core.Op{nn.NewAggregate("agg", "adj", red, "x", w, "y", cols, heads)},
						Graphs: map[string]*core.Graph{"adj": g},
						Values: vals,
						Seeds:  map[string]*gradcheck.Data{"y": gradcheck.Rand(r, 0, g.NumDst, cols)},
					}
					check(t, c, gradcheck.Options{})
				})
			}
		}
	}
}

func TestGradActivations(t *testing.T) {
	dev := device(t)
	for _, op := range []core.Op{
		nn.NewReLU("relu", "x", "y", 5),
		nn.NewLeakyReLU("leaky", "x", "y", 0.2, 5),
		nn.NewELU("elu", "x", "y", 1, 5),
	} {
		t.Run(op.Name(), func(t *testing.T) {
			r := rng(5)
			c := &gradcheck.Case{Dev: dev, Ops: []core.Op{op},
				Values: map[string]*gradcheck.Data{"x": gradcheck.Rand(r, 0.1, 6, 5)},
				Seeds:  map[string]*gradcheck.Data{"y": gradcheck.Rand(r, 0, 6, 5)},
			}
			check(t, c, gradcheck.Options{Eps: 1e-3})
		})
	}
}

func TestGradDropout(t *testing.T) {
	dev := device(t)
	for _, tc := range []struct {
		name     string
		p        float32
		training bool
	}{{"train", 0.5, true}, {"eval", 0.5, false}, {"p=0", 0, true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := rng(6)
			c := &gradcheck.Case{Dev: dev, Ops: []core.Op{nn.NewDropout("drop", "x", "y", tc.p, 5)},
				Values:   map[string]*gradcheck.Data{"x": gradcheck.Rand(r, 0, 8, 5)},
				Seeds:    map[string]*gradcheck.Data{"y": gradcheck.Rand(r, 0, 8, 5)},
				Training: tc.training, Seed: 42,
			}
			check(t, c, gradcheck.Options{})
		})
	}
}

func TestGradHeadDot(t *testing.T) {
	r := rng(7)
	c := &gradcheck.Case{Dev: device(t),
		Ops:    []core.Op{nn.NewHeadDot("hd", "z", "a", "y", 2, 3)},
		Values: map[string]*gradcheck.Data{"z": gradcheck.Rand(r, 0, 5, 6)},
		Params: map[string]*gradcheck.Data{"a": gradcheck.Rand(r, 0, 1, 6)},
		Seeds:  map[string]*gradcheck.Data{"y": gradcheck.Rand(r, 0, 5, 2)},
	}
	check(t, c, gradcheck.Options{})
}

func TestGradEdgeScore(t *testing.T) {
	gs := graphs(t)
	dev := device(t)
	for _, gname := range graphNames {
		g := gs[gname]
		t.Run("graph="+gname, func(t *testing.T) {
			r := rng(8)
			c := &gradcheck.Case{Dev: dev,
				Ops:    []core.Op{nn.NewEdgeScore("score", "adj", "el", "er", "e", 2)},
				Graphs: map[string]*core.Graph{"adj": g},
				Values: map[string]*gradcheck.Data{"el": gradcheck.Rand(r, 0, g.NumDst, 2), "er": gradcheck.Rand(r, 0, g.NumSrc, 2)},
				Seeds:  map[string]*gradcheck.Data{"e": edgeSeed(r, g, 2)},
			}
			check(t, c, gradcheck.Options{})
		})
	}
}

// edgeSeed is a random E x h gradient seed, zero on ids no edge uses
// (those rows are not the op's output).
func edgeSeed(r *rand.Rand, g *core.Graph, h int) *gradcheck.Data {
	d := gradcheck.Rand(r, 0, g.NumEdgeIDs(), h)
	used := make([]bool, g.NumEdgeIDs())
	for e := 0; e < g.NumEdges(); e++ {
		used[g.EdgeID(e)] = true
	}
	for id, u := range used {
		if !u {
			clear(d.V[id*h : id*h+h])
		}
	}
	return d
}

func TestGradEdgeSoftmax(t *testing.T) {
	gs := graphs(t)
	dev := device(t)
	for _, gname := range graphNames {
		g := gs[gname]
		t.Run("graph="+gname, func(t *testing.T) {
			r := rng(9)
			c := &gradcheck.Case{Dev: dev,
				Ops:    []core.Op{nn.NewEdgeSoftmax("softmax", "adj", "s", "a", 2)},
				Graphs: map[string]*core.Graph{"adj": g},
				Values: map[string]*gradcheck.Data{"s": gradcheck.Rand(r, 0, g.NumEdgeIDs(), 2)},
				Seeds:  map[string]*gradcheck.Data{"a": edgeSeed(r, g, 2)},
			}
			check(t, c, gradcheck.Options{Eps: 3e-3})
		})
	}
}

func TestGradCrossEntropy(t *testing.T) {
	r := rng(10)
	c := &gradcheck.Case{Dev: device(t),
		Ops:     []core.Op{nn.NewCrossEntropy("loss", "logits", "loss", 4)},
		Values:  map[string]*gradcheck.Data{"logits": gradcheck.Rand(r, 0, 6, 4)},
		Labels:  []int32{0, 3, -1, 2, 1, 1},
		Targets: []int32{0, 1, 3, 5}, LossScale: 0.25,
	}
	check(t, c, gradcheck.Options{Eps: 3e-3})
}

// TestGradAttention checks a whole GAT attention block, op outputs
// feeding op inputs, on every graph of the corpus, with attention dropout.
func TestGradAttention(t *testing.T) {
	gs := graphs(t)
	dev := device(t)
	for _, gname := range []string{"sq", "perm", "khop"} { // square: z feeds both sides
		g := gs[gname]
		t.Run("graph="+gname, func(t *testing.T) {
			r := rng(11)
			const heads, feats = 2, 3
			ops := []core.Op{
				nn.NewHeadDot("att_dst", "z", "a_dst", "el", heads, feats),
				nn.NewHeadDot("att_src", "z", "a_src", "er", heads, feats),
				nn.NewEdgeScore("score", "adj", "el", "er", "e", heads),
				nn.NewLeakyReLU("leaky", "e", "e.act", 0.2, heads).OnEdges(),
				nn.NewEdgeSoftmax("softmax", "adj", "e.act", "alpha", heads),
				nn.NewDropout("attn_drop", "alpha", "alpha.d", 0.3, heads).OnEdges(),
				nn.NewAggregate("agg", "adj", core.ReduceSum, "z", "alpha.d", "y", heads*feats, heads),
			}
			c := &gradcheck.Case{Dev: dev, Ops: ops,
				Graphs:   map[string]*core.Graph{"adj": g},
				Values:   map[string]*gradcheck.Data{"z": gradcheck.Rand(r, 0, g.NumSrc, heads*feats)},
				Params:   map[string]*gradcheck.Data{"a_dst": gradcheck.Rand(r, 0, 1, heads*feats), "a_src": gradcheck.Rand(r, 0, 1, heads*feats)},
				Seeds:    map[string]*gradcheck.Data{"y": gradcheck.Rand(r, 0, g.NumDst, heads*feats)},
				Training: true, Seed: 3,
			}
			check(t, c, gradcheck.Options{Eps: 3e-3})
		})
	}
}

// TestGradEmbedding checks the table's gradient (rows hit several times
// accumulate) and that the input x gets none.
func TestGradEmbedding(t *testing.T) {
	r := rng(40)
	c := &gradcheck.Case{Dev: device(t),
		Ops:      []core.Op{nn.NewEmbedding("emb", "x", "table", "y", 7, 3, 11)},
		Values:   map[string]*gradcheck.Data{"x": gradcheck.Rand(r, 0, 9, 2)},
		Params:   map[string]*gradcheck.Data{"table": gradcheck.Rand(r, 0, 7, 3)},
		Seeds:    map[string]*gradcheck.Data{"y": gradcheck.Rand(r, 0, 9, 3)},
		NeedGrad: map[string]bool{"table": true, "y": true},
	}
	check(t, c, gradcheck.Options{})
}
