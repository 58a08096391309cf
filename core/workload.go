package core

import (
	"context"
	"fmt"
)

// OpInfo is the plain-data view of one op that schedulers reason over.
type OpInfo struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	Kind  OpKind `json:"kind"`
	Deps  []int  `json:"deps,omitempty"` // indices of ops whose outputs it reads
	Cost  Cost   `json:"cost"`           // at the workload's full-graph dims
	// Params are the parameters the op reads (a parameter shared by
	// several ops is listed by each); with Plan.StepOwners they decide
	// where each parameter is stepped (StepOwners).
	Params []ParamRef `json:"params,omitempty"`
}

// ParamRef names one parameter and its size.
type ParamRef struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

// Workload is what a scheduler sees: the op DAG with costs, the data sizes,
// the batch of target nodes for one iteration, and the devices.
type Workload struct {
	ModelName  string       `json:"model"`
	Ops        []OpInfo     `json:"ops"`
	ParamBytes int64        `json:"param_bytes"`
	Dims       Dims         `json:"dims"`
	FeatureDim int          `json:"feature_dim"`
	Batch      []int32      `json:"batch"` // the target nodes of one iteration
	Devices    []DeviceInfo `json:"devices"`
	Seed       uint64       `json:"seed"`
	// Groups, when the batch lists groups (dynamic training: batch entry
	// i is group i, see engine.RunOptions.Groups), describes each group
	// for placement; nil otherwise. Plain data, so out-of-process
	// schedulers see it too.
	Groups []GroupInfo `json:"groups,omitempty"`
	// Optimizer says what the optimizer step keeps and moves, for the
	// planners' memory and step-time pricing; nil: Adam's (see
	// StateBuffers). Plain data: plugins see it.
	Optimizer *OptimizerInfo `json:"optimizer,omitempty"`

	// Model and Graph are the in-process objects behind the plain data
	// (nil when the workload came over the wire).
	Model *Model `json:"-"`
	Graph *Graph `json:"-"`
	// Estimator, when set (in process), predicts the device memory of
	// running units one after another on one stream of dev: the resident
	// bytes (parameters, gradients, optimizer state, data kept on the
	// device) and the largest transient bytes of any single unit.
	Estimator func(units []Unit, dev DeviceID) (resident, unitPeak int64, err error) `json:"-"`
	// PlanEstimator, when set (in process), predicts the peak memory of
	// running plan p on its home device, resident bytes included; unlike
	// Estimator it understands plans whose units are not run one by one
	// (Plan.Reuse).
	PlanEstimator func(p *Plan) (int64, error) `json:"-"`
}

// GroupInfo describes one group of a dynamic-training workload: a stable
// key (e.g. its target snapshot) under which a scheduler may keep
// measurements across iterations, the estimated work of its graph ops and
// of its dense ops (any one unit, e.g. FLOP-like counts), and its sample
// count (loss terms).
type GroupInfo struct {
	Key     int     `json:"key"`
	Graph   float64 `json:"graph"`
	Dense   float64 `json:"dense"`
	Samples int     `json:"samples"`
}

// OptimizerInfo describes a workload's optimizer: its kind ("adam",
// "sgd") and how many buffers the size of a parameter of state it keeps
// per parameter (Adam 2: its moments; SGD with momentum 1; plain SGD 0).
type OptimizerInfo struct {
	Kind    string `json:"kind"`
	Buffers int    `json:"buffers"`
}

// MaxOptimizerBuffers bounds OptimizerInfo.Buffers (CheckOptimizer).
const MaxOptimizerBuffers = 16

// CheckOptimizer checks o (nil is Adam's and valid): Buffers in
// [0, MaxOptimizerBuffers].
func CheckOptimizer(o *OptimizerInfo) error {
	if o != nil && (o.Buffers < 0 || o.Buffers > MaxOptimizerBuffers) {
		return fmt.Errorf("core: optimizer %q keeps %d buffers of state per parameter; want 0 to %d (Adam 2, SGD with momentum 1, plain SGD 0)", o.Kind, o.Buffers, MaxOptimizerBuffers)
	}
	return nil
}

// StateBuffers is how many parameter-sized buffers of state the
// workload's optimizer keeps per parameter: Optimizer.Buffers, or
// Adam's 2 when the workload does not say.
func (w *Workload) StateBuffers() int {
	if w.Optimizer == nil {
		return 2
	}
	return w.Optimizer.Buffers
}

// NewWorkload describes training m on g (as prepared for the model) with
// the given batch of target nodes on the given devices.
func NewWorkload(m *Model, g *Graph, featureDim int, batch []int32, devs []DeviceInfo, seed uint64) *Workload {
	d := Dims{}
	if g != nil {
		d = Dims{Nodes: int64(g.NumDst), Edges: int64(g.NumEdges())}
	}
	w := &Workload{ModelName: m.Name, ParamBytes: m.ParamBytes(), Dims: d, FeatureDim: featureDim,
		Batch: batch, Devices: devs, Seed: seed, Model: m, Graph: g}
	deps, opPar := m.OpDeps(), m.OpParams()
	size := map[string]int64{}
	for _, p := range m.Params {
		size[p.Name] = int64(NumElems(p.Shape)) * 4
	}
	for i, op := range m.Ops {
		o := OpInfo{Index: i, Name: op.Name(), Kind: op.Kind(), Deps: deps[i], Cost: op.Cost(d)}
		for _, v := range opPar[i] {
			o.Params = append(o.Params, ParamRef{Name: v, Bytes: size[v]})
		}
		w.Ops = append(w.Ops, o)
	}
	return w
}

// Device returns the workload's device with the given id.
func (w *Workload) Device(id DeviceID) (DeviceInfo, bool) {
	for _, d := range w.Devices {
		if d.ID == id {
			return d, true
		}
	}
	return DeviceInfo{}, false
}

// OpsNeedGrad says, per op, whether a gradient of any of its outputs is
// needed (Model.NeedsGrad): only those gradients are computed and sent
// back across devices, so a value with no parameter upstream (an
// input's dropout) gets none. Without the model (or with other ops than
// its), every op's is.
func (w *Workload) OpsNeedGrad() []bool {
	ng := make([]bool, len(w.Ops))
	if w.Model == nil || len(w.Model.Ops) != len(w.Ops) {
		for i := range ng {
			ng[i] = true
		}
		return ng
	}
	need := w.Model.NeedsGrad()
	for i, op := range w.Model.Ops {
		for _, v := range op.Outputs() {
			ng[i] = ng[i] || need[v]
		}
	}
	return ng
}

// Scheduler turns a workload into a plan. Schedule must be deterministic
// for a fixed workload (including its seed) and honour ctx cancellation.
type Scheduler interface {
	Name() string
	Schedule(ctx context.Context, w *Workload) (*Plan, error)
}

// SchedulerWithFeedback is a scheduler that adapts to measurements: after
// an iteration the runtime passes the trace, and a non-nil plan replaces
// the current one from the next iteration on. The new plan must keep the
// same Home device: the master parameters and optimizer state live there
// (engine.Train refuses a move from Observe).
type SchedulerWithFeedback interface {
	Scheduler
	Observe(ctx context.Context, w *Workload, t *Trace) (*Plan, error)
}
