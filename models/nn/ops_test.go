package nn_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/models/internal/gradcheck"
	"github.com/gnnkit/gnnkit/models/nn"
)

// testEnv binds random values (all needing gradients) and params on dev.
type testEnv struct {
	*core.Env
	dev    core.Device
	params map[string]*core.Tensor
	grads  map[string]*core.Tensor
}

func newEnv(t *testing.T, dev core.Device, vals, params map[string][]int, need ...string) *testEnv {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	te := &testEnv{dev: dev, params: map[string]*core.Tensor{}, grads: map[string]*core.Tensor{}}
	up := func(shape []int) *core.Tensor {
		d := gradcheck.Rand(r, 0.1, shape...)
		x, err := dev.Alloc(shape...)
		if err != nil {
			t.Fatal(err)
		}
		if err := dev.Upload(x, d.V); err != nil {
			t.Fatal(err)
		}
		return x
	}
	for n, s := range params {
		te.params[n] = up(s)
		g, err := dev.Alloc(s...)
		if err != nil {
			t.Fatal(err)
		}
		te.grads[n] = g
	}
	needGrad := map[string]bool{}
	for _, n := range need {
		needGrad[n] = true
	}
	te.Env = core.NewEnv(dev, te.params, te.grads, needGrad)
	for n, s := range vals {
		x := up(s)
		te.Adopt(x)
		te.SetValue(n, x)
	}
	t.Cleanup(func() {
		te.Release()
		for _, m := range []map[string]*core.Tensor{te.params, te.grads} {
			for _, x := range m {
				dev.Free(x)
			}
		}
	})
	return te
}

func (te *testEnv) used() int64 { return te.dev.Mem().Stats().Used }

func TestDropoutInactiveAliases(t *testing.T) {
	dev := device(t)
	for _, tc := range []struct {
		p        float32
		training bool
	}{{0.5, false}, {0, true}} {
		env := newEnv(t, dev, map[string][]int{"x": {4, 3}}, nil, "x", "y")
		env.Training = tc.training
		op := nn.NewDropout("drop", "x", "y", tc.p, 3)
		before := env.used()
		if err := op.Forward(env.Env); err != nil {
			t.Fatal(err)
		}
		x, _ := env.Value("x")
		y, _ := env.Value("y")
		if x != y {
			t.Errorf("p=%g training=%v: y is a new tensor, want x itself", tc.p, tc.training)
		}
		if d := env.used() - before; d != 0 {
			t.Errorf("inactive dropout allocated %d bytes", d)
		}
	}
}

func TestDropoutMasks(t *testing.T) {
	dev := device(t)
	env := newEnv(t, dev, map[string][]int{"x": {50, 20}}, nil)
	env.Training, env.Seed = true, 7
	ones, _ := env.Value("x")
	if err := env.K.Map(core.MapFill, nil, nil, 1, ones); err != nil {
		t.Fatal(err)
	}
	run := func(name, out string) []float32 {
		if err := nn.NewDropout(name, "x", out, 0.4, 20).Forward(env.Env); err != nil {
			t.Fatal(err)
		}
		y, _ := env.Value(out)
		v := make([]float32, y.Len())
		if err := dev.Download(v, y); err != nil {
			t.Fatal(err)
		}
		return v
	}
	a, a2, b := run("drop0", "a"), run("drop0", "a2"), run("drop1", "b")
	same, kept := 0, 0
	for i := range a {
		if a[i] != a2[i] {
			t.Fatalf("same op and seed gave different masks at %d", i)
		}
		if a[i] == b[i] {
			same++
		}
		if a[i] != 0 {
			kept++
			if want := float32(1 / 0.6); a[i] != want {
				t.Fatalf("kept element scaled to %g, want %g", a[i], want)
			}
		}
	}
	if frac := float64(kept) / float64(len(a)); frac < 0.5 || frac > 0.7 {
		t.Errorf("kept %.2f of the elements, want about 0.6", frac)
	}
	if same > len(a)*3/4 {
		t.Errorf("two dropout ops agree on %d of %d elements; their masks should be independent", same, len(a))
	}
}

func TestCrossEntropyEval(t *testing.T) {
	dev := device(t)
	env := newEnv(t, dev, map[string][]int{"logits": {5, 3}}, nil, "logits", "loss")
	env.Labels = []int32{0, 1, 2, 0, 1}
	op := nn.NewCrossEntropy("loss", "logits", "loss", 3)
	env.Loss = 12
	if err := op.Forward(env.Env); err != nil {
		t.Fatal(err)
	}
	if env.Loss != 0 {
		t.Errorf("loss without targets = %v, want 0", env.Loss)
	}
	if err := op.Backward(env.Env); err != nil {
		t.Fatal(err)
	}
	if g := env.Grad("logits"); g != nil {
		t.Error("backward without targets produced a gradient")
	}
	env.Targets, env.LossScale = []int32{1, 3}, 0.5
	if err := op.Forward(env.Env); err != nil {
		t.Fatal(err)
	}
	l, _ := env.Value("loss")
	v := make([]float32, 1)
	if err := dev.Download(v, l); err != nil || l.Rows() != 1 || l.Cols() != 1 {
		t.Fatalf("loss value %v: %v", l, err)
	}
	if env.Loss <= 0 || float32(env.Loss) != v[0] {
		t.Errorf("Env.Loss %v, loss value %v", env.Loss, v[0])
	}
}

// TestNoLeaks runs each op forward and backward and checks that only the
// outputs and the input gradients stay allocated: every temporary is freed.
func TestNoLeaks(t *testing.T) {
	dev := device(t)
	gs := graphs(t)
	g := gs["perm"]
	n, e := g.NumDst, g.NumEdgeIDs()
	for _, tc := range []struct {
		op     core.Op
		vals   map[string][]int
		params map[string][]int
	}{
		{nn.NewLinear("lin", "x", "W", "y", 3, 4), map[string][]int{"x": {n, 3}}, map[string][]int{"W": {3, 4}}},
		{nn.NewBias("bias", "x", "b", "y", 4), map[string][]int{"x": {n, 4}}, map[string][]int{"b": {1, 4}}},
		{nn.NewAdd("add", "x", "x2", "y", 4), map[string][]int{"x": {n, 4}, "x2": {n, 4}}, nil},
		{nn.NewAggregate("agg", "adj", core.ReduceMean, "x", "w", "y", 4, 2), map[string][]int{"x": {n, 4}, "w": {e, 2}}, nil},
		{nn.NewAggregate("agg", "adj", core.ReduceSum, "x", "", "y", 4, 0), map[string][]int{"x": {n, 4}}, nil},
		{nn.NewELU("elu", "x", "y", 1, 4), map[string][]int{"x": {n, 4}}, nil},
		{nn.NewDropout("drop", "x", "y", 0.3, 4), map[string][]int{"x": {n, 4}}, nil},
		{nn.NewHeadDot("hd", "x", "a", "y", 2, 2), map[string][]int{"x": {n, 4}}, map[string][]int{"a": {1, 4}}},
		{nn.NewEdgeScore("score", "adj", "x", "x2", "y", 2), map[string][]int{"x": {n, 2}, "x2": {n, 2}}, nil},
		{nn.NewEdgeSoftmax("softmax", "adj", "x", "y", 2), map[string][]int{"x": {e, 2}}, nil},
		{nn.NewCrossEntropy("ce", "x", "y", 4), map[string][]int{"x": {n, 4}}, nil},
	} {
		t.Run(tc.op.Name(), func(t *testing.T) {
			need := append(tc.op.Inputs(), tc.op.Outputs()...)
			env := newEnv(t, dev, tc.vals, tc.params, need...)
			env.Graphs["adj"] = g
			env.Training, env.Seed = true, 1
			env.Labels, env.Targets, env.LossScale = make([]int32, n), []int32{1, 2}, 0.5
			before := env.used()
			if err := tc.op.Forward(env.Env); err != nil {
				t.Fatal(err)
			}
			y, err := env.Value("y")
			if err != nil {
				t.Fatal(err)
			}
			if d := env.used() - before; d != y.Bytes() {
				t.Errorf("forward kept %d bytes, want the output's %d", d, y.Bytes())
			}
			dy, err := dev.Alloc(y.Shape...)
			if err != nil {
				t.Fatal(err)
			}
			env.Adopt(dy)
			if err := env.K.Map(core.MapFill, nil, nil, 0.5, dy); err != nil {
				t.Fatal(err)
			}
			env.SetGrad("y", dy)
			before = env.used()
			if err := tc.op.Backward(env.Env); err != nil {
				t.Fatal(err)
			}
			var want int64
			for name := range tc.vals {
				g := env.Grad(name)
				if g == nil {
					t.Errorf("no gradient for %s", name)
					continue
				}
				want += g.Bytes()
			}
			if d := env.used() - before; d != want {
				t.Errorf("backward kept %d bytes, want the input gradients' %d", d, want)
			}
			// A missing upstream gradient is a no-op.
			for name := range tc.vals {
				env.DropGrad(name)
			}
			env.DropGrad("y")
			before = env.used()
			if _, ok := tc.op.(*nn.CrossEntropy); !ok {
				if err := tc.op.Backward(env.Env); err != nil {
					t.Fatal(err)
				}
				if d := env.used() - before; d != 0 {
					t.Errorf("backward without an output gradient allocated %d bytes", d)
				}
			}
		})
	}
}

func TestShapeErrors(t *testing.T) {
	dev := device(t)
	env := newEnv(t, dev, map[string][]int{"x": {5, 3}}, map[string][]int{"W": {4, 2}}, "x")
	env.Graphs["adj"] = graphs(t)["sq"]
	for _, op := range []core.Op{
		nn.NewLinear("lin", "x", "W", "y", 3, 2),
		nn.NewBias("bias", "x", "W", "y", 3),
		nn.NewAggregate("agg", "adj", core.ReduceSum, "x", "", "y", 3, 0), // 5 rows, graph has 7
		nn.NewReLU("relu", "x", "y", 4),
	} {
		err := op.Forward(env.Env)
		if !errors.Is(err, core.ErrShape) {
			t.Errorf("%s: %v, want a shape error", op.Name(), err)
		}
		t.Log(err)
	}
	if err := nn.NewLinear("lin", "nope", "W", "y", 3, 2).Forward(env.Env); err == nil {
		t.Error("unbound input: no error")
	}
}

func TestCost(t *testing.T) {
	d := core.Dims{Nodes: 100, Edges: 1000}
	lin := nn.NewLinear("lin", "x", "W", "y", 8, 4)
	if c := lin.Cost(d); c.FLOPs != 3*2*100*8*4 || c.WeightBytes != 8*4*4 || c.ActivationBytes != 100*8*4 {
		t.Errorf("linear cost %+v", c)
	}
	agg := nn.NewAggregate("agg", "adj", core.ReduceSum, "y", "adj.w", "z", 4, 1)
	if c := agg.Cost(d); c.FLOPs != 2*(2*1000*4)+2*1000*4 {
		t.Errorf("aggregate cost %+v", c)
	}
	// In a model where x is data and adj.w a fixed input, their backward
	// work is left out.
	m := &core.Model{Name: "t", Inputs: []string{"x"}, Graphs: []core.GraphSpec{{Name: "adj", Weights: core.WeightsGCN}},
		Params: []core.ParamSpec{{Name: "W", Shape: []int{8, 4}}}, Ops: []core.Op{lin, agg}, Output: "z"}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	nn.AnnotateGrads(m)
	if c := lin.Cost(d); c.FLOPs != 2*2*100*8*4 {
		t.Errorf("annotated linear FLOPs %d, want forward and dW only", c.FLOPs)
	}
	if c := agg.Cost(d); c.FLOPs != 2*2*1000*4 {
		t.Errorf("annotated aggregate FLOPs %d, want forward and dx only", c.FLOPs)
	}
}
