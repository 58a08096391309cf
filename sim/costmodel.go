package sim

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// CostModel is the simulator's cost model on its own: what an op, a
// unit's setup, a transfer, a gradient reduction, the optimizer step and
// a device's resident memory cost for one workload on one cluster with
// one profile. Simulate prices every task through it, so a partitioner
// that plans with a CostModel (schedulers/graphpipe does) predicts with
// the simulator's numbers rather than with a model of its own; what the
// simulator adds on top is only the dynamics (the order in which tasks
// wait for devices, links and each other).
type CostModel struct {
	w    *core.Workload
	c    *Cluster
	prof map[core.DeviceID]*devProf
	// paramBytes, optBytes, residentIn as Simulate's memory model uses
	// them (see Resident).
	paramBytes, optBytes, residentIn int64
	// stepPasses: the bytes a step moves per parameter byte (StepBytes):
	// read p and g, write p, clear g, and read and write each buffer of
	// the optimizer's state.
	stepPasses float64
	mark, pos  []int32 // receptive, fieldShape
	stamp      int32
	// fields caches subgraph units' sizes and op outputs, shared by
	// clones.
	fields *fieldCache
	// opReads: what each model op reads (reads), shared by clones.
	opReads *opReads
}

// opReads is core.Model.InputsRead by op, for unitInputs: feat[o], op o
// reads a model input (the features); weights[o], the indices of the
// graphs with edge weights whose weights it reads; weighted, the model's
// graphs with edge weights (Model.WeightedGraphs).
type opReads struct {
	once     sync.Once
	feat     []bool
	weights  [][]int
	weighted int
}

// reads is cm's opReads, computed on first use (the model has as many
// ops as the workload: unitInputs checks).
func (cm *CostModel) reads() *opReads {
	r := cm.opReads
	r.once.Do(func() {
		m := cm.w.Model
		r.feat, r.weights = make([]bool, len(m.Ops)), make([][]int, len(m.Ops))
		r.weighted = m.WeightedGraphs()
		for o := range m.Ops {
			feat, ws := m.InputsRead([]int{o})
			r.feat[o] = feat
			for _, name := range ws {
				for g, gr := range m.Graphs {
					if gr.Name+".w" == name {
						r.weights[o] = append(r.weights[o], g)
					}
				}
			}
		}
	})
	return r
}

// fieldCache holds what UnitSize and UnitOuts learn of a subgraph unit's
// receptive field, by the unit's targets (hashed, then compared); it
// depends on the workload only.
type fieldCache struct {
	mu     sync.Mutex
	m, old map[uint64][]*unitField // the current generation and the one before
	n      int                     // entries in m
}

// maxFields bounds a fieldCache's generation: past it the current one
// becomes the old one (the one before is dropped).
const maxFields = 4096

type unitField struct {
	targets       []int32
	rows, edges   int64
	sized, shaped bool
	out           []int64 // nil: the shape pass could not run
	opEdges       []int64 // the edges each op reads (shapeOut.edges)
	mem           *opMem  // what each op holds (nil with out)
}

// opMem is a subgraph unit's memory per op from its own shape pass (the
// executor's allocations at the sizes each op computes there): what its
// forward holds and, in its backward, the peak above its start, the
// input gradients it leaves and the output gradients freed after it
// (Point's Mem, Temp, GradIn, GradOut).
type opMem struct {
	held, temp, gin, gout []int64
	in                    int64 // the unit's inputs (the setup's Mem)
}

// apply replaces the memory of costs c (one per op, then the setup) with
// m's; m nil leaves them.
func (m *opMem) apply(c []Cost) {
	if m == nil {
		return
	}
	for o := range m.held {
		if o < len(c) {
			c[o].Mem, c[o].Temp, c[o].GradIn, c[o].GradOut = m.held[o], m.temp[o], m.gin[o], m.gout[o]
		}
	}
	if len(c) == len(m.held)+1 {
		c[len(c)-1].Mem = m.in
	}
}

// field is the cache entry of targets (a new one if none).
func (c *fieldCache) field(targets []int32) *unitField {
	h := fnv.New64a()
	var b [4]byte
	for _, t := range targets {
		binary.LittleEndian.PutUint32(b[:], uint32(t))
		h.Write(b[:])
	}
	key := h.Sum64()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.m[key] {
		if slices.Equal(e.targets, targets) {
			return e
		}
	}
	var e *unitField
	for _, x := range c.old[key] {
		if slices.Equal(x.targets, targets) {
			e = x // still in use: back to the current generation
		}
	}
	if c.n >= maxFields {
		// Two generations: the units of the last maxFields lookups stay.
		c.old, c.m, c.n = c.m, map[uint64][]*unitField{}, 0
	}
	if e == nil {
		e = &unitField{targets: slices.Clone(targets)}
	}
	c.m[key] = append(c.m[key], e)
	c.n++
	return e
}

// NewCostModel prices workload w's ops on every device of cluster c with
// profile prof (nil: a roofline profile of each device model, as
// Simulate does without a profile).
func NewCostModel(w *core.Workload, prof *Profile, c *Cluster) (*CostModel, error) {
	if c == nil {
		return nil, fmt.Errorf("sim: nil cluster")
	}
	ids := make([]core.DeviceID, len(c.Devices))
	for i, d := range c.Devices {
		ids[i] = d.ID
	}
	return newCostModel(w, prof, c, ids)
}

// newCostModel builds the cost model for the given devices of c.
func newCostModel(w *core.Workload, prof *Profile, c *Cluster, devs []core.DeviceID) (*CostModel, error) {
	if w == nil || c == nil {
		return nil, fmt.Errorf("sim: nil workload or cluster")
	}
	if prof != nil {
		if err := prof.Validate(); err != nil {
			return nil, err
		}
	}
	cm := &CostModel{w: w, c: c, prof: map[core.DeviceID]*devProf{}, fields: &fieldCache{m: map[uint64][]*unitField{}}, opReads: &opReads{}}
	roofs := map[DeviceModel]*Profile{}
	shares := map[*Profile]*costShare{}
	for _, d := range devs {
		m, ok := c.Device(d)
		if !ok {
			ids := make([]string, len(c.Devices))
			for i, x := range c.Devices {
				ids[i] = string(x.ID)
			}
			return nil, fmt.Errorf("sim: the plan uses device %s, which cluster %q does not have (it has %s)", d, c.Name, strings.Join(ids, ", "))
		}
		if !(m.Speedup == 0 || m.Speedup >= MinSpeedup && m.Speedup <= MaxSpeedup) {
			return nil, fmt.Errorf("sim: device %s: speedup %g: want 0 (none) or %g to %g", d, m.Speedup, MinSpeedup, MaxSpeedup)
		}
		pr, scale := prof, 1.0
		if pr == nil {
			key := *m
			key.ID = ""
			if pr = roofs[key]; pr == nil {
				r, err := Roofline(w, *m)
				if err != nil {
					return nil, err
				}
				roofs[key], pr = r, r
			}
		} else if m.Speedup > 0 {
			scale = 1 / m.Speedup
		}
		if shares[pr] == nil {
			shares[pr] = newCostShare(len(w.Ops))
		}
		dp := &devProf{p: pr, scale: scale, model: m, idx: make([]int, len(w.Ops)), cache: map[[3]int64][]Cost{}, share: shares[pr], walk: pr.walksBackward()}
		byName := map[string]int{}
		for j, op := range pr.Ops {
			byName[op.Name] = j
		}
		var missing []string
		for i, op := range w.Ops {
			j, ok := byName[op.Name]
			if !ok {
				missing = append(missing, op.Name)
			}
			dp.idx[i] = j
		}
		if len(missing) > 0 {
			if len(missing) > 5 {
				missing = append(missing[:5], "…")
			}
			return nil, fmt.Errorf("sim: the profile (model %q) has no ops named %s of workload model %q: it profiles another model; profile this one (gnnkit plan --measure --profile FILE)", pr.Model, strings.Join(missing, ", "), w.ModelName)
		}
		if len(pr.Ops) > len(w.Ops) {
			// Every op of the workload's is in it, and more: a larger
			// model's (more --branches or --layers, or dropout ops where
			// the workload has none), whose model-wide
			// figures (the step, the setup, the executor's own time)
			// would be priced for this one.
			in := make(map[string]bool, len(w.Ops))
			for _, op := range w.Ops {
				in[op.Name] = true
			}
			var extra []string
			for _, op := range pr.Ops {
				if !in[op.Name] {
					extra = append(extra, op.Name)
				}
			}
			if len(extra) > 5 {
				extra = append(extra[:5], "…")
			}
			return nil, fmt.Errorf("sim: the profile (model %q) has %d ops, the workload's model %q %d: its ops %s are not the workload's: it profiles another configuration of the model (more --branches or --layers, or a --dropout where this one has none); profile this one (gnnkit plan --measure --profile FILE)",
				pr.Model, len(pr.Ops), w.ModelName, len(w.Ops), strings.Join(extra, ", "))
		}
		for i, op := range w.Ops {
			// Both sides know the weights an op reads: a profile of
			// another size of the model would price every op wrong.
			if a, b := pr.Ops[dp.idx[i]].WeightBytes, op.Cost.WeightBytes; a > 0 && b > 0 && a != b {
				return nil, fmt.Errorf("sim: the profile's op %s reads %s of parameters, the workload's (model %q) %s: the profile is of another size of the model (--hidden, --branches, --layers); profile this one (gnnkit plan --measure --profile FILE)",
					op.Name, core.FormatBytes(a), w.ModelName, core.FormatBytes(b))
			}
		}
		cm.prof[d] = dp
	}
	if len(devs) == 0 {
		return nil, fmt.Errorf("sim: no devices")
	}
	home := prof
	if home == nil {
		home = cm.prof[devs[0]].p
	}
	cm.paramBytes = w.ParamBytes
	if cm.paramBytes == 0 {
		cm.paramBytes = home.ParamBytes
	}
	// The optimizer's state: the workload's optimizer when it says (its
	// buffers are exactly what the trainer allocates, whatever optimizer
	// a profile was measured with), else the profile's, else the
	// cluster's factor, else Adam's 2.
	cm.optBytes = home.OptStateBytes
	buffers := 2.0
	switch {
	case w.Optimizer != nil:
		buffers = float64(w.Optimizer.Buffers)
		cm.optBytes = int64(buffers * float64(cm.paramBytes))
	case prof == nil || (home.OptStateBytes == 0 && home.ParamBytes == 0):
		if c.OptStateFactor != 0 {
			buffers = c.OptStateFactor
		}
		cm.optBytes = int64(buffers * float64(cm.paramBytes))
	case home.ParamBytes > 0:
		buffers = float64(home.OptStateBytes) / float64(home.ParamBytes)
	}
	cm.stepPasses = stepPasses(buffers)
	cm.residentIn = home.ResidentInputBytes
	return cm, nil
}

// Clone returns a cost model sharing cm's profiles with caches of its
// own (for use on another goroutine); the op costs by unit size
// (devProf.costs) stay shared, behind a lock.
func (cm *CostModel) Clone() *CostModel {
	c := *cm
	c.prof = make(map[core.DeviceID]*devProf, len(cm.prof))
	for d, dp := range cm.prof {
		x := *dp
		x.cache = map[[3]int64][]Cost{}
		c.prof[d] = &x
	}
	c.mark, c.pos, c.stamp = nil, nil, 0 // fields stays shared
	return &c
}

// Cluster is the cluster the model prices.
func (cm *CostModel) Cluster() *Cluster { return cm.c }

func (cm *CostModel) dev(d core.DeviceID) *devProf {
	dp, ok := cm.prof[d]
	if !ok {
		panic(fmt.Sprintf("sim: cost model has no device %s", d))
	}
	return dp
}

// Op is op o's cost on device d for a unit of rows rows and edges edges
// (the unit's size prices every op; Simulate prices a subgraph unit of a
// graph model's ops each at its own size: UnitOps),
// with the device's Speedup applied to the times.
func (cm *CostModel) Op(d core.DeviceID, o int, rows, edges int64) Cost {
	dp := cm.dev(d)
	c := dp.costs(rows, edges, false)[o]
	c.Fwd, c.Bwd = dp.t(c.Fwd), dp.t(c.Bwd)
	return c
}

// Setup is a unit's per-device overhead outside the ops (building its
// Env on the device at its first task there, releasing it after its last
// backward), with Speedup applied; Mem is the unit's own inputs, held on
// the device while the unit is in flight there when the unit computes a
// subgraph. whole says the unit computes the whole graph (whose inputs
// stay resident), else a subgraph of rows rows.
func (cm *CostModel) Setup(d core.DeviceID, rows, edges int64, whole bool) Cost {
	dp := cm.dev(d)
	cs := dp.costs(rows, edges, whole)
	c := cs[len(cs)-1]
	c.Fwd, c.Bwd = dp.t(c.Fwd), dp.t(c.Bwd)
	return c
}

// UnitSize is the size Simulate gives unit u: every node (and edge) of
// the workload for a whole-graph unit; the receptive field of its
// targets over the model's layers for a subgraph unit on a graph model;
// else its targets (with the graph's average degree).
func (cm *CostModel) UnitSize(u core.Unit) (rows, edges int64) {
	w := cm.w
	switch {
	case !u.Subgraph:
		rows, edges = w.Dims.Nodes, w.Dims.Edges
		if rows == 0 {
			rows = int64(len(u.Targets))
		}
	case w.Graph != nil && w.Model != nil && len(w.Model.Graphs) > 0 && w.Model.Config.Layers > 0 && w.Graph.NumDst == w.Graph.NumSrc:
		f := cm.fields.field(u.Targets)
		cm.fields.mu.Lock()
		sized := f.sized
		rows, edges = f.rows, f.edges
		cm.fields.mu.Unlock()
		if !sized {
			mark, _, stamp := cm.scratch()
			rows, edges = receptive(w.Graph, u.Targets, w.Model.Config.Layers, mark, stamp)
			cm.fields.mu.Lock()
			f.rows, f.edges, f.sized = rows, edges, true
			cm.fields.mu.Unlock()
		}
	default:
		rows = int64(len(u.Targets))
		if w.Dims.Nodes > 0 {
			edges = rows * w.Dims.Edges / w.Dims.Nodes
		}
	}
	return max(rows, 1), edges
}

// scratch is this cost model's (not its clones') mark and row arrays
// over the workload graph's nodes, and a fresh stamp for them.
func (cm *CostModel) scratch() (mark, pos []int32, stamp int32) {
	if cm.mark == nil {
		n := cm.w.Graph.NumDst
		cm.mark, cm.pos = make([]int32, n), make([]int32, n)
	}
	cm.stamp++
	return cm.mark, cm.pos, cm.stamp
}

// UnitOuts is each op's output bytes in subgraph unit u of a graph
// model, from a shape pass over the unit's receptive field as the
// executor builds it, layers trimmed to the rows read later (its
// default; engine.Config.NoTrim runs are not priced so); sim's shape
// pass, no arithmetic. nil for a unit computing the whole graph, a
// workload without a graph model, targets KHop would reject, or a model
// the pass cannot run. The ops of a subgraph unit compute different
// hops of its field, so their sizes do not follow the unit's rows alike;
// UnitOps prices each op at its own size (OpProfile.AtOwn).
func (cm *CostModel) UnitOuts(u core.Unit) []int64 {
	out, _ := cm.unitShape(u)
	return out
}

// unitShape is UnitOuts and the edges each op reads (a graph op's hop
// block; 0 for the others).
func (cm *CostModel) unitShape(u core.Unit) (out, opEdges []int64) {
	out, opEdges, _ = cm.unitShapes(u)
	return out, opEdges
}

// unitShapes is unitShape and the unit's memory per op from the same
// shape pass (nil where out is).
func (cm *CostModel) unitShapes(u core.Unit) (out, opEdges []int64, mem *opMem) {
	w := cm.w
	if !u.Subgraph || w.Graph == nil || w.Model == nil || len(w.Model.Graphs) == 0 || w.Model.Config.Layers <= 0 ||
		w.Graph.NumDst != w.Graph.NumSrc || len(w.Model.Ops) != len(w.Ops) {
		return nil, nil, nil
	}
	f := cm.fields.field(u.Targets)
	cm.fields.mu.Lock()
	shaped := f.shaped
	out, opEdges, mem = f.out, f.opEdges, f.mem
	cm.fields.mu.Unlock()
	if shaped {
		return out, opEdges, mem
	}
	// The field's whole view, outermost hop's edges included, as the
	// executor builds it: a pass without them (cheaper, and enough for
	// the output sizes of models reading only hop blocks) priced GCN's
	// and SAGE's micro-batches 2-3% short of the executor's memory.
	mark, pos, stamp := cm.scratch()
	if so, ok := fieldShapes(w.Model, w.Graph, w.FeatureDim, u.Targets, mark, pos, stamp, true); ok && len(so.out) == len(w.Ops) {
		out, opEdges = so.out, so.edges
		mem = &opMem{held: so.held, temp: so.bwdPeak, gin: so.gradIn, gout: so.gradOut, in: so.in}
	}
	cm.fields.mu.Lock()
	f.out, f.opEdges, f.mem, f.shaped = out, opEdges, mem, true
	cm.fields.mu.Unlock()
	return out, opEdges, mem
}

// UnitOps is every op's cost on device d in unit u, with the device's
// Speedup applied, and last the unit's setup (Setup): each op at the
// unit's size (UnitSize), or in a subgraph unit of a graph model at its
// own size (UnitOuts and the edges a graph op reads: OpProfile.AtOwn).
func (cm *CostModel) UnitOps(d core.DeviceID, u core.Unit) []Cost {
	dp := cm.dev(d)
	rows, edges := cm.UnitSize(u)
	out, opEdges, mem := cm.unitShapes(u)
	cs := slices.Clone(dp.unitCosts(rows, edges, !u.Subgraph, out, opEdges, mem))
	for i := range cs {
		cs[i].Fwd, cs[i].Bwd = dp.t(cs[i].Fwd), dp.t(cs[i].Bwd)
	}
	return cs
}

// Transfer is how long bytes take from device a to device b (the link's
// latency and bandwidth; one transfer at a time per directed link).
func (cm *CostModel) Transfer(a, b core.DeviceID, bytes int64) time.Duration {
	return cm.c.LinkBetween(a, b).Time(bytes)
}

// MemTime is how long device d takes to stream bytes through its memory
// (gradient sums, the modelled optimizer step).
func (cm *CostModel) MemTime(d core.DeviceID, bytes int64) time.Duration {
	m := cm.dev(d).model
	if m == nil || m.MemGBps <= 0 {
		return 0
	}
	return time.Duration(math.Round(float64(bytes) / m.MemGBps))
}

// ReduceSum is the time device into (home, or with core.Plan.StepOwners
// the parameters' owner) takes to add a replica's gradients of nb
// parameter bytes into its own (after they arrived: Transfer).
func (cm *CostModel) ReduceSum(into core.DeviceID, nb int64) time.Duration {
	return cm.MemTime(into, 4*nb) // add into the target, clear the source
}

// Step is the optimizer step on home over the whole model:
// StepBytes(home, ParamBytes()).
func (cm *CostModel) Step(home core.DeviceID) time.Duration {
	return cm.StepBytes(home, cm.paramBytes)
}

// StepBytes is the optimizer step on device d over nb parameter bytes
// (with Plan.StepOwners, those d owns): the profile's measured step
// scaled to nb of the model's bytes, else the optimizer's traffic at
// memory bandwidth: read p and g, write p, clear g, and read and write
// each buffer of state (Adam: 8 passes over nb; plain SGD: 4).
func (cm *CostModel) StepBytes(d core.DeviceID, nb int64) time.Duration {
	dp := cm.dev(d)
	if dp.p.Step > 0 {
		step := dp.t(dp.p.Step)
		if dp.p.ParamBytes > 0 {
			// Measured with the profile's optimizer (its state over its
			// parameters): the workload's moves stepPasses per byte.
			measured := stepPasses(float64(dp.p.OptStateBytes) / float64(dp.p.ParamBytes))
			step = time.Duration(math.Round(float64(step) * cm.stepPasses / measured))
		}
		if nb == cm.paramBytes || cm.paramBytes <= 0 {
			return step
		}
		return time.Duration(math.Round(float64(step) * float64(nb) / float64(cm.paramBytes)))
	}
	return cm.MemTime(d, int64(math.Round(cm.stepPasses*float64(nb))))
}

// stepPasses is the bytes an optimizer step moves per parameter byte
// with buffers of state per parameter: read p and g, write p, clear g,
// and read and write each buffer.
func stepPasses(buffers float64) float64 { return 4 + 2*buffers }

// ParamBytes is the model's parameter bytes.
func (cm *CostModel) ParamBytes() int64 { return cm.paramBytes }

// UsedBytes is the parameter bytes the given ops read: what a device
// running them reduces into home and has refreshed after the step.
func (cm *CostModel) UsedBytes(ops []int) int64 {
	var n int64
	for _, o := range ops {
		n += cm.w.Ops[o].Cost.WeightBytes
	}
	if cm.paramBytes > 0 && n > cm.paramBytes {
		n = cm.paramBytes // shared params counted twice
	}
	return n
}

// Resident is the memory a device holds for the whole iteration: on home
// the parameters and gradient accumulators of the whole model and the
// optimizer state; elsewhere the parameters (and accumulators) of used
// bytes, those its ops read (the executor places only those there); and
// the batch inputs where whole-graph units run.
func (cm *CostModel) Resident(home, wholeUnits bool, used int64) int64 {
	if cm.paramBytes > 0 {
		used = min(used, cm.paramBytes) // shared parameters counted twice
	}
	r := 2 * used
	if home {
		r = 2*cm.paramBytes + cm.optBytes
	}
	if wholeUnits {
		r += cm.residentIn
	}
	return r
}

// ResidentOwned is Resident for a plan that steps every parameter on its
// owner (core.Plan.StepOwners): used are the parameter bytes the device's
// ops read, owned those it owns (ParamBytesRead over OpInfo.Params, a
// parameter counted once). Every device, home included, holds the
// parameters its ops read, their gradients and the optimizer state of
// those it owns (the executor drops home's copies of the rest once their
// current values live elsewhere: engine's dropHomeCopies). The optimizer
// state of owned bytes is the model's (OptStateBytes) in proportion.
func (cm *CostModel) ResidentOwned(wholeUnits bool, used, owned int64) int64 {
	r := 2*used + cm.OptStateBytes(owned)
	if wholeUnits {
		r += cm.residentIn
	}
	return r
}

// ResidentInputs are the batch inputs a device keeps resident while it
// runs whole-graph units whose ops there are ops: as the executor does,
// only the inputs they read — the features (any of the model's inputs)
// and each weighted graph's edge weights — when the workload carries its
// model; all of them (the profile's ResidentInputBytes) otherwise.
func (cm *CostModel) ResidentInputs(ops []int) int64 {
	m := cm.w.Model
	if m == nil || len(m.Ops) != len(cm.w.Ops) {
		return cm.residentIn
	}
	feat, weights := m.InputsRead(ops)
	edgeBytes := 4 * cm.w.Dims.Edges
	var r int64
	if feat {
		r += max(cm.residentIn-int64(m.WeightedGraphs())*edgeBytes, 0)
	}
	return r + int64(len(weights))*edgeBytes
}

// OptStateBytes is the optimizer state of nb parameter bytes: the
// model's (the profile's, else the workload's optimizer's buffers or
// Cluster.OptStateFactor × its parameters, Adam's 2 by default) in
// proportion.
func (cm *CostModel) OptStateBytes(nb int64) int64 {
	switch {
	case nb == cm.paramBytes:
		return cm.optBytes
	case cm.paramBytes <= 0:
		return int64(cm.w.StateBuffers()) * nb
	case cm.optBytes == 2*cm.paramBytes:
		return 2 * nb
	}
	return int64(math.Round(float64(cm.optBytes) * float64(nb) / float64(cm.paramBytes)))
}

// ParamBytesRead is the bytes of the distinct parameters the given ops
// read by their OpInfo.Params (a parameter several ops read counted
// once): what a device running them holds and reduces under
// core.Plan.StepOwners. 0 when the workload names no op's parameters.
func (cm *CostModel) ParamBytesRead(ops []int) int64 {
	seen := map[string]bool{}
	var n int64
	for _, o := range ops {
		for _, r := range cm.w.Ops[o].Params {
			if !seen[r.Name] {
				seen[r.Name] = true
				n += r.Bytes
			}
		}
	}
	return n
}

// Capacity is device d's memory (0: unlimited).
func (cm *CostModel) Capacity(d core.DeviceID) int64 {
	if m, ok := cm.c.Device(d); ok {
		return m.MemBytes
	}
	return 0
}
