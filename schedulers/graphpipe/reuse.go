package graphpipe

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// searchReuse keeps a scheduler's searches' choices (the partition,
// schedule kind, micro-batch count and step grouping of the plan each
// chose) for the next workloads of the same shapes. Sampled mini-batch
// training asks for a plan per batch: every batch of one size is the
// same model on the same devices with the same number of targets, only
// its sampled subgraph differs, and a whole search per batch made an
// epoch 5× longer than sequential training (sage, 500 training nodes in
// batches of 128 on cpu:0,cpu:1: 325 ms against 63). The registry's
// schedulers keep one (option reuse=on, the default); a Scheduler built
// as a struct has none and searches every time.
type searchReuse struct {
	mu     sync.Mutex
	shapes map[shapeKey][]reused // at most maxShapes, each at most maxSizes; order: the keys, oldest first
	order  []shapeKey
}

// reused is one shape's search: what its chosen candidate is (not its
// plan or simulation), and the metrics of its plan that describe the
// choice (searchMetrics), for a rebuilt plan.
type reused struct {
	chosen  candidate
	metrics map[string]float64
	dims    core.Dims // the searched batch's graph
}

// near reports whether a batch of graph d is near enough in size to the
// searched one for its choice: nodes and edges each within a factor of
// 2 (sampled batches of one target count and fanouts are; the
// neighbourhoods of batches sampled without fanouts need not be).
func (r reused) near(d core.Dims) bool {
	within := func(a, b int64) bool {
		a, b = max(a, 1), max(b, 1)
		return a <= 2*b && b <= 2*a
	}
	return within(d.Nodes, r.dims.Nodes) && within(d.Edges, r.dims.Edges)
}

// maxSizes is how many batch sizes (reused.near) a shape keeps choices
// for, the oldest out.
const maxSizes = 4

// maxShapes is how many shapes a searchReuse keeps: an epoch of sampled
// batches has two (the full batches and the last, smaller one), and a
// scheduler kept across runs a few more.
const maxShapes = 8

// shapeKey is what makes two workloads the same shape for a scheduler:
// the model (in-process: the same *core.Model), its op count, the
// devices as the workload describes them (IDs, memory caps, speeds:
// without a Cluster the scheduler plans on sim.ClusterFor(them)), the
// batch's target and group counts, and the scheduler's options. A key
// keeps a choice per batch size (reused.near): a batch sampled without
// fanouts can be many times another's, and its best plan can differ,
// not only its fit.
type shapeKey struct {
	model   *core.Model
	ops     int
	devices string
	targets int
	groups  int
	opts    schedOptions
}

// schedOptions are a Scheduler's settings that change its search.
type schedOptions struct {
	graph                                    bool
	kind                                     Kind
	micro, simulate, maxReplicas             int
	step                                     StepMode
	bucket                                   int64
	disjoint, keepWarmup, noGroups, gpipeOrd bool
	noSinkFirst                              bool
	slack                                    float64
	memCaps                                  int
	chainDP                                  ChainDP
	cluster                                  *sim.Cluster
	profile                                  *sim.Profile
}

func shapeOf(s *Scheduler, w *core.Workload) (shapeKey, bool) {
	if w.Model == nil {
		return shapeKey{}, false // over the wire: no identity to match
	}
	var b strings.Builder
	for _, d := range w.Devices {
		fmt.Fprintf(&b, "%q %q %q %d %d %d %q %g %g %q;", d.ID, d.Backend, d.Name, d.MemCap, d.MemTotal, d.Threads, d.Kernel, d.GFLOPS, d.MemGBps, d.Features)
	}
	return shapeKey{model: w.Model, ops: len(w.Ops), devices: b.String(), targets: len(w.Batch), groups: len(w.Groups),
		opts: schedOptions{graph: s.Graph, kind: s.Kind, micro: s.MicroBatches, simulate: s.Simulate, maxReplicas: s.MaxReplicas,
			step: s.Step, bucket: s.BucketBytes, disjoint: s.Disjoint, keepWarmup: s.KeepWarmup, noGroups: s.NoStepGroups, noSinkFirst: s.NoSinkFirst, slack: s.Slack, memCaps: s.MemCaps,
			gpipeOrd: s.GPipeOrder, chainDP: s.ChainDP, cluster: s.Cluster, profile: s.Profile}}, true
}

// keep records the choice a search made for w.
func (r *searchReuse) keep(s *Scheduler, w *core.Workload, chosen *candidate, p *core.Plan) {
	key, ok := shapeOf(s, w)
	if !ok || chosen == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.shapes == nil {
		r.shapes = map[shapeKey][]reused{}
	}
	if _, had := r.shapes[key]; !had {
		r.order = append(r.order, key)
		if len(r.order) > maxShapes {
			delete(r.shapes, r.order[0])
			r.order = r.order[1:]
		}
	}
	metrics := map[string]float64{}
	for _, k := range searchMetrics {
		if v, ok := p.Metrics[k]; ok {
			metrics[k] = v
		}
	}
	// The whole choice (its order options included: groups, sinkFirst),
	// less what was the searched batch's: its estimate, plan and
	// simulation.
	kept := *chosen
	kept.pred, kept.plan, kept.res = prediction{}, nil, nil
	got := append(r.shapes[key], reused{kept, metrics, w.Dims})
	r.shapes[key] = got[max(0, len(got)-maxSizes):]
}

// searchMetrics are the metrics a search sets on the plan it chose
// (Scheduler.search, Schedule) that describe the choice, not the batch,
// nor the search's work (candidates, simulated_candidates and
// micro_batch_counts_tried: a rebuilt plan weighed none, and train
// averages the metrics over its iterations). fastest_iteration_ms and
// fastest_peak_bytes (Scheduler.Slack) are the searched batch's.
var searchMetrics = []string{"micro_batches_asked", "dag_partition", "shared_trunk", "gpipe_order", "warmup_cap",
	"steps_weighed", "flush_weighed", "widened", "piper_chain", "step_groups", "sink_first", "coarsened_ops",
	"slack_chosen", "fastest_iteration_ms", "fastest_peak_bytes", "dp_mem_cap_bytes"}

// replan builds the choice of the search for w's shape, if one ran
// and the choice fits w by the estimate and the simulator (a sampled
// batch's field can be larger than the searched one's); ok false:
// search. The plan's metrics are the searched plan's, with the
// estimate and simulation of this one and search_reused 1.
func (r *searchReuse) replan(ctx context.Context, s *Scheduler, w *core.Workload, cm *sim.CostModel, devs []core.DeviceID) (*core.Plan, bool, error) {
	key, ok := shapeOf(s, w)
	if !ok {
		return nil, false, nil
	}
	r.mu.Lock()
	var got reused
	ok = false
	for i := len(r.shapes[key]) - 1; i >= 0 && !ok; i-- { // the latest near one
		if x := r.shapes[key][i]; x.near(w.Dims) {
			got, ok = x, true
		}
	}
	r.mu.Unlock()
	if !ok {
		return nil, false, nil
	}
	cd := got.chosen // a copy: the kept one stays as it was
	c := (*searchMemo)(nil).costsAt(cm, w, devs, cd.m, s.Step, float64(s.planOptions().BucketBytes))
	pred := c.estimate(cd.part, cd.kind)
	if !pred.fits {
		return nil, false, nil
	}
	cd.pred = pred
	p, err := s.build(w, &cd)
	if err != nil {
		return nil, false, err
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if s.Simulate >= 0 {
		// As the search: without simulations (Simulate < 0) it chose on
		// the estimate alone.
		res, err := sim.SimulateModel(p, cm, sim.Options{})
		if err != nil || len(res.OverCap) > 0 {
			return nil, false, nil // deadlocked or over a device's memory here: search
		}
		p.Metrics["simulated_iteration_ms"] = float64(res.Iteration) / 1e6
	}
	maps.Copy(p.Metrics, got.metrics)
	pred.setMetrics(p)
	p.Metrics["search_reused"] = 1
	return p, true, nil
}
