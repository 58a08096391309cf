package main

import (
	"encoding/json"
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
