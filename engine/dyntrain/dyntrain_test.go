package dyntrain_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data/dynamic"
	"github.com/gnnkit/gnnkit/engine/dyntrain"
	mdyn "github.com/gnnkit/gnnkit/models/dynamic"
	"github.com/gnnkit/gnnkit/schedulers/blad"
)

func TestMetrics(t *testing.T) {
	for _, c := range []struct {
		name         string
		s            []float32
		l, q         []int32
		auc, mrr, f1 float64
	}{
		{"perfect", []float32{3, -1, -2, 2, -3, -0.5}, []int32{1, 0, 0, 1, 0, 0}, []int32{0, 0, 0, 3, 3, 3}, 1, 1, 1},
		{"inverted", []float32{-3, 1, 2}, []int32{1, 0, 0}, []int32{0, 0, 0}, 0, 1.0 / 3, 0},
		{"ties", []float32{0, 0, 0, 0}, []int32{1, 0, 1, 0}, []int32{0, 0, 2, 2}, 0.5, 2.0 / 3, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := dyntrain.AUC(c.s, c.l); math.Abs(got-c.auc) > 1e-9 {
				t.Errorf("AUC %v, want %v", got, c.auc)
			}
			if got := dyntrain.MRR(c.s, c.l, c.q); math.Abs(got-c.mrr) > 1e-9 {
				t.Errorf("MRR %v, want %v", got, c.mrr)
			}
			if got := dyntrain.F1(c.s, c.l); math.Abs(got-c.f1) > 1e-9 {
				t.Errorf("F1 %v, want %v", got, c.f1)
			}
		})
	}
}

func set(t testing.TB, task dynamic.Task) *dynamic.Set {
	spec, err := dynamic.ParseDSBM("dsbm,nodes=400,snapshots=24,edges=60,skew=20,communities=4")
	if err != nil {
		t.Fatal(err)
	}
	d, err := dynamic.DSBM(spec)
	if err != nil {
		t.Fatal(err)
	}
	sn, err := d.Snapshots(1)
	if err != nil {
		t.Fatal(err)
	}
	s, err := dynamic.Build(sn, d.NumNodes, dynamic.Options{Window: 3, Task: task, Seed: 1, Features: d.Features, FeatureDim: d.FeatureDim})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTrainSynthetic(t *testing.T) {
	b, err := cpu.New(core.BackendOptions{Devices: 2, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, c := range []struct {
		model string
		task  dynamic.Task
	}{{"tgcn", dynamic.LinkPrediction}, {"evolvegcn", dynamic.LinkPrediction}, {"tgcn", dynamic.EdgeSign}} {
		t.Run(c.model+"/"+c.task.String(), func(t *testing.T) {
			res, err := dyntrain.Train(context.Background(), dyntrain.Config{Set: set(t, c.task), Model: c.model, Hidden: 16,
				Epochs: 15, LR: 0.02, StepGroups: 2, Devices: b.Devices(), Scheduler: blad.New(), Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("baseline %v", res.Baseline)
			t.Logf("test     %v  (loss %.4f, epoch %.1f ms, imbalance %.3f, overlap %.3f)", res.Test, res.FinalLoss, res.EpochMsMedian, res.Imbalance, res.Overlap)
			if c.task == dynamic.LinkPrediction && !(res.Test.AUC > res.Baseline.AUC+0.1 && res.Test.AUC > 0.6) {
				t.Errorf("test AUC %.3f vs untrained %.3f", res.Test.AUC, res.Baseline.AUC)
			}
			if c.task == dynamic.EdgeSign && !(res.Test.MacroF1 > res.Baseline.MacroF1+0.1) {
				t.Errorf("test macro-F1 %.3f vs untrained %.3f", res.Test.MacroF1, res.Baseline.MacroF1)
			}
		})
	}
}

// TestUtilisation: busy time is the union of a device's spans, overlap
// counts only spans of one device that run at once (not two devices at
// once), and touching spans do not overlap.
func TestUtilisation(t *testing.T) {
	ms := time.Millisecond
	ev := func(d core.DeviceID, s, a, b int) core.TraceEvent {
		return core.TraceEvent{Cat: core.TaskForward.String(), Device: d, Stream: s, Start: time.Duration(a) * ms, Dur: time.Duration(b-a) * ms}
	}
	tr := &core.Trace{Events: []core.TraceEvent{
		ev("cpu:0", 0, 0, 10), ev("cpu:0", 1, 5, 15), ev("cpu:0", 0, 15, 20), // touching: no overlap
		ev("cpu:1", 0, 0, 10),
		{Cat: "transfer", Device: "cpu:1", Start: 0, Dur: 50 * ms}, // not a task span
	}}
	busy, imb, ov := dyntrain.Utilisation(tr)
	if busy["cpu:0"] != 20*ms || busy["cpu:1"] != 10*ms {
		t.Errorf("busy %v", busy)
	}
	if math.Abs(imb-(20.0/15-1)) > 1e-9 || math.Abs(ov-5.0/30) > 1e-9 {
		t.Errorf("imbalance %v, overlap %v; want %v, %v", imb, ov, 20.0/15-1, 5.0/30)
	}
	// Over two traces the times add up.
	busy, _, ov = dyntrain.Utilisation(tr, tr)
	if busy["cpu:0"] != 40*ms || math.Abs(ov-5.0/30) > 1e-9 {
		t.Errorf("two traces: busy %v, overlap %v", busy, ov)
	}
	// A device the plan left idle counts: busy 0, and the imbalance of
	// 20, 10 and 0 ms is 20/10 - 1.
	busy, imb, _ = dyntrain.UtilisationOn([]core.DeviceID{"cpu:0", "cpu:1", "cpu:2"}, tr)
	if b, ok := busy["cpu:2"]; !ok || b != 0 || math.Abs(imb-1) > 1e-9 {
		t.Errorf("with an idle device: busy %v, imbalance %v; want cpu:2 at 0 and 1", busy, imb)
	}
}

// TestSessionsAgree: epochs of ESDG, BLAD and the vertex partition on 2
// devices, interleaved, train identically (losses equal epoch by epoch),
// and every group runs once per epoch.
func TestSessionsAgree(t *testing.T) {
	b, err := cpu.New(core.BackendOptions{Devices: 2, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s := set(t, dynamic.LinkPrediction)
	mk := func(sched core.Scheduler, parts, step int) *dyntrain.Session {
		ss, err := dyntrain.NewSession(dyntrain.Config{Set: s, Model: "tgcn", Hidden: 8, LR: 0.02, StepGroups: step,
			Devices: b.Devices(), Scheduler: sched, Seed: 3, VertexParts: parts})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ss.Close)
		return ss
	}
	for _, step := range []int{0, 4} {
		ss := []*dyntrain.Session{mk(&blad.ESDG{}, 0, step), mk(blad.New(), 0, step), mk(blad.NewVertexPartition(), 2, step)}
		for epoch := range 3 {
			var l0 float64
			for i, x := range ss {
				st, err := x.Epoch(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if len(st.Traces) == 0 || st.Run <= 0 || st.Time < st.Run {
					t.Errorf("session %d: %d traces, run %v of %v", i, len(st.Traces), st.Run, st.Time)
				}
				if i == 0 {
					l0 = st.Loss
				} else if d := math.Abs(st.Loss-l0) / l0; d > 1e-5 {
					t.Errorf("step %d epoch %d: session %d loss %v, esdg %v", step, epoch, i, st.Loss, l0)
				}
			}
		}
		for _, x := range ss {
			_, ws := x.Groups()
			for k, p := range x.Plans() {
				if err := blad.GroupsOnce(p, ws[k]); err != nil {
					t.Error(err)
				}
			}
		}
	}
}

// TestVertexPartition: parts cover the nodes, every pair is scored by the
// part owning its scored node, and the model's graphs are all built.
func TestVertexPartition(t *testing.T) {
	s := set(t, dynamic.LinkPrediction)
	m, err := mdyn.TGCNVertex(mdyn.Config{ModelConfig: core.ModelConfig{InDim: s.FeatureDim, Hidden: 8, Layers: s.Window}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range s.Train {
		p, err := dyntrain.VertexPartition(g, 3)
		if err != nil {
			t.Fatal(err)
		}
		owned, pairs := 0, 0
		for k := range 3 {
			owned += p.Owned[k]
			pairs += p.Pairs[k]
		}
		if owned != len(g.Nodes) || pairs != len(g.Labels) {
			t.Errorf("group %d: %d owned of %d nodes, %d pairs of %d", g.Target, owned, len(g.Nodes), pairs, len(g.Labels))
		}
		for _, gs := range m.Graphs {
			if p.Graphs[gs.Name] == nil {
				t.Fatalf("group %d: no graph %s", g.Target, gs.Name)
			}
		}
		dims, total := dyntrain.VertexOpDims(g, m, 3)
		if len(dims) != len(m.Ops) || total.Nodes != int64(len(g.Nodes)) {
			t.Fatalf("dims %d for %d ops, total %+v", len(dims), len(m.Ops), total)
		}
	}
	if _, err := dyntrain.VertexPartition(s.Train[0], len(s.Train[0].Nodes)+1); err == nil {
		t.Error("more parts than nodes: want an error")
	}
}

// TestConfigErrors: a negative or non-finite setting is an error that
// names the field and the allowed range (NewPlanner and NewSession check
// before building anything); the zero values are the defaults.
func TestConfigErrors(t *testing.T) {
	s := set(t, dynamic.LinkPrediction)
	infos := []core.DeviceInfo{{ID: "cpu:0"}}
	for _, c := range []struct {
		name string
		cfg  dyntrain.Config
		want string
	}{
		{"negative hidden", dyntrain.Config{Hidden: -1}, "Hidden -1: want >= 1 (0: the default, 32)"},
		{"negative epochs", dyntrain.Config{Epochs: -1}, "Epochs -1: want >= 1 (0: the default, 50)"},
		{"negative step groups", dyntrain.Config{StepGroups: -1}, "StepGroups -1: want >= 1"},
		{"negative eval every", dyntrain.Config{EvalEvery: -2}, "EvalEvery -2: want >= 1 epochs (0: no evaluation during training)"},
		{"negative lr", dyntrain.Config{LR: -0.1}, "LR -0.1: want a finite learning rate > 0"},
		{"NaN lr", dyntrain.Config{LR: float32(math.NaN())}, "LR NaN: want a finite learning rate > 0"},
		{"Inf lr", dyntrain.Config{LR: float32(math.Inf(1))}, "LR +Inf: want a finite learning rate > 0"},
		{"zero values are the defaults", dyntrain.Config{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.Set, cfg.Model, cfg.Scheduler = s, "tgcn", blad.New()
			p, err := dyntrain.NewPlanner(cfg, infos)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if h := p.Model().Config.Hidden; h != 32 {
					t.Errorf("hidden %d, want the default 32", h)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one containing %q", err, c.want)
			}
			if _, err := dyntrain.NewSession(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("NewSession: err = %v, want one containing %q", err, c.want)
			}
		})
	}
}
