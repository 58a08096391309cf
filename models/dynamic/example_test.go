package dynamic_test

import (
	"fmt"
	"strings"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/models/dynamic"
)

// TGCN over a window of two snapshots of a 4-node graph, run forward and
// backward on the CPU backend as the runtime would: the snapshots get
// self-loops and their GCN weights ("adj.t<k>.w"), the scored pairs are
// the edges of the "pairs" graph (pair k is the edge with id k), every
// pair is a loss target, and the parameters take their initial values for
// seed 1. Each pair's logits are [0, score]; the loss is the binary
// cross-entropy of the scores against the 0/1 labels, and backward
// through the window reaches every parameter.
func ExampleTGCN() {
	m, err := dynamic.TGCN(dynamic.Config{ModelConfig: core.ModelConfig{InDim: 3, Hidden: 4, Layers: 2}, Embed: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
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

	params, grads := map[string]*core.Tensor{}, map[string]*core.Tensor{}
	for _, p := range m.Params {
		params[p.Name] = upload(p.Initial(1), p.Shape...)
		g, err := dev.Alloc(p.Shape...) // zero-filled accumulator
		if err != nil {
			panic(err)
		}
		grads[p.Name] = g
	}
	defer func() {
		for _, p := range m.Params {
			dev.Free(params[p.Name])
			dev.Free(grads[p.Name])
		}
	}()
	env := core.NewEnv(dev, params, grads, m.NeedsGrad())
	defer env.Release()

	const n = 4
	snapshots := [][2][]int32{ // src, dst of each snapshot, oldest first
		{{0, 1, 2}, {1, 2, 3}},
		{{0, 1, 2, 3}, {1, 2, 3, 0}},
	}
	for t, e := range snapshots {
		g, _ := core.Undirected(n, e[0], e[1])
		g, _ = g.WithSelfLoops()
		env.Graphs[dynamic.Adj(t)] = g
		w := upload(g.GCNNorm(), g.NumEdgeIDs(), 1)
		env.Adopt(w)
		env.SetValue(dynamic.Adj(t)+".w", w)
	}
	// Pairs (u, v) = (0, 2), (1, 3), (3, 0) as edges v → u, in id order.
	pairs, _ := core.FromEdges(n, n, []int32{2, 3, 0}, []int32{0, 1, 3})
	env.Graphs[dynamic.Pairs] = pairs
	x := upload([]float32{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, n, 3)
	env.Adopt(x)
	env.SetValue(dynamic.Features, x)
	env.Labels = []int32{1, 0, 1}
	env.Targets, env.LossScale = []int32{0, 1, 2}, 1.0/3

	for _, op := range m.Ops {
		if err := op.Forward(env); err != nil {
			fmt.Println(err)
			return
		}
	}
	logits, _ := env.Value(dynamic.Logits)
	v := make([]float32, logits.Len())
	if err := dev.Download(v, logits); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("graphs:", len(m.Graphs), "params:", len(m.Params), "ops:", len(m.Ops))
	fmt.Println("logits:", logits.Shape)
	for k := range pairs.NumEdgeIDs() {
		fmt.Printf("pair %d: score %.4f\n", k, v[2*k+1]-v[2*k])
	}
	fmt.Printf("loss %.4f\n", env.Loss)

	for i := len(m.Ops) - 1; i >= 0; i-- {
		if err := m.Ops[i].Backward(env); err != nil {
			fmt.Println(err)
			return
		}
	}
	reached := 0
	for _, p := range m.Params {
		g := make([]float32, grads[p.Name].Len())
		if err := dev.Download(g, grads[p.Name]); err != nil {
			fmt.Println(err)
			return
		}
		for _, v := range g {
			if v != 0 {
				reached++
				break
			}
		}
	}
	fmt.Printf("params with a gradient: %d of %d\n", reached, len(m.Params))
	// Output:
	// graphs: 3 params: 14 ops: 39
	// logits: [3 2]
	// pair 0: score -0.0413
	// pair 1: score -0.0519
	// pair 2: score 0.0587
	// loss 0.6819
	// params with a gradient: 14 of 14
}

// EvolveGCN evolves the GCN weight itself with an LSTM, once per window
// step, and applies the GCN to the window's last snapshot only: its only
// snapshot graph is "adj.t{w-1}". Built through the registry, with the
// defaults filled in (Classes 2, Embed = Hidden).
func ExampleEvolveGCN() {
	m, err := core.BuildModel("evolvegcn", core.ModelConfig{InDim: 8, Hidden: 16, Layers: 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: classes %d, window %d, output %q\n", m.Name, m.Config.Classes, m.Config.Layers, m.Output)
	for _, g := range m.Graphs {
		fmt.Printf("graph %s: self-loops %v\n", g.Name, g.SelfLoops)
	}
	var names []string
	for _, p := range m.Params {
		names = append(names, p.Name)
	}
	fmt.Println("params:", strings.Join(names, " "))
	fmt.Println("param bytes:", m.ParamBytes(), "ops:", len(m.Ops))
	// Output:
	// evolvegcn: classes 2, window 3, output "logits"
	// graph adj.t2: self-loops true
	// graph pairs: self-loops false
	// params: gcn.weight gcn.bias lstm.ui lstm.bi lstm.uf lstm.bf lstm.uo lstm.bo lstm.uc lstm.bc head.a head.b head.bias
	// param bytes: 6984 ops: 55
}

// OpDims sizes each op of a model for one group of a dynamic graph: the
// GCN aggregations at their own snapshot's edges (self-loops included),
// the pair scorer at the pairs, the GRU at the group's rows and the loss
// at the pair logits' rows. Op.Cost at those sizes estimates each op's work.
func ExampleOpDims() {
	m, err := core.BuildModel("tgcn", core.ModelConfig{InDim: 8, Hidden: 16, Layers: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	const rows = 100
	graphs := func(name string) core.Dims {
		switch name {
		case dynamic.Adj(0):
			return core.Dims{Nodes: rows, Edges: 400}
		case dynamic.Adj(1):
			return core.Dims{Nodes: rows, Edges: 500}
		case dynamic.Pairs:
			return core.Dims{Nodes: rows, Edges: 60}
		}
		return core.Dims{}
	}
	dims := dynamic.OpDims(m, rows, graphs)
	out := dynamic.OpOutRows(m, rows, graphs)
	for i, op := range m.Ops {
		switch name := op.Name(); {
		case strings.HasPrefix(name, "gcn."), strings.HasPrefix(name, "head."), name == "t1.h", name == dynamic.Loss:
			fmt.Printf("%-12s nodes %3d edges %3d -> %3d rows, %6d FLOPs\n", name, dims[i].Nodes, dims[i].Edges, out[i], op.Cost(dims[i]).FLOPs)
		}
	}
	// Output:
	// gcn.xw       nodes 100 edges   0 -> 100 rows,  51200 FLOPs
	// gcn.agg.t0   nodes 100 edges 400 -> 100 rows,  25600 FLOPs
	// gcn.agg.t1   nodes 100 edges 500 -> 100 rows,  32000 FLOPs
	// t1.h         nodes 100 edges   0 -> 100 rows,   1600 FLOPs
	// head.ea      nodes 100 edges   0 -> 100 rows, 153600 FLOPs
	// head.eb      nodes 100 edges   0 -> 100 rows, 153600 FLOPs
	// head.score   nodes 100 edges  60 ->  60 rows,   5760 FLOPs
	// head.logits  nodes  60 edges   0 ->  60 rows,    240 FLOPs
	// loss         nodes  60 edges   0 ->  60 rows,   1440 FLOPs
}

// TGCNVertex is T-GCN rewritten for the vertex-partition baseline: each
// part's ops carry the prefix PartPrefix(p), so that a scheduler runs
// them on device p, and read per-part graphs named by VP (which
// engine/dyntrain builds from a group); the gather of the pair logits and
// the loss run on the home device.
func ExampleTGCNVertex() {
	cfg := dynamic.Config{ModelConfig: core.ModelConfig{InDim: 8, Hidden: 16, Layers: 2}}
	m, err := dynamic.TGCNVertex(cfg, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	plain, err := dynamic.TGCN(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("same params as TGCN:", len(m.Params) == len(plain.Params))
	perPart := map[string]int{}
	for _, op := range m.Ops {
		part := "home"
		for p := range 2 {
			if strings.HasPrefix(op.Name(), dynamic.PartPrefix(p)) {
				part = dynamic.PartPrefix(p)
			}
		}
		perPart[part]++
	}
	fmt.Println("ops:", perPart)
	var part0 []string
	for _, g := range m.Graphs {
		if strings.HasSuffix(g.Name, ".p0") || strings.Contains(g.Name, ".p0.") {
			part0 = append(part0, g.Name)
		}
	}
	fmt.Println("graphs:", len(m.Graphs), "of part 0:", part0)
	fmt.Println(dynamic.VP.Adj(1, 0), "(snapshot 1, part 0)")
	fmt.Println(dynamic.VP.Send(1, 0), "(rows part 1 sends part 0)")
	// Output:
	// same params as TGCN: true
	// ops: map[home:4 p0.:45 p1.:45]
	// graphs: 18 of part 0: [vp.sel.p0 vp.adj.t0.p0 vp.adj.t1.p0 vp.own.p0 vp.send.p0.to1 vp.recv.p0.from1 vp.ext.p0 vp.pairs.p0 vp.gather.p0]
	// vp.adj.t1.p0 (snapshot 1, part 0)
	// vp.send.p1.to0 (rows part 1 sends part 0)
}
