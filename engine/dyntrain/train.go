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

// Config is one training run.
type Config struct {
	Set        *dynamic.Set
	Model      string // "tgcn" or "evolvegcn"
	Hidden     int
	Epochs     int
	LR         float32
	Devices    []core.Device
	Scheduler  core.Scheduler // group-aware: blad or esdg
	StepGroups int            // groups per optimizer step; 0: all
	Seed       uint64
	EvalEvery  int // evaluate on val every so many epochs (0: never)
	Progress   func(EpochStats)
}

// EpochStats reports one epoch.
type EpochStats struct {
	Epoch int
	Loss  float64
	Time  time.Duration
	Val   *Metrics
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
	m, err := core.BuildModel(cfg.Model, core.ModelConfig{InDim: s.FeatureDim, Hidden: cfg.Hidden, Classes: 2, Layers: s.Window})
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

// Train trains and evaluates.
func Train(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Set == nil || len(cfg.Devices) == 0 || cfg.Scheduler == nil {
		return nil, fmt.Errorf("dyntrain: need a set, devices and a scheduler")
	}
	if cfg.Epochs <= 0 {
		cfg.Epochs = 50
	}
	if cfg.LR == 0 {
		cfg.LR = 0.01
	}
	tr, m, err := newTrainer(cfg)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	infos := make([]core.DeviceInfo, len(cfg.Devices))
	for i, d := range cfg.Devices {
		infos[i] = d.Info()
	}
	train := cfg.Set.Train
	k := cfg.StepGroups
	if k <= 0 || k > len(train) {
		k = len(train)
	}
	type chunk struct {
		groups []*engine.Batch
		costs  []blad.GroupCost
		w      *core.Workload
		plan   *core.Plan
	}
	var chunks []*chunk
	for lo := 0; lo < len(train); lo += k {
		c := &chunk{}
		for _, g := range train[lo:min(len(train), lo+k)] {
			c.groups = append(c.groups, Batch(g))
			c.costs = append(c.costs, Cost(g, cfg.Set.FeatureDim, m.Config.Hidden))
		}
		if c.w, err = tr.GroupWorkload(c.groups, infos); err != nil {
			return nil, err
		}
		chunks = append(chunks, c)
	}
	res := &Result{}
	var last *core.Trace
	for epoch := 1; epoch <= cfg.Epochs; epoch++ {
		t0 := time.Now()
		loss := 0.0
		for _, c := range chunks {
			if gs, ok := cfg.Scheduler.(blad.GroupSetter); ok {
				gs.SetGroups(c.costs)
			}
			if c.plan == nil || len(chunks) > 1 {
				if c.plan, err = cfg.Scheduler.Schedule(ctx, c.w); err != nil {
					return nil, err
				}
				if err := blad.GroupsOnce(c.plan, c.w); err != nil {
					return nil, err
				}
			}
			r, err := tr.Run(ctx, c.plan, nil, engine.RunOptions{Groups: c.groups})
			if err != nil {
				return nil, err
			}
			loss += r.Loss / float64(len(chunks))
			last = r.Trace
			if fb, ok := cfg.Scheduler.(core.SchedulerWithFeedback); ok {
				np, err := fb.Observe(ctx, c.w, r.Trace)
				if err != nil {
					return nil, err
				}
				if np != nil {
					if err := blad.GroupsOnce(np, c.w); err != nil {
						return nil, err
					}
					c.plan = np
					res.Replans++
				}
			}
		}
		el := time.Since(t0)
		res.EpochMs = append(res.EpochMs, float64(el.Microseconds())/1e3)
		res.FinalLoss = loss
		st := EpochStats{Epoch: epoch, Loss: loss, Time: el}
		if cfg.EvalEvery > 0 && epoch%cfg.EvalEvery == 0 && len(cfg.Set.Val) > 0 {
			v, err := Evaluate(ctx, tr, m, cfg.Set, cfg.Set.Val, cfg.Devices)
			if err != nil {
				return nil, err
			}
			st.Val = &v
		}
		if cfg.Progress != nil {
			cfg.Progress(st)
		}
		if math.IsNaN(loss) {
			return nil, fmt.Errorf("dyntrain: loss is NaN at epoch %d", epoch)
		}
	}
	res.Plan = chunks[len(chunks)-1].plan
	res.EpochMsMedian = engine.Median(res.EpochMs)
	res.Busy, res.Imbalance, res.Overlap = Utilisation(last)
	if res.Val, err = Evaluate(ctx, tr, m, cfg.Set, cfg.Set.Val, cfg.Devices); err != nil {
		return nil, err
	}
	if res.Test, err = Evaluate(ctx, tr, m, cfg.Set, cfg.Set.Test, cfg.Devices); err != nil {
		return nil, err
	}
	// The no-training baseline: the same model at its initial parameters.
	tr0, m0, err := newTrainer(cfg)
	if err != nil {
		return nil, err
	}
	defer tr0.Close()
	if res.Baseline, err = evaluateParams(ctx, initialParams(m0, cfg.Seed), m0, cfg.Set, cfg.Set.Test, cfg.Devices[0]); err != nil {
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

// Utilisation returns per device the union of its task spans, the
// imbalance of those (max/mean - 1) and the share of busy time during
// which two or more streams of a device ran at once.
func Utilisation(t *core.Trace) (map[core.DeviceID]time.Duration, float64, float64) {
	busy := map[core.DeviceID]time.Duration{}
	if t == nil {
		return busy, 0, 0
	}
	type pt struct {
		at time.Duration
		d  int
	}
	per := map[core.DeviceID][]pt{}
	for _, e := range t.Events {
		if e.Cat != core.TaskForward.String() && e.Cat != core.TaskBackward.String() {
			continue
		}
		per[e.Device] = append(per[e.Device], pt{e.Start, 1}, pt{e.Start + e.Dur, -1})
	}
	var multi, total time.Duration
	var loads []float64
	for d, ps := range per {
		sort.Slice(ps, func(i, j int) bool {
			if ps[i].at != ps[j].at {
				return ps[i].at < ps[j].at
			}
			return ps[i].d < ps[j].d
		})
		active := 0
		var prev time.Duration
		for _, p := range ps {
			if active >= 1 {
				busy[d] += p.at - prev
			}
			if active >= 2 {
				multi += p.at - prev
			}
			active += p.d
			prev = p.at
		}
		total += busy[d]
		loads = append(loads, busy[d].Seconds())
	}
	ov := 0.0
	if total > 0 {
		ov = multi.Seconds() / total.Seconds()
	}
	return busy, blad.Imbalance(loads), ov
}
