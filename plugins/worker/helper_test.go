package worker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/plugins/worker"
)

// The test binary doubles as every worker the tests need (the
// TestHelperProcess idiom, done in TestMain): started with
// GNNKIT_TEST_WORKER=KIND it serves that worker instead of running tests.
// Every worker is a real process serving the CPU backend, which the host
// shows under another name (wcpu:0, ...): the worker does not know or care
// which backend it serves.
const kindEnv = "GNNKIT_TEST_WORKER"

func TestMain(m *testing.M) {
	if kind := os.Getenv(kindEnv); kind != "" {
		os.Exit(serveWorker(kind))
	}
	os.Exit(m.Run())
}

func serveWorker(kind string) int {
	switch kind {
	case "nogpu": // what gorgonia.org/cu's init does without a GPU: a line on stdout, exit 1
		fmt.Printf("Error in initialization, please refer to %q for details on: NoDevice\n", "https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__INITIALIZE.html")
		return 1
	case "nodriver": // what the dynamic loader does without libcuda.so.1
		fmt.Fprintf(os.Stderr, "%s: error while loading shared libraries: libcuda.so.1: cannot open shared object file: No such file or directory\n", os.Args[0])
		return 127
	case "slowstart": // never completes the handshake (a driver stuck in its init)
		fmt.Fprintln(os.Stderr, "initialising the driver ...")
		time.Sleep(time.Hour)
		return 1
	case "badopen": // the backend itself refuses to open (gnnkit-cuda's main prints and exits 1)
		fmt.Fprintln(os.Stderr, "gnnkit-cuda: cuda: no device supports compute capability 8.0")
		return 1
	}
	opts, err := worker.BackendOptions()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	b, err := cpu.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch kind {
	case "cpu":
		worker.Serve(b)
	case "crash": // a device fault mid-Run: the first GEMM after Load crashes the process
		worker.Serve(&faulty{Backend: b, gemm: func() { go panic("simulated device fault in GEMM"); time.Sleep(time.Hour) }})
	case "exit": // exits mid-Run
		worker.Serve(&faulty{Backend: b, gemm: func() { os.Exit(3) }})
	case "hang": // a kernel that never returns
		worker.Serve(&faulty{Backend: b, gemm: func() { time.Sleep(time.Hour) }})
	default:
		fmt.Fprintf(os.Stderr, "unknown helper worker %q\n", kind)
		return 2
	}
	return 0
}

// faulty wraps a backend whose devices' GEMM misbehaves.
type faulty struct {
	core.Backend
	gemm func()
}

func (f *faulty) Devices() []core.Device {
	var out []core.Device
	for _, d := range f.Backend.Devices() {
		out = append(out, faultyDev{Device: d, gemm: f.gemm})
	}
	return out
}

type faultyDev struct {
	core.Device
	gemm func()
}

func (d faultyDev) Kernels() core.Kernels {
	return faultyKernels{Kernels: d.Device.Kernels(), gemm: d.gemm}
}

type faultyKernels struct {
	core.Kernels
	gemm func()
}

func (k faultyKernels) GEMM(ta, tb bool, alpha float32, a, b *core.Tensor, beta float32, c *core.Tensor) error {
	k.gemm()
	return k.Kernels.GEMM(ta, tb, alpha, a, b, beta, c)
}

var tagSeq atomic.Int64

// start launches the test binary as the helper worker kind, naming its
// devices wcpu:i. Every process gets a unique tag, so leftover finds it.
func start(t testing.TB, kind string, o worker.Options) (*worker.Worker, string, error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("%d-%d", os.Getpid(), tagSeq.Add(1))
	o.Env = append(o.Env, kindEnv+"="+kind, "GNNKIT_TEST_TAG="+tag)
	if o.Name == "" {
		o.Name = "wcpu"
	}
	if o.Backend.Devices == 0 {
		o.Backend = core.BackendOptions{Devices: 2, Threads: 1}
	}
	w, err := worker.Start(context.Background(), self, o)
	return w, tag, err
}

func mustStart(t testing.TB, kind string, o worker.Options) *worker.Worker {
	t.Helper()
	w, _, err := start(t, kind, o)
	if err != nil {
		t.Fatalf("start %s: %v", kind, err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// leftover returns the pids of running processes with the tag (Linux; on
// other systems it returns nil).
func leftover(tag string) []int {
	if runtime.GOOS != "linux" {
		return nil
	}
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && strings.Contains(string(env), "GNNKIT_TEST_TAG="+tag+"\x00") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func checkGone(t *testing.T, pid int, tag string) {
	t.Helper()
	if pid > 0 {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("worker process %d is still there (kill -0: %v)", pid, err)
		}
	}
	if pids := leftover(tag); len(pids) > 0 {
		t.Errorf("processes left behind: %v", pids)
	}
}
