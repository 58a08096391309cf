package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestTrainDynamicSchedulers: the three group schedulers train the same
// model to the same loss and test metrics (they are exact), and report
// busy time, imbalance and overlap.
func TestTrainDynamicSchedulers(t *testing.T) {
	final := regexp.MustCompile(`final loss\s+(\S+)`)
	test := regexp.MustCompile(`test\s+(AUC.*)`)
	var want []string
	for _, s := range []string{"esdg", "blad", "vertexpart"} {
		out, err := run(t, "train-dynamic", "--data", "synthetic:dsbm,nodes=300,snapshots=12,edges=40,skew=20,trend=grow",
			"--scheduler", s, "--devices", "cpu:0,cpu:1", "--threads", "1", "--epochs", "3", "--window", "3", "--hidden", "8", "--step-groups", "0")
		if err != nil {
			t.Fatalf("%s: %v\n%s", s, err, out)
		}
		for _, k := range []string{"busy cpu:0", "busy cpu:1", "imbalance", "overlap"} {
			if !strings.Contains(out, k) {
				t.Errorf("%s: output lacks %q:\n%s", s, k, out)
			}
		}
		f, m := final.FindStringSubmatch(out), test.FindStringSubmatch(out)
		if f == nil || m == nil {
			t.Fatalf("%s: no final loss or test metrics:\n%s", s, out)
		}
		got := []string{f[1], m[1]}
		if want == nil {
			want = got
		} else if got[0] != want[0] || got[1] != want[1] {
			t.Errorf("%s: loss %s, test %s; esdg: %s, %s", s, got[0], got[1], want[0], want[1])
		}
	}
	if _, err := run(t, "train-dynamic", "--data", "synthetic:dsbm,trend=sideways", "--epochs", "1"); err == nil || !strings.Contains(err.Error(), "trend") {
		t.Errorf("bad trend: %v", err)
	}
	if _, err := run(t, "train-dynamic", "--scheduler", "vertexpart", "--model", "evolvegcn", "--data", "synthetic:dsbm,nodes=300,snapshots=12,edges=40",
		"--devices", "cpu:0,cpu:1", "--epochs", "1", "--window", "3"); err == nil || !strings.Contains(err.Error(), "tgcn") {
		t.Errorf("vertexpart with evolvegcn: %v", err)
	}
}
