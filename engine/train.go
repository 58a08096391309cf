package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/internal/stats"
)

// TrainOptions configure a training run.
type TrainOptions struct {
	Epochs    int
	Scheduler core.Scheduler
	// Train are the training nodes; Train and Val are evaluated (on the
	// full graph) after each epoch (see EvalEvery), and Test at the end.
	Train, Val, Test []int32
	// EvalEvery evaluates Train and Val after every EvalEvery-th epoch
	// only (and the last); 0 or 1: after every epoch (unlike
	// dyntrain.Config.EvalEvery, whose 0 is never). Evaluation passes
	// over the whole graph: on small iterations it costs as much as the
	// training, and leaves the next iteration's caches cold.
	EvalEvery int
	// BatchSize 0 with no Fanouts is full-graph training: one iteration
	// per epoch over the whole graph with every training node a target.
	// Otherwise each epoch shuffles Train into batches of BatchSize (0:
	// all) and samples each batch's neighbourhood with Fanouts (one per
	// layer, -1 for all neighbours; default all).
	BatchSize int
	Fanouts   []int
	// Progress, if set, is called after every epoch.
	Progress func(EpochStats)
	// Trace collects the per-task trace of every epoch.
	Trace bool
}

// EpochStats report one epoch.
type EpochStats struct {
	Epoch      int
	Iterations int
	Loss       float64 // mean over the epoch's iterations
	TrainAcc   float64
	ValAcc     float64
	// Evaluated says whether TrainAcc and ValAcc are this epoch's (with
	// TrainOptions.EvalEvery, other epochs carry the last evaluation's).
	Evaluated bool
	Time      time.Duration // the iterations, without evaluation
}

// Summary is the outcome of a training run.
type Summary struct {
	Scheduler  string `json:"scheduler"`
	Epochs     int    `json:"epochs"`
	Iterations int    `json:"iterations_per_epoch"`
	// SchedulingMs is the time spent planning (describing each batch's
	// workload and the scheduler's Schedule), Plans how many plans: one
	// for full-graph training, one per sampled batch. Epoch times hold it.
	SchedulingMs float64 `json:"scheduling_ms"`
	Plans        int     `json:"plans"`
	// EpochMs are the epochs' times; EpochMsMedian their median, without
	// the first when there are more (it holds the first iteration, below:
	// with it, a few epochs' median could fall under their iterations').
	EpochMs       []float64 `json:"-"`
	EpochMsMedian float64   `json:"epoch_ms_median"`
	// IterationMs are the iterations' times (running the plan, without
	// scheduling or evaluation); IterationMsMedian their median, without
	// the first when there are more (it uploads the inputs and warms
	// every buffer: several times a steady iteration).
	IterationMs       []float64               `json:"-"`
	IterationMsMedian float64                 `json:"iteration_ms_median"`
	FinalLoss         float64                 `json:"final_loss"`
	TrainAcc          float64                 `json:"train_acc"`
	ValAcc            float64                 `json:"val_acc"`
	TestAcc           float64                 `json:"test_acc"`
	PeakMem           map[core.DeviceID]int64 `json:"peak_mem_bytes"`
	// PredictedPeak is the largest peak the scheduler predicted
	// (Plan.MemEstimate), when it predicts one.
	PredictedPeak map[core.DeviceID]int64 `json:"predicted_peak_mem_bytes,omitempty"`
	Units         int                     `json:"units"`
	// EvalFallbacks counts the evaluations that ran on the trainer's
	// Config.EvalDevice because the training devices ran out of memory.
	EvalFallbacks int `json:"eval_fallbacks,omitempty"`
	// Metrics are the plans' Metrics averaged over all iterations.
	Metrics map[string]float64 `json:"scheduler_metrics,omitempty"`
	Wall    time.Duration      `json:"-"`
	Trace   *core.Trace        `json:"-"`
	Plan    *core.Plan         `json:"-"`
}

// Train runs opts.Epochs epochs, scheduling each iteration's batch with
// opts.Scheduler, and evaluates after each epoch (or every
// opts.EvalEvery-th, and the last).
func Train(ctx context.Context, t *Trainer, devs []core.DeviceInfo, opts TrainOptions) (*Summary, error) {
	if opts.Scheduler == nil {
		return nil, errors.New("engine: no scheduler")
	}
	if opts.Epochs <= 0 {
		return nil, fmt.Errorf("engine: epochs must be positive, got %d", opts.Epochs)
	}
	if len(opts.Train) == 0 {
		return nil, errors.New("engine: no training nodes")
	}
	if opts.EvalEvery < 0 {
		return nil, fmt.Errorf("engine: evaluating every %d epochs: want a positive interval (0: every epoch)", opts.EvalEvery)
	}
	if opts.BatchSize < 0 {
		return nil, fmt.Errorf("engine: batch size must not be negative, got %d", opts.BatchSize)
	}
	fullGraph := opts.BatchSize == 0 && opts.Fanouts == nil
	fanouts := opts.Fanouts
	if !fullGraph && fanouts == nil {
		for l := 0; l < max(1, t.model.Config.Layers); l++ {
			fanouts = append(fanouts, -1)
		}
	}
	s := &Summary{Scheduler: opts.Scheduler.Name(), Epochs: opts.Epochs, PeakMem: map[core.DeviceID]int64{},
		PredictedPeak: map[core.DeviceID]int64{}, Metrics: map[string]float64{}}
	if opts.Trace {
		s.Trace = &core.Trace{PeakMem: map[core.DeviceID]int64{}}
	}
	schedule := func(b *Batch) (*core.Plan, *core.Workload, error) {
		t0 := time.Now()
		defer func() { s.SchedulingMs += float64(time.Since(t0)) / 1e6; s.Plans++ }()
		w, err := t.Workload(b, devs)
		if err != nil {
			return nil, nil, err
		}
		plan, err := opts.Scheduler.Schedule(ctx, w)
		if err != nil {
			return nil, nil, core.ScheduleError(opts.Scheduler.Name(), err)
		}
		if err := plan.Validate(w); err != nil {
			return nil, nil, fmt.Errorf("scheduler %s returned a bad plan: %w", opts.Scheduler.Name(), err)
		}
		return plan, w, nil
	}
	var full *Batch
	var fullPlan *core.Plan
	var fullW *core.Workload
	if fullGraph {
		full = t.FullBatch(opts.Train)
		var err error
		if fullPlan, fullW, err = schedule(full); err != nil {
			return nil, err
		}
	}
	evalNodes := append(append([]int32(nil), opts.Train...), opts.Val...)
	start := time.Now()
	fallbacks0 := t.EvalFallbacks()
	iters := 0
	metricSums := map[string]float64{}
	var last EpochStats // the last evaluation's accuracies
	for e := 1; e <= opts.Epochs; e++ {
		t0 := time.Now()
		var batches []*Batch
		if fullGraph {
			batches = []*Batch{full}
		} else {
			perm := append([]int32(nil), opts.Train...)
			r := rand.New(rand.NewPCG(t.seed, uint64(e)))
			r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
			bs := opts.BatchSize
			if bs == 0 {
				bs = len(perm)
			}
			for lo := 0; lo < len(perm); lo += bs {
				b, err := Sample(t.data.Graph, perm[lo:min(len(perm), lo+bs)], fanouts, mix(t.seed, uint64(e)<<20|uint64(lo/bs)))
				if err != nil {
					return nil, err
				}
				batches = append(batches, b)
			}
		}
		var lossSum float64
		for _, b := range batches {
			plan, w := fullPlan, fullW
			if !fullGraph {
				var err error
				if plan, w, err = schedule(b); err != nil {
					return nil, fmt.Errorf("epoch %d: %w", e, err)
				}
			}
			it0 := time.Now()
			res, err := t.Run(ctx, plan, b, RunOptions{})
			if err != nil {
				return nil, fmt.Errorf("epoch %d: %w", e, err)
			}
			if math.IsNaN(res.Loss) || math.IsInf(res.Loss, 0) {
				return nil, fmt.Errorf("epoch %d: the loss is %v; lower the learning rate", e, res.Loss)
			}
			s.IterationMs = append(s.IterationMs, float64(time.Since(it0))/1e6)
			lossSum += res.Loss
			iters++
			s.Plan, s.Units = plan, len(plan.Units)
			for k, v := range plan.Metrics {
				metricSums[k] += v
			}
			for d, p := range res.Trace.PeakMem {
				s.PeakMem[d] = max(s.PeakMem[d], p)
			}
			for d, p := range plan.MemEstimate {
				s.PredictedPeak[d] = max(s.PredictedPeak[d], p)
			}
			if s.Trace != nil {
				s.Trace.Append(res.Trace, it0.Sub(start))
			}
			if fb, ok := opts.Scheduler.(core.SchedulerWithFeedback); ok && fullGraph {
				np, err := fb.Observe(ctx, w, res.Trace)
				if err != nil {
					return nil, fmt.Errorf("scheduler %s feedback: %w", opts.Scheduler.Name(), err)
				}
				if np != nil {
					if err := np.Validate(w); err != nil {
						return nil, fmt.Errorf("scheduler %s returned a bad plan after feedback: %w", opts.Scheduler.Name(), err)
					}
					if t.homeFor(np.Home) != t.home {
						return nil, fmt.Errorf("%s: Observe moved the plan's home from %s to %s; a plan from Observe must keep the first plan's home, where the master parameters and optimizer state live",
							schedulerLabel(opts.Scheduler), plan.Home, np.Home)
					}
					fullPlan = np
				}
			}
		}
		dur := time.Since(t0)
		s.EpochMs = append(s.EpochMs, float64(dur)/1e6)
		s.Iterations = len(batches)
		s.FinalLoss = lossSum / float64(len(batches))

		st := EpochStats{Epoch: e, Iterations: len(batches), Loss: s.FinalLoss, Time: dur, TrainAcc: last.TrainAcc, ValAcc: last.ValAcc}
		if e == opts.Epochs || opts.EvalEvery <= 1 || e%opts.EvalEvery == 0 {
			t1 := time.Now()
			nodes := evalNodes
			if e == opts.Epochs {
				nodes = append(append([]int32(nil), evalNodes...), opts.Test...)
			}
			preds, err := t.Predict(ctx, nodes)
			if err != nil {
				return nil, fmt.Errorf("epoch %d: %w", e, err)
			}
			nt, nv := len(opts.Train), len(opts.Val)
			st.TrainAcc = Accuracy(preds[:nt], t.data.Labels, opts.Train)
			st.ValAcc = Accuracy(preds[nt:nt+nv], t.data.Labels, opts.Val)
			st.Evaluated = true
			last = st
			if s.Trace != nil {
				s.Trace.Events = append(s.Trace.Events, core.TraceEvent{Name: "evaluate", Cat: "eval", Device: t.home,
					Stream: 0, Unit: -1, Start: t1.Sub(start), Dur: time.Since(t1)})
			}
			if e == opts.Epochs {
				s.TrainAcc, s.ValAcc = st.TrainAcc, st.ValAcc
				s.TestAcc = Accuracy(preds[nt+nv:], t.data.Labels, opts.Test)
			}
		}
		if opts.Progress != nil {
			opts.Progress(st)
		}
	}
	s.Wall = time.Since(start)
	s.EvalFallbacks = t.EvalFallbacks() - fallbacks0
	s.EpochMsMedian = Median(s.EpochMs)
	if len(s.EpochMs) > 1 {
		s.EpochMsMedian = Median(s.EpochMs[1:])
	}
	s.IterationMsMedian = Median(s.IterationMs)
	if len(s.IterationMs) > 1 {
		s.IterationMsMedian = Median(s.IterationMs[1:])
	}
	for k, v := range metricSums {
		s.Metrics[k] = v / float64(iters)
	}
	return s, nil
}

// Median of xs (0 for none).
func Median(xs []float64) float64 { return stats.Median(xs) }

// schedulerLabel names a scheduler in messages: "scheduler NAME", or what
// the scheduler says it is (a plugin: its name and path) when it is a
// fmt.Stringer.
func schedulerLabel(s core.Scheduler) string {
	if st, ok := s.(fmt.Stringer); ok {
		return st.String()
	}
	return "scheduler " + s.Name()
}
