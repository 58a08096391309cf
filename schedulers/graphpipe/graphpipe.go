// Package graphpipe holds pipeline-parallel schedulers: GraphPipe
// (ASPLOS'25; papers.md §3), whose stages form a DAG so independent
// branches run concurrently, and the chain baselines GPipe and 1F1B
// (PipeDream-Flush) over a PipeDream-style contiguous partition.
//
// Every plan is synchronous: m micro-batches (loss weights |O_i|/|O|)
// flow through the stages, gradients accumulate, and one optimizer step
// ends the iteration, so training is exactly sequential training's.
package graphpipe

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gnnkit/gnnkit/core"
)

var _ core.Scheduler = (*Scheduler)(nil)

func init() {
	for _, s := range []struct {
		name  string
		graph bool
		kind  Kind
	}{{"graphpipe", true, OneFOneB}, {"1f1b", false, OneFOneB}, {"gpipe", false, GPipe}} {
		core.RegisterScheduler(s.name, func(opts map[string]string) (core.Scheduler, error) {
			sc := &Scheduler{Graph: s.graph, Kind: s.kind}
			for k, v := range opts {
				switch k {
				case "microbatches", "m":
					n, err := strconv.Atoi(v)
					if err != nil || n < 1 {
						return nil, fmt.Errorf("%s: option %s=%q: want a positive integer", s.name, k, v)
					}
					sc.MicroBatches = n
				default:
					return nil, fmt.Errorf("%s: unknown option %q (known: microbatches)", s.name, k)
				}
			}
			return sc, nil
		})
	}
}

// Scheduler partitions the model into stages over the workload's devices
// and pipelines micro-batches through them.
type Scheduler struct {
	// Graph selects GraphPipe's DAG partitioner; false is the chain
	// (PipeDream) baseline.
	Graph bool
	// Kind is the micro-batch schedule.
	Kind Kind
	// MicroBatches per iteration (default 4).
	MicroBatches int
}

// connected rejects op graphs with ops that do not lead to the loss (the
// last op): their stages would receive no gradient and the pipeline
// would have dangling branches.
func connected(w *core.Workload) error {
	n := len(w.Ops)
	reaches := make([]bool, n)
	reaches[n-1] = true
	for o := n - 1; o >= 0; o-- {
		if !reaches[o] {
			continue
		}
		for _, d := range w.Ops[o].Deps {
			if d < 0 || d >= o {
				return fmt.Errorf("graphpipe: op %s depends on op %d, which does not come before it: the op graph is not a DAG in topological order", w.Ops[o].Name, d)
			}
			reaches[d] = true
		}
	}
	for o, ok := range reaches {
		if !ok {
			return fmt.Errorf("graphpipe: op %s does not lead to the loss (%s): the op graph is disconnected", w.Ops[o].Name, w.Ops[n-1].Name)
		}
	}
	return nil
}

// Name returns "graphpipe", "1f1b" or "gpipe".
func (s *Scheduler) Name() string {
	if s.Graph {
		return "graphpipe"
	}
	return s.Kind.String()
}

// Schedule partitions and schedules one iteration.
func (s *Scheduler) Schedule(ctx context.Context, w *core.Workload) (*core.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(w.Devices) == 0 || len(w.Ops) == 0 {
		return nil, errors.New(s.Name() + ": the workload has no devices or no ops")
	}
	m := s.MicroBatches
	if m == 0 {
		m = 4
	}
	devs := make([]core.DeviceID, len(w.Devices))
	var memCap int64
	for i, d := range w.Devices {
		devs[i] = d.ID
		if d.MemCap > 0 && (memCap == 0 || d.MemCap < memCap) {
			memCap = d.MemCap
		}
	}
	if err := connected(w); err != nil {
		return nil, err
	}
	c := EstimateCosts(w, w.Devices[0])
	var part Partition
	var coarse [][]int
	var err error
	if s.Graph {
		part, coarse, err = GraphPartition(w, c, devs, m, memCap)
	} else {
		part, err = ChainPartition(w, c, devs, m, memCap)
	}
	if err != nil {
		return nil, err
	}
	p, err := BuildPlan(w, part, m, s.Kind, s.Name())
	if err != nil {
		return nil, err
	}
	if s.Kind == OneFOneB {
		// With replicated stages (micro-batches dealt round-robin to the
		// replicas) the k_s warm-up can leave a cycle between a replica's
		// queue and its neighbours'; GPipe's order cannot deadlock.
		if verr := p.Validate(w); verr != nil && strings.Contains(verr.Error(), "deadlock") {
			if p, err = BuildPlan(w, part, m, GPipe, s.Name()); err != nil {
				return nil, err
			}
			p.Metrics["fallback_gpipe"] = 1
		}
	}
	lost := 0
	for _, r := range coarse {
		lost += len(r)
	}
	p.Metrics["coarsened_ops"] = float64(lost)
	return p, nil
}
