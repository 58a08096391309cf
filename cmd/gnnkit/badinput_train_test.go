package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTrainBadInputClean: bad input to train is a clear error that names
// what was wrong, before anything is trained (or the Go runtime dies).
func TestTrainBadInputClean(t *testing.T) {
	small := []string{"--data", "synthetic:sbm,nodes=20,classes=2,feat=4"}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		// 1: more than the machine holds, with no --device-mem (on Cora's
		// 1433 features: 2.1 TiB of parameters with their gradients and
		// Adam's moments).
		{"huge hidden", []string{"--data", "cora", "--hidden", "100000000"}, []string{"model gcn has", "of parameters", "memory this machine has", "--hidden"}},
		{"overflowing hidden", []string{"--data", "cora", "--hidden", "1000000000000000000"}, []string{"--hidden 1000000000000000000: at most 1073741824"}},
		{"hidden past the machine", []string{"--data", "cora", "--hidden", "1073741824"}, []string{"TiB of parameters", "--hidden"}},
		{"uno branches", []string{"--model", "uno", "--branches", "100000"}, []string{"--branches 100000", "at most 1024"}},
		{"mbgnn towers", []string{"--model", "mbgnn", "--branches", "65"}, []string{"--branches 65", "at most 64 towers"}},
		{"huge layers", []string{"--layers", "100000000"}, []string{"--layers 100000000", "at most 1024"}},
		// 2: logical CPU devices.
		{"cpu:99999999999", []string{"--devices", "cpu:99999999999"}, []string{"cpu:0 to cpu:63"}},
		{"cpu:1000000", []string{"--devices", "cpu:1000000"}, []string{"cpu:0 to cpu:63"}},
		{"cpu:999", []string{"--devices", "cpu:0,cpu:999"}, []string{"--devices cpu:999", "at most 64"}},
		{"cpu:64", []string{"--devices", "cpu:64"}, []string{"cpu:0 to cpu:63"}},
		{"opencl:100000", []string{"--backend", "opencl", "--devices", "opencl:100000"}, []string{"--devices opencl:100000", "the opencl backend has at most 64 logical devices, opencl:0 to opencl:63"}},
		// 2b: worker threads.
		{"threads -1", []string{"--threads", "-1"}, []string{"--threads -1: want >= 1 worker threads per CPU device"}},
		{"threads 12000", []string{"--threads", "12000"}, []string{"--threads 12000 on 1 CPU devices", "at most 4096 worker threads in all", "--threads 4096 or fewer"}},
		{"threads on 64 devices", []string{"--threads", "100", "--devices", "cpu:0,cpu:63"}, []string{"--threads 100 on 64 CPU devices", "--threads 64 or fewer"}},
		{"threads with opencl", []string{"--backend", "opencl", "--threads", "4"}, []string{"--threads 4: only CPU devices take a thread count", "--backend opencl", "drop --threads"}},
		{"opencl:64", []string{"--backend", "opencl", "--devices", "opencl:0,opencl:64"}, []string{"--devices opencl:64", "at most 64"}},
		// 3: dynamic-graph models.
		{"tgcn", []string{"--model", "tgcn"}, []string{"dynamic-graph model", "gnnkit train-dynamic"}},
		{"evolvegcn", []string{"--model", "evolvegcn"}, []string{"dynamic-graph model", "gnnkit train-dynamic"}},
		// 4: non-finite or negative rates.
		{"lr nan", []string{"--lr", "nan"}, []string{"--lr must be a positive number", "NaN"}},
		{"lr inf", []string{"--lr", "inf"}, []string{"--lr must be a positive number", "+Inf"}},
		{"lr negative", []string{"--lr", "-0.1"}, []string{"--lr must be a positive number"}},
		{"weight decay nan", []string{"--weight-decay", "nan"}, []string{"--weight-decay must be a non-negative number", "NaN"}},
		{"weight decay negative", []string{"--weight-decay", "-1"}, []string{"--weight-decay must be a non-negative number"}},
		{"dropout nan", []string{"--dropout", "nan"}, []string{"--dropout must be in [0, 1)", "NaN"}},
		{"attn dropout inf", []string{"--model", "gat", "--attn-dropout", "inf"}, []string{"--attn-dropout must be in [0, 1)"}},
		// 5: 0 is not "the default".
		{"lr 0 gat", []string{"--model", "gat", "--lr", "0"}, []string{"--lr must be a positive number", "got 0"}},
		{"hidden 0", []string{"--hidden", "0"}, []string{"--hidden must be positive, got 0", "16 for gcn"}},
		{"layers 0", []string{"--layers", "0"}, []string{"--layers must be positive, got 0"}},
		{"heads 0", []string{"--model", "gat", "--heads", "0"}, []string{"--heads must be positive, got 0", "8 for gat"}},
		{"heads with gcn", []string{"--heads", "4"}, []string{"--heads applies to gat's attention, not gcn"}},
		{"attn dropout with sage", []string{"--model", "sage", "--attn-dropout", "0.1"}, []string{"--attn-dropout applies to gat's attention, not sage"}},
		// 6: --backend and --devices disagree.
		{"opencl backend, cpu devices", []string{"--backend", "opencl", "--devices", "cpu:0"}, []string{"--backend opencl, but --devices cpu:0 names devices of cpu"}},
		{"cpu backend, opencl devices", []string{"--backend", "cpu", "--devices", "opencl:0"}, []string{"--backend cpu, but --devices opencl:0 names devices of opencl"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"train", "-q", "--epochs", "2"}, small...)
			_, err := run(t, append(args, c.args...)...)
			if err == nil {
				t.Fatalf("train %v: no error", c.args)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("train %v: %v\nwant it to say %q", c.args, err, w)
				}
			}
		})
	}
}

// TestTrainBackendDevicesAgree: --backend given with --devices of the
// same backend (or a worker backend joining it) still trains.
func TestTrainBackendDevicesAgree(t *testing.T) {
	for _, args := range [][]string{
		{"--backend", "cpu", "--devices", "cpu:0"},
		{"--devices", "cpu:0,cpu:1"},
	} {
		if _, err := run(t, append([]string{"train", "-q", "--epochs", "1", "--data", "synthetic:sbm,nodes=20,classes=2,feat=4"}, args...)...); err != nil {
			t.Errorf("train %v: %v", args, err)
		}
	}
}

// TestTrainAbsentAccuracy: with no validation or test nodes their
// accuracy is absent: null in --json, n/a in the summary, not 0.
func TestTrainAbsentAccuracy(t *testing.T) {
	cases := []struct {
		split          string
		valNull, tNull bool
		summary        string
	}{
		{"val=0,test=0", true, true, "/ n/a / n/a"},
		{"val=0", true, false, "/ n/a / 0."},
		{"test=0", false, true, " / n/a\n"},
	}
	for _, c := range cases {
		t.Run(c.split, func(t *testing.T) {
			data := "synthetic:sbm,nodes=20,classes=2,feat=4," + c.split
			out, err := run(t, "train", "--json", "--epochs", "2", "--data", data)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(out), &m); err != nil {
				t.Fatalf("--json printed %q: %v", out, err)
			}
			for key, null := range map[string]bool{"val_acc": c.valNull, "test_acc": c.tNull} {
				v, ok := m[key]
				if !ok {
					t.Errorf("%s missing from %s", key, out)
				} else if (v == nil) != null {
					t.Errorf("%s = %v, want null %v", key, v, null)
				}
			}
			if _, ok := m["train_acc"].(float64); !ok {
				t.Errorf("train_acc = %v, want a number", m["train_acc"])
			}
			out, err = run(t, "train", "-q", "--epochs", "2", "--data", data)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, c.summary) {
				t.Errorf("summary lacks %q:\n%s", c.summary, out)
			}
		})
	}
}

// TestTrainCPUEnv: GNN_CPU_PIN that is not a boolean is an error naming
// it (it was ignored), and GNN_CPU naming an unknown variant a one-line
// warning on stderr (train fell back silently).
func TestTrainCPUEnv(t *testing.T) {
	small := []string{"train", "-q", "--epochs", "1", "--data", "synthetic:sbm,nodes=20,classes=2,feat=4"}
	t.Run("pin", func(t *testing.T) {
		t.Setenv("GNN_CPU_PIN", "bogus")
		_, err := run(t, small...)
		if err == nil || !strings.Contains(err.Error(), `GNN_CPU_PIN="bogus": want 1 or true`) {
			t.Errorf("err = %v, want one naming GNN_CPU_PIN and its values", err)
		}
	})
	for _, c := range []struct {
		value string
		warn  bool
	}{{"bogus", true}, {"generic", false}, {"", false}} {
		t.Run("variant "+c.value, func(t *testing.T) {
			t.Setenv("GNN_CPU", c.value)
			root := newRoot()
			var out, errOut strings.Builder
			root.SetOut(&out)
			root.SetErr(&errOut)
			root.SetArgs(small)
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			got := errOut.String()
			if !c.warn {
				if strings.Contains(got, "warning") {
					t.Errorf("stderr %q, want no warning", got)
				}
				return
			}
			if strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "gnnkit: warning: GNN_CPU is not followed") || !strings.Contains(got, "GNN_CPU=bogus is not built into this binary") {
				t.Errorf("stderr %q, want one warning line naming GNN_CPU=bogus", got)
			}
			if strings.Contains(out.String(), "warning") {
				t.Errorf("warning on stdout: %q", out.String())
			}
		})
	}
}
