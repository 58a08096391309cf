package fromproto_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/plugins/internal/fromproto"
	"github.com/gnnkit/gnnkit/plugins/internal/toproto"
	pb "github.com/gnnkit/gnnkit/plugins/proto/scheduler/v1"
)

func workload() *core.Workload {
	return &core.Workload{
		ModelName: "gcn", ParamBytes: 1234, Dims: core.Dims{Nodes: 10, Edges: 40}, FeatureDim: 7, Seed: 99,
		Batch: []int32{3, 1, 4, 1 << 30},
		Ops: []core.OpInfo{
			{Index: 0, Name: "spmm", Kind: core.KindGraph, Cost: core.Cost{FLOPs: 1, BytesMoved: 2, ActivationBytes: 3, WeightBytes: 4}},
			{Index: 1, Name: "gemm", Kind: core.KindGather, Deps: []int{0}},
		},
		Devices: []core.DeviceInfo{{ID: "cpu:0", Backend: "cpu", Name: "EPYC", MemCap: 1 << 30, MemTotal: 1 << 34, Threads: 2,
			Features: []string{"AVX2"}, Kernel: "avx2", GFLOPS: 12.5, MemGBps: 20}},
	}
}

func plan() *core.Plan {
	return &core.Plan{Scheduler: "x", Home: "cpu:0",
		Units: []core.Unit{{ID: 0, Targets: []int32{3, 1}, LossWeight: 0.5}, {ID: 1, Targets: []int32{4, 1 << 30}, LossWeight: 0.5, Subgraph: true}},
		Tasks: []core.Task{
			{ID: 0, Kind: core.TaskForward, Unit: 0, Device: "cpu:0", OpLo: 0, OpHi: 2, Priority: -1},
			{ID: 1, Kind: core.TaskBackward, Unit: 0, Device: "cpu:0", OpLo: 0, OpHi: 2, Deps: []int{0}},
			{ID: 2, Kind: core.TaskForward, Unit: 1, Device: "cpu:1", Stream: 3, Ops: []int{0, 1}},
			{ID: 3, Kind: core.TaskBackward, Unit: 1, Device: "cpu:1", Stream: 3, Ops: []int{0, 1}, Deps: []int{2}},
			{ID: 4, Kind: core.TaskReduceGrads, Unit: -1, Device: "cpu:0", From: "cpu:1", Deps: []int{3}, Params: []string{"w0"}},
			{ID: 5, Kind: core.TaskStep, Unit: -1, Device: "cpu:0", Deps: []int{1, 4}},
		},
		MemEstimate: map[core.DeviceID]int64{"cpu:0": 1 << 20}, Metrics: map[string]float64{"micro_batches": 2},
		StepOwners: true, Owners: map[string]core.DeviceID{"w0": "cpu:0", "w1": "cpu:1"}, Exclusive: []core.DeviceID{"cpu:1"},
		Alternatives: []core.Alternative{{Description: "dag, 2 stages", IterationMs: 1.5, PeakBytes: 1 << 20, NeedBytes: 3 << 19, Chosen: true}, {Description: "chain", IterationMs: 2, PeakBytes: 1 << 19}}}
}

// roundTrip marshals m to bytes and back, as the wire does.
func roundTrip[M proto.Message](t *testing.T, m M, into M) M {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(b, into); err != nil {
		t.Fatal(err)
	}
	return into
}

func TestRoundTrip(t *testing.T) {
	t.Run("workload", func(t *testing.T) {
		w := workload()
		got, err := fromproto.Workload(roundTrip(t, toproto.Workload(w), &pb.Workload{}))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("got %+v\nwant %+v", got, w)
		}
	})
	t.Run("plan", func(t *testing.T) {
		p := plan()
		got, err := fromproto.Plan(roundTrip(t, toproto.Plan(p), &pb.Plan{}))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, p) {
			t.Errorf("got %+v\nwant %+v", got, p)
		}
	})
	t.Run("trace", func(t *testing.T) {
		tr := &core.Trace{Events: []core.TraceEvent{{Name: "f", Cat: "forward", Device: "cpu:0", Stream: 1, Unit: -1,
			Start: time.Millisecond, Dur: time.Second, Bytes: 9}}, PeakMem: map[core.DeviceID]int64{"cpu:0": 5}, BytesMoved: 9, Wall: time.Minute}
		got, err := fromproto.Trace(roundTrip(t, toproto.Trace(tr), &pb.Trace{}))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tr) {
			t.Errorf("got %+v\nwant %+v", got, tr)
		}
	})
}

func TestPlanRejects(t *testing.T) {
	for name, m := range map[string]*pb.Plan{
		"nil":          nil,
		"unset kind":   {Tasks: []*pb.Task{{Id: 0}}},
		"unknown kind": {Tasks: []*pb.Task{{Id: 0, Kind: 42}}},
	} {
		if _, err := fromproto.Plan(m); !errors.Is(err, core.ErrInvalidPlan) {
			t.Errorf("%s: %v, want core.ErrInvalidPlan", name, err)
		}
	}
	if _, err := fromproto.Workload(nil); err == nil {
		t.Error("nil workload accepted")
	}
	if _, err := fromproto.Workload(&pb.Workload{Ops: []*pb.OpInfo{{}}}); err == nil {
		t.Error("op without a kind accepted")
	}
	for _, n := range []int64{-1, core.MaxOptimizerBuffers + 1} {
		if _, err := fromproto.Workload(&pb.Workload{Optimizer: &pb.OptimizerInfo{Kind: "x", Buffers: n}}); err == nil || !strings.Contains(err.Error(), "buffers of state") {
			t.Errorf("optimizer with %d buffers: %v, want it refused", n, err)
		}
	}
	// Absent (a host before the field): nil, priced as Adam.
	if w, err := fromproto.Workload(&pb.Workload{}); err != nil || w.Optimizer != nil || w.StateBuffers() != 2 {
		t.Errorf("no optimizer: %+v, %v; want nil (Adam's 2 buffers)", w, err)
	}
}

func TestErrors(t *testing.T) {
	oom := &core.OOMError{Device: "cpu:0", Need: 10, Free: 1, Cap: 8, Used: 7, What: "x"}
	for _, c := range []struct {
		err  error
		code codes.Code
		is   error
	}{
		{oom, codes.ResourceExhausted, core.ErrOutOfMemory},
		{context.Canceled, codes.Canceled, context.Canceled},
		{core.ErrShape, codes.InvalidArgument, core.ErrShape},
		{errors.ErrUnsupported, codes.Unimplemented, core.ErrUnsupported},
		{core.ErrNotBuilt, codes.Unimplemented, core.ErrNotBuilt},
		{errors.New("plain"), codes.Unknown, nil},
		{status.Error(codes.Aborted, "foreign"), codes.Aborted, nil},
	} {
		st := toproto.Error(c.err)
		if got := status.Code(st); got != c.code {
			t.Errorf("%v: code %v, want %v", c.err, got, c.code)
		}
		back := fromproto.Error(st)
		if c.is != nil && !errors.Is(back, c.is) {
			t.Errorf("%v: back as %v, which is not %v", c.err, back, c.is)
		}
		if c.is == nil && errors.Unwrap(back) != nil {
			t.Errorf("%v: back as %v with a sentinel", c.err, back)
		}
	}
	// Without a detail (a plugin in another language), the code decides.
	if err := fromproto.Error(status.Error(codes.DeadlineExceeded, "slow")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("bare DEADLINE_EXCEEDED: %v", err)
	}
	if fromproto.Error(nil) != nil || toproto.Error(nil) != nil {
		t.Error("nil error not nil")
	}
}

// FuzzPlan: decoding whatever bytes a plugin sends, then validating, never
// panics.
func FuzzPlan(f *testing.F) {
	b, _ := proto.Marshal(toproto.Plan(plan()))
	f.Add(b)
	f.Add([]byte{})
	f.Add([]byte{0x22, 0x02, 0x10, 0x09})
	w := workload()
	w.Devices = append(w.Devices, core.DeviceInfo{ID: "cpu:1"})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m pb.Plan
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		p, err := fromproto.Plan(&m)
		if err != nil {
			if !errors.Is(err, core.ErrInvalidPlan) {
				t.Fatalf("error %v does not wrap core.ErrInvalidPlan", err)
			}
			return
		}
		_ = p.Validate(w)
	})
}
