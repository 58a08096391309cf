// Package schedtest is the scheduler conformance suite and the exactness
// oracle, shipped as a package so every scheduler (built-in, or a plugin
// over the wire) runs the same checks from a few lines of test:
//
//	func TestConformance(t *testing.T) {
//		schedtest.Run(t, func(t *testing.T) core.Scheduler { return &mysched.Scheduler{} })
//	}
//	func TestExact(t *testing.T) {
//		schedtest.Oracle(t, &mysched.Scheduler{}, schedtest.OracleOptions{})
//	}
//
// Run checks plan validity on a table of workloads (Plan.Validate: every
// batch node in exactly one unit, loss weights summing to one, every op run
// once forward and backward per unit, gradients reduced before the single
// optimizer step, devices known, no cycles), determinism for a fixed seed,
// a JSON round trip of the plan, context cancellation, and concurrent use.
//
// Oracle trains the same model on the same data and seed with the
// scheduler under test and with the sequential reference, and compares the
// loss and the parameter gradient after one iteration (relative L2 ≤ 1e-5
// by default, each tensor ≤ 1e-4), then the loss after a few optimizer
// steps.
package schedtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"sync"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/engine"
	_ "github.com/gnnkit/gnnkit/models" // registers gcn, sage, gat
	"github.com/gnnkit/gnnkit/schedulers/sequential"
)

// Fixture is a small labelled graph for scheduler tests.
type Fixture struct {
	Graph      *core.Graph
	Features   []float32
	FeatureDim int
	Labels     []int32
	Classes    int
}

// NewFixture makes a seeded random graph of n nodes with two-way edges
// (average degree about 2*deg, 80% within a class), a few isolated nodes,
// features correlated with the labels, and classes classes.
func NewFixture(n, deg, featDim, classes int, seed uint64) *Fixture {
	r := rand.New(rand.NewPCG(seed, 7))
	labels := make([]int32, n)
	byClass := make([][]int, classes)
	for i := range labels {
		labels[i] = int32(r.IntN(classes))
		byClass[labels[i]] = append(byClass[labels[i]], i)
	}
	var a, b []int32
	for i := 0; i < n; i++ {
		if i%17 == 16 {
			continue // isolated node
		}
		for k := 0; k < deg; k++ {
			j := r.IntN(n)
			if same := byClass[labels[i]]; r.Float64() < 0.8 && len(same) > 0 {
				j = same[r.IntN(len(same))] // homophily, as in citation graphs
			}
			if j != i && j%17 != 16 {
				a = append(a, int32(i))
				b = append(b, int32(j))
			}
		}
	}
	g, err := core.Undirected(n, a, b)
	if err != nil {
		panic(err) // programmer error in the fixture
	}
	f := &Fixture{Graph: g, FeatureDim: featDim, Classes: classes,
		Features: make([]float32, n*featDim), Labels: labels}
	for i := 0; i < n; i++ {
		c := labels[i]
		for j := 0; j < featDim; j++ {
			v := float32(r.NormFloat64() * 0.5)
			if j%classes == int(c) {
				v += 1
			}
			f.Features[i*featDim+j] = v
		}
	}
	return f
}

// Devices opens the CPU backend with n logical devices of one thread each.
func Devices(t testing.TB, n int) []core.Device {
	t.Helper()
	b, err := cpu.New(core.BackendOptions{Devices: n, Threads: 1})
	if err != nil {
		t.Fatalf("schedtest: open cpu backend: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b.Devices()
}

func infos(devs []core.Device) []core.DeviceInfo {
	out := make([]core.DeviceInfo, len(devs))
	for i, d := range devs {
		out[i] = d.Info()
	}
	return out
}

func buildModel(t testing.TB, name string, f *Fixture) *core.Model {
	t.Helper()
	m, err := core.BuildModel(name, core.ModelConfig{InDim: f.FeatureDim, Hidden: 8, Classes: f.Classes, Heads: 2, Dropout: 0.5, AttnDropout: 0.5})
	if err != nil {
		t.Fatalf("schedtest: build %s: %v", name, err)
	}
	return m
}

func nodes(lo, hi int) []int32 {
	out := make([]int32, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, int32(i))
	}
	return out
}

type workloadCase struct {
	name string
	w    *core.Workload
}

func workloads(t *testing.T) []workloadCase {
	f := NewFixture(80, 3, 12, 4, 1)
	var cases []workloadCase
	for _, model := range []string{"gcn", "sage", "gat"} {
		for _, nd := range []int{1, 2, 3} {
			devs := Devices(t, nd)
			tr, err := engine.New(engine.Config{Model: buildModel(t, model, f), Devices: devs, Seed: 42,
				Data: engine.Data{Graph: f.Graph, Features: f.Features, FeatureDim: f.FeatureDim, Labels: f.Labels}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(tr.Close)
			for _, b := range []struct {
				name  string
				batch []int32
			}{{"all", nodes(0, 80)}, {"half", nodes(0, 40)}, {"one", []int32{7}}, {"scattered", []int32{3, 71, 12, 40, 55}}} {
				w, err := tr.Workload(tr.FullBatch(b.batch), infos(devs))
				if err != nil {
					t.Fatal(err)
				}
				cases = append(cases, workloadCase{name: fmt.Sprintf("model=%s/devices=%d/batch=%s", model, nd, b.name), w: w})
			}
		}
	}
	return cases
}

// Run runs the conformance suite against schedulers made by newSched.
func Run(t *testing.T, newSched func(t *testing.T) core.Scheduler) {
	t.Helper()
	for _, c := range workloads(t) {
		t.Run(c.name, func(t *testing.T) {
			s := newSched(t)
			p1, err := s.Schedule(context.Background(), c.w)
			if err != nil {
				t.Fatalf("Schedule: %v", err)
			}
			if err := p1.Validate(c.w); err != nil {
				t.Fatalf("plan from %s is invalid: %v", s.Name(), err)
			}
			checkUnitsExactlyOnce(t, p1, c.w)
			p2, err := s.Schedule(context.Background(), c.w)
			if err != nil {
				t.Fatalf("second Schedule: %v", err)
			}
			if !reflect.DeepEqual(p1, p2) {
				t.Errorf("Schedule is not deterministic for a fixed workload")
			}
			b, err := json.Marshal(p1)
			if err != nil {
				t.Fatalf("plan does not marshal: %v", err)
			}
			p3, err := core.DecodePlan(b)
			if err != nil {
				t.Fatalf("plan does not round-trip through JSON: %v", err)
			}
			if err := p3.Validate(c.w); err != nil {
				t.Fatalf("decoded plan invalid: %v", err)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		c := workloads(t)[0]
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := newSched(t).Schedule(ctx, c.w)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Schedule with a cancelled context returned %v, want context.Canceled", err)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		c := workloads(t)[1]
		s := newSched(t)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				p, err := s.Schedule(context.Background(), c.w)
				if err == nil {
					err = p.Validate(c.w)
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Errorf("concurrent Schedule: %v", err)
			}
		}
	})
}

// checkUnitsExactlyOnce is the work-conservation multiset check, made
// independently of Plan.Validate.
func checkUnitsExactlyOnce(t *testing.T, p *core.Plan, w *core.Workload) {
	t.Helper()
	var got []int32
	for _, u := range p.Units {
		got = append(got, u.Targets...)
	}
	want := append([]int32(nil), w.Batch...)
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
	if !reflect.DeepEqual(got, want) {
		t.Errorf("units cover %d targets, want the batch's %d exactly once", len(got), len(want))
	}
}

// OracleOptions configure the exactness oracle.
type OracleOptions struct {
	Models  []string // default gcn, sage, gat
	Devices int      // logical CPU devices offered (default 2)
	// Reference makes the reference scheduler (default: sequential on the
	// first device).
	Reference func() core.Scheduler
	// Tol bounds the relative error of the loss and the relative L2 error
	// of the whole parameter gradient (all tensors concatenated) after one
	// iteration (default 1e-5). Each tensor separately must be within
	// TensorTol (default 10*Tol): a small tensor whose gradient is a sum
	// of nearly cancelling terms (the last layer's bias on a
	// class-balanced batch) carries fp32 rounding of the summands that is
	// large relative to its own norm, whatever the summation order.
	Tol       float64
	TensorTol float64
	Steps     int     // optimizer steps compared afterwards (default 5)
	StepTol   float64 // relative tolerance on the loss after Steps steps (default 1e-4)
	// Fixture is the data (default: NewFixture(120, 3, 16, 4, 3)) and
	// Batch the targets (default: the first three quarters of the nodes).
	Fixture *Fixture
	Batch   []int32
	// Fanouts, when set, trains a sampled mini-batch (engine.Sample with
	// these fan-outs) instead of the full graph.
	Fanouts []int
}

// RelL2 is ||a-b|| / max(||b||, tiny).
func RelL2(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	if den < 1e-30 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

// Oracle checks that sched trains exactly like the reference.
func Oracle(t *testing.T, sched core.Scheduler, o OracleOptions) {
	t.Helper()
	o.defaults()
	for _, model := range o.Models {
		t.Run("model="+model, func(t *testing.T) {
			for _, p := range Compare(t, sched, model, o) {
				t.Error(p)
			}
		})
	}
}

func (o *OracleOptions) defaults() {
	if len(o.Models) == 0 {
		o.Models = []string{"gcn", "sage", "gat"}
	}
	if o.Devices == 0 {
		o.Devices = 2
	}
	if o.Reference == nil {
		o.Reference = func() core.Scheduler { return &sequential.Scheduler{} }
	}
	if o.Tol == 0 {
		o.Tol = 1e-5
	}
	if o.TensorTol == 0 {
		o.TensorTol = 10 * o.Tol
	}
	if o.Steps == 0 {
		o.Steps = 5
	}
	if o.StepTol == 0 {
		o.StepTol = 1e-4
	}
	if o.Fixture == nil {
		o.Fixture = NewFixture(120, 3, 16, 4, 3)
	}
	if o.Batch == nil {
		o.Batch = nodes(0, o.Fixture.Graph.NumDst*3/4)
	}
}

// Compare trains model with sched and with the reference on the oracle's
// fixture and returns the differences beyond tolerance (none: exact). Set-up
// failures stop the test.
func Compare(t testing.TB, sched core.Scheduler, model string, o OracleOptions) []string {
	t.Helper()
	o.defaults()
	f := o.Fixture
	type run struct {
		tr   *engine.Trainer
		plan *core.Plan
		b    *engine.Batch
	}
	mk := func(s core.Scheduler) run {
		m := buildModel(t, model, f)
		devs := Devices(t, o.Devices)
		tr, err := engine.New(engine.Config{Model: m, Data: engine.Data{Graph: f.Graph, Features: f.Features,
			FeatureDim: f.FeatureDim, Labels: f.Labels}, Devices: devs, Seed: 11,
			Optimizer: engine.Optimizer{LR: 0.01, WeightDecay: 5e-4}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.Close)
		b := tr.FullBatch(o.Batch)
		if o.Fanouts != nil {
			if b, err = engine.Sample(f.Graph, o.Batch, o.Fanouts, 99); err != nil {
				t.Fatal(err)
			}
		}
		w, err := tr.Workload(b, infos(devs))
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.Schedule(context.Background(), w)
		if err != nil {
			t.Fatalf("%s: Schedule: %v", s.Name(), err)
		}
		if err := p.Validate(w); err != nil {
			t.Fatalf("%s: invalid plan: %v", s.Name(), err)
		}
		return run{tr, p, b}
	}
	got, ref := mk(sched), mk(o.Reference())
	ctx := context.Background()
	var probs []string
	rg, err := got.tr.Run(ctx, got.plan, got.b, engine.RunOptions{SkipStep: true})
	if err != nil {
		t.Fatalf("%s: Run: %v", sched.Name(), err)
	}
	rr, err := ref.tr.Run(ctx, ref.plan, ref.b, engine.RunOptions{SkipStep: true})
	if err != nil {
		t.Fatalf("reference Run: %v", err)
	}
	if e := relErr(rg.Loss, rr.Loss); e > o.Tol || math.IsNaN(e) {
		probs = append(probs, fmt.Sprintf("loss %.9g vs reference %.9g: relative error %.3g > %.0e", rg.Loss, rr.Loss, e, o.Tol))
	}
	gg, err := got.tr.Grads()
	if err != nil {
		t.Fatal(err)
	}
	gr, err := ref.tr.Grads()
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(gr))
	for name := range gr {
		names = append(names, name)
	}
	sort.Strings(names)
	var all, allRef []float32
	for _, name := range names {
		all, allRef = append(all, gg[name]...), append(allRef, gr[name]...)
		if e := RelL2(gg[name], gr[name]); e > o.TensorTol || math.IsNaN(e) {
			probs = append(probs, fmt.Sprintf("gradient of %s: relative L2 error %.3g > %.0e", name, e, o.TensorTol))
		}
	}
	if e := RelL2(all, allRef); e > o.Tol || math.IsNaN(e) {
		probs = append(probs, fmt.Sprintf("parameter gradient: relative L2 error %.3g > %.0e", e, o.Tol))
	}
	// Then train a few steps with both and compare the loss.
	var lg, lr float64
	for s := 0; s < o.Steps; s++ {
		a, err := got.tr.Run(ctx, got.plan, got.b, engine.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := ref.tr.Run(ctx, ref.plan, ref.b, engine.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lg, lr = a.Loss, b.Loss
	}
	if e := relErr(lg, lr); e > o.StepTol || math.IsNaN(e) {
		probs = append(probs, fmt.Sprintf("loss after %d steps %.9g vs reference %.9g: relative error %.3g > %.0e", o.Steps, lg, lr, e, o.StepTol))
	}
	return probs
}

func relErr(a, b float64) float64 { return math.Abs(a-b) / math.Max(math.Abs(b), 1e-30) }
