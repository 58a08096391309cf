package sim_test

import (
	"context"

	"github.com/gnnkit/gnnkit/core"
)

// The test schedulers of core/schedtest/schedtest_test.go, copied (they
// are test-only there): split is data parallelism, stages a pipeline.

// micro is a micro-batching test scheduler (Cherry's shape): the batch in
// k subgraph units, each computing its targets' receptive field, one
// after another on the first device, gradients accumulated, one step.
type micro struct{ k int }

func (s micro) Name() string { return "micro" }

func (s micro) Schedule(ctx context.Context, w *core.Workload) (*core.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d := w.Devices[0].ID
	p := &core.Plan{Scheduler: "micro", Home: d}
	k := min(s.k, len(w.Batch))
	for u := 0; u < k; u++ {
		p.Units = append(p.Units, core.Unit{ID: u, Subgraph: true})
	}
	for i, n := range w.Batch {
		p.Units[i%k].Targets = append(p.Units[i%k].Targets, n)
	}
	n := len(w.Ops)
	var last []int
	for u := range p.Units {
		p.Units[u].LossWeight = float64(len(p.Units[u].Targets)) / float64(len(w.Batch))
		f := len(p.Tasks)
		p.Tasks = append(p.Tasks,
			core.Task{ID: f, Kind: core.TaskForward, Unit: u, Device: d, OpLo: 0, OpHi: n},
			core.Task{ID: f + 1, Kind: core.TaskBackward, Unit: u, Device: d, OpLo: 0, OpHi: n, Deps: []int{f}})
		last = append(last, f+1)
	}
	p.Tasks = append(p.Tasks, core.Task{ID: len(p.Tasks), Kind: core.TaskStep, Unit: -1, Device: d, Deps: last})
	return p, nil
}
