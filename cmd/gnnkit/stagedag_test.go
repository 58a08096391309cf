package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

func toks(s string) []schedTok {
	var out []schedTok
	for _, f := range strings.Fields(s) {
		var t schedTok
		t.kind = f[0]
		for _, c := range f[1:] {
			t.unit = 10*t.unit + int(c-'0')
		}
		out = append(out, t)
	}
	return out
}

func TestCompressSchedule(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"empty", "", ""},
		{"one", "F0", "F0"},
		{"GPipe", "F0 F1 F2 F3 B0 B1 B2 B3", "F0-3 B0-3"},
		{"1F1B", "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7", "F0-2 B0 F3 … B4 F7 (5×) B5-7"},
		{"last stage", "F0 B0 F1 B1 F2 B2", "F0 B0 … F2 B2 (3×)"},
		{"two pairs stay apart", "F0 B0 F1 B1", "F0 B0 F1 B1"},
		{"a replica's every second micro-batch", "F1 F3 F5 B1 F7 B3 B5 B7", "F1,3…5 B1 F7 B3,5…7"},
		{"run of two", "F0 F1 B0 B1", "F0 F1 B0 B1"},
		{"units out of order", "F2 F1 F0", "F2 F1 F0"},
		{"replica pairs", "B0 F8 B2 F10 B4 F12", "B0 F8 … B4 F12 (3×)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := compressSchedule(toks(c.in)); got != c.want {
				t.Errorf("compressSchedule(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestDeviceRanges(t *testing.T) {
	cases := []struct {
		in   []core.DeviceID
		want string
	}{
		{[]core.DeviceID{"cuda:3", "cuda:0", "cuda:1", "cuda:2"}, "cuda:0-3"},
		{[]core.DeviceID{"cuda:0", "cuda:2", "cuda:3", "cuda:10"}, "cuda:0,2-3,10"},
		{[]core.DeviceID{"cpu:1", "cuda:0", "cpu:0"}, "cpu:0-1 cuda:0"},
		{[]core.DeviceID{"odd"}, "odd"},
	}
	for _, c := range cases {
		if got := deviceRanges(c.in); got != c.want {
			t.Errorf("deviceRanges(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestCompactOps(t *testing.T) {
	cases := []struct {
		in   []int
		want string
	}{
		{nil, "-"},
		{[]int{7}, "7"},
		{[]int{0, 1, 2, 3}, "0-3"},
		{[]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 36, 37, 38, 39, 40, 41, 42, 43, 44}, "0-8,36-44"},
		{[]int{2, 4, 5, 9}, "2,4-5,9"},
	}
	for _, c := range cases {
		if got := compactOps(c.in); got != c.want {
			t.Errorf("compactOps(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestPlanStageDAG: `gnnkit plan` prints GraphPipe's stage DAG (each
// branch on a device of its own, the search having split a stage of two
// branches on two replicas, splitBranches, feeding the shared trunk,
// replicated on every device's own stream) and each stream's 1F1B
// schedule, and --dot writes the DAG. (Before the split, two branches a
// stage on two replicas each: 1.378 ms in 13.4 MiB; split, 1.177 ms in
// 9.1 MiB.)
func TestPlanStageDAG(t *testing.T) {
	dot := filepath.Join(t.TempDir(), "stages.dot")
	out, err := run(t, "plan", "--scheduler", "graphpipe", "--model", "uno", "--hidden", "256", "--devices", "4",
		"--preset", "pcie-a100", "--sched-opt", "m=8", "--dot", dot)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"stage DAG                   5 stages, depth 2",
		"s0 → s4", "s1 → s4", "s2 → s4", "s3 → s4",
		"s0 → s4                   cuda:0 stream 0 · 6 ops: branch0.l0.lin … branch0.l1.relu · 8 units · k 2",
		"s4 (sink)                 cuda:0-3 stream 2 · 9 ops: join0 … loss · 8 units · k 1",
		"cuda:0 stream 0           s0: F0-4 B0 F5 … B2 F7 (3×) B3-7",
		"cuda:3 stream 2           s4: F0 B0 F4 B4",
		// The owners step the trunk's parameters apart from their
		// branch stage's (the search's step groups), each group on a
		// stream of its own.
		"cuda:0 stream 3           3 reductions",
		"cuda:0 stream 4           step of 1 parameter",
		"cuda:0 stream 5           step of 4 parameters",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(dot)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"digraph stages {", "s0 -> s4;", "s3 -> s4;", `cuda:0 stream 0\n8 units, k=2`, `cuda:0-3 stream 2\n8 units, k=1`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("DOT file lacks %q:\n%s", want, b)
		}
	}
	// A data-parallel plan has one stage: no DAG printed, the DOT file
	// one node.
	out, err = run(t, "plan", "--scheduler", "sequential", "--devices", "1", "--dot", dot)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "stage DAG") {
		t.Errorf("a one-device plan printed a stage DAG:\n%s", out)
	}
	if b, _ := os.ReadFile(dot); strings.Count(string(b), "[label=") != 1 || strings.Contains(string(b), "->") {
		t.Errorf("one-stage DOT file:\n%s", b)
	}
}

func TestDotQuote(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:         `"plain"`,
		`a"q`:           `"a\"q"`,
		`b\lx`:          `"b\\lx"`,
		"two\nlines":    `"two\nlines"`,
		"tab\there·…":   "\"tab\there·…\"",
		"soft\u00adhyp": "\"soft\u00adhyp\"",
	} {
		if got := dotQuote(in); got != want {
			t.Errorf("dotQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestOpsString(t *testing.T) {
	w := &core.Workload{}
	for i := range 6 {
		w.Ops = append(w.Ops, core.OpInfo{Index: i, Name: string(rune('a' + i))})
	}
	for _, c := range []struct {
		ops  []int
		want string
	}{
		{nil, "no ops"},
		{[]int{2}, "1 op: c"},
		{[]int{0, 3, 4}, "3 ops: a d e"},
		{[]int{1, 2, 3, 4}, "4 ops: b … e"},
		{[]int{0, 1, 2, 5}, "4 ops: a … f (not contiguous)"},
	} {
		if got := opsString(c.ops, w); got != c.want {
			t.Errorf("opsString(%v) = %q, want %q", c.ops, got, c.want)
		}
	}
}

// TestPlanDeviceMem: --device-mem caps every simulated device. Under a
// cap no partition meets, each pipeline scheduler says so under its own
// name, once, with the smallest memory that fits; at that memory it
// plans, and the plan fits.
func TestPlanDeviceMem(t *testing.T) {
	args := []string{"plan", "--model", "uno", "--hidden", "256", "--devices", "4", "--preset", "pcie-a100"}
	for _, s := range []string{"graphpipe", "1f1b", "gpipe"} {
		_, err := run(t, append(args, "--scheduler", s, "--device-mem", "1MiB")...)
		if err == nil || !strings.HasPrefix(err.Error(), s+": model does not fit") || strings.Count(err.Error(), s+":") != 1 {
			t.Fatalf("%s under 1 MiB: %v", s, err)
		}
		_, need, ok := strings.Cut(err.Error(), "is about ")
		need, _, _ = strings.Cut(need, " (")
		if !ok {
			t.Fatalf("%s: no memory named in %q", s, err)
		}
		out, err := run(t, append(args, "--scheduler", s, "--device-mem", strings.ReplaceAll(need, " ", ""), "--simulate")...)
		if err != nil {
			t.Fatalf("%s at the %s it named: %v", s, need, err)
		}
		if strings.Contains(out, "OVER CAPACITY") || !strings.Contains(out, "of "+need) {
			t.Errorf("%s at %s:\n%s", s, need, out)
		}
	}
	if _, err := run(t, append(args, "--scheduler", "graphpipe", "--device-mem", "0")...); err == nil || !strings.Contains(err.Error(), "--device-mem must be positive") {
		t.Errorf("--device-mem 0: %v", err)
	}
	if _, err := run(t, append(args, "--scheduler", "graphpipe", "--device-mem", "lots")...); err == nil || !strings.Contains(err.Error(), "--device-mem") {
		t.Errorf("--device-mem lots: %v", err)
	}
}

// TestPlanCluster: --write-cluster writes the preset planned for, and
// --cluster plans for it again, the same plan; a slower link in the file
// moves the prediction; conflicting or bad input is refused clearly.
func TestPlanCluster(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.json")
	args := []string{"plan", "--scheduler", "graphpipe", "--model", "uno", "--hidden", "256", "--sched-opt", "m=8", "--json", "--simulate"}
	report := func(out string) planReport {
		t.Helper()
		var r planReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %q", err, out)
		}
		return r
	}
	out, err := run(t, append(args, "--preset", "pcie-a100", "--devices", "4", "--device-mem", "2GiB", "--write-cluster", file)...)
	if err != nil {
		t.Fatal(err)
	}
	want := report(out)
	out, err = run(t, append(args, "--cluster", file)...)
	if err != nil {
		t.Fatal(err)
	}
	got := report(out)
	if got.Cluster != want.Cluster || got.Sim.Iteration != want.Sim.Iteration || len(got.StageDAG) != len(want.StageDAG) {
		t.Errorf("from the written cluster: %s, %v, %d stages; from the preset: %s, %v, %d stages",
			got.Cluster, got.Sim.Iteration, len(got.StageDAG), want.Cluster, want.Sim.Iteration, len(want.StageDAG))
	}
	for d, m := range got.Sim.PeakMem {
		if m <= 0 {
			t.Errorf("%s: peak %d", d, m)
		}
	}
	if len(got.Sim.OverCap) > 0 {
		t.Errorf("over the 2 GiB on %v", got.Sim.OverCap)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"mem_bytes": 2147483648`) {
		t.Errorf("--device-mem is not in the written cluster:\n%s", b)
	}
	slow := filepath.Join(dir, "slow.json")
	if err := os.WriteFile(slow, []byte(strings.ReplaceAll(string(b), `"gbps": 24`, `"gbps": 0.5`)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, append(args, "--cluster", slow)...)
	if err != nil {
		t.Fatal(err)
	}
	if s := report(out); s.Sim.Iteration <= want.Sim.Iteration {
		t.Errorf("links at 0.5 GB/s: %v, not slower than at 24 GB/s (%v)", s.Sim.Iteration, want.Sim.Iteration)
	}
	// Planned for one cluster (the scheduler option), simulated on another
	// (the preset): said, not left to be guessed from the two times.
	out, err = run(t, append(args, "--preset", "pcie-a100", "--devices", "4", "--sched-opt", "cluster="+slow)...)
	if err != nil {
		t.Fatal(err)
	}
	if s := report(out); !slices.ContainsFunc(s.Notes, func(n string) bool { return strings.Contains(n, "give the file as --cluster") }) {
		t.Errorf("planned on %s, simulated on the preset: notes %q", slow, s.Notes)
	}
	out, err = run(t, append(args, "--cluster", slow, "--sched-opt", "cluster="+slow)...)
	if err != nil {
		t.Fatal(err)
	}
	if s := report(out); slices.ContainsFunc(s.Notes, func(n string) bool { return strings.Contains(n, "give the file as --cluster") }) {
		t.Errorf("planned and simulated on %s alike: notes %q", slow, s.Notes)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(strings.Replace(string(b), `"cuda:1"`, `"cuda:0"`, 1)), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--cluster", file, "--preset", "cpu"}, "give one"},
		{[]string{"--cluster", file, "--devices", "8"}, "has 4 devices"},
		{[]string{"--cluster", bad}, "id cuda:0 appears twice"},
		{[]string{"--cluster", filepath.Join(dir, "none.json")}, "no such file"},
	} {
		if _, err := run(t, append(args, c.args...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error containing %q", c.args, err, c.want)
		}
	}
}

// TestBranchesFlag: --branches sets a multi-branch model's branch count
// (plan and train), and is refused for other models or below 1.
func TestBranchesFlag(t *testing.T) {
	for _, c := range []struct {
		branches string
		ops      string
	}{{"2", "19 ops"}, {"8", "61 ops"}} {
		out, err := run(t, "plan", "--model", "uno", "--branches", c.branches)
		if err != nil || !strings.Contains(out, c.ops+")") {
			t.Errorf("uno --branches %s: %v\n%s", c.branches, err, out)
		}
	}
	// A sampled batch spans the model's depth: mbgnn's is its branch
	// count, not --layers.
	first := func(args ...string) string {
		out, err := run(t, append([]string{"plan", "--model", "mbgnn", "--branches", "3", "--batch-size", "64"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		line, _, _ := strings.Cut(out, "\n")
		return line
	}
	if a, b := first(), first("--fanout", "-1,-1,-1"); a != b {
		t.Errorf("mbgnn with 3 branches samples %q, with 3 full hops %q", a, b)
	}
	// In train: more branches, more parameters, a larger peak.
	peak := func(model, branches string) int64 {
		r := trainJSON(t, "--model", model, "--branches", branches, "--epochs", "1")
		return r.PeakMemBytes["cpu:0"]
	}
	for _, model := range []string{"uno", "mbgnn", "dlrm"} {
		if two, six := peak(model, "2"), peak(model, "6"); !(two > 0 && six > two) {
			t.Errorf("train %s: peak %d with 2 branches, %d with 6", model, two, six)
		}
	}
	for _, args := range [][]string{{"plan", "--model", "gcn", "--branches", "3"}, {"train", "--model", "mbgnn", "--branches", "0", "--epochs", "1", "-q"},
		{"plan", "--model", "mbgnn", "--layers", "3"}, {"train", "--model", "mbgnn", "--branches", "3", "--layers", "3", "--epochs", "1", "-q"}} {
		if _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), "--branches") {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// TestTableRowsFlag: --table-rows sizes dlrm's embedding tables in plan
// and train (a larger table: a larger peak), and is refused for other
// models or below 1.
func TestTableRowsFlag(t *testing.T) {
	peak := func(rows string) int64 {
		r := trainJSON(t, "--model", "dlrm", "--table-rows", rows, "--epochs", "1")
		return r.PeakMemBytes["cpu:0"]
	}
	// 9,000 more rows of 64 (dlrm's default width): 2.3 MB of
	// parameters and as much of gradients at least.
	if small, big := peak("1000"), peak("10000"); !(small > 0 && big-small >= 2*9000*64*4) {
		t.Errorf("train dlrm: peak %d with 1,000 rows, %d with 10,000", small, big)
	}
	out, err := run(t, "plan", "--model", "dlrm", "--table-rows", "100000", "--scheduler", "graphpipe", "--devices", "4", "--preset", "pcie-a100")
	if err != nil || !strings.Contains(out, "stage DAG") {
		t.Errorf("plan dlrm --table-rows 100000: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"plan", "--model", "uno", "--table-rows", "10"}, {"train", "--model", "gcn", "--table-rows", "10", "--epochs", "1", "-q"},
		{"plan", "--model", "dlrm", "--table-rows", "0"}, {"train", "--model", "dlrm", "--table-rows", "-3", "--epochs", "1", "-q"}} {
		if _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), "--table-rows") {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// TestDAGModelDropout: train honours --dropout for uno and dlrm (they
// ignored it before), their default is none, and train says before it
// trains dlrm that its accuracy on graph data means nothing (not with
// --json, whose output stays one JSON object).
func TestDAGModelDropout(t *testing.T) {
	for _, model := range []string{"uno", "dlrm"} {
		loss := func(args ...string) float64 {
			return trainJSON(t, append([]string{"--model", model, "--epochs", "2"}, args...)...).FinalLoss
		}
		none, dflt, half := loss("--dropout", "0"), loss(), loss("--dropout", "0.5")
		if none != dflt || half == none {
			t.Errorf("%s: final loss %v at --dropout 0, %v by default, %v at 0.5; want the first two equal, the third not", model, none, dflt, half)
		}
	}
	out, err := run(t, "train", "--model", "dlrm", "--epochs", "1", "-q")
	if err != nil || !strings.Contains(out, "gnnkit: note: dlrm looks its tables up by synthetic ids") {
		t.Errorf("train --model dlrm: %v, want the note on synthetic ids:\n%s", err, out)
	}
	if out, err := run(t, "train", "--model", "uno", "--epochs", "1", "-q"); err != nil || strings.Contains(out, "note:") {
		t.Errorf("train --model uno: %v, want no note:\n%s", err, out)
	}
}

// TestPlanOptimizer: plan prices the optimizer it is told (--optimizer,
// as train's): plain SGD keeps no state, so the smallest memory that fits
// is smaller than Adam's, SGD plans at it and Adam does not (the roofline
// used to price Adam's two moments for every optimizer).
func TestPlanOptimizer(t *testing.T) {
	args := []string{"plan", "--model", "uno", "--hidden", "256", "--devices", "4", "--preset", "pcie-a100", "--scheduler", "graphpipe"}
	need := map[string]string{}
	for _, o := range []string{"adam", "sgd"} {
		_, err := run(t, append(args, "--optimizer", o, "--device-mem", "1MiB")...)
		if err == nil {
			t.Fatalf("%s under 1 MiB planned", o)
		}
		_, n, ok := strings.Cut(err.Error(), "is about ")
		n, _, _ = strings.Cut(n, " (")
		if !ok {
			t.Fatalf("%s: no memory named in %q", o, err)
		}
		need[o] = strings.ReplaceAll(n, " ", "")
	}
	a, errA := core.ParseBytes(need["adam"])
	s, errS := core.ParseBytes(need["sgd"])
	if errA != nil || errS != nil || s >= a {
		t.Fatalf("smallest memory that fits: adam %s, sgd %s; want sgd's smaller", need["adam"], need["sgd"])
	}
	if _, err := run(t, append(args, "--optimizer", "sgd", "--device-mem", need["sgd"])...); err != nil {
		t.Errorf("sgd at the %s it named: %v", need["sgd"], err)
	}
	if _, err := run(t, append(args, "--optimizer", "adam", "--device-mem", need["sgd"])...); err == nil {
		t.Errorf("adam planned at sgd's %s (it needs %s)", need["sgd"], need["adam"])
	}
	if _, err := run(t, append(args, "--optimizer", "rmsprop")...); err == nil || !strings.Contains(err.Error(), `unknown optimizer "rmsprop"`) {
		t.Errorf("--optimizer rmsprop: %v", err)
	}
}

// TestPlanComputeBound: --simulate gives the compute bound at the plan's
// micro-batches (in the text and the JSON), no larger than the simulated
// iteration; on a device overlapping its streams there is none, and the
// reason is given.
func TestPlanComputeBound(t *testing.T) {
	args := []string{"plan", "--scheduler", "graphpipe", "--model", "uno", "--hidden", "256", "--sched-opt", "m=8", "--simulate", "--preset", "pcie-a100", "--devices", "4"}
	out, err := run(t, append(args, "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var r planReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	if b := r.Bound; b == nil || b.Units != 8 || b.Devices != 4 || b.Ns <= 0 || b.Ns > r.Sim.Iteration ||
		b.WorkNs <= 0 || b.PathNs <= 0 || b.Ns != max(b.WorkNs, b.PathNs) ||
		math.Abs(b.Ratio-float64(r.Sim.Iteration)/float64(b.Ns)) > 1e-9 || r.NoBound != "" {
		t.Errorf("bound %+v (none: %q), simulated %v", r.Bound, r.NoBound, r.Sim.Iteration)
	}
	out, err = run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "compute bound") || !strings.Contains(out, "x it (every op of the 8 units") {
		t.Errorf("no compute bound in the text:\n%s", out)
	}
	// Two micro-batches on 16 devices: their path of ops binds, and the
	// line says so; one micro-batch: its phases.
	for _, c := range []struct{ m, want string }{
		{"2", "one unit's longest path of ops"},
		{"1", "the unit's ops in dependency order"},
	} {
		out, err = run(t, "plan", "--scheduler", "graphpipe", "--model", "uno", "--hidden", "256", "--sched-opt", "m="+c.m, "--simulate", "--preset", "pcie-a100", "--devices", "16")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("m = %s on 16 devices: the bound does not say %q:\n%s", c.m, c.want, out)
		}
	}
	// The same cluster with a device that overlaps its streams.
	file := filepath.Join(t.TempDir(), "c.json")
	if _, err := run(t, append(args, "--write-cluster", file)...); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	overlap := strings.Replace(string(b), `"sms": 108`, `"sms": 108, "stream_overlap": 0.5`, 1)
	if err := os.WriteFile(file, []byte(overlap), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "plan", "--scheduler", "graphpipe", "--model", "uno", "--hidden", "256", "--sched-opt", "m=8", "--simulate", "--cluster", file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "compute bound") || !strings.Contains(out, "none: device cuda:0 runs its streams' tasks side by side") {
		t.Errorf("stream overlap: no reason given for the missing bound:\n%s", out)
	}
}

// TestPlanAlternativesNeed: where the estimate's worst case is above a
// plan's simulated peak (the trunk shared with branch stages), the
// alternatives say what the plan needs; that figure, passed back as
// --device-mem, here gets a plan as fast (the same, or one as fast by
// another route), and the simulated peak, under it, rules the plan out.
func TestPlanAlternativesNeed(t *testing.T) {
	args := []string{"plan", "--scheduler", "graphpipe", "--model", "uno", "--hidden", "256", "--sched-opt", "m=16", "--simulate", "--preset", "pcie-a100", "--devices", "8"}
	chosen := func(extra ...string) core.Alternative {
		t.Helper()
		out, err := run(t, append(append(args, "--json"), extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		var r planReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %q", err, out)
		}
		if alts := r.Plan.Alternatives; len(alts) > 0 && alts[0].Chosen {
			return alts[0]
		}
		t.Fatalf("%v: alternatives %+v", extra, r.Plan.Alternatives)
		return core.Alternative{}
	}
	c := chosen()
	if !needsMore(c) {
		t.Fatalf("the chosen plan needs %d B, its simulated peak is %d B: want a case where the need shows", c.NeedBytes, c.PeakBytes)
	}
	need := core.FormatBytes(core.RoundUpShownBytes(c.NeedBytes))
	out, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "(chosen), needs "+need) || !strings.Contains(out, "needs: the --device-mem a search must allow") {
		t.Errorf("the text does not say the chosen plan needs %s:\n%s", need, out)
	}
	if k := chosen("--device-mem", need); k.IterationMs > c.IterationMs*(1+1e-9) || k.NeedBytes > core.RoundUpShownBytes(c.NeedBytes) {
		t.Errorf("--device-mem %s (what %q needs, at %.4f ms): kept %q at %.4f ms, needing %d B", need, c.Description, c.IterationMs, k.Description, k.IterationMs, k.NeedBytes)
	}
	peak := strconv.FormatInt(c.PeakBytes, 10)
	if k := chosen("--device-mem", peak); k.NeedBytes > c.PeakBytes || k.IterationMs == c.IterationMs {
		t.Errorf("--device-mem %s B (the simulated peak of %q, under what it needs): kept %q at %.4f ms, needing %d B", peak, c.Description, k.Description, k.IterationMs, k.NeedBytes)
	}
}

// TestPlanSlack: --sched-opt slack=1% (the README's line) prints the
// lighter plan it chose, what it passed over (the metrics and the
// alternatives' header), within 1% of the fastest; a bad value is
// refused with what slack takes.
func TestPlanSlack(t *testing.T) {
	args := []string{"plan", "--scheduler", "graphpipe", "--model", "uno", "--devices", "16", "--preset", "pcie-a100", "--simulate"}
	out, err := run(t, append(args, "--sched-opt", "slack=1%", "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var r planReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	m := r.Plan.Metrics
	if m["slack_chosen"] != 1 {
		t.Fatalf("slack=1%%: metrics %v: want slack_chosen (this cell has a plan 0.8%% slower and lighter)", m)
	}
	if it, fast := m["simulated_iteration_ms"], m["fastest_iteration_ms"]; it > fast*1.01 || it < fast {
		t.Errorf("chose %v ms against the fastest %v ms: want within 1%%", it, fast)
	}
	if alts := r.Plan.Alternatives; len(alts) < 2 || !alts[0].Chosen || alts[1].IterationMs != m["fastest_iteration_ms"] || alts[0].PeakBytes >= alts[1].PeakBytes {
		t.Errorf("alternatives %+v: want the chosen, then the faster and heavier plan it passed over", alts)
	}
	text, err := run(t, append(args, "--sched-opt", "slack=1%")...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"slack chosen", "fastest iteration ms", "fastest peak bytes", "the lightest within the slack"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q:\n%s", want, text)
		}
	}
	if _, err := run(t, append(args, "--sched-opt", "slack=lots")...); err == nil || !strings.Contains(err.Error(), "percentage") {
		t.Errorf("slack=lots: %v, want an error saying what slack takes", err)
	}
}
