package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// TrainOptions configure a training run.
type TrainOptions struct {
	Epochs    int
	Scheduler core.Scheduler
	// Train are the target nodes of every iteration (the batch); Val and
	// Test are evaluated after each epoch and at the end.
	Train, Val, Test []int32
	// Progress, if set, is called after every epoch.
	Progress func(EpochStats)
	// Trace collects the per-task trace of every epoch.
	Trace bool
}

// EpochStats report one epoch.
type EpochStats struct {
	Epoch    int
	Loss     float64
	TrainAcc float64
	ValAcc   float64
	Time     time.Duration // the iteration, without evaluation
}

// Summary is the outcome of a training run.
type Summary struct {
	Scheduler     string                  `json:"scheduler"`
	Epochs        int                     `json:"epochs"`
	EpochMs       []float64               `json:"-"`
	EpochMsMedian float64                 `json:"epoch_ms_median"`
	FinalLoss     float64                 `json:"final_loss"`
	TrainAcc      float64                 `json:"train_acc"`
	ValAcc        float64                 `json:"val_acc"`
	TestAcc       float64                 `json:"test_acc"`
	PeakMem       map[core.DeviceID]int64 `json:"peak_mem_bytes"`
	Units         int                     `json:"units"`
	Wall          time.Duration           `json:"-"`
	Trace         *core.Trace             `json:"-"`
	Plan          *core.Plan              `json:"-"`
}

// Workload describes one iteration of tr over batch on devs.
func (t *Trainer) Workload(batch []int32, devs []core.DeviceInfo) *core.Workload {
	return core.NewWorkload(t.model, t.Graph(), t.data.FeatureDim, batch, devs, t.seed)
}

// Train schedules the workload and runs opts.Epochs iterations, evaluating
// after each.
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
	w := t.Workload(opts.Train, devs)
	plan, err := opts.Scheduler.Schedule(ctx, w)
	if err != nil {
		return nil, fmt.Errorf("engine: scheduler %s: %w", opts.Scheduler.Name(), err)
	}
	if err := plan.Validate(w); err != nil {
		return nil, fmt.Errorf("engine: scheduler %s returned a bad plan: %w", opts.Scheduler.Name(), err)
	}
	s := &Summary{Scheduler: opts.Scheduler.Name(), Epochs: opts.Epochs, PeakMem: map[core.DeviceID]int64{}, Plan: plan, Units: len(plan.Units)}
	if opts.Trace {
		s.Trace = &core.Trace{PeakMem: map[core.DeviceID]int64{}}
	}
	start := time.Now()
	for e := 1; e <= opts.Epochs; e++ {
		t0 := time.Now()
		res, err := t.Run(ctx, plan, RunOptions{})
		if err != nil {
			return nil, fmt.Errorf("epoch %d: %w", e, err)
		}
		dur := time.Since(t0)
		if math.IsNaN(res.Loss) || math.IsInf(res.Loss, 0) {
			return nil, fmt.Errorf("engine: epoch %d: the loss is %v; lower the learning rate", e, res.Loss)
		}
		s.EpochMs = append(s.EpochMs, float64(dur)/1e6)
		s.FinalLoss = res.Loss
		for d, p := range res.Trace.PeakMem {
			if p > s.PeakMem[d] {
				s.PeakMem[d] = p
			}
		}
		if s.Trace != nil {
			s.Trace.Append(res.Trace, t0.Sub(start))
		}
		t1 := time.Now()
		logits, classes, err := t.Logits(ctx)
		if err != nil {
			return nil, err
		}
		st := EpochStats{Epoch: e, Loss: res.Loss, Time: dur,
			TrainAcc: Accuracy(logits, classes, t.data.Labels, opts.Train),
			ValAcc:   Accuracy(logits, classes, t.data.Labels, opts.Val)}
		if s.Trace != nil {
			s.Trace.Events = append(s.Trace.Events, core.TraceEvent{Name: "evaluate", Cat: "eval", Device: plan.Home,
				Stream: 0, Unit: -1, Start: t1.Sub(start), Dur: time.Since(t1)})
		}
		if e == opts.Epochs {
			s.TrainAcc, s.ValAcc = st.TrainAcc, st.ValAcc
			s.TestAcc = Accuracy(logits, classes, t.data.Labels, opts.Test)
		}
		if opts.Progress != nil {
			opts.Progress(st)
		}
		if fb, ok := opts.Scheduler.(core.SchedulerWithFeedback); ok {
			np, err := fb.Observe(ctx, w, res.Trace)
			if err != nil {
				return nil, fmt.Errorf("engine: scheduler %s feedback: %w", opts.Scheduler.Name(), err)
			}
			if np != nil {
				if err := np.Validate(w); err != nil {
					return nil, fmt.Errorf("engine: scheduler %s returned a bad plan after feedback: %w", opts.Scheduler.Name(), err)
				}
				plan = np
			}
		}
	}
	s.Wall = time.Since(start)
	s.EpochMsMedian = Median(s.EpochMs)
	return s, nil
}

// Median of xs (0 for none).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	c := append([]float64(nil), xs...)
	sort.Float64s(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}
