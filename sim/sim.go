package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

var (
	// ErrDeadlock is wrapped by the error Simulate returns when tasks
	// remain that can never start.
	ErrDeadlock = errors.New("sim: deadlock")
	// ErrInFlight is wrapped by the error Simulate returns when a stage
	// holds more units in flight than its limit.
	ErrInFlight = errors.New("sim: in-flight limit exceeded")
)

// Options adjust a simulation.
type Options struct {
	// InFlightLimit, when set, gives the most units a stage may hold in
	// flight (GraphPipe's k_s; 0: no limit). A stage is the ops a unit runs
	// on one device; a unit is in flight there from the start of its first
	// task on the device to the end of its last backward task there.
	InFlightLimit func(dev core.DeviceID, ops []int) int
	// BlockOnLimit makes a unit wait for a free in-flight slot before its
	// first task on a stage (bounded buffers), instead of reporting the
	// excess as ErrInFlight. A schedule that then cannot proceed is a
	// deadlock.
	BlockOnLimit bool
}

// StageStat describes one stage of the simulated plan.
type StageStat struct {
	Device      core.DeviceID `json:"device"`
	Ops         []int         `json:"ops"`
	Units       int           `json:"units"`
	MaxInFlight int           `json:"max_in_flight"`
	Limit       int           `json:"limit,omitempty"`
}

// Result is the predicted outcome of one iteration of a plan.
type Result struct {
	// Iteration is the time from the first task's start to the last
	// task's end, plus the executor's time outside the tasks where the
	// profile measured it (Profile.IterationOverhead).
	Iteration time.Duration `json:"iteration_ns"`
	// Busy is the time each device computed (some task running, transfers
	// excluded).
	Busy map[core.DeviceID]time.Duration `json:"busy_ns"`
	// Overlap is the time each device computed two or more tasks at once
	// (devices with DeviceModel.StreamOverlap).
	Overlap map[core.DeviceID]time.Duration `json:"overlap_ns,omitempty"`
	// Comm is the time of the transfers into each device (activations,
	// gradients, gradient reductions, parameter broadcasts).
	Comm map[core.DeviceID]time.Duration `json:"comm_ns"`
	// Bubble is the fraction of device time spent not computing over the
	// tasks' span (Iteration less the executor's overhead), 1 − Σ Busy /
	// (devices × span), over the plan's devices.
	Bubble float64 `json:"bubble"`
	// PeakMem is each device's predicted peak: Resident plus the
	// activations of the units in flight there.
	PeakMem  map[core.DeviceID]int64 `json:"peak_mem_bytes"`
	Resident map[core.DeviceID]int64 `json:"resident_bytes"`
	// BytesMoved counts every transfer between devices.
	BytesMoved int64       `json:"bytes_moved"`
	Stages     []StageStat `json:"stages"`
	// OverCap lists devices whose peak exceeds their memory.
	OverCap []core.DeviceID `json:"over_cap,omitempty"`
	// Trace is the simulated schedule (Trace.WriteChrome gives a
	// Perfetto view): task spans per device and stream, transfers on the
	// consumer's stream (synchronous copies) or on "link A->B" rows.
	Trace *core.Trace `json:"-"`
}

// Simulate replays one iteration of plan p over workload w on cluster c
// with the op costs of prof (nil: a roofline model of each device, see
// Roofline), with the executor's semantics: tasks run in plan order per
// (device, stream) and after their Deps; a device computes one task at a
// time (an optimizer step first, then by core.Task.Priority, then the
// earliest ready, ties in plan order); values crossing
// devices are moved over the link between them. See the package
// documentation for the model.
func Simulate(p *core.Plan, w *core.Workload, prof *Profile, c *Cluster) (*Result, error) {
	return SimulateWith(p, w, prof, c, Options{})
}

// SimulateWith is Simulate with options. On ErrDeadlock and ErrInFlight
// the partial or complete result is returned with the error.
func SimulateWith(p *core.Plan, w *core.Workload, prof *Profile, c *Cluster, o Options) (*Result, error) {
	s, err := newSim(p, w, prof, c, o)
	if err != nil {
		return nil, err
	}
	return s.run()
}

// devProf is the profile a device uses, matched to the workload's ops.
type devProf struct {
	p     *Profile
	idx   []int   // workload op -> profile op
	scale float64 // time factor (1/Speedup)
	model *DeviceModel
	cache map[[3]int64][]Cost
	// share holds what costs computed for every device with the profile,
	// in this cost model and its clones.
	share *costShare
	// walk: the profile has per-op backward gradients (Point.GradIn,
	// GradOut), so backward tasks walk their ops (WalkBackward).
	walk bool
}

// costs are the ops' costs for a unit of the given size, and last the
// unit's overhead (a subgraph unit's, or with whole a whole-graph unit's).
func (dp *devProf) costs(rows, edges int64, whole bool) []Cost {
	k := [3]int64{rows, edges, 0}
	if whole {
		k[2] = 1
	}
	if c, ok := dp.cache[k]; ok {
		return c
	}
	if c := dp.share.get(k); c != nil {
		dp.cache[k] = c
		return c
	}
	c := make([]Cost, len(dp.idx)+1)
	for o, j := range dp.idx {
		c[o] = dp.p.Ops[j].At(rows, edges)
	}
	c[len(dp.idx)] = dp.p.SetupFor(rows, edges, whole) // the per-unit overhead last
	c = dp.share.put(k, c)
	dp.cache[k] = c
	return c
}

// costShare keeps devProf.costs' answers for one profile across the
// devices that use it and across a cost model's clones (a scheduler's
// search simulates each candidate on a clone: without it every
// simulation interpolated every op again). The slices are read-only.
// It starts over past max entries, so it holds at most about
// shareCosts costs.
type costShare struct {
	mu  sync.Mutex
	m   map[[3]int64][]Cost
	max int
}

// shareCosts bounds a costShare: 2^19 costs, 28 MiB.
const shareCosts = 1 << 19

func newCostShare(ops int) *costShare {
	return &costShare{m: map[[3]int64][]Cost{}, max: max(8, shareCosts/(ops+1))}
}

func (sh *costShare) get(k [3]int64) []Cost {
	if sh == nil {
		return nil
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.m[k]
}

// put keeps c at k unless another caller's answer is there already
// (two clones may compute one size at once), and returns the one kept.
func (sh *costShare) put(k [3]int64, c []Cost) []Cost {
	if sh == nil {
		return c
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if kept, ok := sh.m[k]; ok {
		return kept
	}
	if len(sh.m) >= sh.max {
		clear(sh.m)
	}
	sh.m[k] = c
	return c
}

// unitCosts is costs for a unit whose ops output outs bytes and read
// opEdges edges (nil: not known, the unit's size prices every op): each
// op at its own size (OpProfile.AtOwn), the setup at the unit's, and
// their memory mem's when set (the unit's own shape pass). The result is
// fresh.
func (dp *devProf) unitCosts(rows, edges int64, whole bool, outs, opEdges []int64, mem *opMem) []Cost {
	if outs == nil {
		return dp.costs(rows, edges, whole)
	}
	c := make([]Cost, len(dp.idx)+1)
	for o, j := range dp.idx {
		e := int64(-1) // not known
		if o < len(opEdges) {
			e = opEdges[o]
		}
		c[o] = dp.p.Ops[j].AtOwn(outs[o], e, rows, edges)
	}
	c[len(dp.idx)] = dp.p.SetupFor(rows, edges, whole)
	mem.apply(c)
	return c
}

func (dp *devProf) t(d time.Duration) time.Duration {
	return time.Duration(math.Round(float64(d) * dp.scale))
}

type xfer struct {
	op  int
	src core.DeviceID
}

type ukey struct {
	u int
	d core.DeviceID
}

type unitState struct {
	started, bwdTotal, bwdStarted, bwdDone int
	live                                   int64
	// retained are gradients the unit's backward left on the device for
	// values other devices produced, until those fetch them.
	retained int64
	stage    *StageStat
	inFlight bool
}

type evKind uint8

const (
	evReady evKind = iota
	evFinish
	evWake
	evCompute   // a task's compute joins the shared host cores
	evDone      // a task's compute ends on the shared host cores
	evFlow      // a transfer through ports may have ended (flows.go)
	evBroadcast // a step's refresh of the other replicas starts
	evFetch     // a prefetching reduction's gradients start moving
)

// At one instant: ends first (freeing memory, readying successors), then
// readies, then changes of the shared-core set, then wake-ups.
var rank = [...]int{evDone: 0, evFinish: 1, evFlow: 1, evBroadcast: 1, evFetch: 2, evReady: 2, evCompute: 3, evWake: 4}

type event struct {
	t       time.Duration
	seq     int
	kind    evKind
	task    int
	dev     int // evWake: the device's index (sim.devs)
	version int
}

type eventQ []event

func (q eventQ) Len() int { return len(q) }
func (q eventQ) Less(i, j int) bool {
	if q[i].t != q[j].t {
		return q[i].t < q[j].t
	}
	// Finishes before readies before wake-ups at one instant, so memory is
	// freed and successors are ready before a device picks its next task.
	if q[i].kind != q[j].kind {
		return rank[q[i].kind] < rank[q[j].kind]
	}
	return q[i].seq < q[j].seq
}
func (q eventQ) Swap(i, j int) { q[i], q[j] = q[j], q[i] }

// push adds e: container/heap's Push, typed, so that an event is not
// boxed in an interface (an allocation per event). Less is a total
// order (seq breaks ties), so the events come out as they did.
func (q *eventQ) push(e event) {
	*q = append(*q, e)
	h := *q
	for j := len(h) - 1; j > 0; {
		i := (j - 1) / 2
		if !h.Less(j, i) {
			break
		}
		h.Swap(i, j)
		j = i
	}
}

// pop removes the first event and returns it (container/heap's Pop).
func (q *eventQ) pop() event {
	h := *q
	n := len(h) - 1
	h.Swap(0, n)
	for i := 0; ; {
		j := 2*i + 1
		if j >= n {
			break
		}
		if j2 := j + 1; j2 < n && h.Less(j2, j) {
			j = j2
		}
		if !h.Less(j, i) {
			break
		}
		h.Swap(i, j)
		i = j
	}
	e := h[n]
	*q = h[:n]
	return e
}

type sim struct {
	p    *core.Plan
	w    *core.Workload
	c    *Cluster
	o    Options
	devs []core.DeviceID
	prof map[core.DeviceID]*devProf
	cm   *CostModel
	nOps int
	// ownMark[o] == ownStamp: op o is the task's becomeReady checks.
	ownMark  []int32
	ownStamp int32

	consumers [][]int
	needGrad  []bool
	// nextOnStream is each task's successor on its (device, stream), -1
	// for a stream's last; handoffs: some device's profile has executor
	// handoffs that apply (executorProf).
	nextOnStream []int
	handoffs     bool
	opDev        [][]core.DeviceID
	fwdOf        [][]int
	bwdOf        [][]int
	rows         []int64
	edges        []int64
	whole        []bool
	// outs[u] and opEdges[u] are each op's output bytes and the edges
	// it reads in subgraph unit u (CostModel.unitShape; nil: priced at
	// the unit's size), and ucost
	// the costs they give, per device profile and unit.
	outs, opEdges [][]int64
	// mems[u] is subgraph unit u's memory per op from the same shape
	// pass (nil: the profile's at each op's size).
	mems  []*opMem
	ucost map[*devProf][][]Cost

	preds, succ [][]int
	needIn      [][]xfer // forward tasks: values from other devices
	needGr      [][]xfer // backward tasks: gradients from other devices
	gradSrc     map[[3]int]int
	// usedBytes[d] are the parameter bytes the plan's ops on d read: the
	// executor reduces and refreshes only those on a replica.
	usedBytes map[core.DeviceID]int64
	// With Plan.StepOwners (owners): readBytes[d] and ownBytes[d] are the
	// bytes of the parameters d's forward tasks read and of those d owns
	// (core.Plan.ParamOwners).
	owners              bool
	readBytes, ownBytes map[core.DeviceID]int64
	// stepBytes[i] is what owner-step Step task i steps (its Params, or
	// all its device owns), and stepShare[i][e] the bytes of those e's
	// ops read: what its refresh sends e.
	stepBytes map[int]int64
	stepShare map[int]map[core.DeviceID]int64
	// addAfter[i] lists, for owner-step ReduceGrads task i, the owner's
	// backward tasks reading the parameters it moves: the executor moves
	// the gradients once the task's dependencies are done but adds them
	// only after those (its deterministic sum order).
	addAfter map[int][]int
	// moves[i] is the bytes owner-step ReduceGrads task i moves, and
	// writers[i] its source's backward tasks writing those gradients
	// (a prefetch waits for them, as well as for the task's Deps: a valid
	// plan may order them before it through a stream only).
	moves   map[int]int64
	writers map[int][]int

	// dynamic state
	q       eventQ
	seq     int
	left    []int
	readyAt []time.Duration
	addLeft []int   // addAfter tasks not finished yet
	addSucc [][]int // reductions waiting for task i to add
	parked  []bool  // transfer done, waiting on addLeft
	staged  []int64 // bytes a parked reduction holds on its owner
	// By device index (devs, devIndex; taskDev: a task's): the main
	// loop dispatches every device at every event time, so these are
	// slices, not maps keyed by the device's name.
	queued     [][]int
	busyUntil  []time.Duration
	running    []bool
	overlap    []bool // the device's streams run at once (StreamOverlap)
	taskDev    []int
	taskUnit   []*unitState // a forward's or backward's unit on its device (units)
	finished   []bool
	finishAt   []time.Duration
	started    []bool
	nDone      int
	linkFree   map[[2]core.DeviceID]time.Duration
	arrival    map[[3]int]time.Duration // (unit, op, device index) -> value there
	present    map[[3]int]bool          // (unit, op, device index) -> value held there
	inflight   map[*StageStat]int
	gArrival   map[[3]int]time.Duration // (unit, op, device index of source) -> gradient at the producer
	units      map[ukey]*unitState
	stages     map[string]*StageStat
	stageOrder []*StageStat
	mem, peak  map[core.DeviceID]int64
	res        *Result
	devIndex   map[core.DeviceID]int
	err        error
	runs       []*taskRun
	fluid      bool  // processor sharing (HostCores or StreamOverlap)
	active     []int // tasks computing under processor sharing
	lastShare  time.Duration
	version    int

	// Transfers through ports (flows.go): the flows in progress, the
	// ports' bandwidth (bytes per ns) by index, and scratch for the
	// sharing; inTransit[{0 activation | 1 gradient, unit, op, device
	// index}] lists the tasks waiting for a value still in a flow, and
	// waitN[i] how many task i waits for.
	flows       []*flow
	portIdx     map[portKey]int
	portCap     []float64
	capScratch  []float64
	userScratch []int
	fixScratch  []bool
	flowVersion int
	lastFlow    time.Duration
	inTransit   map[[4]int][]int
	flowOf      map[[4]int]*flow // the flow carrying an inTransit value
	waitN       []int
	// Prefetching reductions (prefetches): depsLeft[i] counts task i's
	// own Deps not done, fetchOn[j] the reductions task j's end lets
	// fetch, fetchedAt[i] when i's gradients are on the owner (-1: not
	// yet), fetchWait[i] whether i's turn came before them.
	depsLeft  []int
	fetchOn   [][]int
	fetchedAt []time.Duration
	fetchWait []bool
	fetchFlow []*flow // the flow carrying task i's prefetch (DemandFirst)
}

// SimulateModel is SimulateWith on the workload, profile and cluster of
// the cost model cm, reusing its priced profiles (a roofline profile is
// built once per NewCostModel, not per simulation). cm's caches are not
// safe for concurrent use: give each goroutine its own cm.Clone().
func SimulateModel(p *core.Plan, cm *CostModel, o Options) (*Result, error) {
	if cm == nil {
		return nil, fmt.Errorf("sim: nil cost model")
	}
	s, err := newSimWith(p, cm.w, cm.c, o, cm)
	if err != nil {
		return nil, err
	}
	return s.run()
}

func newSim(p *core.Plan, w *core.Workload, prof *Profile, c *Cluster, o Options) (*sim, error) {
	if p == nil || w == nil || c == nil {
		return nil, fmt.Errorf("sim: nil plan, workload or cluster")
	}
	devs := p.Devices()
	if len(devs) == 0 {
		return nil, fmt.Errorf("sim: the plan has no tasks")
	}
	cm, err := newCostModel(w, prof, c, devs)
	if err != nil {
		return nil, err
	}
	return newSimWith(p, w, c, o, cm)
}

func newSimWith(p *core.Plan, w *core.Workload, c *Cluster, o Options, cm *CostModel) (*sim, error) {
	if p == nil || w == nil || c == nil {
		return nil, fmt.Errorf("sim: nil plan, workload or cluster")
	}
	s := &sim{p: p, w: w, c: c, o: o, nOps: len(w.Ops), prof: map[core.DeviceID]*devProf{}, devIndex: map[core.DeviceID]int{}}
	s.devs = p.Devices()
	if len(s.devs) == 0 {
		return nil, fmt.Errorf("sim: the plan has no tasks")
	}
	for i, d := range s.devs {
		s.devIndex[d] = i
	}
	for _, d := range s.devs {
		if _, ok := cm.prof[d]; !ok {
			if _, err := newCostModel(w, nil, c, []core.DeviceID{d}); err != nil {
				return nil, err // the cluster lacks the device: say so
			}
			return nil, fmt.Errorf("sim: the cost model does not price device %s", d)
		}
	}
	s.cm, s.prof = cm, cm.prof
	for _, d := range s.devs {
		if pp := s.executorProf(d); pp != nil && (pp.Handoff > 0 || pp.HandoffBusy > 0) {
			s.handoffs = true
		}
	}
	// The parameter bytes the plan's ops on each device read.
	s.usedBytes = map[core.DeviceID]int64{}
	opsOn := map[core.DeviceID][]int{}
	seenOp := map[core.DeviceID]map[int]bool{}
	for _, t := range p.Tasks {
		if t.Kind != core.TaskForward {
			continue
		}
		if seenOp[t.Device] == nil {
			seenOp[t.Device] = map[int]bool{}
		}
		for _, o := range t.OpIndices() {
			if o >= 0 && o < len(w.Ops) && !seenOp[t.Device][o] {
				seenOp[t.Device][o] = true
				opsOn[t.Device] = append(opsOn[t.Device], o)
			}
		}
	}
	for d, ops := range opsOn {
		s.usedBytes[d] = cm.UsedBytes(ops)
	}
	if p.StepOwners {
		if err := s.ownerBytes(); err != nil {
			return nil, err
		}
	}
	// Op graph.
	s.consumers = make([][]int, s.nOps)
	for i, op := range w.Ops {
		for _, d := range op.Deps {
			if d < 0 || d >= s.nOps {
				return nil, fmt.Errorf("sim: op %d (%s) depends on op %d, outside the model's %d ops", i, op.Name, d, s.nOps)
			}
			s.consumers[d] = append(s.consumers[d], i)
		}
	}
	s.needGrad = w.OpsNeedGrad()
	// Units: sizes, and where each op of each unit runs.
	nu := len(p.Units)
	s.rows, s.edges, s.whole = make([]int64, nu), make([]int64, nu), make([]bool, nu)
	for u, un := range p.Units {
		s.whole[u] = !un.Subgraph
		s.rows[u], s.edges[u] = s.cm.UnitSize(un)
	}
	s.outs, s.opEdges, s.mems, s.ucost = make([][]int64, nu), make([][]int64, nu), make([]*opMem, nu), map[*devProf][][]Cost{}
	for u, un := range p.Units {
		s.outs[u], s.opEdges[u], s.mems[u] = s.cm.unitShapes(un)
	}
	s.opDev = make([][]core.DeviceID, nu)
	s.fwdOf, s.bwdOf = make([][]int, nu), make([][]int, nu)
	for u := range nu {
		s.opDev[u] = make([]core.DeviceID, s.nOps)
		s.fwdOf[u], s.bwdOf[u] = make([]int, s.nOps), make([]int, s.nOps)
		for o := range s.nOps {
			s.fwdOf[u][o], s.bwdOf[u][o] = -1, -1
		}
	}
	n := len(p.Tasks)
	s.units = map[ukey]*unitState{}
	s.taskUnit = make([]*unitState, n)
	for i, t := range p.Tasks {
		if t.ID != i {
			return nil, fmt.Errorf("sim: task %d has id %d; ids must equal positions", i, t.ID)
		}
		switch t.Kind {
		case core.TaskForward, core.TaskBackward:
			if t.Unit < 0 || t.Unit >= nu {
				return nil, fmt.Errorf("sim: task %d (%s) names unit %d of %d", i, t.Kind, t.Unit, nu)
			}
			ops := t.OpIndices()
			if len(ops) == 0 {
				return nil, fmt.Errorf("sim: task %d (%s) runs no ops", i, t.Kind)
			}
			for _, o := range ops {
				if o < 0 || o >= s.nOps {
					return nil, fmt.Errorf("sim: task %d (%s) runs op %d, outside the model's %d ops", i, t.Kind, o, s.nOps)
				}
				if t.Kind == core.TaskForward {
					s.opDev[t.Unit][o], s.fwdOf[t.Unit][o] = t.Device, i
				} else {
					s.bwdOf[t.Unit][o] = i
				}
			}
			k := ukey{t.Unit, t.Device}
			us := s.units[k]
			if us == nil {
				us = &unitState{}
				s.units[k] = us
			}
			s.taskUnit[i] = us
			if t.Kind == core.TaskBackward {
				us.bwdTotal++
			}
		case core.TaskReduceGrads:
			if _, ok := c.Device(t.From); !ok {
				return nil, fmt.Errorf("sim: task %d reduces gradients from %s, which cluster %q does not have", i, t.From, c.Name)
			}
		case core.TaskStep:
		default:
			return nil, fmt.Errorf("sim: task %d has unknown kind %d", i, t.Kind)
		}
		for _, d := range t.Deps {
			if d < 0 || d >= n || d == i {
				return nil, fmt.Errorf("sim: task %d depends on task %d, which does not exist", i, d)
			}
		}
	}
	// Stages: the ops each unit runs on each device.
	s.stages = map[string]*StageStat{}
	keys := make([]ukey, 0, len(s.units))
	for k := range s.units {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].d != keys[j].d {
			return keys[i].d < keys[j].d
		}
		return keys[i].u < keys[j].u
	})
	for _, k := range keys {
		var ops []int
		for o, d := range s.opDev[k.u] {
			if d == k.d && s.fwdOf[k.u][o] >= 0 {
				ops = append(ops, o)
			}
		}
		name := fmt.Sprintf("%s %v", k.d, ops)
		st := s.stages[name]
		if st == nil {
			st = &StageStat{Device: k.d, Ops: ops}
			if o.InFlightLimit != nil {
				st.Limit = o.InFlightLimit(k.d, ops)
			}
			s.stages[name] = st
			s.stageOrder = append(s.stageOrder, st)
		}
		st.Units++
		s.units[k].stage = st
	}
	// Dependencies: Deps plus the stream predecessor.
	s.preds, s.succ = make([][]int, n), make([][]int, n)
	type sk struct {
		d core.DeviceID
		s int
	}
	last := map[sk]int{}
	s.nextOnStream = make([]int, n)
	for i, t := range p.Tasks {
		s.nextOnStream[i] = -1
		s.preds[i] = append(s.preds[i], t.Deps...)
		k := sk{t.Device, t.Stream}
		if j, ok := last[k]; ok {
			s.preds[i] = append(s.preds[i], j)
			s.nextOnStream[j] = i
		}
		last[k] = i
		for _, d := range s.preds[i] {
			s.succ[d] = append(s.succ[d], i)
		}
	}
	// Transfers each task needs.
	s.needIn, s.needGr = make([][]xfer, n), make([][]xfer, n)
	s.gradSrc = map[[3]int]int{}
	for i, t := range p.Tasks {
		seen := map[xfer]bool{}
		switch t.Kind {
		case core.TaskForward:
			for _, o := range t.OpIndices() {
				for _, q := range w.Ops[o].Deps {
					if src := s.opDev[t.Unit][q]; src != "" && src != t.Device && !seen[xfer{q, src}] {
						seen[xfer{q, src}] = true
						s.needIn[i] = append(s.needIn[i], xfer{q, src})
					}
				}
			}
		case core.TaskBackward:
			for _, o := range t.OpIndices() {
				if !s.needGrad[o] {
					continue
				}
				for _, cons := range s.consumers[o] {
					if src := s.opDev[t.Unit][cons]; src != "" && src != t.Device && !seen[xfer{o, src}] {
						seen[xfer{o, src}] = true
						s.needGr[i] = append(s.needGr[i], xfer{o, src})
					}
				}
			}
		}
	}
	// Backward tasks whose end releases a gradient to another device
	// (prefetch mode): count them per (unit, op, source device).
	for u := range nu {
		for o := range s.nOps {
			if !s.needGrad[o] {
				continue
			}
			seen := map[int]bool{}
			for _, cons := range s.consumers[o] {
				b := s.bwdOf[u][cons]
				if b < 0 || s.opDev[u][cons] == s.opDev[u][o] || seen[b] {
					continue
				}
				seen[b] = true
				s.gradSrc[[3]int{u, o, s.devIndex[s.opDev[u][cons]]}]++
			}
		}
	}
	return s, nil
}

// ownerBytes fills readBytes, ownBytes, stepBytes and stepShare for a
// StepOwners plan from the workload's OpInfo.Params, each parameter
// counted once.
func (s *sim) ownerBytes() error {
	size := map[string]int64{}
	for _, op := range s.w.Ops {
		for _, r := range op.Params {
			size[r.Name] = r.Bytes
		}
	}
	if len(size) == 0 {
		return fmt.Errorf("sim: the plan steps parameters on their owners (step_owners) but the workload names no op's parameters")
	}
	opParams := s.w.OpParams()
	owner := s.p.ParamOwners(opParams)
	s.owners = true
	s.readBytes, s.ownBytes = map[core.DeviceID]int64{}, map[core.DeviceID]int64{}
	for name, d := range owner {
		s.ownBytes[d] += size[name]
	}
	readers := core.ParamReaders(s.p.Tasks, opParams)
	for d, ps := range readers {
		for name := range ps {
			s.readBytes[d] += size[name]
		}
	}
	bwdOn := map[core.DeviceID][]int{}
	for i, t := range s.p.Tasks {
		if t.Kind == core.TaskBackward {
			bwdOn[t.Device] = append(bwdOn[t.Device], i)
		}
	}
	// Each step's bytes and refreshes: its Params, or all its device owns.
	ownedBy := map[core.DeviceID][]string{}
	for name, d := range owner {
		ownedBy[d] = append(ownedBy[d], name)
	}
	readersOf := map[string][]core.DeviceID{}
	for e, ps := range readers {
		for name := range ps {
			readersOf[name] = append(readersOf[name], e)
		}
	}
	s.stepBytes, s.stepShare = map[int]int64{}, map[int]map[core.DeviceID]int64{}
	for i, t := range s.p.Tasks {
		if t.Kind != core.TaskStep {
			continue
		}
		names := t.Params
		if len(names) == 0 {
			names = ownedBy[t.Device]
		}
		s.stepShare[i] = map[core.DeviceID]int64{}
		for _, name := range names {
			s.stepBytes[i] += size[name]
			for _, e := range readersOf[name] {
				if e != t.Device {
					s.stepShare[i][e] += size[name]
				}
			}
		}
	}
	s.addAfter, s.moves, s.writers = map[int][]int{}, map[int]int64{}, map[int][]int{}
	index := map[core.DeviceID]core.ReaderIndex{}
	indexOf := func(d core.DeviceID) core.ReaderIndex {
		x, ok := index[d]
		if !ok {
			x = core.IndexReaders(s.p.Tasks, bwdOn[d], opParams)
			index[d] = x
		}
		return x
	}
	for i, t := range s.p.Tasks {
		if t.Kind != core.TaskReduceGrads {
			continue
		}
		moved := core.MovedParams(t, readers, owner)
		for name := range moved {
			s.moves[i] += size[name]
		}
		s.addAfter[i] = indexOf(t.Device).Reading(moved)
		s.writers[i] = indexOf(t.From).Reading(moved)
	}
	return nil
}

// reduceBytes is what ReduceGrads task i moves: the gradients of the
// parameters its source reads (into home), or with StepOwners of those
// it reads and the task's device owns (or names, core.MovedParams).
func (s *sim) reduceBytes(i int) int64 {
	t := s.p.Tasks[i]
	if s.owners {
		return s.moves[i]
	}
	return s.usedBytes[t.From]
}

// receptive counts the nodes within k hops of seeds (toward them, as a
// k-layer GNN reads) and the edges among them, marking visited nodes with
// stamp in mark.
func receptive(g *core.Graph, seeds []int32, k int, mark []int32, stamp int32) (rows, edges int64) {
	nodes := make([]int32, 0, len(seeds)*4)
	for _, v := range seeds {
		if v >= 0 && int(v) < g.NumDst && mark[v] != stamp {
			mark[v] = stamp
			nodes = append(nodes, v)
		}
	}
	nodes, _ = growHops(g, nodes, k, mark, stamp, nil)
	for _, v := range nodes {
		for _, x := range g.Indices[g.Offsets[v]:g.Offsets[v+1]] {
			if mark[x] == stamp {
				edges++
			}
		}
	}
	return int64(len(nodes)), edges
}

// growHops adds to nodes (the seeds, marked with stamp in mark) the nodes
// within k hops of them, toward them (in-neighbours, as a k-layer GNN
// reads), hop by hop, marking each and telling added (when set) its row;
// it returns the nodes and their count after the seeds and each hop
// (core.Subgraph.HopEnds).
func growHops(g *core.Graph, nodes []int32, k int, mark []int32, stamp int32, added func(v int32, row int)) ([]int32, []int) {
	ends := []int{len(nodes)}
	frontier := nodes
	for hop := 0; hop < k; hop++ {
		start := len(nodes)
		for _, v := range frontier {
			for _, x := range g.Indices[g.Offsets[v]:g.Offsets[v+1]] {
				if mark[x] != stamp {
					mark[x] = stamp
					if added != nil {
						added(x, len(nodes))
					}
					nodes = append(nodes, x)
				}
			}
		}
		frontier = nodes[start:]
		ends = append(ends, len(nodes))
	}
	return nodes, ends
}

// fieldShape is the receptive field of seeds over k hops as the
// executor's view of a subgraph unit (core.Graph.KHop's induced graph,
// without edge ids): rows in hop order with hopEnds as core.Subgraph's,
// each row's in-edges from within the field in g's order. Unless full,
// the rows k hops out get no edges: a model whose layers read one graph
// trimmed by hop (core.Env.HopRows) reads only the edges into rows
// nearer, and those are most of the field's edges. mark (with stamp)
// flags the field's nodes and pos keeps their rows; both are g's size and
// reused across calls, where KHop allocates an index per call. Seeds out
// of range or listed twice, which KHop rejects, give false.
func fieldShape(g *core.Graph, seeds []int32, k int, mark, pos []int32, stamp int32, full bool) (*core.Graph, []int, bool) {
	nodes := make([]int32, 0, len(seeds)*4)
	for _, v := range seeds {
		if v < 0 || int(v) >= g.NumDst || mark[v] == stamp {
			return nil, nil, false // as KHop rejects them
		}
		mark[v], pos[v] = stamp, int32(len(nodes))
		nodes = append(nodes, v)
	}
	nodes, ends := growHops(g, nodes, k, mark, stamp, func(v int32, row int) { pos[v] = int32(row) })
	rows := len(nodes)
	if !full && k > 0 {
		rows = ends[k-1]
	}
	offs := make([]int64, len(nodes)+1)
	var idx []int32
	for i, v := range nodes[:rows] {
		for _, x := range g.Indices[g.Offsets[v]:g.Offsets[v+1]] {
			if mark[x] == stamp {
				idx = append(idx, pos[x])
			}
		}
		offs[i+1] = int64(len(idx))
	}
	for i := rows; i < len(nodes); i++ {
		offs[i+1] = offs[i]
	}
	return &core.Graph{NumDst: len(nodes), NumSrc: len(nodes), Offsets: offs, Indices: idx}, ends, true
}

func (s *sim) push(e event) {
	e.seq = s.seq
	s.seq++
	s.q.push(e)
}

func (s *sim) run() (*Result, error) {
	n := len(s.p.Tasks)
	s.res = &Result{Busy: map[core.DeviceID]time.Duration{}, Comm: map[core.DeviceID]time.Duration{}, Overlap: map[core.DeviceID]time.Duration{},
		PeakMem: map[core.DeviceID]int64{}, Resident: map[core.DeviceID]int64{},
		Trace: &core.Trace{PeakMem: map[core.DeviceID]int64{}}}
	s.left = make([]int, n)
	s.readyAt = make([]time.Duration, n)
	s.finished, s.started = make([]bool, n), make([]bool, n)
	s.finishAt = make([]time.Duration, n)
	s.runs = make([]*taskRun, n)
	s.fluid = s.c.HostCores > 0
	for _, dp := range s.prof {
		s.fluid = s.fluid || dp.model.StreamOverlap > 0
	}
	nd := len(s.devs)
	s.queued, s.busyUntil, s.running, s.overlap = make([][]int, nd), make([]time.Duration, nd), make([]bool, nd), make([]bool, nd)
	for di, d := range s.devs {
		s.overlap[di] = s.prof[d].model.StreamOverlap > 0
	}
	s.taskDev = make([]int, n)
	for i, t := range s.p.Tasks {
		s.taskDev[i] = s.devIndex[t.Device]
	}
	s.linkFree = map[[2]core.DeviceID]time.Duration{}
	s.arrival, s.gArrival = map[[3]int]time.Duration{}, map[[3]int]time.Duration{}
	s.inTransit, s.waitN, s.flowOf = map[[4]int][]int{}, make([]int, n), map[[4]int]*flow{}
	// Prefetching reductions: their own Deps left, and who they wait on.
	s.depsLeft, s.fetchedAt, s.fetchWait = make([]int, n), make([]time.Duration, n), make([]bool, n)
	s.fetchFlow = make([]*flow, n)
	s.fetchOn = make([][]int, n)
	for i := range n {
		s.fetchedAt[i] = -1
		if !s.prefetches(i) {
			continue
		}
		seen := map[int]bool{}
		for _, d := range append(slices.Clone(s.p.Tasks[i].Deps), s.writers[i]...) {
			if !seen[d] {
				seen[d] = true
				s.depsLeft[i]++
				s.fetchOn[d] = append(s.fetchOn[d], i)
			}
		}
	}
	s.present, s.inflight = map[[3]int]bool{}, map[*StageStat]int{}
	s.mem, s.peak = map[core.DeviceID]int64{}, map[core.DeviceID]int64{}
	// Resident memory: on home every parameter, its gradient accumulator
	// and the optimizer state; elsewhere the parameters (and
	// accumulators) the device's ops read; batch inputs where whole-graph
	// units run. With StepOwners, home like every device keeps only the
	// parameters (and accumulators) its ops read, and each device the
	// optimizer state of those it owns (CostModel.ResidentOwned).
	wholeOn := map[core.DeviceID]bool{}
	for k := range s.units {
		if s.whole[k.u] {
			wholeOn[k.d] = true
		}
	}
	opsOn := map[core.DeviceID][]int{}
	for _, t := range s.p.Tasks {
		if t.Kind == core.TaskForward {
			opsOn[t.Device] = append(opsOn[t.Device], t.OpIndices()...)
		}
	}
	for _, d := range s.devs {
		seen, ops := map[int]bool{}, []int(nil)
		for _, o := range opsOn[d] {
			if !seen[o] {
				seen[o] = true
				ops = append(ops, o)
			}
		}
		r := s.cm.Resident(d == s.p.Home, false, s.cm.UsedBytes(ops))
		if s.owners {
			r = s.cm.ResidentOwned(false, s.readBytes[d], s.ownBytes[d])
		}
		if wholeOn[d] {
			r += s.cm.ResidentInputs(ops)
		}
		s.res.Resident[d] = r
		s.alloc(d, r)
	}
	s.addLeft, s.addSucc, s.parked = make([]int, n), make([][]int, n), make([]bool, n)
	s.staged = make([]int64, n)
	for i := range n { // in task order: wakeups in plan order
		after := s.addAfter[i]
		s.addLeft[i] = len(after)
		for _, b := range after {
			s.addSucc[b] = append(s.addSucc[b], i)
		}
	}
	for i := range n {
		if s.prefetches(i) && s.depsLeft[i] == 0 {
			s.fetch(i, 0)
		}
	}
	for i := range n {
		s.left[i] = len(s.preds[i])
		if s.left[i] == 0 {
			s.becomeReady(i, 0)
		}
	}
	var now time.Duration
	for s.err == nil {
		for di := range s.devs {
			s.dispatch(di, now)
		}
		if s.err != nil || s.q.Len() == 0 {
			break
		}
		now = s.q[0].t
		for s.q.Len() > 0 && s.q[0].t == now && s.err == nil {
			e := s.q.pop()
			switch e.kind {
			case evReady:
				di := s.taskDev[e.task]
				s.queued[di] = append(s.queued[di], e.task)
			case evFinish:
				s.finish(e.task, now)
			case evWake:
				if s.busyUntil[e.dev] <= now {
					s.running[e.dev] = false
				}
			case evCompute:
				s.joinCompute(e.task, now)
			case evDone:
				s.leaveCompute(e.task, e.version, now)
			case evFlow:
				s.flowsDone(e.version, now)
			case evBroadcast:
				s.broadcast(e.task, now)
			case evFetch:
				s.fetch(e.task, now)
			}
		}
	}
	if s.err != nil {
		return nil, s.err
	}
	s.summarise()
	if s.nDone < n {
		return s.res, s.deadlock(now)
	}
	for _, st := range s.stageOrder {
		if st.Limit > 0 && st.MaxInFlight > st.Limit {
			return s.res, fmt.Errorf("%w: stage %s ops %v held %d units in flight, limit %d", ErrInFlight, st.Device, st.Ops, st.MaxInFlight, st.Limit)
		}
	}
	return s.res, nil
}

func (s *sim) alloc(d core.DeviceID, n int64) {
	s.mem[d] += n
	if s.mem[d] > s.peak[d] {
		s.peak[d] = s.mem[d]
	}
}

func (s *sim) describe(i int) string {
	t := s.p.Tasks[i]
	switch t.Kind {
	case core.TaskForward, core.TaskBackward:
		return fmt.Sprintf("task %d (%s of unit %d, %s, on %s stream %d)", i, t.Kind, t.Unit, opSpan(t.OpIndices()), t.Device, t.Stream)
	case core.TaskReduceGrads:
		return fmt.Sprintf("task %d (reduce grads from %s into %s stream %d)", i, t.From, t.Device, t.Stream)
	}
	return fmt.Sprintf("task %d (%s on %s stream %d)", i, t.Kind, t.Device, t.Stream)
}

// own marks ops (a task's) and returns their membership test, valid
// until the next call.
func (s *sim) own(ops []int) func(o int) bool {
	if s.ownMark == nil {
		s.ownMark = make([]int32, s.nOps)
	}
	s.ownStamp++
	st := s.ownStamp
	for _, o := range ops {
		s.ownMark[o] = st
	}
	return func(o int) bool { return s.ownMark[o] == st }
}

// becomeReady is called when task i's predecessors are done: it checks
// that the values the task reads exist and, with prefetching transfers,
// waits for them to arrive.
func (s *sim) becomeReady(i int, now time.Duration) {
	t := s.p.Tasks[i]
	at := now
	s.waitN[i]++ // until the values it reads are accounted for below
	switch t.Kind {
	case core.TaskForward:
		own := s.own(t.OpIndices())
		for _, o := range t.OpIndices() {
			for _, q := range s.w.Ops[o].Deps {
				if own(q) {
					continue
				}
				f := s.fwdOf[t.Unit][q]
				if f < 0 || !s.finished[f] {
					s.err = fmt.Errorf("sim: %s reads the output of op %d (%s) of unit %d, which %s: the plan lacks a dependency",
						s.describe(i), q, s.w.Ops[q].Name, t.Unit, s.notDone(f))
					return
				}
			}
		}
		if !s.c.SyncTransfers {
			for _, x := range s.needIn[i] {
				k := [3]int{t.Unit, x.op, s.devIndex[t.Device]}
				at = max(at, s.arrival[k])
				s.await([4]int{0, k[0], k[1], k[2]}, i, now)
			}
		}
	case core.TaskBackward:
		own := s.own(t.OpIndices())
		for _, o := range t.OpIndices() {
			if f := s.fwdOf[t.Unit][o]; f < 0 || !s.finished[f] {
				s.err = fmt.Errorf("sim: %s runs op %d (%s) backward before its forward (task %d) has finished: the plan lacks a dependency",
					s.describe(i), o, s.w.Ops[o].Name, f)
				return
			}
			if !s.needGrad[o] {
				continue
			}
			for _, cons := range s.consumers[o] {
				if own(cons) {
					continue
				}
				b := s.bwdOf[t.Unit][cons]
				if b >= 0 && !s.finished[b] {
					s.err = fmt.Errorf("sim: %s needs the gradient of op %d (%s) from op %d (%s), whose backward %s: the plan lacks a dependency",
						s.describe(i), o, s.w.Ops[o].Name, cons, s.w.Ops[cons].Name, s.notDone(b))
					return
				}
			}
		}
		if !s.c.SyncTransfers {
			for _, x := range s.needGr[i] {
				k := [3]int{t.Unit, x.op, s.devIndex[x.src]}
				at = max(at, s.gArrival[k])
				s.await([4]int{1, k[0], k[1], k[2]}, i, now)
			}
		}
	case core.TaskReduceGrads:
		if s.prefetches(i) {
			// Fetched since its Deps were done (fetch): wait for the bytes.
			if s.fetchedAt[i] >= 0 {
				at = max(at, s.fetchedAt[i])
			} else {
				s.fetchWait[i] = true
				s.waitN[i]++
				s.demand(s.fetchFlow[i], now)
			}
		} else if !s.c.SyncTransfers {
			// The copy engine moves the gradients in the task's turn.
			l := [2]core.DeviceID{t.From, t.Device}
			nb := s.reduceBytes(i)
			s.waitN[i]++
			f := s.send(l[0], l[1], nb, now, "reduce grads", -1, func(en time.Duration) { s.release(i, en) })
			s.demand(f, now) // its task waits for it already
		}
	}
	s.release(i, at)
}

// release ends one of the waits of task i (becomeReady's own and each
// value it waits for) at time at; after the last it is readied.
func (s *sim) release(i int, at time.Duration) {
	s.readyAt[i] = max(s.readyAt[i], at)
	if s.waitN[i]--; s.waitN[i] == 0 {
		s.readied(i)
	}
}

// prefetches reports whether ReduceGrads task i fetches its gradients
// once its own Deps are done, ahead of its turn on its stream: owner
// steps with copy engines (engine.RunOptions.PrefetchReductions, always
// between devices with memory of their own).
func (s *sim) prefetches(i int) bool {
	return s.owners && !s.c.SyncTransfers && s.p.Tasks[i].Kind == core.TaskReduceGrads
}

// fetch starts moving prefetching task i's gradients at now; they are
// staged on the owner until added (the executor's ownerReduce).
func (s *sim) fetch(i int, now time.Duration) {
	t := s.p.Tasks[i]
	nb := s.reduceBytes(i)
	s.staged[i] = nb
	s.alloc(t.Device, nb)
	s.fetchFlow[i] = s.send(t.From, t.Device, nb, now, "reduce grads", -1, func(at time.Duration) {
		s.fetchedAt[i] = at
		s.fetchFlow[i] = nil
		if s.fetchWait[i] {
			s.fetchWait[i] = false
			s.release(i, at)
		}
	})
	if s.fetchWait[i] {
		s.demand(s.fetchFlow[i], now) // its turn came at this instant, before the fetch
	}
}

// await makes task i wait for value k if it is still in a flow.
func (s *sim) await(k [4]int, i int, now time.Duration) {
	if w, ok := s.inTransit[k]; ok {
		s.inTransit[k] = append(w, i)
		s.waitN[i]++
		s.demand(s.flowOf[k], now)
	}
}

// arrived records that value k is on its device at time at and readies
// the tasks that waited for it.
func (s *sim) arrived(k [4]int, at time.Duration) {
	key := [3]int{k[1], k[2], k[3]}
	if k[0] == 0 {
		s.arrival[key] = at
	} else {
		s.gArrival[key] = at
	}
	w, ok := s.inTransit[k]
	delete(s.inTransit, k)
	delete(s.flowOf, k)
	if !ok {
		return // sent over a FIFO link: the time was known at once
	}
	for _, i := range w {
		s.release(i, at)
	}
}

// readied queues task i at readyAt[i] once everything it reads is there
// (a reduction whose add waits is parked instead).
func (s *sim) readied(i int) {
	if s.addLeft[i] > 0 {
		s.parked[i] = true // the gradients are there; the add waits
		return
	}
	s.push(event{t: s.readyAt[i], kind: evReady, task: i})
}

// unitInputs is the part of a subgraph unit's inputs (mem: all of them,
// the profile's setup Mem) the executor brings to device d: the features
// if an op of the unit there reads one of the model's inputs, each
// weighted graph's edge weights if one reads them. Without the model in
// the workload, all of it.
func (s *sim) unitInputs(u int, d core.DeviceID, mem int64) int64 {
	m := s.w.Model
	if m == nil || len(m.Ops) != s.nOps {
		return mem
	}
	rd := s.cm.reads()
	feat, weights := false, 0
	var seen []bool // by graph
	for o, dev := range s.opDev[u] {
		if dev != d {
			continue
		}
		feat = feat || rd.feat[o]
		for _, g := range rd.weights[o] {
			if seen == nil {
				seen = make([]bool, len(m.Graphs))
			}
			if !seen[g] {
				seen[g] = true
				weights++
			}
		}
	}
	rows, edges := float64(s.rows[u]), float64(max(s.edges[u], 0))
	fb := rows * float64(s.w.FeatureDim)
	total := fb + edges*float64(rd.weighted)
	if total <= 0 {
		return mem
	}
	part := edges * float64(weights)
	if feat {
		part += fb
	}
	return int64(math.Round(float64(mem) * part / total))
}

// costsOf is unit u's op costs (and setup, last) under profile dp.
func (s *sim) costsOf(dp *devProf, u int) []Cost {
	if s.outs[u] == nil {
		return dp.costs(s.rows[u], s.edges[u], s.whole[u])
	}
	byUnit := s.ucost[dp]
	if byUnit == nil {
		byUnit = make([][]Cost, len(s.outs))
		s.ucost[dp] = byUnit
	}
	if byUnit[u] == nil {
		byUnit[u] = dp.unitCosts(s.rows[u], s.edges[u], s.whole[u], s.outs[u], s.opEdges[u], s.mems[u])
	}
	return byUnit[u]
}

func (s *sim) notDone(task int) string {
	if task < 0 {
		return "no task runs"
	}
	return fmt.Sprintf("task %d has not finished", task)
}

func (s *sim) linkEvent(l [2]core.DeviceID, what string, unit int, bytes int64, st, en time.Duration) {
	s.res.BytesMoved += bytes
	s.res.Comm[l[1]] += en - st
	s.res.Trace.Events = append(s.res.Trace.Events, core.TraceEvent{Name: what, Cat: "transfer",
		Device: core.DeviceID("link " + string(l[0]) + "->" + string(l[1])), Unit: unit, Start: st, Dur: en - st, Bytes: bytes})
}

// startable reports whether task i may start now: not blocked by a full
// in-flight limit of its stage.
func (s *sim) startable(i int) bool {
	t := s.p.Tasks[i]
	if !s.o.BlockOnLimit || t.Kind != core.TaskForward {
		return true
	}
	us := s.taskUnit[i]
	if us.inFlight || us.stage.Limit <= 0 {
		return true
	}
	return s.inflight[us.stage] < us.stage.Limit
}

// before reports whether ready task i goes before ready task j on their
// device (core.Task.Priority): the higher priority first, then the
// earliest ready, then plan order.
func (s *sim) before(i, j int) bool {
	if pi, pj := s.p.Tasks[i].Priority, s.p.Tasks[j].Priority; pi != pj {
		return pi > pj
	}
	return s.readyAt[i] < s.readyAt[j] || s.readyAt[i] == s.readyAt[j] && i < j
}

// dispatch starts what device d (its index in devs) may start now: with
// overlapping streams every startable queued task, else, when the
// device is idle, the one that goes first (a step, then before).
func (s *sim) dispatch(d int, now time.Duration) {
	if s.overlap[d] {
		// Streams run at once: start everything that may start (stream
		// order already keeps one task per stream).
		var keep []int
		queued := s.queued[d]
		s.queued[d] = nil
		sort.Slice(queued, func(a, b int) bool { return s.before(queued[a], queued[b]) })
		for _, i := range queued {
			if s.startable(i) {
				s.start(i, now)
			} else {
				keep = append(keep, i)
			}
		}
		s.queued[d] = append(keep, s.queued[d]...)
		return
	}
	if s.running[d] || len(s.queued[d]) == 0 {
		return
	}
	best := -1
	q := s.queued[d]
	for j, i := range q {
		if !s.startable(i) {
			continue
		}
		if best < 0 {
			best = j
			continue
		}
		b := q[best]
		// An optimizer step goes before any other ready task on its
		// device (forward, backward, a reduction's add): it is short
		// and its refresh travels while they run (a step group's,
		// core.Plan.OwnerStepGroupsIn; a high-priority stream). With
		// one step per owner nothing else is left on its device then.
		if st, sb := s.p.Tasks[i].Kind == core.TaskStep, s.p.Tasks[b].Kind == core.TaskStep; st != sb {
			if st {
				best = j
			}
			continue
		}
		if s.before(i, b) {
			best = j
		}
	}
	if best < 0 {
		return
	}
	i := q[best]
	s.queued[d] = append(q[:best], q[best+1:]...)
	s.start(i, now)
}

// start runs task i from now on its device: the per-unit setup, the
// synchronous copies, then its compute (computeDone follows).
func (s *sim) start(i int, now time.Duration) {
	t := s.p.Tasks[i]
	d := t.Device
	dp := s.prof[d]
	s.started[i] = true
	di := s.taskDev[i]
	s.running[di] = true
	s.busyUntil[di] = math.MaxInt64 // until computeDone knows
	tr := s.res.Trace
	cur := now
	run := &taskRun{start: now}
	s.runs[i] = run
	// syncCopy moves bytes from src to d on the link, holding d.
	syncCopy := func(src core.DeviceID, bytes int64) {
		l := [2]core.DeviceID{src, d}
		st := max(cur, s.linkFree[l])
		en := st + s.cm.Transfer(src, d, bytes)
		s.linkFree[l] = en
		s.res.Comm[d] += en - cur
		s.res.BytesMoved += bytes
		cur = en
	}
	switch t.Kind {
	case core.TaskForward, core.TaskBackward:
		u := t.Unit
		us := s.taskUnit[i]
		costs := s.costsOf(dp, u)
		setup := costs[len(costs)-1]
		if us.started == 0 {
			run.work += dp.t(setup.Fwd)
			if !s.whole[u] {
				m := s.unitInputs(u, d, setup.Mem)
				us.live += m
				s.alloc(d, m)
			}
			us.inFlight = true
			st := us.stage
			s.inflight[st]++
			st.MaxInFlight = max(st.MaxInFlight, s.inflight[st])
		}
		us.started++
		var moved int64
		t0 := cur
		if t.Kind == core.TaskForward {
			for _, x := range s.needIn[i] {
				key := [3]int{u, x.op, s.devIndex[d]}
				if s.present[key] {
					continue // fetched by an earlier task of the unit here
				}
				s.present[key] = true
				b := s.costsOf(s.prof[x.src], u)[x.op].OutBytes
				if s.c.SyncTransfers {
					syncCopy(x.src, b)
					moved += b
				}
				us.live += b
				s.alloc(d, b)
			}
			if moved > 0 {
				tr.Events = append(tr.Events, core.TraceEvent{Name: fmt.Sprintf("recv activations u%d", u), Cat: "transfer",
					Device: d, Stream: t.Stream, Unit: u, Start: t0, Dur: cur - t0, Bytes: moved})
			}
			for _, o := range t.OpIndices() {
				run.work += dp.t(costs[o].Fwd)
				us.live += costs[o].Mem
				s.alloc(d, costs[o].Mem)
			}
			run.name = fmt.Sprintf("fwd u%d %s", u, opSpan(t.OpIndices()))
		} else {
			for _, x := range s.needGr[i] {
				b := costs[x.op].OutBytes
				if s.c.SyncTransfers {
					syncCopy(x.src, b)
					moved += b
				}
				run.transient += b
				// The consumer's device kept this gradient for us: freed now.
				if cs := s.units[ukey{u, x.src}]; cs != nil && cs.retained > 0 {
					f := min(cs.retained, b)
					cs.retained -= f
					s.alloc(x.src, -f)
				}
			}
			if moved > 0 {
				tr.Events = append(tr.Events, core.TraceEvent{Name: fmt.Sprintf("recv gradients u%d", u), Cat: "transfer",
					Device: d, Stream: t.Stream, Unit: u, Start: t0, Dur: cur - t0, Bytes: moved})
			}
			for _, o := range t.OpIndices() {
				run.work += dp.t(costs[o].Bwd)
			}
			if dp.walk {
				// The executor's order: each op's backward over the gradients
				// alive at its start; what is left at the end (gradients of
				// values other devices produced) stays until they fetch it.
				run.transient, run.retain = WalkBackward(t.OpIndices(),
					func(o int) int64 { return costs[o].Temp },
					func(o int) int64 { return costs[o].GradIn },
					func(o int) int64 { return costs[o].GradOut }, run.transient)
			} else {
				for _, o := range t.OpIndices() {
					run.transient += costs[o].Temp
				}
			}
			s.alloc(d, run.transient)
			us.bwdStarted++
			if us.bwdStarted == us.bwdTotal {
				run.work += dp.t(setup.Bwd) // releasing the unit's Env
			}
			run.name = fmt.Sprintf("bwd u%d %s", u, opSpan(t.OpIndices()))
		}
	case core.TaskReduceGrads:
		nb := s.reduceBytes(i)
		run.name, run.bytes = "reduce grads from "+string(t.From), nb
		run.transient = nb
		if s.staged[i] == 0 {
			s.alloc(d, run.transient) // else held since the transfer began
		}
		if s.c.SyncTransfers {
			syncCopy(t.From, nb)
		}
		run.work = s.cm.ReduceSum(d, nb)
	case core.TaskStep:
		run.name = "optimizer step"
		if s.owners {
			run.work = s.cm.StepBytes(d, s.stepBytes[i])
			run.bytes = s.stepBytes[i]
		} else {
			run.work = s.cm.Step(d)
		}
	}
	if t.Kind == core.TaskForward || t.Kind == core.TaskBackward {
		// Memory-bound (graph, gather, elementwise ops) or compute-bound
		// (dense, loss), by where the task's time goes.
		costs := s.costsOf(dp, t.Unit)
		var dense, other time.Duration
		for _, o := range t.OpIndices() {
			c := costs[o].Fwd
			if t.Kind == core.TaskBackward {
				c = costs[o].Bwd
			}
			if k := s.w.Ops[o].Kind; k == core.KindDense || k == core.KindLoss {
				dense += c
			} else {
				other += c
			}
		}
		run.dense = dense >= other
	}
	if !s.fluid {
		s.computeDone(i, cur, cur+run.work)
		return
	}
	s.push(event{t: cur, kind: evCompute, task: i})
}

// taskRun is a started task's state.
type taskRun struct {
	name      string
	bytes     int64
	start     time.Duration // device acquired
	cStart    time.Duration // compute began
	work      time.Duration // compute at full speed
	rem       float64       // compute left (ns at full speed), shared cores
	transient int64
	retain    int64 // gradient bytes a backward task leaves (WalkBackward)
	dense     bool  // compute-bound rather than memory-bound
}

// rates gives each computing task its speed (processor sharing): the
// host's cores are shared by all computing tasks (min(1,
// HostCores/active)), and on a device whose streams overlap, tasks of one
// kind (compute- or memory-bound) share the device while both kinds
// running at once get (1 + StreamOverlap)/2 of it each.
func (s *sim) rates() map[int]float64 {
	host := 1.0
	if s.c.HostCores > 0 && len(s.active) > 0 {
		host = min(1, s.c.HostCores/float64(len(s.active)))
	}
	type dk struct {
		d     core.DeviceID
		dense bool
	}
	count := map[dk]int{}
	for _, i := range s.active {
		count[dk{s.p.Tasks[i].Device, s.runs[i].dense}]++
	}
	r := make(map[int]float64, len(s.active))
	for _, i := range s.active {
		d := s.p.Tasks[i].Device
		same, other := count[dk{d, s.runs[i].dense}], count[dk{d, !s.runs[i].dense}]
		share := 1.0
		if other > 0 {
			share = (1 + s.prof[d].model.StreamOverlap) / 2
		}
		r[i] = host * share / float64(same)
	}
	return r
}

func (s *sim) advance(now time.Duration) {
	r := s.rates()
	el := now - s.lastShare
	perDev := map[core.DeviceID]int{}
	for _, i := range s.active {
		s.runs[i].rem -= float64(el) * r[i]
		perDev[s.p.Tasks[i].Device]++
	}
	for d, k := range perDev {
		s.res.Busy[d] += el
		if k > 1 {
			s.res.Overlap[d] += el
		}
	}
	s.lastShare = now
}

func (s *sim) reschedule(now time.Duration) {
	s.version++
	r := s.rates()
	for _, i := range s.active {
		left := max(0, s.runs[i].rem) / r[i]
		s.push(event{t: now + time.Duration(math.Ceil(left)), kind: evDone, task: i, version: s.version})
	}
}

func (s *sim) joinCompute(i int, now time.Duration) {
	s.advance(now)
	run := s.runs[i]
	run.cStart, run.rem = now, float64(run.work)
	s.active = append(s.active, i)
	s.reschedule(now)
}

func (s *sim) leaveCompute(i int, version int, now time.Duration) {
	if version != s.version {
		return // superseded by a later change of the active set
	}
	s.advance(now)
	for j, a := range s.active {
		if a == i {
			s.active = append(s.active[:j], s.active[j+1:]...)
			break
		}
	}
	s.computeDone(i, s.runs[i].cStart, now)
	s.reschedule(now)
}

// computeDone records task i's compute span [cs, ce], then what follows
// it (a step's parameter broadcast) and schedules the task's end.
func (s *sim) computeDone(i int, cs, ce time.Duration) {
	t := s.p.Tasks[i]
	d := t.Device
	run := s.runs[i]
	tr := s.res.Trace
	if !s.fluid {
		s.res.Busy[d] += ce - cs // else counted as time passes (advance)
	}
	ev := core.TraceEvent{Name: run.name, Cat: t.Kind.String(), Device: d, Stream: t.Stream,
		Unit: t.Unit, Start: cs, Dur: ce - cs, Bytes: run.bytes}
	if t.Kind == core.TaskReduceGrads && s.c.SyncTransfers {
		ev.Start, ev.Dur = run.start, ce-run.start // the copy and the sum, as the executor traces it
	}
	tr.Events = append(tr.Events, ev)
	cur := ce
	engineFree, finish := cur, cur
	// bcast: the step's refresh of the other replicas goes on copy
	// engines from ce (broadcast, at that event: ce may be ahead of the
	// simulation's clock); the task ends when the last copy is there.
	bcast := false
	if t.Kind == core.TaskStep {
		// Refresh every other replica with the new values of the params
		// its ops read (with StepOwners: those of them this device owns).
		var moved int64
		for _, o := range s.devs {
			nb := s.refreshBytes(i, o)
			if o == d || nb == 0 {
				continue
			}
			if s.c.SyncTransfers {
				l := [2]core.DeviceID{d, o}
				st := max(cur, s.linkFree[l])
				en := st + s.cm.Transfer(d, o, nb)
				s.linkFree[l] = en
				s.res.Comm[o] += en - cur
				s.res.BytesMoved += nb
				cur = en
				moved += nb
				engineFree, finish = cur, cur
			} else {
				bcast = true
			}
		}
		if moved > 0 {
			tr.Events = append(tr.Events, core.TraceEvent{Name: "broadcast params", Cat: "transfer", Device: d,
				Stream: t.Stream, Unit: -1, Start: ce, Dur: cur - ce, Bytes: moved})
		}
	}
	if run.transient > 0 {
		s.alloc(d, -run.transient)
	}
	if run.retain > 0 {
		s.alloc(d, run.retain)
		s.taskUnit[i].retained += run.retain
	}
	s.busyUntil[s.taskDev[i]] = engineFree
	if bcast {
		s.push(event{t: engineFree, kind: evWake, dev: s.taskDev[i]})
		s.push(event{t: ce, kind: evBroadcast, task: i})
		return
	}
	s.push(event{t: finish, kind: evFinish, task: i})
	if engineFree < finish {
		s.push(event{t: engineFree, kind: evWake, dev: s.taskDev[i]})
	}
}

// refreshBytes is what step task i sends replica o: the parameters o's
// ops read (with StepOwners, of those the task steps).
func (s *sim) refreshBytes(i int, o core.DeviceID) int64 {
	if s.owners {
		return s.stepShare[i][o]
	}
	return s.usedBytes[o]
}

// broadcast sends step task i's new parameter values to every other
// replica from now on copy engines; the task ends when the last is there.
func (s *sim) broadcast(i int, now time.Duration) {
	d := s.p.Tasks[i].Device
	left, fin := 1, now // 1: until every copy has started
	end := func(at time.Duration) {
		fin = max(fin, at)
		if left--; left == 0 {
			s.push(event{t: fin, kind: evFinish, task: i})
		}
	}
	for _, o := range s.devs {
		if nb := s.refreshBytes(i, o); o != d && nb > 0 {
			left++
			s.send(d, o, nb, now, "broadcast params", -1, end)
		}
	}
	end(now)
}

func (s *sim) finish(i int, now time.Duration) {
	t := s.p.Tasks[i]
	d := t.Device
	s.finished[i] = true
	s.finishAt[i] = now
	s.nDone++
	if di := s.taskDev[i]; s.busyUntil[di] <= now {
		s.running[di] = false
	}
	switch t.Kind {
	case core.TaskForward:
		if !s.c.SyncTransfers {
			// Send this task's outputs to every other device that reads them.
			sent := map[[2]int]bool{}
			for _, o := range t.OpIndices() {
				for _, cons := range s.consumers[o] {
					dst := s.opDev[t.Unit][cons]
					if dst == "" || dst == d || sent[[2]int{o, s.devIndex[dst]}] {
						continue
					}
					sent[[2]int{o, s.devIndex[dst]}] = true
					b := s.costsOf(s.prof[d], t.Unit)[o].OutBytes
					k := [4]int{0, t.Unit, o, s.devIndex[dst]}
					s.inTransit[k] = nil
					if f := s.send(d, dst, b, now, fmt.Sprintf("activations u%d %s", t.Unit, s.w.Ops[o].Name), t.Unit,
						func(at time.Duration) { s.arrived(k, at) }); f != nil && s.c.DemandFirst {
						s.flowOf[k] = f // only demand looks it up
					}
				}
			}
		}
	case core.TaskBackward:
		us := s.taskUnit[i]
		us.bwdDone++
		if us.bwdDone == us.bwdTotal {
			s.alloc(d, -us.live)
			us.live = 0
			us.inFlight = false
			s.inflight[us.stage]--
		}
		if !s.c.SyncTransfers {
			// Gradients this device has finished for producers elsewhere.
			seen := map[int]bool{}
			for _, o := range t.OpIndices() {
				for _, q := range s.w.Ops[o].Deps {
					src := s.opDev[t.Unit][q]
					if src == "" || src == d || !s.needGrad[q] || seen[q] {
						continue
					}
					seen[q] = true
					key := [3]int{t.Unit, q, s.devIndex[d]}
					if _, ok := s.gradSrc[key]; !ok {
						continue
					}
					s.gradSrc[key]--
					if s.gradSrc[key] > 0 {
						continue
					}
					delete(s.gradSrc, key)
					b := s.costsOf(s.prof[src], t.Unit)[q].OutBytes
					k := [4]int{1, key[0], key[1], key[2]}
					s.inTransit[k] = nil
					if f := s.send(d, src, b, now, fmt.Sprintf("gradients u%d %s", t.Unit, s.w.Ops[q].Name), t.Unit,
						func(at time.Duration) { s.arrived(k, at) }); f != nil && s.c.DemandFirst {
						s.flowOf[k] = f // only demand looks it up
					}
				}
			}
		}
	}
	for _, j := range s.fetchOn[i] {
		if s.depsLeft[j]--; s.depsLeft[j] == 0 {
			// After every end at this instant (memory freed first).
			s.push(event{t: now, kind: evFetch, task: j})
		}
	}
	for _, j := range s.addSucc[i] {
		if s.addLeft[j]--; s.addLeft[j] == 0 && s.parked[j] {
			s.parked[j] = false
			s.readyAt[j] = max(s.readyAt[j], now)
			s.push(event{t: s.readyAt[j], kind: evReady, task: j})
		}
	}
	// Whether this task's stream goes straight on with its next task
	// (all else it waits for done): a goroutine it wakes then waits for
	// an idle core to wake (Profile.HandoffBusy) rather than taking this
	// one when the stream blocks (Profile.Handoff). Approximate: another
	// predecessor ending at this same instant counts only if its end was
	// handled first, and the waits the simulator keeps apart (an owner's
	// adds in order, values in flight) are not looked at; tasks released
	// by those waits (addSucc) get no handoff.
	goesOn := false
	if next := s.nextOnStream[i]; s.handoffs && next >= 0 {
		goesOn = true
		for _, q := range s.preds[next] {
			goesOn = goesOn && s.finished[q]
		}
	}
	for _, j := range s.succ[i] {
		if s.left[j]--; s.left[j] == 0 {
			// Its stream waited for this task on another stream: the
			// executor's handoff (a parked goroutine woken).
			if tj := s.p.Tasks[j]; s.handoffs && (tj.Device != d || tj.Stream != t.Stream) {
				if pj := s.executorProf(tj.Device); pj != nil {
					h := pj.Handoff
					if goesOn && pj.HandoffBusy > 0 {
						h = pj.HandoffBusy
					}
					s.readyAt[j] = max(s.readyAt[j], now+h)
				}
			}
			s.becomeReady(j, now)
			if s.err != nil {
				return
			}
		}
	}
}

// executorProf is device d's profile where its executor times apply
// (Profile.Handoff, HandoffBusy, IterationOverhead): on the CPU
// executor's model (SyncTransfers) with the profile taken on that kind of
// device (no Speedup). A CPU profile priced onto GPUs brings its ops, not
// the CPU executor's goroutine wake-ups. Nil where they do not apply.
func (s *sim) executorProf(d core.DeviceID) *Profile {
	dp, ok := s.prof[d]
	if !ok || !s.c.SyncTransfers || dp.scale != 1 {
		return nil
	}
	return dp.p
}

func (s *sim) summarise() {
	var end time.Duration
	for i, f := range s.finished {
		if f {
			end = max(end, s.finishAt[i])
		}
	}
	for _, e := range s.res.Trace.Events {
		end = max(end, e.Start+e.Dur)
	}
	r := s.res
	// The executor's time outside the tasks (the profile's, home's).
	var over time.Duration
	if pp := s.executorProf(s.p.Home); pp != nil {
		over = pp.IterationOverhead
	}
	r.Iteration = end + over
	var busy time.Duration
	for _, d := range s.devs {
		busy += r.Busy[d]
		r.PeakMem[d] = s.peak[d]
		if m, ok := s.c.Device(d); ok && m.MemBytes > 0 && s.peak[d] > m.MemBytes {
			r.OverCap = append(r.OverCap, d)
		}
	}
	if end > 0 {
		r.Bubble = 1 - float64(busy)/(float64(len(s.devs))*float64(end))
	}
	for _, st := range s.stageOrder {
		r.Stages = append(r.Stages, *st)
	}
	tr := r.Trace
	tr.Wall = end
	tr.BytesMoved = r.BytesMoved
	for d, p := range r.PeakMem {
		tr.PeakMem[d] = p
	}
	sort.SliceStable(tr.Events, func(i, j int) bool { return tr.Events[i].Start < tr.Events[j].Start })
}

// deadlock names the tasks that can never start and what each waits for.
func (s *sim) deadlock(now time.Duration) error {
	var stuck []string
	count := 0
	for i := range s.p.Tasks {
		if s.finished[i] || s.started[i] {
			continue
		}
		count++
		if len(stuck) >= 8 {
			continue
		}
		var waits []string
		for _, d := range s.preds[i] {
			if !s.finished[d] {
				waits = append(waits, fmt.Sprint(d))
			}
		}
		why := ""
		switch {
		case len(waits) > 0:
			why = "waits for task(s) " + strings.Join(waits, ", ")
		case s.parked[i]:
			for _, b := range s.addAfter[i] {
				if !s.finished[b] {
					waits = append(waits, fmt.Sprint(b))
				}
			}
			why = "has its gradients and waits to add them after its owner's backward task(s) " + strings.Join(waits, ", ")
		default:
			t := s.p.Tasks[i]
			why = "waits for its device"
			if us := s.units[ukey{t.Unit, t.Device}]; us != nil && us.stage != nil {
				st := us.stage
				why = fmt.Sprintf("waits for an in-flight slot on stage %s ops %v (limit %d, all held by units waiting on later tasks)", st.Device, st.Ops, st.Limit)
			}
		}
		stuck = append(stuck, s.describe(i)+" "+why)
	}
	return fmt.Errorf("%w at %v: %d task(s) can never start: %s", ErrDeadlock, now, count, strings.Join(stuck, "; "))
}

// opSpan names a task's ops compactly, as the executor's trace does.
func opSpan(idx []int) string {
	if len(idx) == 0 {
		return "ops -"
	}
	if idx[len(idx)-1]-idx[0] == len(idx)-1 {
		return fmt.Sprintf("ops %d-%d", idx[0], idx[len(idx)-1])
	}
	return fmt.Sprintf("ops %v", idx)
}
