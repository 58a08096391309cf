package nn_test

import (
	"fmt"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/models/nn"
)

// A one-layer GCN assembled from the package's ops as a core.Model
// (logits = Â·X·W + b, then the cross-entropy), run forward and backward
// by hand on the CPU backend over the path 0-1-2 with self-loops. The
// gradients of the parameters land in the device's accumulators; the
// data input x gets none, since it does not need one.
func Example() {
	m := &core.Model{Name: "gcn1", Inputs: []string{"x"},
		Graphs: []core.GraphSpec{{Name: "adj", SelfLoops: true, Weights: core.WeightsGCN}},
		Params: []core.ParamSpec{{Name: "W", Shape: []int{2, 2}}, {Name: "b", Shape: []int{1, 2}, Init: core.InitZeros}},
		Ops: []core.Op{
			nn.NewLinear("xw", "x", "W", "xw", 2, 2),
			nn.NewAggregate("agg", "adj", core.ReduceSum, "xw", "adj.w", "agg", 2, 1),
			nn.NewBias("logits", "agg", "b", "logits", 2),
			nn.NewCrossEntropy("loss", "logits", "loss", 2),
		},
		Output: "logits"}
	if err := m.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	nn.AnnotateGrads(m)

	b, err := cpu.New(core.BackendOptions{Threads: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	dev := b.Devices()[0]
	upload := func(v []float32, shape ...int) *core.Tensor {
		t, err := dev.Alloc(shape...)
		if err != nil {
			panic(err)
		}
		if err := dev.Upload(t, v); err != nil {
			panic(err)
		}
		return t
	}
	download := func(t *core.Tensor) []float32 {
		v := make([]float32, t.Len())
		if err := dev.Download(v, t); err != nil {
			panic(err)
		}
		return v
	}

	// Fixed parameters and their (zeroed) gradient accumulators.
	params := map[string]*core.Tensor{
		"W": upload([]float32{1, -1, 0.5, 0.5}, 2, 2),
		"b": upload([]float32{0, 0.1}, 1, 2),
	}
	grads := map[string]*core.Tensor{}
	for _, p := range m.Params {
		g, err := dev.Alloc(p.Shape...) // zero-filled accumulator
		if err != nil {
			panic(err)
		}
		grads[p.Name] = g
	}
	defer func() {
		for _, t := range params {
			dev.Free(t)
		}
		for _, t := range grads {
			dev.Free(t)
		}
	}()

	env := core.NewEnv(dev, params, grads, m.NeedsGrad())
	defer env.Release()
	g, _ := core.Undirected(3, []int32{0, 1}, []int32{1, 2})
	g, _ = g.WithSelfLoops()
	env.Graphs["adj"] = g
	for name, t := range map[string]*core.Tensor{
		"x":     upload([]float32{1, 0, 0, 1, 1, 1}, 3, 2),
		"adj.w": upload(g.GCNNorm(), g.NumEdgeIDs(), 1),
	} {
		env.Adopt(t)
		env.SetValue(name, t)
	}
	env.Labels, env.Targets, env.LossScale = []int32{0, 1, 1}, []int32{0, 1, 2}, 1.0/3

	for _, op := range m.Ops {
		if err := op.Forward(env); err != nil {
			fmt.Println(err)
			return
		}
	}
	logits, _ := env.Value("logits")
	fmt.Printf("logits %v: %.4f\n", logits.Shape, download(logits))
	fmt.Printf("loss %.4f\n", env.Loss)

	for i := len(m.Ops) - 1; i >= 0; i-- {
		if err := m.Ops[i].Backward(env); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Printf("dW %.4f\n", download(grads["W"]))
	fmt.Printf("db %.4f\n", download(grads["b"]))
	fmt.Println("x has a gradient:", env.Grad("x") != nil)
	// Output:
	// logits [3 2]: [0.7041 -0.1959 1.1873 -0.3457 0.9541 0.0541]
	// loss 1.1036
	// dW [0.2942 -0.2942 0.3792 -0.3792]
	// db [0.4148 -0.4148]
	// x has a gradient: false
}

// NewLinear and NewBias form a dense layer y = x·W + b. The example runs
// it forward on a 2 x 3 input with fixed weights and reads the matrix
// products Linear runs for a batch of two rows: x·W forward, xᵀ·dy for
// dW backward (x is data, so no dx).
func ExampleNewLinear() {
	b, err := cpu.New(core.BackendOptions{Threads: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	dev := b.Devices()[0]
	upload := func(v []float32, shape ...int) *core.Tensor {
		t, err := dev.Alloc(shape...)
		if err != nil {
			panic(err)
		}
		if err := dev.Upload(t, v); err != nil {
			panic(err)
		}
		return t
	}

	params := map[string]*core.Tensor{
		"W": upload([]float32{1, 0, 0, 1, 1, 1}, 3, 2), // 3 x 2
		"b": upload([]float32{10, 20}, 1, 2),
	}
	defer func() {
		for _, t := range params {
			dev.Free(t)
		}
	}()
	env := core.NewEnv(dev, params, nil, nil) // inference: no gradients
	defer env.Release()
	x := upload([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	env.Adopt(x)
	env.SetValue("x", x)

	lin := nn.NewLinear("dense", "x", "W", "dense.xw", 3, 2)
	bias := nn.NewBias("dense.b", "dense.xw", "b", "y", 2)
	for _, op := range []core.Op{lin, bias} {
		if err := op.Forward(env); err != nil {
			fmt.Println(err)
			return
		}
	}
	y, _ := env.Value("y")
	v := make([]float32, y.Len())
	if err := dev.Download(v, y); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("y", y.Shape, v)

	m := &core.Model{Name: "dense", Inputs: []string{"x"},
		Params: []core.ParamSpec{{Name: "W", Shape: []int{3, 2}}, {Name: "b", Shape: []int{1, 2}}},
		Ops:    []core.Op{lin, bias}, Output: "y"}
	nn.AnnotateGrads(m)
	fwd, bwd := lin.GEMMs(core.Dims{Nodes: 2})
	fmt.Println("forward GEMMs", fwd, "backward GEMMs", bwd)
	// Output:
	// y [2 2] [14 25 20 31]
	// forward GEMMs [{2 2 3}] backward GEMMs [{3 2 2}]
}

// NewAggregate is message passing: each node reduces the rows of its
// in-neighbours. Over the edges 1→0, 2→0 and 0→1 (node 2 has none), a sum
// adds the neighbours' rows, a mean averages them, and an E x 1 edge
// weight scales each message (GCN's normalisation is such a weight).
func ExampleNewAggregate() {
	b, err := cpu.New(core.BackendOptions{Threads: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	dev := b.Devices()[0]
	upload := func(v []float32, shape ...int) *core.Tensor {
		t, err := dev.Alloc(shape...)
		if err != nil {
			panic(err)
		}
		if err := dev.Upload(t, v); err != nil {
			panic(err)
		}
		return t
	}

	env := core.NewEnv(dev, nil, nil, nil)
	defer env.Release()
	// Edges sorted by (dst, src), so edge id k is the k-th edge listed.
	g, err := core.FromEdges(3, 3, []int32{1, 2, 0}, []int32{0, 0, 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	env.Graphs["adj"] = g
	for name, t := range map[string]*core.Tensor{
		"x": upload([]float32{1, 10, 2, 20, 4, 40}, 3, 2),
		"w": upload([]float32{0.5, 0.25, 2}, g.NumEdgeIDs(), 1),
	} {
		env.Adopt(t)
		env.SetValue(name, t)
	}
	for _, op := range []*nn.Aggregate{
		nn.NewAggregate("sum", "adj", core.ReduceSum, "x", "", "sum", 2, 0),
		nn.NewAggregate("mean", "adj", core.ReduceMean, "x", "", "mean", 2, 0),
		nn.NewAggregate("weighted", "adj", core.ReduceSum, "x", "w", "weighted", 2, 1),
	} {
		if err := op.Forward(env); err != nil {
			fmt.Println(err)
			return
		}
		y, _ := env.Value(op.Outputs()[0])
		v := make([]float32, y.Len())
		if err := dev.Download(v, y); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%-8s %v\n", op.Name(), v)
	}
	// Output:
	// sum      [6 60 1 10 0 0]
	// mean     [3 30 1 10 0 0]
	// weighted [2 20 2 20 0 0]
}

// NewEdgeSoftmax normalises per-edge scores over each destination's
// in-edges, as GAT's attention does: the three edges into node 0 share
// its weight, the single edge into node 1 gets all of node 1's.
func ExampleNewEdgeSoftmax() {
	b, err := cpu.New(core.BackendOptions{Threads: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	dev := b.Devices()[0]

	env := core.NewEnv(dev, nil, nil, nil)
	defer env.Release()
	g, err := core.FromEdges(2, 4, []int32{1, 2, 3, 0}, []int32{0, 0, 0, 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	env.Graphs["adj"] = g
	s, err := env.Alloc(g.NumEdgeIDs(), 1) // one head
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := dev.Upload(s, []float32{1, 2, 3, 5}); err != nil {
		fmt.Println(err)
		return
	}
	env.SetValue("score", s)

	if err := nn.NewEdgeSoftmax("softmax", "adj", "score", "alpha", 1).Forward(env); err != nil {
		fmt.Println(err)
		return
	}
	alpha, _ := env.Value("alpha")
	v := make([]float32, alpha.Len())
	if err := dev.Download(v, alpha); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("alpha %v: %.4f\n", alpha.Shape, v)
	// Output:
	// alpha [4 1]: [0.0900 0.2447 0.6652 1.0000]
}

// NewPairScore scores node pairs for link prediction: the pairs are the
// edges of a graph, and pair k (edge id k, src v → dst u) gets the logits
// [0, <a[u], b[v]>], so that the cross-entropy over them with 0/1 labels
// is the binary cross-entropy of the score.
func ExampleNewPairScore() {
	b, err := cpu.New(core.BackendOptions{Threads: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	dev := b.Devices()[0]

	env := core.NewEnv(dev, nil, nil, nil)
	defer env.Release()
	// Pairs (0,1), (0,2) and (2,1) as (u, v): edges v → u, listed in id order.
	pairs, err := core.FromEdges(3, 3, []int32{1, 2, 1}, []int32{0, 0, 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	env.Graphs["pairs"] = pairs
	h, err := env.Alloc(3, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := dev.Upload(h, []float32{1, 0, 2, 3, -1, 1}); err != nil {
		fmt.Println(err)
		return
	}
	env.SetValue("h", h)

	if err := nn.NewPairScore("score", "pairs", "h", "h", "logits", 2).Forward(env); err != nil {
		fmt.Println(err)
		return
	}
	y, _ := env.Value("logits")
	v := make([]float32, y.Len())
	if err := dev.Download(v, y); err != nil {
		fmt.Println(err)
		return
	}
	for k := range pairs.NumEdgeIDs() {
		fmt.Printf("pair %d: logits %v\n", k, v[2*k:2*k+2])
	}
	// Output:
	// pair 0: logits [0 2]
	// pair 1: logits [0 -1]
	// pair 2: logits [0 1]
}

// AnnotateGrads lets Cost leave out the backward work Backward will skip:
// in a model where x is data and the GCN weights a fixed input, neither
// the Linear's dx nor the Aggregate's edge-weight gradient is computed.
func ExampleAnnotateGrads() {
	lin := nn.NewLinear("lin", "x", "W", "xw", 8, 4)
	agg := nn.NewAggregate("agg", "adj", core.ReduceSum, "xw", "adj.w", "y", 4, 1)
	d := core.Dims{Nodes: 100, Edges: 1000}
	fmt.Println("FLOPs before:", lin.Cost(d).FLOPs, agg.Cost(d).FLOPs)

	m := &core.Model{Name: "gcn", Inputs: []string{"x"},
		Graphs: []core.GraphSpec{{Name: "adj", Weights: core.WeightsGCN}},
		Params: []core.ParamSpec{{Name: "W", Shape: []int{8, 4}}},
		Ops:    []core.Op{lin, agg}, Output: "y"}
	if err := m.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	nn.AnnotateGrads(m)
	fmt.Println("FLOPs after: ", lin.Cost(d).FLOPs, agg.Cost(d).FLOPs)
	fmt.Println("model FLOPs: ", m.Cost(d).FLOPs)
	// Output:
	// FLOPs before: 19200 24000
	// FLOPs after:  12800 16000
	// model FLOPs:  28800
}
