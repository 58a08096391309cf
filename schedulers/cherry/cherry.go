// Package cherry is a scheduler that trains past a device's memory cap by
// micro-batching: it splits an iteration's target nodes into K
// micro-batches that each fit, computes each over its targets' receptive
// field only, accumulates their gradients (loss weights |O_k|/|O|) and
// takes one optimizer step — exactly the full batch's update.
//
// K starts at ceil(estimate / free memory) and grows where a part is still
// over the cap; parts are chosen to share few inputs (see Partition). The
// estimate replays the units on a meta device (engine.Trainer.Estimate),
// so it is the executor's own allocation sequence. The design follows
// Betty (ASPLOS'23) as reconstructed in papers.md §2; see docs/design.md.
package cherry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/gnnkit/gnnkit/core"
)

var _ core.Scheduler = (*Scheduler)(nil)

func init() {
	core.RegisterScheduler("cherry", func(opts map[string]string) (core.Scheduler, error) {
		s := &Scheduler{}
		for k, v := range opts {
			switch k {
			case "device":
				s.Device = core.DeviceID(v)
			case "k":
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 {
					return nil, fmt.Errorf("cherry: option k=%q: want a positive integer", v)
				}
				s.K = n
			case "headroom":
				f, err := strconv.ParseFloat(v, 64)
				if err != nil || f < 0 || f >= 1 {
					return nil, fmt.Errorf("cherry: option headroom=%q: want a fraction in [0, 1)", v)
				}
				s.Headroom = f
			case "reuse":
				b, err := strconv.ParseBool(v)
				if err != nil {
					return nil, fmt.Errorf("cherry: option reuse=%q: want true or false", v)
				}
				s.Reuse = b
			default:
				return nil, fmt.Errorf("cherry: unknown option %q (known: device, k, headroom, reuse)", k)
			}
		}
		return s, nil
	})
}

// Scheduler plans micro-batched training on one device.
type Scheduler struct {
	// Device to run on; empty means the workload's first device.
	Device core.DeviceID
	// K fixes the number of micro-batches (0: choose from the memory cap).
	// Parts over the cap are still split further.
	K int
	// Headroom is the fraction of the cap kept free (allocator slack).
	Headroom float64
	// Reuse computes each activation the micro-batches share once per
	// iteration (cache-and-accumulate, core.Reuse) instead of once per
	// micro-batch; the cache counts against the cap.
	Reuse bool
}

// Name returns "cherry".
func (s *Scheduler) Name() string { return "cherry" }

// ErrTooSmall reports a cap under which even one target cannot train.
var ErrTooSmall = errors.New("cherry: device memory cap too small")

// Schedule partitions the batch into micro-batches that fit the cap.
func (s *Scheduler) Schedule(ctx context.Context, w *core.Workload) (*core.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(w.Devices) == 0 || len(w.Ops) == 0 {
		return nil, errors.New("cherry: the workload has no devices or no ops")
	}
	dev := w.Devices[0]
	if s.Device != "" {
		var ok bool
		if dev, ok = w.Device(s.Device); !ok {
			return nil, fmt.Errorf("cherry: device %s is not among the workload's devices", s.Device)
		}
	}
	if w.Graph == nil || w.Model == nil || w.Estimator == nil {
		return nil, errors.New("cherry: needs the in-process workload (graph, model and memory estimator); it cannot run over a plugin connection")
	}
	hops := w.Model.Config.Layers
	targets := w.Batch
	unit := func(t []int32) core.Unit { return core.Unit{Targets: t, Subgraph: true} }

	budget := int64(math.MaxInt64)
	resident, _, err := w.Estimator(nil, dev.ID)
	if err != nil {
		return nil, err
	}
	if dev.MemCap > 0 {
		budget = int64(float64(dev.MemCap)*(1-s.Headroom)) - resident
		if budget <= 0 {
			return nil, fmt.Errorf("%w: the parameters, their gradients and the optimizer state alone take %s on %s, over the usable cap of %s; raise --device-mem well above %s",
				ErrTooSmall, core.FormatBytes(resident), dev.ID, core.FormatBytes(int64(float64(dev.MemCap)*(1-s.Headroom))), core.FormatBytes(resident))
		}
	}
	estimate := func(t []int32) (int64, error) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		_, peak, err := w.Estimator([]core.Unit{unit(t)}, dev.ID)
		return peak, err
	}
	k := s.K
	if k == 0 {
		k = 1
		if dev.MemCap > 0 && len(targets) > 1 {
			all, err := estimate(targets)
			if err != nil {
				return nil, err
			}
			k = int(min(int64(len(targets)), (all+budget-1)/budget))
		}
	}
	var parts [][]int32
	var peaks []int64
	var split func(p []int32) error
	split = func(p []int32) error {
		peak, err := estimate(p)
		if err != nil {
			return err
		}
		if peak <= budget {
			parts, peaks = append(parts, p), append(peaks, peak)
			return nil
		}
		if len(p) == 1 {
			node, worst, err := largestFootprint(w.Graph, targets, hops, estimate)
			if err != nil {
				return err
			}
			need := int64(float64(resident+worst)/(1-s.Headroom)) + 1
			return fmt.Errorf("%w: training node %d alone needs %s of activations and inputs on top of %s resident on %s, and node %d needs the most (%s); the cap is %s: raise --device-mem to at least %s",
				ErrTooSmall, p[0], core.FormatBytes(peak), core.FormatBytes(resident), dev.ID, node, core.FormatBytes(worst), core.FormatBytes(dev.MemCap), core.FormatBytes(need))
		}
		for _, q := range Partition(w.Graph, p, 2) {
			if err := split(q); err != nil {
				return err
			}
		}
		return nil
	}
	if len(targets) == 0 {
		parts, peaks = [][]int32{nil}, []int64{0}
	} else {
		for _, p := range Partition(w.Graph, targets, k) {
			if err := split(p); err != nil {
				return nil, err
			}
		}
	}

	if s.Reuse && len(targets) > 0 && w.Model.ReuseBoundary() != "" {
		if w.PlanEstimator == nil {
			return nil, errors.New("cherry: activation reuse needs the in-process plan estimator")
		}
		usable := int64(math.MaxInt64)
		if dev.MemCap > 0 {
			usable = int64(float64(dev.MemCap) * (1 - s.Headroom))
		}
		return s.reusePlan(ctx, w, dev.ID, usable, targets, parts)
	}
	plan := s.basePlan(w, dev.ID, targets, parts)
	if r, err := redundancy(w.Graph, targets, parts, hops); err == nil {
		plan.Metrics["redundancy"] = r
	}
	var top int64
	for _, p := range peaks {
		top = max(top, p)
	}
	plan.MemEstimate = map[core.DeviceID]int64{dev.ID: resident + top}
	return plan, nil
}

// basePlan is one micro-batch unit per part, run one after another on one
// stream of dev, then one optimizer step.
func (s *Scheduler) basePlan(w *core.Workload, dev core.DeviceID, targets []int32, parts [][]int32) *core.Plan {
	plan := &core.Plan{Scheduler: s.Name(), Home: dev, Metrics: map[string]float64{}}
	for i, p := range parts {
		u := core.Unit{ID: i, Targets: p, Subgraph: true}
		u.LossWeight = 1
		if len(targets) > 0 {
			u.LossWeight = float64(len(p)) / float64(len(targets))
		}
		plan.Units = append(plan.Units, u)
		f := len(plan.Tasks)
		var deps []int
		if f > 0 {
			deps = []int{f - 1}
		}
		plan.Tasks = append(plan.Tasks,
			core.Task{ID: f, Kind: core.TaskForward, Unit: i, Device: dev, OpLo: 0, OpHi: len(w.Ops), Deps: deps},
			core.Task{ID: f + 1, Kind: core.TaskBackward, Unit: i, Device: dev, OpLo: 0, OpHi: len(w.Ops), Deps: []int{f}})
	}
	last := len(plan.Tasks) - 1
	plan.Tasks = append(plan.Tasks, core.Task{ID: last + 1, Kind: core.TaskStep, Unit: -1, Device: dev, Deps: []int{last}})
	plan.Metrics["micro_batches"] = float64(len(parts))
	return plan
}

// largestFootprint finds the target whose micro-batch of one needs the
// most memory: it ranks targets by receptive-field size (nodes + edges)
// and estimates the largest few. With many targets only the 256 of
// highest in-degree are ranked.
func largestFootprint(g *core.Graph, targets []int32, hops int, estimate func([]int32) (int64, error)) (int32, int64, error) {
	cand := append([]int32(nil), targets...)
	deg := g.InDegrees()
	sort.Slice(cand, func(a, b int) bool {
		if deg[cand[a]] != deg[cand[b]] {
			return deg[cand[a]] > deg[cand[b]]
		}
		return cand[a] < cand[b]
	})
	if len(cand) > 256 {
		cand = cand[:256]
	}
	type scored struct {
		node int32
		size int
	}
	var sc []scored
	for _, t := range cand {
		sub, err := g.KHop([]int32{t}, hops)
		if err != nil {
			return 0, 0, err
		}
		sc = append(sc, scored{t, len(sub.Nodes) + sub.NumEdges()})
	}
	sort.SliceStable(sc, func(a, b int) bool { return sc[a].size > sc[b].size })
	var node int32
	var worst int64
	for i := 0; i < len(sc) && i < 8; i++ {
		peak, err := estimate([]int32{sc[i].node})
		if err != nil {
			return 0, 0, err
		}
		if peak > worst {
			node, worst = sc[i].node, peak
		}
	}
	return node, worst, nil
}

// redundancy is the inputs of all parts over the inputs of the batch: the
// receptive-field node counts summed over parts, divided by the batch's.
func redundancy(g *core.Graph, targets []int32, parts [][]int32, hops int) (float64, error) {
	if len(targets) == 0 || hops <= 0 {
		return 1, nil
	}
	all, err := g.KHop(targets, hops)
	if err != nil {
		return 0, err
	}
	sum := 0
	for _, p := range parts {
		sub, err := g.KHop(p, hops)
		if err != nil {
			return 0, err
		}
		sum += len(sub.Nodes)
	}
	return float64(sum) / float64(len(all.Nodes)), nil
}
