package dynamic_test

import (
	"math/rand/v2"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	_ "github.com/gnnkit/gnnkit/models" // the static models, for TestModels
	"github.com/gnnkit/gnnkit/models/dynamic"
	"github.com/gnnkit/gnnkit/models/internal/gradcheck"
)

// TestGradModels checks every parameter gradient of the whole models
// (with their loss) against finite differences on a tiny window.
func TestGradModels(t *testing.T) {
	b, err := cpu.New(core.BackendOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	dev := b.Devices()[0]
	for _, name := range []string{"tgcn", "evolvegcn"} {
		t.Run(name, func(t *testing.T) {
			m, err := core.BuildModel(name, core.ModelConfig{InDim: 3, Hidden: 4, Layers: 3})
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(7, 1))
			const n = 6
			c := &gradcheck.Case{Dev: dev, Ops: m.Ops, Graphs: map[string]*core.Graph{},
				Values: map[string]*gradcheck.Data{"x": gradcheck.Rand(r, 0, n, 3)},
				Params: map[string]*gradcheck.Data{}}
			for _, gs := range m.Graphs {
				var src, dst []int32
				for k := 0; k < 9; k++ {
					src, dst = append(src, int32(r.IntN(n))), append(dst, int32(r.IntN(n)))
				}
				g, err := core.FromEdges(n, n, src, dst)
				if err != nil {
					t.Fatal(err)
				}
				if gs.SelfLoops {
					g, _ = g.WithSelfLoops()
					c.Values[gs.Name+".w"] = &gradcheck.Data{Shape: []int{g.NumEdgeIDs(), 1}, V: g.GCNNorm()}
				}
				c.Graphs[gs.Name] = g
			}
			for _, p := range m.Params {
				c.Params[p.Name] = gradcheck.Rand(r, 0, p.Shape...)
			}
			c.NeedGrad = map[string]bool{}
			for _, p := range m.Params {
				c.NeedGrad[p.Name] = true
			}
			c.Labels = []int32{1, 0, 1, 1, 0, 0, 1, 0, 1}
			c.Targets = []int32{0, 1, 2, 3, 4, 5, 6, 7, 8}
			c.LossScale = 1.0 / 9
			res, err := gradcheck.Check(c, gradcheck.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res) < len(m.Params) {
				t.Errorf("checked %d of %d params", len(res), len(m.Params))
			}
			for _, x := range res {
				for _, bad := range x.Bad {
					t.Errorf("%s%s", x.Name, bad)
				}
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []core.ModelConfig{{}, {InDim: 3, Classes: 3}, {InDim: 3, Dropout: 0.5}, {InDim: 3, Layers: -1}} {
		for _, name := range []string{"tgcn", "evolvegcn"} {
			if _, err := core.BuildModel(name, c); err == nil {
				t.Errorf("%s accepted %+v", name, c)
			}
		}
	}
	m, err := dynamic.TGCN(dynamic.Config{ModelConfig: core.ModelConfig{InDim: 4}})
	if err != nil || m.Config.Layers != 5 || len(m.Graphs) != 6 {
		t.Errorf("defaults: %v %+v", err, m.Config)
	}
}

// TestOpDims: graph ops at their snapshot's edges, the scorer at the
// pairs, the loss at the pair rows, EvolveGCN's LSTM at the weight's rows.
func TestOpDims(t *testing.T) {
	edges := func(g string) core.Dims {
		switch g {
		case dynamic.Adj(0):
			return core.Dims{Nodes: 50, Edges: 100}
		case dynamic.Adj(1):
			return core.Dims{Nodes: 50, Edges: 200}
		case dynamic.Pairs:
			return core.Dims{Nodes: 50, Edges: 80}
		}
		return core.Dims{Nodes: 50, Edges: 300}
	}
	m, err := core.BuildModel("tgcn", core.ModelConfig{InDim: 7, Hidden: 4, Layers: 3})
	if err != nil {
		t.Fatal(err)
	}
	d := dynamic.OpDims(m, 50, edges)
	want := map[string]core.Dims{"gcn.xw": {Nodes: 50}, "gcn.agg.t0": {Nodes: 50, Edges: 100}, "gcn.agg.t2": {Nodes: 50, Edges: 300},
		"t1.z": {Nodes: 50}, "head.score": {Nodes: 50, Edges: 80}, "head.logits": {Nodes: 80}, "loss": {Nodes: 80}}
	for i, op := range m.Ops {
		if w, ok := want[op.Name()]; ok && d[i] != w {
			t.Errorf("%s: %+v, want %+v", op.Name(), d[i], w)
		}
	}
	m, err = core.BuildModel("evolvegcn", core.ModelConfig{InDim: 7, Hidden: 4, Layers: 3})
	if err != nil {
		t.Fatal(err)
	}
	d = dynamic.OpDims(m, 50, edges)
	want = map[string]core.Dims{"t0.i.pre.lin": {Nodes: 7}, "t2.w": {Nodes: 7}, "gcn.xw": {Nodes: 50}, "gcn.agg": {Nodes: 50, Edges: 300}, "loss": {Nodes: 80}}
	for i, op := range m.Ops {
		if w, ok := want[op.Name()]; ok && d[i] != w {
			t.Errorf("%s: %+v, want %+v", op.Name(), d[i], w)
		}
	}
}

// TestModels: Models lists exactly the registered models that score
// pairs over window graphs (they read the "pairs" graph), so a caller can
// tell a dynamic model from a static one by name.
func TestModels(t *testing.T) {
	dyn := map[string]bool{}
	for _, name := range dynamic.Models() {
		dyn[name] = true
	}
	if len(dyn) != 2 || !dyn["tgcn"] || !dyn["evolvegcn"] {
		t.Errorf("Models() = %v, want tgcn and evolvegcn", dynamic.Models())
	}
	static := 0
	for _, name := range core.Models() {
		m, err := core.BuildModel(name, core.ModelConfig{InDim: 3, Hidden: 4, Classes: 2, Layers: 2})
		if err != nil {
			if dyn[name] {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if !dyn[name] {
			static++
		}
		pairs := false
		for _, g := range m.Graphs {
			pairs = pairs || g.Name == dynamic.Pairs
		}
		if pairs != dyn[name] {
			t.Errorf("%s reads the pairs graph: %v; listed by Models: %v", name, pairs, dyn[name])
		}
	}
	if static == 0 {
		t.Error("no static model built: the check compared nothing")
	}
}
