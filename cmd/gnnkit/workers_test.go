package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/plugins/worker"
)

// TestHelperWorker is not a test: run by a wrapper script named
// gnnkit-cuda with GNNKIT_TEST_CUDA_WORKER=KIND, the test binary becomes a
// stand-in for the CUDA worker — a real worker process serving the CPU
// backend, whose devices the host names cuda:0, ... — or one that fails to
// start the way gnnkit-cuda does on a machine without a GPU.
func TestHelperWorker(t *testing.T) {
	kind := os.Getenv("GNNKIT_TEST_CUDA_WORKER")
	switch kind {
	case "":
		t.Skip("helper process for the worker tests")
	case "nogpu":
		fmt.Printf("Error in initialization, please refer to %q for details on: NoDevice\n", "https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__INITIALIZE.html")
		os.Exit(1)
	}
	opts, err := worker.BackendOptions()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	opts.Threads = 1
	b, err := cpu.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	worker.Serve(b)
	os.Exit(0)
}

// fakeCUDA puts a gnnkit-cuda wrapper of kind into a fresh plugin folder
// and empties PATH of other candidates.
func fakeCUDA(t *testing.T, kind string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("wrapper scripts need /bin/sh")
	}
	dir := t.TempDir()
	t.Setenv("GNNKIT_PLUGIN_DIR", dir)
	t.Setenv("PATH", t.TempDir())
	if kind == "" {
		return dir
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\nGNNKIT_TEST_CUDA_WORKER=%s exec %q -test.run='^TestHelperWorker$'\n", kind, self)
	if err := os.WriteFile(filepath.Join(dir, "gnnkit-cuda"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestDevicesWithWorker(t *testing.T) {
	fakeCUDA(t, "cpu")
	out, err := run(t, "devices")
	// The cuda backend is usable (OpenCL may be unavailable here: no
	// ICD without PoCL installed).
	if err != nil || !strings.Contains(out, "cuda:0") || !strings.Contains(out, "worker's cpu:0") || strings.Contains(out, "cuda: unavailable") {
		t.Errorf("devices: %v\n%s", err, out)
	}
	out, err = run(t, "devices", "--json")
	var d struct {
		Backends []backendReport `json:"backends"`
	}
	if err != nil || json.Unmarshal([]byte(out), &d) != nil {
		t.Fatalf("devices --json: %v\n%s", err, out)
	}
	found := false
	for _, b := range d.Backends {
		if b.Name == "cuda" {
			found = len(b.Devices) > 0 && b.Devices[0].ID == "cuda:0" && b.Error == "" && strings.Contains(b.Worker, "gnnkit-cuda")
		}
	}
	if !found {
		t.Errorf("devices --json has no usable cuda backend: %s", out)
	}
}

func TestDevicesWorkerUnavailable(t *testing.T) {
	for _, c := range []struct{ kind, want string }{
		{"nogpu", "cuda: unavailable (" + "%s" + ": exit status 1: Error in initialization"},
		{"", "cuda: unavailable (gnnkit-cuda not found (looked"},
	} {
		t.Run("kind="+c.kind, func(t *testing.T) {
			dir := fakeCUDA(t, c.kind)
			want := c.want
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, filepath.Join(dir, "gnnkit-cuda"))
			}
			out, err := run(t, "devices")
			if err != nil || !strings.Contains(out, "cpu:0") {
				t.Errorf("devices did not carry on: %v\n%s", err, out)
			}
			// The exit status can be lost when go-plugin kills the worker
			// on its stray stdout line; the message is what matters.
			want = strings.Replace(want, ": exit status 1", "", 1)
			got := strings.Replace(strings.Replace(out, ": exit status 1", "", 1), ": it printed", "", 1)
			if !strings.Contains(got, want) {
				t.Errorf("devices output lacks %q:\n%s", want, out)
			}
		})
	}
}

// TestTrainThroughWorker trains Cora on the worker's cuda:0 (a CPU worker
// standing in for gnnkit-cuda) and on the local cpu:0: the same loss and
// accuracies; a worker device next to a local one, with the home on the
// worker, works too.
func TestTrainThroughWorker(t *testing.T) {
	fakeCUDA(t, "cpu")
	want := trainJSON(t, "--epochs", "5", "--devices", "cpu:0", "--threads", "1")
	for _, args := range [][]string{
		{"--devices", "cuda:0"},
		{"--backend", "cuda"},
		{"--devices", "cpu:0,cuda:0", "--sched-opt", "device=cuda:0"},
	} {
		got := trainJSON(t, append([]string{"--epochs", "5", "--threads", "1"}, args...)...)
		if math.Abs(got.FinalLoss-want.FinalLoss) > 1e-6*want.FinalLoss || got.TestAcc != want.TestAcc || got.ValAcc != want.ValAcc {
			t.Errorf("%v: loss %.7f acc %.3f/%.3f; locally %.7f %.3f/%.3f", args, got.FinalLoss, got.ValAcc, got.TestAcc, want.FinalLoss, want.ValAcc, want.TestAcc)
		}
		if got.PeakMemBytes["cuda:0"] <= 0 || !strings.Contains(got.Backend, "cuda") {
			t.Errorf("%v: backend %q, peak memory %v", args, got.Backend, got.PeakMemBytes)
		}
	}
}

func TestTrainWorkerMissing(t *testing.T) {
	fakeCUDA(t, "")
	_, err := run(t, "train", "-q", "--epochs", "1", "--devices", "cuda:0")
	if err == nil || !strings.Contains(err.Error(), "unavailable") || !strings.Contains(err.Error(), "go build -tags cuda -o bin/gnnkit-cuda ./cmd/gnnkit-cuda") {
		t.Errorf("err = %v", err)
	}
	_, err = run(t, "train", "-q", "--epochs", "1", "--devices", "cpu:0,gpu:1")
	if err == nil || !strings.Contains(err.Error(), "mixes backends") {
		t.Errorf("err = %v", err)
	}
}
