package main

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/backends/opencl"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// TestTrainMeasure: a pipeline scheduler training on logical CPU devices
// plans with op costs measured there (its summary says so, and compares
// the measured iteration with the predicted one); --measure=false plans
// on the roofline; --measure where nothing plans with costs is refused. With GNNKIT_TIMING=1 the measured-cost
// prediction must also be within 35% of the measured iteration (the
// timing-free default only guards against gross error, 3x); with
// GNNKIT_DEFER_TIMED set the ratio is not checked (make test checks it
// alone, after the other packages' tests).
func TestTrainMeasure(t *testing.T) {
	args := []string{"--model", "gcn", "--scheduler", "graphpipe", "--devices", "cpu:0,cpu:1", "--epochs", "20"}
	r := trainJSON(t, args...)
	if !strings.HasPrefix(r.PlannedOn, "measured on cpu:0") || !strings.Contains(r.PlannedOn, "host cores") {
		t.Errorf("planned on %q, want costs measured on cpu:0 with the host's cores", r.PlannedOn)
	}
	pred := r.SchedMetrics["simulated_iteration_ms"]
	if r.IterationMsMedian <= 0 || pred <= 0 {
		t.Fatalf("iteration %.3f ms measured, %.3f ms predicted", r.IterationMsMedian, pred)
	}
	ratio := pred / r.IterationMsMedian
	bound := 3.0
	if os.Getenv("GNNKIT_TIMING") == "1" {
		bound = 1.35
	}
	t.Logf("measured costs: iteration %.3f ms measured, %.3f ms predicted (ratio %.2f)", r.IterationMsMedian, pred, ratio)
	if os.Getenv("GNNKIT_DEFER_TIMED") != "" {
		// Beside other packages' test binaries on two cores the measured
		// iteration can come out 3x the profile's (a CI run: 14.4 ms
		// against 4.4 predicted); make test runs this check again alone.
		t.Log("the ratio is not checked: GNNKIT_DEFER_TIMED is set; make test runs it after the other packages' tests, alone")
	} else if ratio > bound || ratio < 1/bound {
		t.Errorf("predicted %.3f ms for a measured %.3f ms (ratio %.2f, bound %.2fx)", pred, r.IterationMsMedian, ratio, bound)
	}

	roof := trainJSON(t, append(args, "--measure=false")...)
	if !strings.Contains(roof.PlannedOn, "roofline") {
		t.Errorf("--measure=false planned on %q, want a roofline", roof.PlannedOn)
	}
	if seq := trainJSON(t, "--epochs", "1"); seq.PlannedOn != "" || seq.IterationMsMedian <= 0 {
		t.Errorf("sequential: planned on %q, iteration %.3f ms", seq.PlannedOn, seq.IterationMsMedian)
	}

	if _, err := run(t, "train", "-q", "--epochs", "1", "--measure"); err == nil || !strings.Contains(err.Error(), "plans without op costs") {
		t.Errorf("train --measure with the sequential scheduler: %v", err)
	}
}

// TestTrainMeasureInputs: measuring for the planner works where units
// are few, dense, sampled or capped in memory: duplicate receptive fields
// (a dense or tiny graph: every size reaches the whole graph), a memory
// cap the whole graph's point and the concurrency check would not fit
// (those are skipped), sampled mini-batches under a cap.
func TestTrainMeasureInputs(t *testing.T) {
	for _, args := range [][]string{
		{"--device-mem", "24MiB"},
		{"--batch-size", "32", "--fanout", "5,5", "--device-mem", "16MiB"},
		{"--data", "synthetic:sbm,nodes=600,classes=3,avgdeg=30"},
		{"--data", "synthetic:sbm,nodes=5,classes=2"},
	} {
		r := trainJSON(t, append([]string{"--scheduler", "graphpipe", "--devices", "cpu:0,cpu:1", "--epochs", "2"}, args...)...)
		if !strings.HasPrefix(r.PlannedOn, "measured on cpu:0") {
			t.Errorf("%v: planned on %q", args, r.PlannedOn)
		}
	}
}

// TestTrainCappedNoFitFigure: under --device-mem the measured planner
// weighs every micro-batch count, since the profile runs on an uncapped
// twin of the first device (a pipeline's stages each hold part of the
// model, so counts whose whole-model unit exceeds the cap may fit). The
// no-fit figure for gcn under gpipe at 10 MiB is then the m = 2 plan's
// (13.6 MiB; it was 31.1 MiB at m = 8, and 14 MiB was refused). Each
// figure given back as the cap trains, evaluation included, its measured
// peaks under it: uno-4 under 1f1b at its figure used to train an epoch
// and run out of memory evaluating, bringing the model to its home.
func TestTrainCappedNoFitFigure(t *testing.T) {
	for _, c := range []struct {
		args  []string
		small string // the cap that does not fit
		below int64  // the figure must be under it (0: any)
	}{
		{[]string{"--model", "gcn", "--scheduler", "gpipe"}, "10MiB", 14 << 20},
		{[]string{"--model", "uno", "--branches", "4", "--scheduler", "1f1b"}, "512KiB", 0},
	} {
		args := append(slices.Clone(c.args), "--devices", "cpu:0,cpu:1", "--epochs", "2")
		_, err := run(t, append([]string{"train", "-q", "--device-mem", c.small}, args...)...)
		if err == nil {
			t.Fatalf("%v trained on two devices of %s", c.args, c.small)
		}
		_, figure, ok := strings.Cut(err.Error(), "is about ")
		figure, _, _ = strings.Cut(figure, " (")
		need, perr := core.ParseBytes(strings.ReplaceAll(figure, " ", ""))
		if !ok || perr != nil {
			t.Fatalf("%v: no figure in %v", c.args, err)
		}
		if c.below > 0 && need >= c.below {
			t.Errorf("%v: the smallest memory that fits is quoted as %s: %s trains", c.args, figure, core.FormatBytes(c.below))
		}
		r := trainJSON(t, append([]string{"--device-mem", strings.ReplaceAll(figure, " ", "")}, args...)...)
		if !strings.HasPrefix(r.PlannedOn, "measured on cpu:0") {
			t.Errorf("%v: planned on %q", c.args, r.PlannedOn)
		}
		for d, peak := range r.PeakMemBytes {
			if peak > need+need/1000 {
				t.Errorf("%v: at the quoted %s, %s peaked at %s", c.args, figure, d, core.FormatBytes(peak))
			}
		}
	}
}

// TestTrainEvaluatesOnHost: sampled training under a cap fits where
// evaluating, which reads whole neighbourhoods (mbgnn's towers reach
// 1,381 of Cora's nodes from one), does not: the evaluations run on the
// host and the summary counts them; uncapped there are none.
func TestTrainEvaluatesOnHost(t *testing.T) {
	args := []string{"--model", "mbgnn", "--scheduler", "graphpipe", "--devices", "cpu:0,cpu:1", "--batch-size", "64", "--fanout", "5,5", "--epochs", "2"}
	r := trainJSON(t, append([]string{"--device-mem", "12MiB"}, args...)...)
	if r.EvalFallbacks != 2 {
		t.Errorf("under 12 MiB: %d evaluations on the host, want 2 (one per epoch)", r.EvalFallbacks)
	}
	out, err := run(t, append([]string{"train", "-q", "--device-mem", "12MiB"}, args...)...)
	if err != nil || !strings.Contains(out, "evaluated on the host") {
		t.Errorf("the summary does not say it evaluated on the host (%v):\n%s", err, out)
	}
	if u := trainJSON(t, args...); u.EvalFallbacks != 0 {
		t.Errorf("uncapped: %d evaluations on the host", u.EvalFallbacks)
	}
}

// TestTrainMeasureWithProfile: --measure beside a profile file is refused;
// the profile alone is what the plan is priced on.
func TestTrainMeasureWithProfile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "p.json")
	if _, err := run(t, "plan", "--scheduler", "graphpipe", "--model", "gcn", "--devices", "2", "--preset", "cpu", "--simulate", "--measure", "--reps", "1", "--profile", file); err != nil {
		t.Fatal(err)
	}
	args := []string{"--model", "gcn", "--scheduler", "graphpipe", "--devices", "cpu:0,cpu:1", "--epochs", "2", "--sched-opt", "profile=" + file}
	r := trainJSON(t, args...)
	if r.PlannedOn != "the profile "+file {
		t.Errorf("planned on %q, want the profile %s", r.PlannedOn, file)
	}
	_, err := run(t, append([]string{"train", "-q", "--measure"}, args...)...)
	if err == nil || !strings.Contains(err.Error(), "both give the op costs") {
		t.Errorf("--measure with profile=: %v", err)
	}
}

// TestPlanMeasure: plan --measure prices the pipeline schedulers' search
// with the profile it simulates with, so the plan's own simulated
// iteration is the simulation's, exactly; the written profile reads back.
// Without --simulate the plan still says what it was priced on and writes
// the profile; beside profile= --measure is refused.
func TestPlanMeasure(t *testing.T) {
	file := filepath.Join(t.TempDir(), "p.json")
	for _, s := range []string{"graphpipe", "1f1b"} {
		out, err := run(t, "plan", "--scheduler", s, "--model", "gcn", "--devices", "2", "--preset", "cpu", "--simulate", "--measure", "--reps", "1", "--json", "--profile", file)
		if err != nil {
			t.Fatal(err)
		}
		var r planReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %q", err, out)
		}
		if !strings.Contains(r.Profile, "before planning") || r.Sim == nil {
			t.Fatalf("%s: profile %q, simulation %v", s, r.Profile, r.Sim != nil)
		}
		got, want := r.Plan.Metrics["simulated_iteration_ms"], float64(r.Sim.Iteration)/1e6
		if math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s: the planner simulated %.6f ms, the simulation %.6f ms: they priced ops differently", s, got, want)
		}
		if !strings.HasPrefix(r.PlannedOn, "measured on cpu:0") || !strings.HasSuffix(r.PlannedOn, "written to "+file) {
			t.Errorf("%s: planned on %q", s, r.PlannedOn)
		}
		fh, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		p, err := sim.ReadProfile(fh)
		fh.Close()
		if err != nil {
			t.Fatalf("%s: the written profile: %v", s, err)
		}
		if len(p.Ops) == 0 || p.Model != "gcn" {
			t.Errorf("%s: profile of %q with %d ops", s, p.Model, len(p.Ops))
		}
	}
	os.Remove(file)
	out, err := run(t, "plan", "--scheduler", "1f1b", "--model", "gcn", "--devices", "2", "--preset", "cpu", "--measure", "--reps", "1", "--profile", file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); err != nil || !strings.Contains(out, "planned on") {
		t.Errorf("plan --measure without --simulate: profile %v; output:\n%s", err, out)
	}
	if _, err := run(t, "plan", "--scheduler", "1f1b", "--model", "gcn", "--devices", "2", "--preset", "cpu", "--measure", "--sched-opt", "profile="+file); err == nil || !strings.Contains(err.Error(), "both give the op costs") {
		t.Errorf("plan --measure with profile=: %v", err)
	}
}

// TestPlanMeasureBackend: --measure-backend takes the profile on another
// backend's device (OpenCL here, PoCL on a CPU-only machine), which the
// planner then prices ops with; without --measure it is refused.
func TestPlanMeasureBackend(t *testing.T) {
	args := []string{"plan", "--scheduler", "graphpipe", "--model", "gcn", "--devices", "2", "--preset", "cpu", "--json", "--measure-backend", "opencl"}
	if _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), "add --measure") {
		t.Errorf("--measure-backend without --measure: %v", err)
	}
	out, err := run(t, append(args, "--measure", "--reps", "1", "--simulate")...)
	if errors.Is(err, opencl.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	var r planReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	if !strings.HasPrefix(r.PlannedOn, "measured on opencl:0") || !strings.Contains(r.Profile, "opencl:0") {
		t.Errorf("planned on %q, simulated with %q; want opencl:0's costs", r.PlannedOn, r.Profile)
	}
	if got, want := r.Plan.Metrics["simulated_iteration_ms"], float64(r.Sim.Iteration)/1e6; math.Abs(got-want) > 1e-9*want {
		t.Errorf("the planner simulated %.6f ms, the simulation %.6f ms", got, want)
	}
}

// TestPlanSpeedupNote: a profile taken here pricing a GPU preset at the
// profiled device's own speed gets a note saying to pass --speedup; with
// it, or with the roofline, or on the cpu preset, none.
func TestPlanSpeedupNote(t *testing.T) {
	base := []string{"plan", "--scheduler", "1f1b", "--model", "gcn", "--simulate", "--json"}
	for _, c := range []struct {
		args []string
		note bool
	}{
		{[]string{"--preset", "pcie-a100", "--devices", "2", "--measure", "--reps", "1"}, true},
		{[]string{"--preset", "pcie-a100", "--devices", "2", "--measure", "--reps", "1", "--speedup", "20"}, false},
		{[]string{"--preset", "pcie-a100", "--devices", "2"}, false},
		{[]string{"--preset", "cpu", "--devices", "2", "--measure", "--reps", "1"}, false},
	} {
		out, err := run(t, append(base, c.args...)...)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		var r planReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %q", err, out)
		}
		if got := len(r.Notes) > 0 && strings.Contains(r.Notes[0], "--speedup"); got != c.note {
			t.Errorf("%v: notes %q, want a --speedup note: %v", c.args, r.Notes, c.note)
		}
	}
}

// TestPlanMeasureRefused: --measure where it would do nothing or cannot
// work is refused before any data is loaded, saying what to do; and the
// --speedup note needs no --simulate when the planner priced ops.
func TestPlanMeasureRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--scheduler", "sequential", "--measure"}, "add --simulate"},
		{[]string{"--scheduler", "graphpipe", "--measure", "--measure-backend", "tpu"}, "want one of"},
		{[]string{"--scheduler", "graphpipe", "--batch-size", "-2"}, "must not be negative"},
	} {
		_, err := run(t, append([]string{"plan", "--data", "/nonexistent"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("plan %v: %v, want an error containing %q (before the missing dataset)", c.args, err, c.want)
		}
	}
	out, err := run(t, "plan", "--scheduler", "1f1b", "--model", "gcn", "--preset", "pcie-a100", "--devices", "2", "--measure", "--reps", "1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r planReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	if len(r.Notes) == 0 || !strings.Contains(r.Notes[0], "--speedup") {
		t.Errorf("planned on %q without --simulate: notes %q, want the --speedup note", r.PlannedOn, r.Notes)
	}
}

// TestPlanMeasureThroughWorker: --measure-backend cuda profiles the
// worker's cuda:0 (a CPU worker standing in for gnnkit-cuda), for the
// pipeline schedulers' planning and for the simulation of any plan.
func TestPlanMeasureThroughWorker(t *testing.T) {
	fakeCUDA(t, "cpu")
	for _, s := range []string{"graphpipe", "sequential"} {
		out, err := run(t, "plan", "--scheduler", s, "--model", "gcn", "--devices", "2", "--preset", "cpu", "--simulate", "--json",
			"--measure", "--measure-backend", "cuda", "--reps", "1")
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		var r planReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %q", err, out)
		}
		if !strings.HasPrefix(r.Profile, "measured on cuda:0") || s == "graphpipe" && !strings.HasPrefix(r.PlannedOn, "measured on cuda:0") {
			t.Errorf("%s: planned on %q, simulated with %q; want cuda:0's costs", s, r.PlannedOn, r.Profile)
		}
		if r.Sim == nil || r.Sim.Iteration <= 0 {
			t.Errorf("%s: no simulation", s)
		}
	}
}
