package worker

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/plugins/internal/toproto"
	pb "github.com/gnnkit/gnnkit/plugins/proto/backend/v1"
)

func testSpec(t testing.TB, eids bool) *engine.RemoteSpec {
	t.Helper()
	f := schedtest.NewFixture(40, 3, 6, 3, 2)
	g := f.Graph
	if eids {
		ids := make([]int32, g.NumEdges())
		for i := range ids {
			ids[i] = int32(len(ids) - 1 - i)
		}
		var err error
		if g, err = core.NewGraph(g.NumDst, g.NumSrc, g.Offsets, g.Indices, ids); err != nil {
			t.Fatal(err)
		}
	}
	m, err := core.BuildModel("gcn", core.ModelConfig{InDim: f.FeatureDim, Hidden: 4, Classes: f.Classes, Layers: 2, Dropout: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	return &engine.RemoteSpec{Model: m, Seed: 7, Optimizer: engine.Optimizer{Kind: "adam", LR: 0.02, WeightDecay: 1e-3, Beta1: 0.8},
		Data: engine.Data{Graph: g, Features: f.Features, FeatureDim: f.FeatureDim, Labels: f.Labels}}
}

func loadMsgs(t testing.TB, spec *engine.RemoteSpec, chunk int) []*pb.LoadRequest {
	t.Helper()
	var msgs []*pb.LoadRequest
	if err := loadMessages(spec, chunk, func(m *pb.LoadRequest) error { msgs = append(msgs, m); return nil }); err != nil {
		t.Fatal(err)
	}
	return msgs
}

func TestLoadRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name  string
		eids  bool
		chunk int
	}{{"one-element-chunks", false, 1}, {"odd-chunks", true, 7}, {"one-chunk", false, 1 << 20}, {"eids", true, 1 << 20}} {
		t.Run(c.name, func(t *testing.T) {
			spec := testSpec(t, c.eids)
			var a assembler
			for _, m := range loadMsgs(t, spec, c.chunk) {
				if err := a.add(m); err != nil {
					t.Fatal(err)
				}
			}
			got, err := a.finish()
			if err != nil {
				t.Fatal(err)
			}
			g, w := got.Data.Graph, spec.Data.Graph
			if g.NumDst != w.NumDst || g.NumSrc != w.NumSrc || !slices.Equal(g.Offsets, w.Offsets) || !slices.Equal(g.Indices, w.Indices) ||
				!slices.Equal(g.EIDs, w.EIDs) || (g.EIDs == nil) != (w.EIDs == nil) {
				t.Errorf("graph differs")
			}
			if !slices.Equal(got.Data.Features, spec.Data.Features) || !slices.Equal(got.Data.Labels, spec.Data.Labels) || got.Data.FeatureDim != spec.Data.FeatureDim {
				t.Errorf("node data differs")
			}
			if got.Optimizer != spec.Optimizer || got.Seed != spec.Seed || got.Model.Name != "gcn" || got.Model.Config != spec.Model.Config {
				t.Errorf("settings differ: %+v vs %+v", got, spec)
			}
		})
	}
}

func TestLoadRejects(t *testing.T) {
	spec := testSpec(t, false)
	good := func() []*pb.LoadRequest { return loadMsgs(t, spec, 16) }
	for _, c := range []struct {
		name string
		edit func([]*pb.LoadRequest) []*pb.LoadRequest
		want string
	}{
		{"no header", func(m []*pb.LoadRequest) []*pb.LoadRequest { return m[1:] }, "before the header"},
		{"two headers", func(m []*pb.LoadRequest) []*pb.LoadRequest { return append(m, m[0]) }, "second header"},
		{"missing chunk", func(m []*pb.LoadRequest) []*pb.LoadRequest { return append(m[:2], m[3:]...) }, "offset"},
		{"truncated", func(m []*pb.LoadRequest) []*pb.LoadRequest { return m[:len(m)-1] }, "announced"},
		{"too many", func(m []*pb.LoadRequest) []*pb.LoadRequest {
			c := proto.Clone(m[len(m)-1]).(*pb.LoadRequest)
			c.Chunk.Offset = int64(len(spec.Data.Features))
			return append(m, c)
		}, "past"},
		{"wrong type", func(m []*pb.LoadRequest) []*pb.LoadRequest {
			m[1].Chunk.I32, m[1].Chunk.I64 = []int32{0}, nil
			return m
		}, "wrong type"},
		{"huge header", func(m []*pb.LoadRequest) []*pb.LoadRequest { m[0].Header.NumDst = 1 << 50; return m }, "num_dst"},
		{"unknown model", func(m []*pb.LoadRequest) []*pb.LoadRequest { m[0].Header.Model = "nope"; return m }, "unknown model"},
		{"other model", func(m []*pb.LoadRequest) []*pb.LoadRequest { m[0].Header.Signature.Ops[0] = "x"; return m }, "differs between host and worker"},
		{"newer config", func(m []*pb.LoadRequest) []*pb.LoadRequest {
			m[0].Header.ModelConfigJson = []byte(`{"in_dim":6,"hidden":4,"classes":3,"layers":2,"dropout":0.5,"fancy":1}`)
			return m
		}, "unknown field"},
		{"bad label", func(m []*pb.LoadRequest) []*pb.LoadRequest {
			for _, x := range m {
				if x.GetChunk().GetArray() == pb.ArrayKind_ARRAY_KIND_LABELS {
					x.Chunk.I32 = slices.Clone(x.Chunk.I32)
					x.Chunk.I32[0] = 9
					break
				}
			}
			return m
		}, "label 9"},
		{"bad graph", func(m []*pb.LoadRequest) []*pb.LoadRequest {
			for _, x := range m {
				if x.GetChunk().GetArray() == pb.ArrayKind_ARRAY_KIND_INDICES {
					x.Chunk.I32 = slices.Clone(x.Chunk.I32)
					x.Chunk.I32[0] = 1000
					break
				}
			}
			return m
		}, "graph"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var a assembler
			var err error
			for _, m := range c.edit(good()) {
				if err = a.add(m); err != nil {
					break
				}
			}
			if err == nil {
				_, err = a.finish()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

func TestBatchRoundTrip(t *testing.T) {
	spec := testSpec(t, false)
	g := spec.Data.Graph
	sampled, err := engine.Sample(g, []int32{3, 9, 1}, []int{2, 2}, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		b    *engine.Batch
		full bool
	}{
		{"full", &engine.Batch{Graph: g, Targets: []int32{1, 2, 3}}, true},
		{"sampled", sampled, false},
		{"labels", &engine.Batch{Graph: g, Targets: []int32{0, 1}, Labels: []int32{2, -1}}, true},
		{"graphs", &engine.Batch{Graph: sampled.Graph, Nodes: sampled.Nodes, Targets: []int32{0},
			Graphs: map[string]*core.Graph{"adj.t0": sampled.Graph}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := encodeBatch(c.b, g)
			if m.GetFull() != c.full {
				t.Errorf("full = %v", m.GetFull())
			}
			raw, err := proto.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			var back pb.Batch
			if err := proto.Unmarshal(raw, &back); err != nil {
				t.Fatal(err)
			}
			b, err := decodeBatch(&back, spec)
			if err != nil {
				t.Fatal(err)
			}
			if c.full && b.Graph != g {
				t.Errorf("a full batch should be the loaded graph itself")
			}
			if !slices.Equal(b.Targets, c.b.Targets) || !slices.Equal(b.Nodes, c.b.Nodes) || !slices.Equal(b.Labels, c.b.Labels) ||
				(b.Labels == nil) != (c.b.Labels == nil) || b.Graph.NumEdges() != c.b.Graph.NumEdges() || len(b.Graphs) != len(c.b.Graphs) {
				t.Errorf("batch differs: %+v vs %+v", b, c.b)
			}
		})
	}
}

func TestDecodeBatchRejects(t *testing.T) {
	spec := testSpec(t, false)
	g := encodeGraph(spec.Data.Graph)
	for _, c := range []struct {
		name string
		m    *pb.Batch
		want string
	}{
		{"nil", nil, "no batch"},
		{"no graph", &pb.Batch{}, "no graph"},
		{"full with nodes", &pb.Batch{Full: true, Nodes: []int32{1}}, "full-graph batch"},
		{"node out of range", &pb.Batch{Graph: &pb.Graph{NumDst: 1, NumSrc: 1, Offsets: []int64{0, 0}}, Nodes: []int32{99}}, "not one of"},
		{"node map length", &pb.Batch{Graph: &pb.Graph{NumDst: 1, NumSrc: 1, Offsets: []int64{0, 0}}, Nodes: []int32{1, 2}}, "maps 2 nodes"},
		{"target", &pb.Batch{Full: true, Targets: []int32{40}}, "target 40"},
		{"label", &pb.Batch{Full: true, HasLabels: true, Labels: []int32{5}}, "label 5"},
		{"bad csr", &pb.Batch{Graph: &pb.Graph{NumDst: 2, NumSrc: 2, Offsets: []int64{0, 3, 1}, Indices: []int32{0}}}, "graph"},
		{"negative size", &pb.Batch{Graph: &pb.Graph{NumDst: -1}}, "graph of"},
		{"mismatched graphs", &pb.Batch{Graph: g, Graphs: map[string]*pb.Graph{"x": {NumDst: 1, NumSrc: 1, Offsets: []int64{0, 0}}}}, "batch graph x"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeBatch(c.m, spec)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

func TestHostIDs(t *testing.T) {
	devs := []core.DeviceInfo{{ID: "cpu:0", Backend: "cpu", Name: "EPYC"}, {ID: "cpu:1", Backend: "cpu", Name: "EPYC"}}
	for _, c := range []struct {
		name, as string
		want     []core.DeviceID
		err      string
	}{
		{"own ids", "", []core.DeviceID{"cpu:0", "cpu:1"}, ""},
		{"renamed", "wcpu", []core.DeviceID{"wcpu:0", "wcpu:1"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			toHost, toWork, infos, err := hostIDs(c.as, devs)
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range infos {
				if d.ID != c.want[i] || toHost[devs[i].ID] != d.ID || toWork[d.ID] != devs[i].ID {
					t.Errorf("device %d: %+v", i, d)
				}
				if c.as != "" && (d.Backend != c.as || !strings.Contains(d.Name, "worker's cpu:")) {
					t.Errorf("renamed device %+v", d)
				}
			}
		})
	}
	if _, _, _, err := hostIDs("w", []core.DeviceInfo{{ID: "nocolon"}}); err == nil {
		t.Errorf("a device id without an index was accepted")
	}
	if _, _, _, err := hostIDs("w", []core.DeviceInfo{{ID: "a:0"}, {ID: "b:0"}}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("two devices mapping to one id: %v", err)
	}
}

func TestTensors(t *testing.T) {
	spec := testSpec(t, false)
	m := spec.Model
	vals := map[string][]float32{}
	for _, p := range m.Params {
		vals[p.Name] = make([]float32, core.NumElems(p.Shape))
	}
	back, err := decodeTensors(m, encodeTensors(m, vals))
	if err != nil || len(back) != len(vals) {
		t.Fatalf("round trip: %v, %d tensors", err, len(back))
	}
	p0 := m.Params[0].Name
	for _, c := range []struct {
		ts   []*pb.Tensor
		want string
	}{
		{[]*pb.Tensor{{Name: "nope"}}, "no parameter"},
		{[]*pb.Tensor{{Name: p0, Values: []float32{1}}}, "values for parameter"},
		{[]*pb.Tensor{{Name: p0, Values: vals[p0]}, {Name: p0, Values: vals[p0]}}, "twice"},
	} {
		if _, err := decodeTensors(m, c.ts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err = %v, want %q", err, c.want)
		}
	}
}

// frame packs messages as a fuzz input: each one length-prefixed.
func frame(msgs ...proto.Message) []byte {
	var out []byte
	for _, m := range msgs {
		b, _ := proto.Marshal(m)
		out = protowire.AppendBytes(out, b)
	}
	return out
}

// FuzzLoad feeds arbitrary message sequences to the Load assembler: it
// must never panic, and whatever it accepts is a valid graph with
// consistent node data.
func FuzzLoad(f *testing.F) {
	spec := testSpec(f, true)
	var msgs []proto.Message
	for _, m := range loadMsgs(f, spec, 64) {
		msgs = append(msgs, m)
	}
	f.Add(frame(msgs...))
	f.Add(frame(msgs[0]))
	f.Add(frame(msgs[1:]...))
	f.Fuzz(func(t *testing.T, in []byte) {
		var a assembler
		for len(in) > 0 {
			b, n := protowire.ConsumeBytes(in)
			if n < 0 {
				return
			}
			in = in[n:]
			var m pb.LoadRequest
			if proto.Unmarshal(b, &m) != nil {
				return
			}
			if a.add(&m) != nil {
				return
			}
		}
		s, err := a.finish()
		if err != nil {
			return
		}
		g := s.Data.Graph
		if g.Validate() != nil || len(s.Data.Labels) != g.NumDst || len(s.Data.Features) != g.NumDst*s.Data.FeatureDim {
			t.Fatalf("accepted an inconsistent load: %d nodes, %d labels, %d features", g.NumDst, len(s.Data.Labels), len(s.Data.Features))
		}
	})
}

// testServer is a worker over two CPU devices with testSpec loaded.
func testServer(t testing.TB) *server {
	t.Helper()
	b, err := cpu.New(core.BackendOptions{Devices: 2, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := &server{b: b}
	t.Cleanup(s.shutdown)
	var a assembler
	for _, m := range loadMsgs(t, testSpec(t, false), 1<<20) {
		if err := a.add(m); err != nil {
			t.Fatal(err)
		}
	}
	spec, err := a.finish()
	if err != nil {
		t.Fatal(err)
	}
	s.spec = spec
	if s.tr, err = engine.New(engine.Config{Model: spec.Model, Data: spec.Data, Devices: b.Devices(), Seed: spec.Seed, Optimizer: spec.Optimizer}); err != nil {
		t.Fatal(err)
	}
	return s
}

// runRequest is what a host sends for a Split plan over the worker's two
// devices.
func runRequest(t testing.TB, s *server, k int) *pb.RunRequest {
	t.Helper()
	targets := []int32{0, 1, 2, 3, 5, 8, 13, 21, 34}
	var infos []core.DeviceInfo
	for _, d := range s.b.Devices() {
		infos = append(infos, d.Info())
	}
	b := s.tr.FullBatch(targets)
	w, err := s.tr.Workload(b, infos)
	if err != nil {
		t.Fatal(err)
	}
	p, err := schedtest.Split{K: k}.Schedule(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	var tasks []core.Task
	for _, task := range p.Tasks {
		if task.Kind == core.TaskForward || task.Kind == core.TaskBackward {
			tasks = append(tasks, task)
		}
	}
	p.Tasks, p.Home = tasks, ""
	return &pb.RunRequest{Step: 3, BatchId: 1, Batch: encodeBatch(b, s.spec.Data.Graph), SliceId: 1, Slice: toproto.Plan(p)}
}

func TestServerRun(t *testing.T) {
	s := testServer(t)
	req := runRequest(t, s, 3)
	resp, err := s.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetLoss() <= 0 || len(resp.GetGrads()) != len(s.spec.Model.Params) || len(resp.GetTrace().GetEvents()) == 0 {
		t.Errorf("response: loss %v, %d grads, %d events", resp.GetLoss(), len(resp.GetGrads()), len(resp.GetTrace().GetEvents()))
	}
	// Cached batch and slice: the same answer without resending them.
	again, err := s.Run(context.Background(), &pb.RunRequest{Step: 3, BatchId: 1, SliceId: 1})
	if err != nil || again.GetLoss() != resp.GetLoss() {
		t.Errorf("cached run: %v, loss %v vs %v", err, again.GetLoss(), resp.GetLoss())
	}
	for _, c := range []struct {
		name string
		req  *pb.RunRequest
		code codes.Code
		want string
	}{
		{"unknown batch", &pb.RunRequest{BatchId: 9, SliceId: 1}, codes.FailedPrecondition, "batch 9"},
		{"unknown slice", &pb.RunRequest{BatchId: 1, SliceId: 9}, codes.FailedPrecondition, "slice 9"},
		{"negative step", &pb.RunRequest{Step: -1, BatchId: 1, SliceId: 1}, codes.InvalidArgument, "step"},
		{"foreign device", func() *pb.RunRequest {
			r := runRequest(t, s, 2)
			r.SliceId = 2
			r.Slice.Tasks[0].Device = "cuda:7"
			return r
		}(), codes.FailedPrecondition, "unknown device"},
		{"cycle", func() *pb.RunRequest {
			r := runRequest(t, s, 1)
			r.SliceId = 3
			r.Slice.Tasks[0].Deps = []int64{1}
			return r
		}(), codes.FailedPrecondition, "cycle"},
		{"step task", func() *pb.RunRequest {
			r := runRequest(t, s, 1)
			r.SliceId = 4
			r.Slice.Tasks[1].Kind = 4
			return r
		}(), codes.FailedPrecondition, "forward and backward tasks only"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Run(context.Background(), c.req)
			if status.Code(err) != c.code || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v (%v), want %v mentioning %q", err, status.Code(err), c.code, c.want)
			}
		})
	}
}

// FuzzRun sends arbitrary Run requests to a loaded worker: it must answer
// each with a result or an error (never panic, never hang), and keep
// answering.
func FuzzRun(f *testing.F) {
	s := testServer(f)
	for k := 1; k <= 3; k++ {
		b, _ := proto.Marshal(runRequest(f, s, k))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var req pb.RunRequest
		if proto.Unmarshal(in, &req) != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := s.Run(ctx, &req)
		if status.Code(err) == codes.Internal {
			t.Fatalf("the worker panicked: %v", err)
		}
		if ctx.Err() != nil {
			t.Fatalf("Run took over 10 s")
		}
	})
}
