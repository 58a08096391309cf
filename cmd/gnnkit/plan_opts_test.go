package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanShowsSchedOpts: plan names the options the scheduler was made
// with, in its summary (sorted) and in --json, so that a plan from
// Piper's chains (dp=piper) reads as one.
func TestPlanShowsSchedOpts(t *testing.T) {
	args := []string{"plan", "--scheduler", "1f1b", "--sched-opt", "m=4", "--sched-opt", "dp=piper", "--model", "uno", "--branches", "2", "--devices", "4", "--preset", "pcie-a100"}
	out, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "1f1b, dp=piper m=4 (planned in ") {
		t.Errorf("the scheduler line does not name its options:\n%s", out)
	}
	out, err = run(t, append(args, "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Scheduler string            `json:"scheduler"`
		SchedOpts map[string]string `json:"sched_opts"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Scheduler != "1f1b" || rep.SchedOpts["dp"] != "piper" || rep.SchedOpts["m"] != "4" || len(rep.SchedOpts) != 2 {
		t.Errorf("--json: scheduler %q, sched_opts %v; want 1f1b with dp=piper and m=4", rep.Scheduler, rep.SchedOpts)
	}
}

// TestParseSchedOpts: --sched-opt values, repeated or comma-joined; a
// comma inside a value (a path) stays; a key given twice with two values,
// an empty key or a piece without '=' is refused.
func TestParseSchedOpts(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want map[string]string
		err  string
	}{
		{in: nil, want: map[string]string{}},
		{in: []string{"m=8"}, want: map[string]string{"m": "8"}},
		{in: []string{"m=8", "simulate=16"}, want: map[string]string{"m": "8", "simulate": "16"}},
		{in: []string{"m=8,simulate=16"}, want: map[string]string{"m": "8", "simulate": "16"}},
		{in: []string{"profile=runs/a,b.json"}, want: map[string]string{"profile": "runs/a,b.json"}},
		{in: []string{"profile=x=1,y.json", "m=4"}, want: map[string]string{"profile": "x=1,y.json", "m": "4"}},
		{in: []string{"m=8", "m=8"}, want: map[string]string{"m": "8"}},
		{in: []string{"m=8, dp=piper "}, want: map[string]string{"m": "8", "dp": "piper"}},
		{in: []string{"profile=a,b=c.json"}, want: map[string]string{"profile": "a", "b": "c.json"}}, // the documented limit
		{in: []string{""}, err: `--sched-opt "": want key=value`},
		{in: []string{"m="}, want: map[string]string{"m": ""}},
		{in: []string{"m=8", "m=16"}, err: `--sched-opt m given twice, as "8" and as "16"`},
		{in: []string{"m=8,m=16"}, err: "given twice"},
		{in: []string{"m"}, err: `--sched-opt "m": want key=value`},
		{in: []string{"=4"}, err: "want key=value"},
	} {
		got, err := parseSchedOpts(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("%q: %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestPlanSchedOptTwice: plan refuses an option given twice with two
// values before it builds anything.
func TestPlanSchedOptTwice(t *testing.T) {
	_, err := run(t, "plan", "--scheduler", "1f1b", "--sched-opt", "m=4", "--sched-opt", "m=8", "--model", "uno", "--devices", "2", "--preset", "pcie-a100")
	if err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("error %v, want the option named as given twice", err)
	}
}

// FuzzParseSchedOpts: parseSchedOpts never panics; what it accepts has
// no empty key, and every option it returns came from the input: given
// back one per flag, the options parse to the same map (a value with a
// comma may then split, so only comma-free values are given back).
func FuzzParseSchedOpts(f *testing.F) {
	for _, s := range []string{"m=8", "m=8,simulate=16", "profile=runs/a,b.json", "=4", "m", "m=8\x00m=16", " k =v", "a=b=c,d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		vals := strings.Split(in, "\x00") // several --sched-opt flags
		got, err := parseSchedOpts(vals)
		if err != nil {
			return
		}
		var again []string
		for k, v := range got {
			if k == "" || strings.TrimSpace(k) != k || strings.TrimSpace(v) != v {
				t.Fatalf("%q: key %q", vals, k)
			}
			if !strings.Contains(in, k) || !strings.Contains(in, v) {
				t.Fatalf("%q: option %s=%s not in the input", vals, k, v)
			}
			if !strings.Contains(v, ",") {
				again = append(again, k+"="+v)
			}
		}
		back, err := parseSchedOpts(again)
		if err != nil {
			t.Fatalf("%q given back as %q: %v", vals, again, err)
		}
		for _, kv := range again {
			k, v, _ := strings.Cut(kv, "=")
			if back[k] != v {
				t.Fatalf("%q given back as %q: %s=%q, want %q", vals, again, k, back[k], v)
			}
		}
	})
}

// TestMetricText: plan prints counts in full, bytes in their unit, and
// the rest to 4 significant digits.
func TestMetricText(t *testing.T) {
	for _, c := range []struct {
		key  string
		v    float64
		want string
	}{
		{"micro_batches_asked", 12345, "12345"},
		{"micro_batches", 1000, "1000"},
		{"predicted_peak_bytes", 348300000, "332.2 MiB"},
		{"predicted_iteration_ms", 23.0412, "23.04"},
		{"bubble_bound", 0.2, "0.2"},
		{"stages", 0, "0"},
	} {
		if got := metricText(c.key, c.v); got != c.want {
			t.Errorf("metricText(%s, %v) = %q, want %q", c.key, c.v, got, c.want)
		}
	}
}

// TestSpeedupKept: --speedup without a profile is refused (the roofline
// ignores it) unless --write-cluster keeps it in the cluster file, or it
// is 0 (none).
func TestSpeedupKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.json")
	if _, err := run(t, "plan", "--preset", "pcie-a100", "--devices", "2", "--speedup", "2", "--write-cluster", path); err != nil {
		t.Fatalf("--speedup 2 --write-cluster: %v", err)
	}
	if b, err := os.ReadFile(path); err != nil || !strings.Contains(string(b), `"speedup": 2`) {
		t.Errorf("the cluster file %s lacks the speedup (%v):\n%s", path, err, b)
	}
	if _, err := run(t, "plan", "--preset", "pcie-a100", "--devices", "2", "--speedup", "0"); err != nil {
		t.Errorf("--speedup 0: %v", err)
	}
	if _, err := run(t, "plan", "--preset", "pcie-a100", "--devices", "2", "--speedup", "2"); err == nil || !strings.Contains(err.Error(), "this plan has none") {
		t.Errorf("--speedup 2 on the roofline: %v, want it refused", err)
	}
}
