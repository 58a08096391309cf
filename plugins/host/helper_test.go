package host_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/plugins/internal/wire"
	"github.com/gnnkit/gnnkit/plugins/sdk"
	"github.com/gnnkit/gnnkit/schedulers/blad"
	"github.com/gnnkit/gnnkit/schedulers/sequential"
)

// The test binary doubles as every plugin the tests need (the
// TestHelperProcess idiom, done in TestMain): launched with
// GNNKIT_TEST_PLUGIN=KIND it serves that plugin instead of running tests,
// so no helper binary has to be built.
const kindEnv = "GNNKIT_TEST_PLUGIN"

func TestMain(m *testing.M) {
	if kind := os.Getenv(kindEnv); kind != "" {
		os.Exit(servePlugin(kind))
	}
	os.Exit(m.Run())
}

func servePlugin(kind string) int {
	switch kind {
	case "split":
		sdk.Serve(schedtest.Split{K: 3})
	case "sequential":
		sdk.Serve(&sequential.Scheduler{})
	case "chunks": // the benchmark's 10k-unit scheduler
		n, _ := strconv.Atoi(os.Getenv("GNNKIT_TEST_UNITS"))
		sdk.Serve(chunks{units: n})
	case "feedback":
		sdk.Serve(&feedback{})
	case "blad": // a real scheduler that needs the workload's group costs
		sdk.Serve(blad.New())
	case "crash": // a Go runtime crash while answering
		sdk.Serve(faulty{schedule: func() (*core.Plan, error) {
			go panic("simulated crash in Schedule")
			time.Sleep(time.Hour)
			return nil, nil
		}})
	case "exit": // exits mid-call
		sdk.Serve(faulty{schedule: func() (*core.Plan, error) { os.Exit(3); return nil, nil }})
	case "hang": // never answers and ignores its context
		sdk.Serve(faulty{schedule: func() (*core.Plan, error) { time.Sleep(time.Hour); return nil, nil }})
	case "hang-info": // hangs in Name (GetInfo), during the launch
		sdk.Serve(faulty{name: func() string { time.Sleep(time.Hour); return "" }})
	case "panic": // a panic the SDK recovers
		sdk.Serve(faulty{schedule: func() (*core.Plan, error) { panic("simulated bug") }})
	case "invalid": // a plan that loses and duplicates nodes
		sdk.Serve(faulty{schedule: func() (*core.Plan, error) {
			p, _ := schedtest.Split{K: 2}.Schedule(context.Background(), testWorkload())
			p.Units[1].Targets = p.Units[0].Targets
			return p, nil
		}})
	case "oom":
		sdk.Serve(faulty{schedule: func() (*core.Plan, error) { return nil, testOOM }})
	case "version": // speaks protocol 99 only
		plugin.Serve(&plugin.ServeConfig{
			HandshakeConfig:  wire.Handshake,
			VersionedPlugins: map[int]plugin.PluginSet{99: {wire.PluginName: &wire.Plugin{Impl: schedtest.Split{K: 2}}}},
			GRPCServer:       func(o []grpc.ServerOption) *grpc.Server { return grpc.NewServer(o...) },
			Logger:           hclog.NewNullLogger(),
		})
	case "garbage": // writes to stdout before the handshake, then waits
		fmt.Println("hello from a program that is not a plugin")
		time.Sleep(time.Hour)
	case "not-a-plugin": // exits at once with a message
		fmt.Fprintln(os.Stderr, "usage: not-a-plugin FILE")
		return 1
	case "silent-exit": // exits at once and says nothing
		return 1
	case "hang-start": // never gets to its handshake
		time.Sleep(time.Hour)
	default:
		fmt.Fprintf(os.Stderr, "unknown helper plugin %q\n", kind)
		return 2
	}
	return 0
}

// chunks cuts the batch into units contiguous chunks on the first device,
// each unit on its own stream (so Plan.Validate stays linear), as a
// stand-in for a scheduler that returns a large plan.
type chunks struct{ units int }

func (c chunks) Name() string { return "chunks" }

func (c chunks) Schedule(ctx context.Context, w *core.Workload) (*core.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d := w.Devices[0].ID
	n, k, ops := len(w.Batch), c.units, len(w.Ops)
	p := &core.Plan{Scheduler: "chunks", Home: d, Units: make([]core.Unit, 0, k), Tasks: make([]core.Task, 0, 2*k+1)}
	batch := slices.Clone(w.Batch)
	var bwd []int
	for u := 0; u < k; u++ {
		lo, hi := u*n/k, (u+1)*n/k
		p.Units = append(p.Units, core.Unit{ID: u, Targets: batch[lo:hi:hi], LossWeight: float64(hi-lo) / float64(n)})
		f := len(p.Tasks)
		p.Tasks = append(p.Tasks,
			core.Task{ID: f, Kind: core.TaskForward, Unit: u, Device: d, Stream: u + 1, OpLo: 0, OpHi: ops},
			core.Task{ID: f + 1, Kind: core.TaskBackward, Unit: u, Device: d, Stream: u + 1, OpLo: 0, OpHi: ops, Deps: []int{f}})
		bwd = append(bwd, f+1)
	}
	p.Tasks = append(p.Tasks, core.Task{ID: len(p.Tasks), Kind: core.TaskStep, Unit: -1, Device: d, Deps: bwd})
	return p, nil
}

// feedback is sequential plus Observe: after an iteration with a trace it
// moves to the device that was busy least.
type feedback struct{ sequential.Scheduler }

func (f *feedback) Name() string { return "feedback" }

func (f *feedback) Observe(ctx context.Context, w *core.Workload, t *core.Trace) (*core.Plan, error) {
	if t == nil || len(t.Events) == 0 {
		return nil, nil
	}
	s := &sequential.Scheduler{Device: w.Devices[len(w.Devices)-1].ID}
	return s.Schedule(ctx, w)
}

// faulty misbehaves in the way its functions say.
type faulty struct {
	name     func() string
	schedule func() (*core.Plan, error)
}

func (f faulty) Name() string {
	if f.name != nil {
		return f.name()
	}
	return "faulty"
}

func (f faulty) Schedule(context.Context, *core.Workload) (*core.Plan, error) { return f.schedule() }

var testOOM = &core.OOMError{Device: "cpu:1", Need: 3 << 30, Free: 1 << 30, Cap: 2 << 30, Used: 1 << 30, What: "activations"}

// testWorkload is a plain-data workload: three ops, two devices, 100 nodes.
func testWorkload() *core.Workload {
	w := &core.Workload{ModelName: "toy", Dims: core.Dims{Nodes: 100, Edges: 400}, FeatureDim: 8, Seed: 1,
		Devices: []core.DeviceInfo{{ID: "cpu:0", Backend: "cpu", Threads: 1}, {ID: "cpu:1", Backend: "cpu", Threads: 1}}}
	for i := 0; i < 3; i++ {
		op := core.OpInfo{Index: i, Name: fmt.Sprintf("op%d", i), Kind: core.KindDense, Cost: core.Cost{FLOPs: 1000}}
		if i > 0 {
			op.Deps = []int{i - 1}
		}
		w.Ops = append(w.Ops, op)
	}
	for i := int32(0); i < 100; i++ {
		w.Batch = append(w.Batch, i)
	}
	return w
}
