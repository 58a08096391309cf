package toproto

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/plugins/internal/errcode"
	pb "github.com/gnnkit/gnnkit/plugins/proto/scheduler/v1"
)

// Workload converts the plain data of w; its Model and Graph stay behind.
func Workload(w *core.Workload) *pb.Workload {
	if w == nil {
		return nil
	}
	out := &pb.Workload{
		Model:      w.ModelName,
		ParamBytes: w.ParamBytes,
		Dims:       &pb.Dims{Nodes: w.Dims.Nodes, Edges: w.Dims.Edges},
		FeatureDim: int64(w.FeatureDim),
		Batch:      w.Batch,
		Seed:       w.Seed,
		Ops:        make([]*pb.OpInfo, len(w.Ops)),
		Devices:    make([]*pb.DeviceInfo, len(w.Devices)),
	}
	for i, op := range w.Ops {
		out.Ops[i] = &pb.OpInfo{
			Index: int64(op.Index),
			Name:  op.Name,
			Kind:  pb.OpKind(int32(op.Kind) + 1),
			Deps:  ints(op.Deps),
			Cost: &pb.Cost{Flops: op.Cost.FLOPs, BytesMoved: op.Cost.BytesMoved,
				ActivationBytes: op.Cost.ActivationBytes, WeightBytes: op.Cost.WeightBytes},
		}
		for _, r := range op.Params {
			out.Ops[i].Params = append(out.Ops[i].Params, &pb.ParamRef{Name: r.Name, Bytes: r.Bytes})
		}
	}
	for i, d := range w.Devices {
		out.Devices[i] = DeviceInfo(d)
	}
	for _, g := range w.Groups {
		out.Groups = append(out.Groups, &pb.GroupInfo{Key: int64(g.Key), Graph: g.Graph, Dense: g.Dense, Samples: int64(g.Samples)})
	}
	if o := w.Optimizer; o != nil {
		out.Optimizer = &pb.OptimizerInfo{Kind: o.Kind, Buffers: int64(o.Buffers)}
	}
	return out
}

// DeviceInfo converts one device description.
func DeviceInfo(d core.DeviceInfo) *pb.DeviceInfo {
	return &pb.DeviceInfo{
		Id:            string(d.ID),
		Backend:       d.Backend,
		Name:          d.Name,
		MemCapBytes:   d.MemCap,
		MemTotalBytes: d.MemTotal,
		Threads:       int64(d.Threads),
		Features:      d.Features,
		KernelVariant: d.Kernel,
		Gflops:        d.GFLOPS,
		MemGbps:       d.MemGBps,
	}
}

// Plan converts a plan (nil stays nil).
func Plan(p *core.Plan) *pb.Plan {
	if p == nil {
		return nil
	}
	out := &pb.Plan{
		Scheduler:  p.Scheduler,
		Home:       string(p.Home),
		StepOwners: p.StepOwners,
		Units:      make([]*pb.Unit, len(p.Units)),
		Tasks:      make([]*pb.Task, len(p.Tasks)),
	}
	for name, d := range p.Owners {
		if out.Owners == nil {
			out.Owners = map[string]string{}
		}
		out.Owners[name] = string(d)
	}
	for i, u := range p.Units {
		out.Units[i] = &pb.Unit{Id: int64(u.ID), Targets: u.Targets, LossWeight: u.LossWeight, Subgraph: u.Subgraph}
	}
	for _, a := range p.Alternatives {
		out.Alternatives = append(out.Alternatives, &pb.Alternative{Description: a.Description, IterationMs: a.IterationMs, PeakBytes: a.PeakBytes, NeedBytes: a.NeedBytes, Chosen: a.Chosen})
	}
	for _, d := range p.Exclusive {
		out.Exclusive = append(out.Exclusive, string(d))
	}
	for i, t := range p.Tasks {
		out.Tasks[i] = &pb.Task{
			Id:       int64(t.ID),
			Kind:     pb.TaskKind(int32(t.Kind) + 1),
			Unit:     int64(t.Unit),
			Device:   string(t.Device),
			Stream:   int64(t.Stream),
			OpLo:     int64(t.OpLo),
			OpHi:     int64(t.OpHi),
			From:     string(t.From),
			Deps:     ints(t.Deps),
			Ops:      ints(t.Ops),
			Params:   t.Params,
			Priority: int64(t.Priority),
		}
	}
	if len(p.Metrics) > 0 {
		out.Metrics = make(map[string]float64, len(p.Metrics))
		for k, v := range p.Metrics {
			out.Metrics[k] = v
		}
	}
	if len(p.MemEstimate) > 0 {
		out.MemEstimate = make(map[string]int64, len(p.MemEstimate))
		for d, b := range p.MemEstimate {
			out.MemEstimate[string(d)] = b
		}
	}
	if r := p.Reuse; r != nil {
		out.Reuse = &pb.Reuse{Boundary: r.Boundary, Keep: r.Keep, Chunks: make([]*pb.NodeList, len(r.Chunks))}
		for i, c := range r.Chunks {
			out.Reuse.Chunks[i] = &pb.NodeList{Nodes: c}
		}
	}
	return out
}

// Trace converts an execution trace (nil stays nil).
func Trace(t *core.Trace) *pb.Trace {
	if t == nil {
		return nil
	}
	out := &pb.Trace{
		Events:     make([]*pb.TraceEvent, len(t.Events)),
		BytesMoved: t.BytesMoved,
		WallNs:     int64(t.Wall),
	}
	for i, e := range t.Events {
		out.Events[i] = &pb.TraceEvent{
			Name:    e.Name,
			Cat:     e.Cat,
			Device:  string(e.Device),
			Stream:  int64(e.Stream),
			Unit:    int64(e.Unit),
			StartNs: int64(e.Start),
			DurNs:   int64(e.Dur),
			Bytes:   e.Bytes,
		}
	}
	if len(t.PeakMem) > 0 {
		out.PeakMemBytes = make(map[string]int64, len(t.PeakMem))
		for d, b := range t.PeakMem {
			out.PeakMemBytes[string(d)] = b
		}
	}
	return out
}

// Error turns err into a gRPC status error. The status carries an
// ErrorDetail naming the core sentinel err matches (and the fields of a
// *core.OOMError), so fromproto.Error can rebuild an error that errors.Is
// and errors.As treat like the original. A nil err stays nil; an error
// that already is a status passes through.
func Error(err error) error {
	if err == nil {
		return nil
	}
	code := codes.Unknown
	detail := &pb.ErrorDetail{}
	if e, ok := errcode.Classify(err); ok {
		code, detail.Sentinel = e.Code, e.Name
	} else if st, ok := status.FromError(err); ok {
		return st.Err() // already a status (a plugin speaking gRPC itself)
	}
	var oom *core.OOMError
	if errors.As(err, &oom) {
		detail.Oom = &pb.OutOfMemory{Device: string(oom.Device), Need: oom.Need, Free: oom.Free,
			Cap: oom.Cap, Used: oom.Used, What: oom.What}
	}
	st := status.New(code, err.Error())
	if detail.Sentinel != "" || detail.Oom != nil {
		if s, err := st.WithDetails(detail); err == nil {
			st = s
		}
	}
	return st.Err()
}

func ints(v []int) []int64 {
	if v == nil {
		return nil
	}
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}
