package worker_test

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/data"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/plugins/worker"
	"github.com/gnnkit/gnnkit/schedulers/sequential"
)

func TestDevicesAndClose(t *testing.T) {
	w, tag, err := start(t, "cpu", worker.Options{Backend: core.BackendOptions{Devices: 3, Threads: 1}})
	if err != nil {
		t.Fatal(err)
	}
	devs := w.Devices()
	if len(devs) != 3 {
		t.Fatalf("%d devices, want 3: %+v", len(devs), devs)
	}
	for i, d := range devs {
		if want := core.DeviceID("wcpu:" + string(rune('0'+i))); d.ID != want || d.Backend != "wcpu" || !strings.Contains(d.Name, "worker's cpu:") {
			t.Errorf("device %d = %+v, want id %s on backend wcpu", i, d, want)
		}
		if d.Threads != 1 {
			t.Errorf("device %s has %d threads; the backend options did not reach the worker", d.ID, d.Threads)
		}
	}
	if w.Backend() != "cpu" || w.Version() != worker.Version || !strings.Contains(w.Name(), "pid") {
		t.Errorf("backend %q, version %q, name %q", w.Backend(), w.Version(), w.Name())
	}
	pid := w.Pid()
	w.Close()
	w.Close() // idempotent
	checkGone(t, pid, tag)
	if _, err := w.Run(context.Background(), &engine.Slice{}); err == nil {
		t.Errorf("Run after Close succeeded")
	}
}

// trainers builds the host trainer (cpu:0, cpu:1 here; the worker's
// wcpu:0, wcpu:1) and the sequential reference on its own cpu:0.
func trainers(t *testing.T, w *worker.Worker, model string, f *schedtest.Fixture) (host, ref *engine.Trainer, all []core.DeviceInfo) {
	t.Helper()
	mk := func(n int, remote []engine.Remote) (*engine.Trainer, []core.DeviceInfo) {
		b, err := cpu.New(core.BackendOptions{Devices: n, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		m, err := core.BuildModel(model, core.ModelConfig{InDim: f.FeatureDim, Hidden: 8, Classes: f.Classes, Heads: 2, Dropout: 0.5, AttnDropout: 0.5, Layers: 2})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := engine.New(engine.Config{Model: m, Devices: b.Devices(), Remote: remote, Seed: 11,
			Data:      engine.Data{Graph: f.Graph, Features: f.Features, FeatureDim: f.FeatureDim, Labels: f.Labels},
			Optimizer: engine.Optimizer{LR: 0.01, WeightDecay: 5e-4}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.Close)
		var infos []core.DeviceInfo
		for _, d := range b.Devices() {
			infos = append(infos, d.Info())
		}
		return tr, infos
	}
	host, local := mk(2, []engine.Remote{w})
	ref, _ = mk(1, nil)
	return host, ref, append(local, w.Devices()...)
}

func pick(all []core.DeviceInfo, ids ...core.DeviceID) []core.DeviceInfo {
	var out []core.DeviceInfo
	for _, id := range ids {
		for _, d := range all {
			if d.ID == id {
				out = append(out, d)
			}
		}
	}
	return out
}

func plan(t *testing.T, tr *engine.Trainer, b *engine.Batch, devs []core.DeviceInfo, s core.Scheduler) *core.Plan {
	t.Helper()
	w, err := tr.Workload(b, devs)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Schedule(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(w); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOracleThroughWorker is core/schedtest's oracle across a real process
// boundary: the sequential reference on a local cpu:0 against plans whose
// units are split between this process and a worker subprocess, all on the
// worker (home here or there), a pipeline inside the worker, and a sampled
// batch. Loss and every gradient agree to 1e-5 (relative L2) after one
// iteration, and the loss after five optimizer steps to 1e-4.
func TestOracleThroughWorker(t *testing.T) {
	f := schedtest.NewFixture(120, 3, 16, 4, 3)
	targets := make([]int32, 90)
	for i := range targets {
		targets[i] = int32(i)
	}
	w := mustStart(t, "cpu", worker.Options{})
	cases := []struct {
		name    string
		sched   core.Scheduler
		devs    []core.DeviceID
		fanouts []int
	}{
		{"split-host-and-worker", schedtest.Split{K: 4}, []core.DeviceID{"cpu:0", "wcpu:0", "cpu:1", "wcpu:1"}, nil},
		{"all-on-worker", schedtest.Split{K: 3}, []core.DeviceID{"cpu:0", "wcpu:0", "wcpu:1"}, nil},
		{"home-on-worker", &sequential.Scheduler{}, []core.DeviceID{"wcpu:1"}, nil},
		{"pipeline-in-worker", schedtest.Stages{K: 2, Assign: schedtest.Alternate}, []core.DeviceID{"wcpu:0", "wcpu:1"}, nil},
		{"sampled-batch", schedtest.Split{K: 3}, []core.DeviceID{"cpu:1", "wcpu:0", "wcpu:1"}, []int{4, 3}},
	}
	for _, model := range []string{"gcn", "sage", "gat"} {
		for _, c := range cases {
			t.Run(model+"/"+c.name, func(t *testing.T) {
				host, ref, all := trainers(t, w, model, f)
				mkBatch := func(tr *engine.Trainer) *engine.Batch {
					if c.fanouts == nil {
						return tr.FullBatch(targets)
					}
					b, err := engine.Sample(f.Graph, targets, c.fanouts, 99)
					if err != nil {
						t.Fatal(err)
					}
					return b
				}
				hb, rb := mkBatch(host), mkBatch(ref)
				hp := plan(t, host, hb, pick(all, c.devs...), c.sched)
				rp := plan(t, ref, rb, pick(all, "cpu:0"), &sequential.Scheduler{})
				ctx := context.Background()
				got, err := host.Run(ctx, hp, hb, engine.RunOptions{SkipStep: true})
				if err != nil {
					t.Fatal(err)
				}
				want, err := ref.Run(ctx, rp, rb, engine.RunOptions{SkipStep: true})
				if err != nil {
					t.Fatal(err)
				}
				lossErr := math.Abs(got.Loss-want.Loss) / want.Loss
				gg, _ := host.Grads()
				gr, _ := ref.Grads()
				names := make([]string, 0, len(gr))
				for n := range gr {
					names = append(names, n)
				}
				sort.Strings(names)
				var a, b []float32
				for _, n := range names {
					if e := schedtest.RelL2(gg[n], gr[n]); e > 1e-4 || math.IsNaN(e) {
						t.Errorf("gradient of %s: relative L2 %.3g", n, e)
					}
					a, b = append(a, gg[n]...), append(b, gr[n]...)
				}
				gradErr := schedtest.RelL2(a, b)
				if lossErr > 1e-5 || gradErr > 1e-5 || math.IsNaN(gradErr) {
					t.Errorf("loss %.9g vs %.9g (rel %.3g), gradient rel L2 %.3g", got.Loss, want.Loss, lossErr, gradErr)
				}
				remote := 0
				for _, e := range got.Trace.Events {
					if strings.HasPrefix(string(e.Device), "wcpu:") && (e.Cat == "forward" || e.Cat == "backward") {
						remote++
					}
				}
				if remote == 0 {
					t.Errorf("the trace has no forward/backward event from the worker's devices")
				}
				if err := host.ZeroGrads(); err != nil {
					t.Fatal(err)
				}
				if err := ref.ZeroGrads(); err != nil {
					t.Fatal(err)
				}
				var lg, lr float64
				for s := 0; s < 5; s++ {
					a, err := host.Run(ctx, hp, hb, engine.RunOptions{})
					if err != nil {
						t.Fatal(err)
					}
					b, err := ref.Run(ctx, rp, rb, engine.RunOptions{})
					if err != nil {
						t.Fatal(err)
					}
					lg, lr = a.Loss, b.Loss
				}
				stepErr := math.Abs(lg-lr) / lr
				if stepErr > 1e-4 {
					t.Errorf("loss after 5 steps %.9g vs %.9g (rel %.3g)", lg, lr, stepErr)
				}
				t.Logf("loss rel err %.2g, gradient rel L2 %.2g, loss after 5 steps rel err %.2g", lossErr, gradErr, stepErr)
			})
		}
	}
}

// TestCoraThroughWorker trains GCN on the embedded Cora for 15 epochs on a
// worker device and on a local one: the loss curves and accuracies agree.
func TestCoraThroughWorker(t *testing.T) {
	ds, err := data.Open("cora")
	if err != nil {
		t.Fatal(err)
	}
	feats := ds.RowNormalizedFeatures()
	w := mustStart(t, "cpu", worker.Options{Backend: core.BackendOptions{Devices: 1}})
	run := func(remote bool) ([]float64, *engine.Summary, time.Duration) {
		b, err := cpu.New(core.BackendOptions{Devices: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		m, err := core.BuildModel("gcn", core.ModelConfig{InDim: ds.FeatureDim, Hidden: 16, Classes: ds.NumClasses, Layers: 2, Dropout: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		cfg := engine.Config{Model: m, Devices: b.Devices(), Seed: 1,
			Data:      engine.Data{Graph: ds.Graph, Features: feats, FeatureDim: ds.FeatureDim, Labels: ds.Labels},
			Optimizer: engine.Optimizer{LR: 0.01, WeightDecay: 5e-4}}
		devs := []core.DeviceInfo{b.Devices()[0].Info()}
		if remote {
			cfg.Remote = []engine.Remote{w}
			devs = w.Devices()
		}
		tr, err := engine.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		var losses []float64
		t0 := time.Now()
		s, err := engine.Train(context.Background(), tr, devs, engine.TrainOptions{Epochs: 15, Scheduler: &sequential.Scheduler{},
			Train: ds.Train, Val: ds.Val, Test: ds.Test, Progress: func(e engine.EpochStats) { losses = append(losses, e.Loss) }})
		if err != nil {
			t.Fatal(err)
		}
		return losses, s, time.Since(t0)
	}
	local, ls, lt := run(false)
	remote, rs, rt := run(true)
	for e := range local {
		if d := math.Abs(local[e]-remote[e]) / local[e]; d > 1e-5 {
			t.Errorf("epoch %d: loss %.7f through the worker, %.7f locally", e+1, remote[e], local[e])
		}
	}
	if ls.TestAcc != rs.TestAcc || ls.ValAcc != rs.ValAcc {
		t.Errorf("accuracy val/test %.3f/%.3f through the worker, %.3f/%.3f locally", rs.ValAcc, rs.TestAcc, ls.ValAcc, ls.TestAcc)
	}
	if rs.PeakMem["wcpu:0"] <= 0 {
		t.Errorf("no peak memory reported for the worker's device: %v", rs.PeakMem)
	}
	t.Logf("15 epochs: loss %.4f -> %.4f; local %v (epoch median %.1f ms), through the worker %v (epoch median %.1f ms)",
		local[0], local[len(local)-1], lt.Round(time.Millisecond), ls.EpochMsMedian, rt.Round(time.Millisecond), rs.EpochMsMedian)
}

// TestFaults: a worker that crashes or exits mid-Run, hangs, is missing,
// or exits at start with a message gives a clear error naming it, leaves no
// process behind, and the host keeps working.
func TestFaults(t *testing.T) {
	f := schedtest.NewFixture(60, 3, 8, 3, 1)
	for _, c := range []struct {
		kind string
		msg  []string
		is   []error
	}{
		{"crash", []string{"wcpu", "Run", "exit status 2", "panic: simulated device fault in GEMM"}, []error{worker.ErrExited}},
		{"exit", []string{"Run", "exit status 3"}, []error{worker.ErrExited}},
		{"hang", []string{"Run did not answer within 2s", "killed"}, []error{worker.ErrExited, context.DeadlineExceeded}},
	} {
		t.Run(c.kind, func(t *testing.T) {
			w, tag, err := start(t, c.kind, worker.Options{Timeout: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			host, _, all := trainers(t, w, "gcn", f)
			b := host.FullBatch([]int32{1, 2, 3, 4, 5, 6, 7, 8})
			p := plan(t, host, b, pick(all, "cpu:0", "wcpu:0"), schedtest.Split{K: 2})
			_, err = host.Run(context.Background(), p, b, engine.RunOptions{})
			if err == nil {
				t.Fatal("the iteration succeeded")
			}
			t.Logf("error: %v", err)
			for _, s := range append(c.msg, w.Name()) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			for _, e := range c.is {
				if !errors.Is(err, e) {
					t.Errorf("error %q is not %v", err, e)
				}
			}
			pid := w.Pid()
			// The next iteration fails fast; a local plan still trains.
			t0 := time.Now()
			if _, err := host.Run(context.Background(), p, b, engine.RunOptions{}); !errors.Is(err, worker.ErrExited) || time.Since(t0) > time.Second {
				t.Errorf("second iteration after %v: %v", time.Since(t0), err)
			}
			lp := plan(t, host, b, pick(all, "cpu:0"), &sequential.Scheduler{})
			if _, err := host.Run(context.Background(), lp, b, engine.RunOptions{}); err != nil {
				t.Errorf("a local plan after the worker failed: %v", err)
			}
			w.Close()
			checkGone(t, pid, tag)
		})
	}
	for _, c := range []struct {
		kind string
		msg  []string
	}{
		{"nogpu", []string{"Error in initialization", "NoDevice"}},
		{"nodriver", []string{"exit status 127", "error while loading shared libraries: libcuda.so.1"}},
		{"badopen", []string{"exit status 1", "gnnkit-cuda: cuda: no device"}},
	} {
		t.Run("start-"+c.kind, func(t *testing.T) {
			_, tag, err := start(t, c.kind, worker.Options{})
			var se *worker.StartError
			if !errors.As(err, &se) || !errors.Is(err, worker.ErrLaunch) {
				t.Fatalf("err = %v, want a *StartError", err)
			}
			t.Logf("error: %v", err)
			for _, s := range c.msg {
				if !strings.Contains(se.Reason, s) {
					t.Errorf("reason %q lacks %q", se.Reason, s)
				}
			}
			if strings.Contains(se.Reason, "\n") || strings.Contains(se.Reason, "@level") {
				t.Errorf("reason %q is not one clean line", se.Reason)
			}
			checkGone(t, 0, tag)
		})
	}
	t.Run("start-hangs", func(t *testing.T) {
		t0 := time.Now()
		_, tag, err := start(t, "slowstart", worker.Options{StartTimeout: time.Second})
		var se *worker.StartError
		if !errors.As(err, &se) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(se.Reason, "no handshake within 1s") ||
			!strings.Contains(se.Reason, "initialising the driver") || time.Since(t0) > 10*time.Second {
			t.Errorf("after %v: err = %v", time.Since(t0), err)
		}
		checkGone(t, 0, tag)
	})
	t.Run("missing", func(t *testing.T) {
		_, err := worker.Start(context.Background(), filepath.Join(t.TempDir(), "gnnkit-cuda"), worker.Options{})
		if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, worker.ErrLaunch) || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestFind(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GNNKIT_PLUGIN_DIR", dir)
	t.Setenv("PATH", t.TempDir())
	_, err := worker.Find("gnnkit-test-worker")
	var nf *worker.NotFoundError
	if !errors.As(err, &nf) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "$PATH") {
		t.Fatalf("err = %v", err)
	}
	p := filepath.Join(dir, "gnnkit-test-worker")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := worker.Find("gnnkit-test-worker"); err != nil || got != p {
		t.Errorf("Find = %q, %v; want %q", got, err, p)
	}
	onPath := t.TempDir()
	t.Setenv("PATH", onPath)
	os.Remove(p)
	q := filepath.Join(onPath, "gnnkit-test-worker")
	if err := os.WriteFile(q, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := worker.Find("gnnkit-test-worker"); err != nil || got != q {
		t.Errorf("Find = %q, %v; want %q (on PATH)", got, err, q)
	}
}
