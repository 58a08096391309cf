package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrainDynamicBadFlags: a flag value that means nothing is rejected
// before any data is loaded (--data names no dataset here, so a check
// made after loading would fail on the data instead), with an error that
// names the flag and the allowed range.
func TestTrainDynamicBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--epochs", "0"}, "--epochs 0: want >= 1 training epochs"},
		{[]string{"--epochs", "-1"}, "--epochs -1: want >= 1 training epochs"},
		{[]string{"--lr", "0"}, "--lr 0: want a finite learning rate > 0"},
		{[]string{"--lr", "-0.01"}, "--lr -0.01: want a finite learning rate > 0"},
		{[]string{"--lr", "NaN"}, "--lr NaN: want a finite learning rate > 0"},
		{[]string{"--lr", "Inf"}, "--lr +Inf: want a finite learning rate > 0"},
		{[]string{"--lr", "-Inf"}, "--lr -Inf: want a finite learning rate > 0"},
		{[]string{"--lr", "1e-300"}, "--lr 0: want a finite learning rate > 0"},
		{[]string{"--neg-train", "0"}, "--neg-train 0: want >= 1 negative samples per positive"},
		{[]string{"--neg-train", "-1"}, "--neg-train -1: want >= 1 negative samples per positive"},
		{[]string{"--neg-eval", "0"}, "--neg-eval 0: want >= 1 negative samples per positive"},
		{[]string{"--hidden", "0"}, "--hidden 0: want a hidden width >= 1"},
		{[]string{"--window", "0"}, "--window 0: want >= 1 snapshots per group"},
		{[]string{"--eval-every", "-1"}, "--eval-every -1: want >= 1 epochs (0: evaluate on val only at the end)"},
		{[]string{"--step-groups", "-1"}, "--step-groups -1: want >= 1 groups per optimizer step (0: all training groups)"},
		{[]string{"--threads", "-1"}, "--threads -1: want >= 1 threads per device (0: the backend's default)"},
		{[]string{"--snapshot-seconds", "-5"}, "--snapshot-seconds -5: want a positive snapshot length in seconds (0: the dataset's own)"},
		{[]string{"--model", "gcn"}, "--model gcn is a static model; train-dynamic trains tgcn or evolvegcn (train gcn with gnnkit train)"},
		{[]string{"--model", "gat"}, "--model gat is a static model; train-dynamic trains tgcn or evolvegcn"},
		{[]string{"--model", "foo"}, `--model "foo": unknown; train-dynamic trains tgcn or evolvegcn`},
		{[]string{"--scheduler", "sequential"}, "blad, esdg or vertexpart"},
		{[]string{"--scheduler", "vertexpart", "--model", "evolvegcn"}, "--scheduler vertexpart partitions tgcn only"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			out, err := run(t, append([]string{"train-dynamic", "--data", "/nonexistent/dataset"}, c.args...)...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one containing %q", err, c.want)
			}
			if strings.Contains(out, "data:") {
				t.Errorf("loaded data before rejecting the flag:\n%s", out)
			}
		})
	}
}

// TestTrainDynamicZeroMeansDefault: the flags whose help gives 0 a
// meaning take it and train.
func TestTrainDynamicZeroMeansDefault(t *testing.T) {
	out, err := run(t, "train-dynamic", "--data", "synthetic:dsbm,nodes=300,snapshots=12,edges=40", "--window", "3", "--hidden", "8",
		"--epochs", "1", "--threads", "1", "--step-groups", "0", "--eval-every", "0", "--snapshot-seconds", "0")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "final loss") {
		t.Errorf("no final loss:\n%s", out)
	}
}

// TestCPUProfileAtomic: --cpuprofile replaces FILE only when the run
// succeeds; a failed run leaves an existing FILE as it was and no
// temporary file beside it, and a FILE in a missing folder is named.
func TestCPUProfileAtomic(t *testing.T) {
	const old = "an existing file\n"
	for _, c := range []struct {
		name    string
		args    []string
		want    string // error; "" for a run that succeeds
		replace bool
	}{
		{"train-dynamic fails", []string{"train-dynamic", "--data", "/nonexistent/dataset"}, "nonexistent", false},
		{"train-dynamic succeeds", []string{"train-dynamic", "--data", "synthetic:dsbm,nodes=300,snapshots=12,edges=40",
			"--window", "3", "--hidden", "8", "--epochs", "1", "--threads", "1"}, "", true},
		{"bench epoch fails", []string{"bench", "epoch", "--data", "/nonexistent/dataset"}, "nonexistent", false},
		{"bench epoch bad flag", []string{"bench", "epoch", "--epochs", "0"}, "--epochs", false},
		{"bench epoch succeeds", []string{"bench", "epoch", "--epochs", "1", "--warmup", "0"}, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "cpu.prof")
			if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := run(t, append(c.args, "--cpuprofile", path)...)
			if c.want == "" && err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Errorf("err = %v, want one containing %q", err, c.want)
			}
			b, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if c.replace {
				// A pprof profile is gzip-compressed.
				if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
					t.Errorf("FILE holds %.20q, want a gzip-compressed profile", b)
				}
			} else if string(b) != old {
				t.Errorf("a failed run left FILE holding %d bytes %.20q, want it as it was", len(b), b)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("%d entries in the folder, want only FILE (a temporary file left behind?)", len(ents))
			}
		})
	}
	_, err := run(t, "train-dynamic", "--epochs", "1", "--cpuprofile", filepath.Join(t.TempDir(), "missing", "cpu.prof"))
	if err == nil || !strings.Contains(err.Error(), "--cpuprofile") || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("FILE in a missing folder: err = %v, want one naming --cpuprofile and the missing folder", err)
	}
}

// TestTrainDynamicDeviceIndex: a device index past the cpu or opencl
// backend's logical devices is refused, naming --devices, not opened
// (cpu:999 would open 1000 devices; a huge index hung; opencl:100000 ran
// out of memory); so are more worker threads than the cpu backend starts,
// and --threads where no CPU device takes it.
func TestTrainDynamicDeviceIndex(t *testing.T) {
	for _, c := range []struct {
		backend, devices, want string
	}{
		{"cpu", "cpu:99999999999", "--devices cpu:99999999999: the cpu backend has at most 64 logical devices"},
		{"cpu", "cpu:0,cpu:64", "--devices cpu:64: the cpu backend has at most 64 logical devices, cpu:0 to cpu:63"},
		{"cpu", "cpu:0,cpu:1", "--threads 3000 on 2 CPU devices: the cpu backend starts at most 4096 worker threads in all"},
		{"opencl", "opencl:0", "--threads 3000: only CPU devices take a thread count"},
		{"opencl", "opencl:100000", "--devices opencl:100000: the opencl backend has at most 64 logical devices, opencl:0 to opencl:63"},
	} {
		t.Run(c.devices, func(t *testing.T) {
			_, err := run(t, "train-dynamic", "--data", "synthetic:dsbm,nodes=300,snapshots=12,edges=40", "--window", "3", "--hidden", "8",
				"--epochs", "1", "--backend", c.backend, "--devices", c.devices, "--threads", "3000")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want it to say %q", err, c.want)
			}
		})
	}
}
