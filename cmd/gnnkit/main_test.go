package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func trainJSON(t *testing.T, args ...string) trainResult {
	t.Helper()
	out, err := run(t, append([]string{"train", "--json"}, args...)...)
	if err != nil {
		t.Fatalf("train %v: %v", args, err)
	}
	var r trainResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("train --json printed %q: %v", out, err)
	}
	return r
}

func TestTrainJSONFields(t *testing.T) {
	r := trainJSON(t, "--epochs", "3")
	if r.Model != "gcn" || r.Data != "cora" || r.Scheduler != "sequential" || r.Backend != "cpu" || r.Epochs != 3 {
		t.Errorf("result %+v", r)
	}
	if r.EpochMsMedian <= 0 || r.PeakMemBytes["cpu:0"] <= 0 || r.FinalLoss <= 0 {
		t.Errorf("missing measurements: %+v", r)
	}
}

func TestTrainOutOfMemory(t *testing.T) {
	_, err := run(t, "train", "--device-mem", "1MiB", "--epochs", "1", "-q")
	if !errors.Is(err, core.ErrOutOfMemory) {
		t.Fatalf("err = %v, want out of memory", err)
	}
	for _, s := range []string{"out of memory", "free", "--scheduler cherry"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q lacks %q", err, s)
		}
	}
}

func TestTrainTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.json")
	r := trainJSON(t, "--epochs", "2", "--trace", path)
	if r.Trace != path {
		t.Errorf("trace field %q", r.Trace)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	spans := 0
	for _, e := range doc.TraceEvents {
		if e["ph"] == "X" {
			spans++
		}
	}
	if spans < 6 { // forward, backward, step, eval per epoch
		t.Errorf("trace has %d spans", spans)
	}
}

func TestTrainBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "transformer"}, "unknown model"},
		{[]string{"--scheduler", "magic"}, "unknown scheduler"},
		{[]string{"--backend", "cuda"}, "-tags cuda"},
		{[]string{"--devices", "cpu:0,gpu:1"}, "mixes backends"},
		{[]string{"--devices", "cpu"}, "BACKEND:INDEX"},
		{[]string{"--device-mem", "lots"}, "--device-mem"},
		{[]string{"--data", "/nonexistent/dataset"}, "nonexistent"},
		{[]string{"--epochs", "0"}, "epochs"},
		{[]string{"--dropout", "1.5"}, "dropout"},
		{[]string{"--feature-norm", "zscore"}, "feature-norm"},
		{[]string{"--trace", "/nonexistent/dir/t.json"}, "--trace: cannot write /nonexistent/dir/t.json: folder /nonexistent/dir does not exist"},
		{[]string{"--trace", os.TempDir()}, "it is a folder"},
		{[]string{"--data", "synthetic:dsbm,nodes=200"}, "is a dynamic dataset (timestamped edge events): train it with gnnkit train-dynamic"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, err := run(t, append([]string{"train", "-q", "--epochs", "1"}, c.args...)...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

func TestPlanBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--speedup", "NaN"}, "--speedup NaN: want a factor from 0.001"},
		{[]string{"--speedup", "Inf"}, "--speedup +Inf"},
		{[]string{"--speedup", "1e-300"}, "--speedup 1e-300"},
		{[]string{"--speedup", "-2"}, "--speedup -2"},
		{[]string{"--trace", "/nonexistent/t.json"}, "--trace: cannot write /nonexistent/t.json: folder /nonexistent does not exist"},
		{[]string{"--dot", "/nonexistent/s.dot"}, "--dot: cannot write"},
		{[]string{"--write-cluster", "/nonexistent/c.json"}, "--write-cluster: cannot write"},
		{[]string{"--measure", "--profile", "/nonexistent/p.json"}, "--profile: cannot write"},
		{[]string{"--model", "tgcn"}, "tgcn is a dynamic-graph model: gnnkit plan plans"},
		{[]string{"--layers", "5000"}, "--layers 5000: at most 1024"},
		{[]string{"--hidden", "0"}, "--hidden must be positive, got 0"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, err := run(t, append([]string{"plan", "--scheduler", "graphpipe", "--model", "uno", "--devices", "2", "--simulate"}, c.args...)...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

// TestPlanGPipeFewerMicroBatches: under GPipe a graph model's
// micro-batches hold more the more there are (their neighbourhoods
// overlap); when the count the search starts from does not fit, it finds
// the one that does, and the no-fit error names the least memory of
// every count.
func TestPlanGPipeFewerMicroBatches(t *testing.T) {
	args := []string{"plan", "--scheduler", "gpipe", "--model", "mbgnn", "--branches", "3", "--devices", "1", "--preset", "pcie-a100", "--json"}
	out, err := run(t, append(args, "--device-mem", "100MiB")...)
	if err != nil {
		t.Fatalf("100 MiB: %v", err)
	}
	var r struct {
		Plan struct{ Metrics map[string]float64 }
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if m, ok := r.Plan.Metrics["micro_batches"]; !ok || m >= 16 {
		t.Errorf("planned %v micro-batches in 100 MiB; want fewer than the 16 the search starts from", m)
	}
	_, err = run(t, append(args, "--device-mem", "10MiB")...)
	if err == nil || !strings.Contains(err.Error(), "at m = 1 is about") {
		t.Errorf("10 MiB: %v; want the memory m = 1 needs", err)
	}
}

// TestOOMHint: an out-of-memory error from training under a pipeline
// scheduler is told to use more micro-batches or devices, not the cherry
// scheduler, and still wraps the OOMError; other schedulers keep the
// default advice.
func TestOOMHint(t *testing.T) {
	oom := &core.OOMError{Device: "cpu:0", Need: 1 << 20, Free: 1 << 10, Cap: 1 << 21, Used: 1 << 20, What: "tensor [2 3]"}
	err := fmt.Errorf("epoch 1: engine: unit 0 on cpu:0: %w", oom)
	for _, c := range []struct {
		sched, want string
	}{{"gpipe", "more micro-batches (--sched-opt m=N)"}, {"graphpipe", "or more devices (--devices)"}, {"1f1b", "--sched-opt m=N"}, {"sequential", "--scheduler cherry"}} {
		got := oomHint(err, c.sched)
		var oe *core.OOMError
		if !errors.As(got, &oe) || !strings.Contains(got.Error(), c.want) || !strings.HasPrefix(got.Error(), "epoch 1: engine: unit 0 on cpu:0: cpu:0: out of memory") {
			t.Errorf("%s: %v; want it to wrap the OOMError and say %q", c.sched, got, c.want)
		}
		if c.sched != "sequential" && strings.Contains(got.Error(), "cherry") {
			t.Errorf("%s: %v still points at cherry", c.sched, got)
		}
	}
	if other := errors.New("no memory here"); oomHint(other, "gpipe") != other {
		t.Error("an error without an OOMError changed")
	}
}

// TestBenchEpochDynamicModel: bench epoch times static models and points
// a dynamic one at train-dynamic.
func TestBenchEpochDynamicModel(t *testing.T) {
	_, err := run(t, "bench", "epoch", "--models", "gcn,tgcn", "--epochs", "1")
	if err == nil || !strings.Contains(err.Error(), "--models tgcn: tgcn is a dynamic-graph model") {
		t.Errorf("err = %v", err)
	}
}

func TestDevicesAndDataInfo(t *testing.T) {
	out, err := run(t, "devices")
	if err != nil || !strings.Contains(out, "cpu:0") {
		t.Errorf("devices: %v\n%s", err, out)
	}
	out, err = run(t, "devices", "--json")
	var d map[string]any
	if err != nil || json.Unmarshal([]byte(out), &d) != nil {
		t.Errorf("devices --json: %v\n%s", err, out)
	}
	out, err = run(t, "data", "info", "cora")
	if err != nil || !strings.Contains(out, "2708") {
		t.Errorf("data info cora: %v\n%s", err, out)
	}
}

// TestAcceptanceCora is the foundation's acceptance check: 200 epochs on
// the embedded Cora reach the papers' accuracy, and the same seed gives the
// same result.
func TestAcceptanceCora(t *testing.T) {
	if testing.Short() {
		t.Skip("200-epoch runs; skipped with -short")
	}
	for _, c := range []struct {
		model string
		min   float64
	}{{"gcn", 0.80}, {"gat", 0.80}, {"sage", 0.77}} {
		t.Run(c.model, func(t *testing.T) {
			r := trainJSON(t, "--model", c.model)
			t.Logf("%s: test acc %.3f, val %.3f, epoch median %.2f ms, wall %.1f s", c.model, r.TestAcc, r.ValAcc, r.EpochMsMedian, r.WallSeconds)
			if r.TestAcc < c.min {
				t.Errorf("%s test accuracy %.3f < %.2f", c.model, r.TestAcc, c.min)
			}
			if c.model == "gcn" {
				if r.WallSeconds > 60 {
					t.Errorf("gcn took %.1f s, want < 60 s", r.WallSeconds)
				}
				again := trainJSON(t, "--model", c.model)
				if again.TestAcc != r.TestAcc || again.FinalLoss != r.FinalLoss {
					t.Errorf("same seed, different result: %v/%v vs %v/%v", r.TestAcc, r.FinalLoss, again.TestAcc, again.FinalLoss)
				}
			}
		})
	}
}

// TestPlanOwners: a pipeline plan steps each parameter on its owner and
// `gnnkit plan` says where (every parameter once); step=home steps the
// whole model on home.
func TestPlanOwners(t *testing.T) {
	out, err := run(t, "plan", "--scheduler", "graphpipe", "--model", "uno", "--devices", "16", "--preset", "pcie-a100", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r planReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("plan --json printed %q: %v", out, err)
	}
	if !r.Plan.StepOwners || len(r.Owners) < 2 {
		t.Fatalf("graphpipe on 16 devices: step_owners %v, owners %+v; want several owners", r.Plan.StepOwners, r.Owners)
	}
	m, err := core.BuildModel("uno", core.ModelConfig{InDim: 1433, Hidden: 16, Classes: 7})
	if err != nil {
		t.Fatal(err)
	}
	var params int
	var bytes int64
	for _, o := range r.Owners {
		params += o.Params
		bytes += o.Bytes
	}
	if params != len(m.Params) {
		t.Errorf("owners step %d parameters, the model has %d", params, len(m.Params))
	}
	if bytes <= 0 {
		t.Errorf("owners step %d bytes", bytes)
	}
	out, err = run(t, "plan", "--scheduler", "graphpipe", "--model", "uno", "--devices", "16", "--preset", "pcie-a100", "--sched-opt", "step=home")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "stepped on home") {
		t.Errorf("step=home plan output lacks the home step:\n%s", out)
	}
}

// TestPlanSharedTrunk: on 4 GPUs GraphPipe shares uno's trunk over every
// device, and `gnnkit plan` shows it as one stage on a stream of its own
// on each; shared=off gives one stage per device.
func TestPlanSharedTrunk(t *testing.T) {
	args := []string{"plan", "--scheduler", "graphpipe", "--model", "uno", "--hidden", "256", "--devices", "4", "--preset", "pcie-a100", "--sched-opt", "m=8"}
	out, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "each on its own stream") || !strings.Contains(out, "cuda:0-3 stream 2 · 9 ops") || !strings.Contains(out, "shared trunk") {
		t.Errorf("shared-trunk plan output:\n%s", out)
	}
	// The trunk goes first on its devices here (sink first simulates
	// faster), and the stage DAG's heading says so; sinkfirst=off keeps
	// the earliest ready first.
	if !strings.Contains(out, "sink first (chosen)") || !strings.Contains(out, "each on its own stream, one task at a time, the stage nearer the sink first when both are ready") {
		t.Errorf("shared-trunk plan output, sink first:\n%s", out)
	}
	out, err = run(t, append(args, "--sched-opt", "sinkfirst=off")...)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "sink first") || !strings.Contains(out, "each on its own stream, one task at a time") {
		t.Errorf("sinkfirst=off plan output:\n%s", out)
	}
	out, err = run(t, append(args, "--sched-opt", "shared=off")...)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "stream 2") || strings.Contains(out, "shared trunk") {
		t.Errorf("shared=off plan output:\n%s", out)
	}
}
