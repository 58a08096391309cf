package dyntrain_test

import (
	"context"
	"math"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data/dynamic"
	"github.com/gnnkit/gnnkit/engine/dyntrain"
	_ "github.com/gnnkit/gnnkit/models/dynamic"
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
