package dyntrain

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data/dynamic"
	"github.com/gnnkit/gnnkit/engine"
	mdyn "github.com/gnnkit/gnnkit/models/dynamic"
	"github.com/gnnkit/gnnkit/schedulers/blad"
)

// Batch turns a group into the engine batch of its unit: the window's
// graphs as "adj.t0".., the pairs as "pairs", the pair labels, and the
// group's nodes.
func Batch(g *dynamic.Group) *engine.Batch {
	gr := map[string]*core.Graph{mdyn.Pairs: g.Pairs}
	for t, s := range g.Snaps {
		gr[mdyn.Adj(t)] = s
	}
	tg := make([]int32, len(g.Labels))
	for i := range tg {
		tg[i] = int32(i)
	}
	return &engine.Batch{Graph: g.Snaps[len(g.Snaps)-1], Nodes: g.Nodes, Targets: tg, Graphs: gr, Labels: g.Labels}
}

// Cost estimates a group's graph-op and dense-op work for a model of the
// given input and hidden widths: graph ~ window edges (plus self-loops)
// x hidden; dense ~ nodes x window x hidden x (input + 6 hidden).
func Cost(g *dynamic.Group, in, hidden int) blad.GroupCost {
	n, w := float64(len(g.Nodes)), float64(len(g.Snaps))
	graph := (float64(g.Edges)+n*w)*float64(hidden)*4 + float64(len(g.Labels))*float64(hidden)*6
	dense := n * float64(hidden) * (float64(in) + 6*w*float64(hidden)) * 2
	return blad.GroupCost{Key: g.Target, Graph: graph, Dense: dense, Samples: len(g.Labels)}
}

// OpDims returns the size each op of m computes for group g
// (models/dynamic.OpDims over the group's window graphs as the runtime
// binds them, with a self-loop on every node), and the group's nodes and
// window edges (self-loops included): what a simulator costs the group's
// unit at (sim.UnitShape).
func OpDims(g *dynamic.Group, m *core.Model) (ops []core.Dims, total core.Dims) {
	ops, _, total = opDims(g, m)
	return ops, total
}

// OpOutRows returns the rows of each op's output for group g (see
// OpDims).
func OpOutRows(g *dynamic.Group, m *core.Model) []int64 {
	_, rows, _ := opDims(g, m)
	return rows
}

func opDims(g *dynamic.Group, m *core.Model) (ops []core.Dims, rows []int64, total core.Dims) {
	n := int64(len(g.Nodes))
	edges := map[string]int64{}
	for t, s := range g.Snaps {
		edges[mdyn.Adj(t)] = int64(s.NumEdges()) + n - selfLoops(s)
	}
	total = groupTotal(g)
	// A model over fewer graphs than the window (EvolveGCN reads only the
	// last snapshot) binds the window's last under its own name.
	for _, gs := range m.Graphs {
		if _, ok := edges[gs.Name]; !ok && len(g.Snaps) > 0 && gs.Name != mdyn.Pairs {
			last := g.Snaps[len(g.Snaps)-1]
			edges[gs.Name] = int64(last.NumEdges()) + n - selfLoops(last)
		}
	}
	edges[mdyn.Pairs] = int64(len(g.Labels))
	graphs := func(name string) core.Dims { return core.Dims{Nodes: n, Edges: edges[name]} }
	return mdyn.OpDims(m, n, graphs), mdyn.OpOutRows(m, n, graphs), total
}

// groupTotal is a group's nodes and window edges (self-loops added).
func groupTotal(g *dynamic.Group) core.Dims {
	n := int64(len(g.Nodes))
	d := core.Dims{Nodes: n}
	for _, s := range g.Snaps {
		d.Edges += int64(s.NumEdges()) + n - selfLoops(s)
	}
	return d
}

func selfLoops(g *core.Graph) int64 {
	var k int64
	for i := 0; i < g.NumDst; i++ {
		for _, j := range g.Indices[g.Offsets[i]:g.Offsets[i+1]] {
			if int(j) == i {
				k++
				break
			}
		}
	}
	return k
}

// Config is one training run. A zero Hidden, Epochs or LR means the
// default (32, 50, 0.01); a negative Hidden, Epochs, StepGroups or
// EvalEvery, and a negative or non-finite LR, is an error.
type Config struct {
	Set        *dynamic.Set
	Model      string // "tgcn" or "evolvegcn"
	Hidden     int    // 0: 32 (models/dynamic)
	Epochs     int    // 0: 50
	LR         float32
	Devices    []core.Device
	Scheduler  core.Scheduler // group-aware: blad or esdg
	StepGroups int            // groups per optimizer step; 0: all
	Seed       uint64
	// EvalEvery evaluates on val every so many epochs (0: never during
	// training; Train always evaluates val and test after the last).
	EvalEvery int
	Progress  func(EpochStats)
	// OpTrace adds per-op events to the traces (engine.RunOptions.OpTrace).
	OpTrace bool
	// VertexParts, when positive, trains the vertex-partitioned T-GCN
	// (models/dynamic.TGCNVertex, Model must be "tgcn") with each group
	// cut into that many parts (VertexBatch): the units of the
	// vertex-partition baseline (schedulers/blad.VertexPartition, one part
	// per device).
	VertexParts int
}

// model builds the configured model.
func (cfg Config) model() (*core.Model, error) {
	s := cfg.Set
	mc := core.ModelConfig{InDim: s.FeatureDim, Hidden: cfg.Hidden, Classes: 2, Layers: s.Window}
	if cfg.VertexParts > 0 {
		if cfg.Model != "tgcn" {
			return nil, fmt.Errorf("dyntrain: the vertex partition is built for tgcn, not %q", cfg.Model)
		}
		return mdyn.TGCNVertex(mdyn.Config{ModelConfig: mc}, cfg.VertexParts)
	}
	return core.BuildModel(cfg.Model, mc)
}

// batch is the engine batch of group g for the configured model.
func (cfg Config) batch(g *dynamic.Group) (*engine.Batch, error) {
	if cfg.VertexParts > 0 {
		return VertexBatch(g, cfg.VertexParts)
	}
	return Batch(g), nil
}

// EpochStats reports one epoch.
type EpochStats struct {
	Epoch int
	Loss  float64
	// Time is the epoch's wall-clock time; Run the part of it inside
	// Trainer.Run (the rest is scheduling and feedback).
	Time, Run time.Duration
	Val       *Metrics
	// Traces are the epoch's iterations' traces; Busy, Imbalance and
	// Overlap summarise them (see Utilisation).
	Traces    []*core.Trace
	Busy      map[core.DeviceID]time.Duration
	Imbalance float64
	Overlap   float64
}

// Metrics are evaluation figures.
type Metrics struct {
	AUC, MRR, F1, MacroF1 float64
	Pairs                 int
}

func (m Metrics) String() string {
	return fmt.Sprintf("AUC %.4f  MRR %.4f  F1 %.4f  macro-F1 %.4f  (%d pairs)", m.AUC, m.MRR, m.F1, m.MacroF1, m.Pairs)
}

// Result is a run's outcome.
type Result struct {
	Baseline, Val, Test Metrics // Baseline: the untrained model on test
	EpochMs             []float64
	EpochMsMedian       float64
	FinalLoss           float64
	Busy                map[core.DeviceID]time.Duration // last epoch, per device (union of its streams' spans)
	Imbalance           float64                         // last epoch: max/mean - 1 of Busy
	Overlap             float64                         // last epoch: share of busy time with >= 2 streams active
	Plan                *core.Plan                      // last plan
	Replans             int
}

// Trainer builds the engine trainer for the set's model.
func newTrainer(cfg Config) (*engine.Trainer, *core.Model, error) {
	s := cfg.Set
	m, err := cfg.model()
	if err != nil {
		return nil, nil, err
	}
	// A full graph over all nodes for the engine (unused by group units).
	full, err := core.FromEdges(s.NumNodes, s.NumNodes, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	tr, err := engine.New(engine.Config{Model: m, Devices: cfg.Devices, Seed: cfg.Seed,
		Optimizer: engine.Optimizer{LR: cfg.LR},
		Data:      engine.Data{Graph: full, Features: s.Features, FeatureDim: s.FeatureDim, Labels: make([]int32, s.NumNodes)}})
	return tr, m, err
}

// Planner holds what scheduling an epoch needs and nothing that runs
// it: per iteration (StepGroups training groups) the groups' engine
// batches, their cost estimates and the group workload, for devices that
// may be simulated. A Session is a Planner with a trainer.
type Planner struct {
	cfg    Config
	m      *core.Model
	chunks []*chunk
}

type chunk struct {
	groups []*engine.Batch
	costs  []blad.GroupCost
	w      *core.Workload
	plan   *core.Plan
}

func (cfg *Config) check() error {
	if cfg.Set == nil || cfg.Scheduler == nil {
		return fmt.Errorf("dyntrain: need a set and a scheduler")
	}
	switch {
	case cfg.Hidden < 0:
		return fmt.Errorf("dyntrain: Hidden %d: want >= 1 (0: the default, 32)", cfg.Hidden)
	case cfg.Epochs < 0:
		return fmt.Errorf("dyntrain: Epochs %d: want >= 1 (0: the default, 50)", cfg.Epochs)
	case cfg.StepGroups < 0:
		return fmt.Errorf("dyntrain: StepGroups %d: want >= 1 groups per optimizer step (0: all training groups)", cfg.StepGroups)
	case cfg.EvalEvery < 0:
		return fmt.Errorf("dyntrain: EvalEvery %d: want >= 1 epochs (0: no evaluation during training)", cfg.EvalEvery)
	case !(cfg.LR >= 0) || math.IsInf(float64(cfg.LR), 0):
		return fmt.Errorf("dyntrain: LR %g: want a finite learning rate > 0 (0: the default, 0.01)", cfg.LR)
	}
	if cfg.Epochs == 0 {
		cfg.Epochs = 50
	}
	if cfg.LR == 0 {
		cfg.LR = 0.01
	}
	return nil
}

// newChunks cuts the training groups into iterations; workload describes
// one iteration's groups.
func (p *Planner) newChunks(workload func([]*engine.Batch) (*core.Workload, error)) error {
	cfg := p.cfg
	train := cfg.Set.Train
	k := cfg.StepGroups
	if k <= 0 || k > len(train) {
		k = len(train)
	}
	for lo := 0; lo < len(train); lo += k {
		c := &chunk{}
		for _, g := range train[lo:min(len(train), lo+k)] {
			b, err := cfg.batch(g)
			if err != nil {
				return err
			}
			c.groups = append(c.groups, b)
			c.costs = append(c.costs, Cost(g, cfg.Set.FeatureDim, p.m.Config.Hidden))
		}
		var err error
		if c.w, err = workload(c.groups); err != nil {
			return err
		}
		c.w.Groups = c.costs // plain data: schedulers out of process see it too
		p.chunks = append(p.chunks, c)
	}
	return nil
}

// NewPlanner prepares the iterations of cfg for devices described by
// infos (cfg.Devices is not used): what a simulator needs to replay the
// scheduler's plans.
func NewPlanner(cfg Config, infos []core.DeviceInfo) (*Planner, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	m, err := cfg.model()
	if err != nil {
		return nil, err
	}
	p := &Planner{cfg: cfg, m: m}
	err = p.newChunks(func(gs []*engine.Batch) (*core.Workload, error) {
		ids := make([]int32, len(gs))
		for i := range ids {
			ids[i] = int32(i)
		}
		// The engine's group workload, without a trainer: the sizes are
		// the first group's first graph's (self-loops added).
		g, err := gs[0].Graph.WithSelfLoops()
		if err != nil {
			return nil, err
		}
		return core.NewWorkload(m, g, cfg.Set.FeatureDim, ids, infos, cfg.Seed), nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Model returns the model being planned for.
func (p *Planner) Model() *core.Model { return p.m }

// Scheduler returns the configured scheduler.
func (p *Planner) Scheduler() core.Scheduler { return p.cfg.Scheduler }

// Parts is the configured vertex-partition part count (0: none).
func (p *Planner) Parts() int { return p.cfg.VertexParts }

// Plans returns the current plan of each iteration (nil before the first
// epoch or Schedule).
func (p *Planner) Plans() []*core.Plan {
	out := make([]*core.Plan, len(p.chunks))
	for i, c := range p.chunks {
		out[i] = c.plan
	}
	return out
}

// Groups returns each iteration's group batches (engine.RunOptions.Groups)
// and their workload.
func (p *Planner) Groups() ([][]*engine.Batch, []*core.Workload) {
	gs, ws := make([][]*engine.Batch, len(p.chunks)), make([]*core.Workload, len(p.chunks))
	for i, c := range p.chunks {
		gs[i], ws[i] = c.groups, c.w
	}
	return gs, ws
}

// Schedule plans iteration k: the scheduler gets the groups' costs
// (blad.GroupSetter), and the plan is checked (every group exactly once,
// Plan.Validate).
func (p *Planner) Schedule(ctx context.Context, k int) (*core.Plan, error) {
	c := p.chunks[k]
	if gs, ok := p.cfg.Scheduler.(blad.GroupSetter); ok {
		gs.SetGroups(c.costs)
	}
	pl, err := p.cfg.Scheduler.Schedule(ctx, c.w)
	if err != nil {
		return nil, err
	}
	if err := blad.GroupsOnce(pl, c.w); err != nil {
		return nil, err
	}
	c.plan = pl
	return pl, nil
}

// Session is a training run driven one epoch at a time: Train uses it,
// and a benchmark can interleave the epochs of several sessions (one per
// scheduler) so that they see the same machine load. Everything that does
// not depend on the parameters — the groups' engine batches (graphs with
// self-loops, GCN weights, labels), their cost estimates and the group
// workloads — is built once, in NewSession.
type Session struct {
	Planner
	tr      *engine.Trainer
	epoch   int
	replans int
	last    *core.Trace
}

// NewSession prepares a run: the trainer, and per iteration (StepGroups
// training groups) the groups' batches, costs and workload.
func NewSession(cfg Config) (*Session, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if len(cfg.Devices) == 0 {
		return nil, fmt.Errorf("dyntrain: need devices")
	}
	tr, m, err := newTrainer(cfg)
	if err != nil {
		return nil, err
	}
	s := &Session{Planner: Planner{cfg: cfg, m: m}, tr: tr}
	infos := make([]core.DeviceInfo, len(cfg.Devices))
	for i, d := range cfg.Devices {
		infos[i] = d.Info()
	}
	// GroupWorkload prepares every batch (graphs, weights) once.
	if err := s.newChunks(func(gs []*engine.Batch) (*core.Workload, error) { return tr.GroupWorkload(gs, infos) }); err != nil {
		tr.Close()
		return nil, err
	}
	return s, nil
}

// Trainer returns the session's trainer.
func (s *Session) Trainer() *engine.Trainer { return s.tr }

// Close frees the trainer's device buffers.
func (s *Session) Close() { s.tr.Close() }

// Replans counts the plans a scheduler's feedback replaced.
func (s *Session) Replans() int { return s.replans }

// Epoch trains one epoch: per iteration, schedule (a plan is reused while
// the scheduler keeps it), run, and pass the trace to a scheduler with
// feedback. Time is the epoch's wall-clock time, Run the part spent in
// Trainer.Run; Busy, Imbalance and Overlap are over the epoch's traces.
func (s *Session) Epoch(ctx context.Context) (EpochStats, error) {
	s.epoch++
	st := EpochStats{Epoch: s.epoch}
	t0 := time.Now()
	for k, c := range s.chunks {
		if c.plan == nil || len(s.chunks) > 1 {
			if _, err := s.Schedule(ctx, k); err != nil {
				return st, err
			}
		} else if gs, ok := s.cfg.Scheduler.(blad.GroupSetter); ok {
			gs.SetGroups(c.costs)
		}
		r, err := s.tr.Run(ctx, c.plan, nil, engine.RunOptions{Groups: c.groups, OpTrace: s.cfg.OpTrace})
		if err != nil {
			return st, err
		}
		st.Run += r.Trace.Wall
		st.Loss += r.Loss / float64(len(s.chunks))
		st.Traces = append(st.Traces, r.Trace)
		s.last = r.Trace
		if fb, ok := s.cfg.Scheduler.(core.SchedulerWithFeedback); ok {
			np, err := fb.Observe(ctx, c.w, r.Trace)
			if err != nil {
				return st, err
			}
			if np != nil {
				if err := blad.GroupsOnce(np, c.w); err != nil {
					return st, err
				}
				c.plan = np
				s.replans++
			}
		}
	}
	st.Time = time.Since(t0)
	st.Busy, st.Imbalance, st.Overlap = UtilisationOn(deviceIDs(s.cfg.Devices), st.Traces...)
	if math.IsNaN(st.Loss) {
		return st, fmt.Errorf("dyntrain: loss is NaN at epoch %d", s.epoch)
	}
	return st, nil
}

// Train trains and evaluates.
func Train(ctx context.Context, cfg Config) (*Result, error) {
	s, err := NewSession(cfg)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	cfg = s.cfg
	tr, m := s.tr, s.m
	res := &Result{}
	for epoch := 1; epoch <= cfg.Epochs; epoch++ {
		st, err := s.Epoch(ctx)
		if err != nil {
			return nil, err
		}
		res.EpochMs = append(res.EpochMs, float64(st.Time.Microseconds())/1e3)
		res.FinalLoss = st.Loss
		if cfg.EvalEvery > 0 && epoch%cfg.EvalEvery == 0 && len(cfg.Set.Val) > 0 {
			v, err := evaluate(ctx, tr, m, cfg.Set, cfg.Set.Val, cfg.Devices, cfg.batch)
			if err != nil {
				return nil, err
			}
			st.Val = &v
		}
		if cfg.Progress != nil {
			cfg.Progress(st)
		}
	}
	res.Replans = s.replans
	res.Plan = s.chunks[len(s.chunks)-1].plan
	res.EpochMsMedian = engine.Median(res.EpochMs)
	res.Busy, res.Imbalance, res.Overlap = UtilisationOn(deviceIDs(cfg.Devices), s.last)
	if res.Val, err = evaluate(ctx, tr, m, cfg.Set, cfg.Set.Val, cfg.Devices, cfg.batch); err != nil {
		return nil, err
	}
	if res.Test, err = evaluate(ctx, tr, m, cfg.Set, cfg.Set.Test, cfg.Devices, cfg.batch); err != nil {
		return nil, err
	}
	// The no-training baseline: the same model at its initial parameters.
	tr0, m0, err := newTrainer(cfg)
	if err != nil {
		return nil, err
	}
	defer tr0.Close()
	if res.Baseline, err = evaluateParams(ctx, initialParams(m0, cfg.Seed), m0, cfg.Set, cfg.Set.Test, cfg.Devices[0], cfg.batch); err != nil {
		return nil, err
	}
	return res, nil
}

func initialParams(m *core.Model, seed uint64) map[string][]float32 {
	out := map[string][]float32{}
	for _, p := range m.Params {
		out[p.Name] = p.Initial(seed)
	}
	return out
}

func deviceIDs(devs []core.Device) []core.DeviceID {
	out := make([]core.DeviceID, len(devs))
	for i, d := range devs {
		out[i] = d.ID()
	}
	return out
}

// Utilisation returns per device the union of its forward and backward
// task spans over the traces (summed over them), the imbalance of those
// (max/mean - 1) and the overlap achieved: the share of that busy time
// during which two or more of a device's task spans ran at once. It is
// measured from the spans' start and end times, so it says that two
// streams' tasks were in flight together, not that the hardware ran them
// faster (on the CPU backend two streams of a device time-share its
// cores unless spare cores exist).
func Utilisation(traces ...*core.Trace) (map[core.DeviceID]time.Duration, float64, float64) {
	return UtilisationOn(nil, traces...)
}

// UtilisationOn is Utilisation with every device of devs counted, busy
// or not: a device the plans left idle has busy time 0 and makes the
// imbalance large, where Utilisation would not see it.
func UtilisationOn(devs []core.DeviceID, traces ...*core.Trace) (map[core.DeviceID]time.Duration, float64, float64) {
	busy := map[core.DeviceID]time.Duration{}
	type pt struct {
		at time.Duration
		d  int
	}
	var multi, total time.Duration
	for _, t := range traces {
		if t == nil {
			continue
		}
		per := map[core.DeviceID][]pt{}
		for _, e := range t.Events {
			if e.Cat != core.TaskForward.String() && e.Cat != core.TaskBackward.String() {
				continue
			}
			per[e.Device] = append(per[e.Device], pt{e.Start, 1}, pt{e.Start + e.Dur, -1})
		}
		for d, ps := range per {
			sort.Slice(ps, func(i, j int) bool {
				if ps[i].at != ps[j].at {
					return ps[i].at < ps[j].at
				}
				return ps[i].d < ps[j].d
			})
			active := 0
			var prev, b time.Duration
			for _, p := range ps {
				if active >= 1 {
					b += p.at - prev
				}
				if active >= 2 {
					multi += p.at - prev
				}
				active += p.d
				prev = p.at
			}
			busy[d] += b
			total += b
		}
	}
	for _, d := range devs {
		if _, ok := busy[d]; !ok {
			busy[d] = 0
		}
	}
	loads := make([]float64, 0, len(busy))
	for _, b := range busy {
		loads = append(loads, b.Seconds())
	}
	ov := 0.0
	if total > 0 {
		ov = multi.Seconds() / total.Seconds()
	}
	return busy, blad.Imbalance(loads), ov
}
