package models_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/models"
	"github.com/gnnkit/gnnkit/models/internal/gradcheck"
)

var builders = []struct {
	name  string
	build func(core.ModelConfig) (*core.Model, error)
}{{"gcn", models.GCN}, {"sage", models.SAGE}, {"gat", models.GAT}}

// dagBuilders are the multi-branch (DAG-shaped) models.
var dagBuilders = []struct {
	name  string
	build func(core.ModelConfig) (*core.Model, error)
}{{"mbgnn", models.MultiBranchGNN}, {"uno", models.Uno}, {"dlrm", models.DLRM}}

// TestGradDAGModels checks every parameter gradient of the DAG models
// (forks into branches, sums as joins) against central differences.
func TestGradDAGModels(t *testing.T) {
	dev := device(t)
	for _, b := range dagBuilders {
		t.Run("model="+b.name, func(t *testing.T) {
			m, err := b.build(core.ModelConfig{InDim: 5, Hidden: 4, Classes: 3, Branches: 3})
			if err != nil {
				t.Fatal(err)
			}
			// Seed 12 puts no ReLU input within the step of its kink (seed 11
			// does for one dlrm sample: central differences then halve).
			res, err := gradcheck.Check(modelCase(t, dev, m, 12), gradcheck.Options{Eps: 3e-3})
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != len(m.Params) {
				t.Fatalf("checked %d tensors, model has %d params", len(res), len(m.Params))
			}
			for _, r := range res {
				for _, e := range r.Bad {
					t.Errorf("%s%s", r.Name, e)
				}
			}
		})
	}
}

func TestRegistered(t *testing.T) {
	names := core.Models()
	for _, b := range builders {
		if !slices.Contains(names, b.name) {
			t.Errorf("model %q is not registered (have %v)", b.name, names)
		}
		m, err := core.BuildModel(b.name, core.ModelConfig{InDim: 10, Classes: 3})
		if err != nil {
			t.Fatalf("%s: %v", b.name, err)
		}
		if m.Name != b.name || m.Output != models.Logits {
			t.Errorf("%s: name %q output %q", b.name, m.Name, m.Output)
		}
		last := m.Ops[len(m.Ops)-1]
		if last.Kind() != core.KindLoss || !slices.Equal(last.Outputs(), []string{models.Loss}) {
			t.Errorf("%s: last op %s (%v) writes %v, want the loss", b.name, last.Name(), last.Kind(), last.Outputs())
		}
	}
}

func TestConfigErrors(t *testing.T) {
	for _, b := range builders {
		for _, tc := range []struct {
			cfg  core.ModelConfig
			want string
		}{
			{core.ModelConfig{Classes: 3}, "InDim"},
			{core.ModelConfig{InDim: 4}, "Classes"},
			{core.ModelConfig{InDim: 4, Classes: 3, Hidden: -1}, "negative"},
			{core.ModelConfig{InDim: 4, Classes: 3, Dropout: 1}, "Dropout"},
			{core.ModelConfig{InDim: 4, Classes: 3, AttnDropout: -0.1}, "AttnDropout"},
		} {
			_, err := b.build(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "models: "+b.name) {
				t.Errorf("%s(%+v) = %v, want an error about %s", b.name, tc.cfg, err, tc.want)
			}
		}
	}
}

func shapes(m *core.Model) map[string][]int {
	s := map[string][]int{}
	for _, p := range m.Params {
		s[p.Name] = p.Shape
	}
	return s
}

func TestDefaults(t *testing.T) {
	cfg := core.ModelConfig{InDim: 20, Classes: 5}
	gcn, _ := models.GCN(cfg)
	if s := shapes(gcn); !slices.Equal(s["conv0.weight"], []int{20, 16}) || !slices.Equal(s["conv1.weight"], []int{16, 5}) || len(s) != 4 {
		t.Errorf("gcn params %v", s)
	}
	if c := gcn.Config; c.Hidden != 16 || c.Layers != 2 {
		t.Errorf("gcn config %+v", c)
	}
	for _, p := range gcn.Params {
		if p.WeightDecay != strings.HasPrefix(p.Name, "conv0.") {
			t.Errorf("gcn: %s weight decay %v; the reference decays the first layer only", p.Name, p.WeightDecay)
		}
	}
	if g := gcn.Graphs[0]; g != (core.GraphSpec{Name: "adj", SelfLoops: true, Weights: core.WeightsGCN}) {
		t.Errorf("gcn graph %+v", g)
	}
	sage, _ := models.SAGE(cfg)
	if s := shapes(sage); !slices.Equal(s["conv0.lin_self.weight"], []int{20, 16}) || !slices.Equal(s["conv1.lin_neigh.weight"], []int{16, 5}) || len(s) != 6 {
		t.Errorf("sage params %v", s)
	}
	if g := sage.Graphs[0]; g != (core.GraphSpec{Name: "adj", SelfLoops: false, Weights: core.WeightsMean}) {
		t.Errorf("sage graph %+v", g)
	}
	gat, _ := models.GAT(cfg)
	s := shapes(gat)
	if !slices.Equal(s["conv0.weight"], []int{20, 64}) || !slices.Equal(s["conv0.att_src"], []int{1, 64}) ||
		!slices.Equal(s["conv1.weight"], []int{64, 5}) || !slices.Equal(s["conv1.bias"], []int{1, 5}) || len(s) != 8 {
		t.Errorf("gat params %v", s)
	}
	if c := gat.Config; c.Hidden != 8 || c.Heads != 8 || c.Layers != 2 {
		t.Errorf("gat config %+v", c)
	}
	for _, p := range gat.Params {
		if !p.WeightDecay {
			t.Errorf("gat: %s has no weight decay; the reference decays all parameters", p.Name)
		}
	}
	if g := gat.Graphs[0]; g != (core.GraphSpec{Name: "adj", SelfLoops: true}) {
		t.Errorf("gat graph %+v", g)
	}
}

func TestLayers(t *testing.T) {
	for _, b := range builders {
		for _, layers := range []int{1, 2, 3} {
			m, err := b.build(core.ModelConfig{InDim: 6, Classes: 3, Layers: layers, Hidden: 4, Heads: 2})
			if err != nil {
				t.Fatalf("%s layers=%d: %v", b.name, layers, err)
			}
			if err := m.Validate(); err != nil {
				t.Errorf("%s layers=%d: %v", b.name, layers, err)
			}
			if got := len(m.Params) / len(shapes(mustBuild(t, b.build, 1))); got != layers {
				t.Errorf("%s layers=%d: %d params", b.name, layers, len(m.Params))
			}
			c := m.Cost(core.Dims{Nodes: 100, Edges: 500})
			if c.FLOPs <= 0 || c.BytesMoved <= 0 || c.ActivationBytes <= 0 || c.WeightBytes != m.ParamBytes() {
				t.Errorf("%s layers=%d: cost %+v (param bytes %d)", b.name, layers, c, m.ParamBytes())
			}
		}
	}
}

func mustBuild(t *testing.T, build func(core.ModelConfig) (*core.Model, error), layers int) *core.Model {
	m, err := build(core.ModelConfig{InDim: 6, Classes: 3, Layers: layers, Hidden: 4, Heads: 2})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tinyData is a 9-node symmetric graph (one isolated node) with features
// and labels.
func tinyData(r *rand.Rand, inDim, classes int) (*core.Graph, *gradcheck.Data, []int32) {
	a := []int32{0, 0, 1, 2, 3, 4, 5, 6, 6, 1}
	b := []int32{1, 2, 3, 3, 4, 5, 6, 7, 2, 5}
	g, err := core.Undirected(9, a, b) // node 8 has no edges
	if err != nil {
		panic(err)
	}
	labels := make([]int32, g.NumDst)
	for i := range labels {
		labels[i] = int32(r.IntN(classes))
	}
	return g, gradcheck.Rand(r, 0, g.NumDst, inDim), labels
}

// prepare binds the graph and its weights as the runtime does for spec.
func prepare(t *testing.T, base *core.Graph, spec core.GraphSpec) (*core.Graph, *gradcheck.Data) {
	t.Helper()
	g := base
	if spec.SelfLoops {
		var err error
		if g, err = base.WithSelfLoops(); err != nil {
			t.Fatal(err)
		}
	}
	var w []float32
	switch spec.Weights {
	case core.WeightsNone:
		return g, nil
	case core.WeightsGCN:
		w = g.GCNNorm()
	case core.WeightsMean:
		w = g.MeanWeights()
	}
	return g, &gradcheck.Data{Shape: []int{len(w), 1}, V: w}
}

// modelCase sets up one full forward/backward of m on the tiny graph.
func modelCase(t *testing.T, dev core.Device, m *core.Model, seed uint64) *gradcheck.Case {
	r := rand.New(rand.NewPCG(seed, 1))
	base, x, labels := tinyData(r, m.Config.InDim, m.Config.Classes)
	c := &gradcheck.Case{Dev: dev, Ops: m.Ops,
		Graphs:   map[string]*core.Graph{},
		Values:   map[string]*gradcheck.Data{models.Features: x},
		Params:   map[string]*gradcheck.Data{},
		NeedGrad: m.NeedsGrad(),
		Labels:   labels, Targets: []int32{0, 2, 3, 5, 7, 8}, LossScale: 1.0 / 6,
	}
	for _, spec := range m.Graphs { // graph-free models (uno, dlrm) have none
		g, w := prepare(t, base, spec)
		c.Graphs[spec.Name] = g
		if w != nil {
			c.Values[spec.Name+".w"] = w
		}
	}
	for _, p := range m.Params {
		d := &gradcheck.Data{Shape: p.Shape, V: p.Initial(seed)}
		if p.Init == core.InitZeros { // move biases off zero
			d = gradcheck.Rand(r, 0, p.Shape...)
			for i := range d.V {
				d.V[i] *= 0.1
			}
		}
		c.Params[p.Name] = d
	}
	return c
}

func device(t *testing.T) core.Device {
	t.Helper()
	b, err := cpu.New(core.BackendOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b.Devices()[0]
}

// TestGradModels checks every parameter gradient of each whole model
// (dropout off) against central differences of the loss.
func TestGradModels(t *testing.T) {
	dev := device(t)
	for _, b := range builders {
		for _, layers := range []int{2, 3} {
			t.Run(fmt.Sprintf("model=%s/layers=%d", b.name, layers), func(t *testing.T) {
				m, err := b.build(core.ModelConfig{InDim: 5, Hidden: 4, Classes: 3, Layers: layers, Heads: 2})
				if err != nil {
					t.Fatal(err)
				}
				c := modelCase(t, dev, m, 7)
				res, err := gradcheck.Check(c, gradcheck.Options{Eps: 1e-2})
				if err != nil {
					t.Fatal(err)
				}
				if len(res) != len(m.Params) {
					t.Fatalf("checked %d tensors, model has %d params", len(res), len(m.Params))
				}
				for _, r := range res {
					t.Logf("%-22s max rel err %.2e (max abs err %.2e, grad scale %.2e)", r.Name, r.MaxRel, r.MaxAbs, r.Scale)
					// The destination attention vector only gets a gradient
					// through LeakyReLU's kink: edge softmax is invariant to a
					// per-row shift, so where every score of a row is on one
					// side of 0 its gradient is exactly zero.
					if r.Scale == 0 && !strings.HasSuffix(r.Name, "att_dst") {
						t.Errorf("%s: no gradient reaches it", r.Name)
					}
					for _, e := range r.Bad {
						t.Errorf("%s%s", r.Name, e)
					}
				}
			})
		}
	}
}

// TestTrainingMode runs each model with dropout on, checks the loss is
// finite and that dropout changes it, and that evaluation (no targets)
// gives loss 0 and the same logits twice.
func TestTrainingMode(t *testing.T) {
	dev := device(t)
	for _, b := range append(slices.Clip(builders), dagBuilders...) {
		t.Run("model="+b.name, func(t *testing.T) {
			m, err := b.build(core.ModelConfig{InDim: 5, Hidden: 4, Classes: 3, Heads: 2, Dropout: 0.5, AttnDropout: 0.5})
			if err != nil {
				t.Fatal(err)
			}
			c := modelCase(t, dev, m, 3)
			plain, _, err := c.Run(true)
			if err != nil {
				t.Fatal(err)
			}
			c.Training, c.Seed = true, 99
			dropped, grads, err := c.Run(true)
			if err != nil {
				t.Fatal(err)
			}
			if math.IsNaN(dropped) || dropped <= 0 || dropped == plain {
				t.Errorf("loss %v with dropout, %v without", dropped, plain)
			}
			if len(grads) != len(m.Params) {
				t.Errorf("%d gradients for %d params", len(grads), len(m.Params))
			}
			c.Training, c.Targets = false, nil
			if l, _, err := c.Run(true); err != nil || l != 0 {
				t.Errorf("evaluation: loss %v, %v; want 0", l, err)
			}
		})
	}
}

// TestDAGDropout checks where uno and dlrm put their dropout: after
// every hidden ReLU (the branches' or the bottom MLP's layers, and the
// trunk's hidden layer) at Dropout > 0, and no dropout op at 0, so the
// pipeline benchmarks' op graphs stay as they were.
func TestDAGDropout(t *testing.T) {
	for _, tc := range []struct {
		model string
		want  int // dropout ops at Dropout > 0: hidden ReLUs
	}{
		{"uno", 3*2 + 1},  // 3 branches of 2 layers, the trunk's hidden layer
		{"dlrm", 1*2 + 1}, // the bottom MLP's 2 layers, the top MLP's hidden layer
	} {
		for _, p := range []float32{0, 0.3} {
			m, err := core.BuildModel(tc.model, core.ModelConfig{InDim: 5, Hidden: 4, Classes: 3, Branches: 3, Dropout: p})
			if err != nil {
				t.Fatal(err)
			}
			var drops, relus int
			for i, op := range m.Ops {
				name := op.Name()
				if !strings.HasSuffix(name, ".drop") {
					if strings.HasSuffix(name, "relu") {
						relus++
					}
					continue
				}
				drops++
				if prev := m.Ops[i-1].Name(); !strings.HasSuffix(prev, "relu") || name != prev+".drop" {
					t.Errorf("%s, Dropout %g: dropout %s follows %s, want a ReLU's", tc.model, p, name, prev)
				}
			}
			if want := map[bool]int{false: 0, true: tc.want}[p > 0]; drops != want || relus != tc.want {
				t.Errorf("%s, Dropout %g: %d dropout ops and %d ReLUs, want %d and %d", tc.model, p, drops, relus, want, tc.want)
			}
		}
	}
}

// TestLearns trains each model with Adam through the device kernels and
// expects the loss to fall well below its start.
func TestLearns(t *testing.T) {
	dev := device(t)
	k := dev.Kernels()
	for _, b := range builders {
		t.Run("model="+b.name, func(t *testing.T) {
			m, err := b.build(core.ModelConfig{InDim: 5, Hidden: 8, Classes: 3, Heads: 2})
			if err != nil {
				t.Fatal(err)
			}
			c := modelCase(t, dev, m, 5)
			var first, last float64
			state := map[string][2][]float32{}
			for step := 1; step <= 100; step++ {
				loss, grads, err := c.Run(true)
				if err != nil {
					t.Fatal(err)
				}
				if step == 1 {
					first = loss
				}
				last = loss
				for name, g := range grads {
					p := c.Params[name]
					st := state[name]
					if st[0] == nil {
						st = [2][]float32{make([]float32, len(g)), make([]float32, len(g))}
						state[name] = st
					}
					ts := make([]*core.Tensor, 4)
					for i, v := range [][]float32{p.V, g, st[0], st[1]} {
						if ts[i], err = core.NewHostTensor(v, len(v)); err != nil {
							t.Fatal(err)
						}
					}
					if err := k.Adam(ts[0], ts[1], ts[2], ts[3], core.AdamParams{LR: 0.05, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: step}); err != nil {
						if errors.Is(err, core.ErrShape) {
							t.Skipf("backend Adam does not take host tensors: %v", err)
						}
						t.Fatal(err)
					}
				}
			}
			t.Logf("loss %.4f -> %.4f", first, last)
			if !(last < first/2) {
				t.Errorf("loss %.4f -> %.4f after 100 Adam steps; want it halved", first, last)
			}
		})
	}
}

func TestDLRMBuildsAndTrains(t *testing.T) {
	m, err := core.BuildModel("dlrm", core.ModelConfig{InDim: 5, Hidden: 8, Classes: 3, Branches: 3})
	if err != nil {
		t.Fatal(err)
	}
	embs := 0
	for _, op := range m.Ops {
		if op.Kind() == core.KindGather {
			embs++
		}
	}
	if embs != 3 || len(m.Graphs) != 0 {
		t.Errorf("dlrm has %d embedding ops and %d graphs, want 3 and 0", embs, len(m.Graphs))
	}
}

// TestDLRMTableRows checks that ModelConfig.TableRows sizes every
// embedding table (0: DefaultTableRows) and that bad sizes are refused.
func TestDLRMTableRows(t *testing.T) {
	for _, tc := range []struct {
		rows, want int
		err        string
	}{
		{0, models.DefaultTableRows, ""},
		{7, 7, ""},
		{1_000_000, 1_000_000, ""},
		{-1, 0, "TableRows must be positive"},
		{1 << 31, 0, "over 2³¹−1"},
	} {
		m, err := core.BuildModel("dlrm", core.ModelConfig{InDim: 4, Hidden: 2, Classes: 2, Branches: 2, TableRows: tc.rows})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("rows %d: error %v, want one containing %q", tc.rows, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("rows %d: %v", tc.rows, err)
		}
		tables := 0
		for _, p := range m.Params {
			if strings.HasSuffix(p.Name, ".table") {
				tables++
				if len(p.Shape) != 2 || p.Shape[0] != tc.want || p.Shape[1] != 2 {
					t.Errorf("rows %d: %s has shape %v, want [%d 2]", tc.rows, p.Name, p.Shape, tc.want)
				}
			}
		}
		if tables != 2 {
			t.Errorf("rows %d: %d tables, want 2", tc.rows, tables)
		}
	}
}
