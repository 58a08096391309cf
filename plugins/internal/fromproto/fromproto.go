package fromproto

import (
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/plugins/internal/errcode"
	pb "github.com/gnnkit/gnnkit/plugins/proto/scheduler/v1"
)

// Workload converts a workload message. The result has no Model or Graph.
func Workload(m *pb.Workload) (*core.Workload, error) {
	if m == nil {
		return nil, errors.New("fromproto: the request has no workload")
	}
	w := &core.Workload{
		ModelName:  m.GetModel(),
		ParamBytes: m.GetParamBytes(),
		Dims:       core.Dims{Nodes: m.GetDims().GetNodes(), Edges: m.GetDims().GetEdges()},
		Batch:      m.GetBatch(),
		Seed:       m.GetSeed(),
	}
	var err error
	if w.FeatureDim, err = toInt("feature_dim", m.GetFeatureDim()); err != nil {
		return nil, err
	}
	if len(m.GetOps()) > 0 {
		w.Ops = make([]core.OpInfo, len(m.GetOps()))
	}
	for i, op := range m.GetOps() {
		k := op.GetKind()
		if k <= pb.OpKind_OP_KIND_UNSPECIFIED || k > math.MaxUint8 {
			return nil, fmt.Errorf("fromproto: op %d has kind %v", i, k)
		}
		o := core.OpInfo{Name: op.GetName(), Kind: core.OpKind(k - 1)}
		c := op.GetCost()
		o.Cost = core.Cost{FLOPs: c.GetFlops(), BytesMoved: c.GetBytesMoved(),
			ActivationBytes: c.GetActivationBytes(), WeightBytes: c.GetWeightBytes()}
		if o.Index, err = toInt("op index", op.GetIndex()); err != nil {
			return nil, err
		}
		if o.Deps, err = ints("op deps", op.GetDeps()); err != nil {
			return nil, err
		}
		for _, r := range op.GetParams() {
			if r.GetName() == "" || r.GetBytes() < 0 {
				return nil, fmt.Errorf("fromproto: op %d names a parameter %q of %d bytes", i, r.GetName(), r.GetBytes())
			}
			o.Params = append(o.Params, core.ParamRef{Name: r.GetName(), Bytes: r.GetBytes()})
		}
		w.Ops[i] = o
	}
	if len(m.GetDevices()) > 0 {
		w.Devices = make([]core.DeviceInfo, len(m.GetDevices()))
	}
	for i, d := range m.GetDevices() {
		if w.Devices[i], err = DeviceInfo(d); err != nil {
			return nil, err
		}
	}
	for i, g := range m.GetGroups() {
		key, err := toInt("group key", g.GetKey())
		if err != nil {
			return nil, err
		}
		samples, err := toInt("group samples", g.GetSamples())
		if err != nil {
			return nil, err
		}
		if samples < 0 || math.IsNaN(g.GetGraph()) || math.IsNaN(g.GetDense()) || g.GetGraph() < 0 || g.GetDense() < 0 {
			return nil, fmt.Errorf("fromproto: group %d has negative or NaN work or samples", i)
		}
		w.Groups = append(w.Groups, core.GroupInfo{Key: key, Graph: g.GetGraph(), Dense: g.GetDense(), Samples: samples})
	}
	if o := m.GetOptimizer(); o != nil {
		n := o.GetBuffers()
		w.Optimizer = &core.OptimizerInfo{Kind: o.GetKind(), Buffers: int(max(min(n, math.MaxInt32), math.MinInt32))}
		if err := core.CheckOptimizer(w.Optimizer); err != nil {
			return nil, fmt.Errorf("fromproto: %w", err)
		}
	}
	return w, nil
}

// DeviceInfo converts one device description.
func DeviceInfo(d *pb.DeviceInfo) (core.DeviceInfo, error) {
	th, err := toInt("threads", d.GetThreads())
	if err != nil {
		return core.DeviceInfo{}, err
	}
	return core.DeviceInfo{
		ID:       core.DeviceID(d.GetId()),
		Backend:  d.GetBackend(),
		Name:     d.GetName(),
		MemCap:   d.GetMemCapBytes(),
		MemTotal: d.GetMemTotalBytes(),
		Threads:  th,
		Features: d.GetFeatures(),
		Kernel:   d.GetKernelVariant(),
		GFLOPS:   d.GetGflops(),
		MemGBps:  d.GetMemGbps(),
	}, nil
}

// Plan converts a plan message. Errors wrap core.ErrInvalidPlan.
func Plan(m *pb.Plan) (*core.Plan, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: no plan in the response", core.ErrInvalidPlan)
	}
	p := &core.Plan{Scheduler: m.GetScheduler(), Home: core.DeviceID(m.GetHome()), StepOwners: m.GetStepOwners()}
	for name, d := range m.GetOwners() {
		if p.Owners == nil {
			p.Owners = map[string]core.DeviceID{}
		}
		p.Owners[name] = core.DeviceID(d)
	}
	for _, a := range m.GetAlternatives() {
		p.Alternatives = append(p.Alternatives, core.Alternative{Description: a.GetDescription(), IterationMs: a.GetIterationMs(), PeakBytes: a.GetPeakBytes(), NeedBytes: a.GetNeedBytes(), Chosen: a.GetChosen()})
	}
	for _, d := range m.GetExclusive() {
		p.Exclusive = append(p.Exclusive, core.DeviceID(d))
	}
	var err error
	if len(m.GetUnits()) > 0 {
		p.Units = make([]core.Unit, len(m.GetUnits()))
	}
	for i, u := range m.GetUnits() {
		p.Units[i] = core.Unit{Targets: u.GetTargets(), LossWeight: u.GetLossWeight(), Subgraph: u.GetSubgraph()}
		if p.Units[i].ID, err = planInt("unit id", u.GetId()); err != nil {
			return nil, err
		}
	}
	if len(m.GetTasks()) > 0 {
		p.Tasks = make([]core.Task, len(m.GetTasks()))
	}
	for i, t := range m.GetTasks() {
		k := t.GetKind()
		if k <= pb.TaskKind_TASK_KIND_UNSPECIFIED || k > pb.TaskKind_TASK_KIND_STEP {
			return nil, fmt.Errorf("%w: task %d has kind %v, which this version of gnnkit does not know", core.ErrInvalidPlan, i, k)
		}
		task := core.Task{Kind: core.TaskKind(k - 1), Device: core.DeviceID(t.GetDevice()), From: core.DeviceID(t.GetFrom())}
		for _, f := range []struct {
			name string
			v    int64
			dst  *int
		}{{"task id", t.GetId(), &task.ID}, {"task unit", t.GetUnit(), &task.Unit}, {"task stream", t.GetStream(), &task.Stream},
			{"task op_lo", t.GetOpLo(), &task.OpLo}, {"task op_hi", t.GetOpHi(), &task.OpHi}, {"task priority", t.GetPriority(), &task.Priority}} {
			if *f.dst, err = planInt(f.name, f.v); err != nil {
				return nil, err
			}
		}
		if task.Deps, err = ints("task deps", t.GetDeps()); err != nil {
			return nil, fmt.Errorf("%w: %v", core.ErrInvalidPlan, err)
		}
		if task.Ops, err = ints("task ops", t.GetOps()); err != nil {
			return nil, fmt.Errorf("%w: %v", core.ErrInvalidPlan, err)
		}
		if len(t.GetParams()) > 0 {
			task.Params = t.GetParams()
		}
		p.Tasks[i] = task
	}
	if len(m.GetMetrics()) > 0 {
		p.Metrics = make(map[string]float64, len(m.GetMetrics()))
		for k, v := range m.GetMetrics() {
			p.Metrics[k] = v
		}
	}
	if len(m.GetMemEstimate()) > 0 {
		p.MemEstimate = make(map[core.DeviceID]int64, len(m.GetMemEstimate()))
		for d, b := range m.GetMemEstimate() {
			p.MemEstimate[core.DeviceID(d)] = b
		}
	}
	if r := m.GetReuse(); r != nil {
		p.Reuse = &core.Reuse{Boundary: r.GetBoundary(), Keep: r.GetKeep()}
		for _, c := range r.GetChunks() {
			p.Reuse.Chunks = append(p.Reuse.Chunks, c.GetNodes())
		}
	}
	return p, nil
}

// Trace converts a trace message (nil stays nil).
func Trace(m *pb.Trace) (*core.Trace, error) {
	if m == nil {
		return nil, nil
	}
	t := &core.Trace{BytesMoved: m.GetBytesMoved(), Wall: time.Duration(m.GetWallNs())}
	if len(m.GetEvents()) > 0 {
		t.Events = make([]core.TraceEvent, len(m.GetEvents()))
	}
	var err error
	for i, e := range m.GetEvents() {
		ev := core.TraceEvent{Name: e.GetName(), Cat: e.GetCat(), Device: core.DeviceID(e.GetDevice()),
			Start: time.Duration(e.GetStartNs()), Dur: time.Duration(e.GetDurNs()), Bytes: e.GetBytes()}
		if ev.Stream, err = toInt("event stream", e.GetStream()); err != nil {
			return nil, err
		}
		if ev.Unit, err = toInt("event unit", e.GetUnit()); err != nil {
			return nil, err
		}
		t.Events[i] = ev
	}
	t.PeakMem = make(map[core.DeviceID]int64, len(m.GetPeakMemBytes()))
	for d, b := range m.GetPeakMemBytes() {
		t.PeakMem[core.DeviceID(d)] = b
	}
	return t, nil
}

// RemoteError is an error that came back from a plugin. Its message is the
// plugin's; errors.Is matches the core sentinel the plugin's error matched
// (or the one its status code implies).
type RemoteError struct {
	Code     codes.Code
	Msg      string
	Sentinel error // nil when none
}

func (e *RemoteError) Error() string { return e.Msg }

// Unwrap returns the sentinel, so errors.Is works across the boundary.
func (e *RemoteError) Unwrap() error { return e.Sentinel }

// Error rebuilds an error from a gRPC status error: a *core.OOMError for
// out-of-memory errors that carried one, else a *RemoteError wrapping the
// sentinel. Errors that are not statuses are returned unchanged.
func Error(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	var detail *pb.ErrorDetail
	for _, d := range st.Details() {
		if x, ok := d.(*pb.ErrorDetail); ok {
			detail = x
			break
		}
	}
	if o := detail.GetOom(); o != nil {
		return &core.OOMError{Device: core.DeviceID(o.GetDevice()), Need: o.GetNeed(), Free: o.GetFree(),
			Cap: o.GetCap(), Used: o.GetUsed(), What: o.GetWhat()}
	}
	re := &RemoteError{Code: st.Code(), Msg: st.Message()}
	if e, ok := errcode.ByName(detail.GetSentinel()); ok {
		re.Sentinel = e.Err
	} else if e, ok := errcode.ByCode(st.Code()); ok {
		re.Sentinel = e.Err
	}
	return re
}

func toInt(what string, v int64) (int, error) {
	if int64(int(v)) != v {
		return 0, fmt.Errorf("fromproto: %s %d does not fit an int", what, v)
	}
	return int(v), nil
}

func planInt(what string, v int64) (int, error) {
	n, err := toInt(what, v)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", core.ErrInvalidPlan, err)
	}
	return n, nil
}

func ints(what string, v []int64) ([]int, error) {
	if v == nil {
		return nil, nil
	}
	out := make([]int, len(v))
	for i, x := range v {
		n, err := toInt(what, x)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}
