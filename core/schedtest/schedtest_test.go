package schedtest_test

import (
	"context"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
)

// split is a test scheduler: the batch in k units, round-robin over the
// workload's devices, each device on its own stream, gradients reduced
// into the first device. With honest loss weights it is exact.
type split struct {
	k           int
	equalWeight bool // the bug the oracle must catch: weights 1/k regardless of size
}

func (s split) Name() string { return "split" }

func (s split) Schedule(ctx context.Context, w *core.Workload) (*core.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p := &core.Plan{Scheduler: "split", Home: w.Devices[0].ID}
	// Uneven units: unit u takes nodes i with i%k == u, and unit 0 also
	// takes the tail, so sizes differ.
	k := min(s.k, len(w.Batch))
	for u := 0; u < k; u++ {
		p.Units = append(p.Units, core.Unit{ID: u})
	}
	for i, n := range w.Batch {
		u := i % k
		if i >= len(w.Batch)*3/4 {
			u = 0
		}
		p.Units[u].Targets = append(p.Units[u].Targets, n)
	}
	for u := range p.Units {
		if s.equalWeight {
			p.Units[u].LossWeight = 1 / float64(k)
		} else {
			p.Units[u].LossWeight = float64(len(p.Units[u].Targets)) / float64(len(w.Batch))
		}
	}
	n := len(w.Ops)
	lastBwd := map[core.DeviceID][]int{}
	for u := range p.Units {
		d := w.Devices[u%len(w.Devices)].ID
		stream := u % len(w.Devices)
		f := len(p.Tasks)
		p.Tasks = append(p.Tasks,
			core.Task{ID: f, Kind: core.TaskForward, Unit: u, Device: d, Stream: stream, OpLo: 0, OpHi: n},
			core.Task{ID: f + 1, Kind: core.TaskBackward, Unit: u, Device: d, Stream: stream, OpLo: 0, OpHi: n, Deps: []int{f}})
		lastBwd[d] = append(lastBwd[d], f+1)
	}
	var stepDeps []int
	for _, dev := range w.Devices {
		b := lastBwd[dev.ID]
		if len(b) == 0 {
			continue
		}
		if dev.ID == p.Home {
			stepDeps = append(stepDeps, b...)
			continue
		}
		id := len(p.Tasks)
		p.Tasks = append(p.Tasks, core.Task{ID: id, Kind: core.TaskReduceGrads, Unit: -1, Device: p.Home, Stream: 7, From: dev.ID, Deps: b})
		stepDeps = append(stepDeps, id)
	}
	p.Tasks = append(p.Tasks, core.Task{ID: len(p.Tasks), Kind: core.TaskStep, Unit: -1, Device: p.Home, Stream: 7, Deps: stepDeps})
	return p, nil
}

func TestSplitSchedulerConforms(t *testing.T) {
	schedtest.Run(t, func(t *testing.T) core.Scheduler { return split{k: 3} })
}

// TestOracleAcceptsExactSplit runs a 3-unit, 2-device plan (two streams,
// a gradient reduction) through the executor: exact against sequential.
func TestOracleAcceptsExactSplit(t *testing.T) {
	schedtest.Oracle(t, split{k: 3}, schedtest.OracleOptions{Devices: 2})
}

// TestOracleCatchesWrongWeights checks that the oracle is not vacuous.
func TestOracleCatchesWrongWeights(t *testing.T) {
	for _, model := range []string{"gcn", "sage", "gat"} {
		probs := schedtest.Compare(t, split{k: 3, equalWeight: true}, model, schedtest.OracleOptions{Devices: 2})
		if len(probs) == 0 {
			t.Errorf("%s: the oracle accepted a scheduler with wrong loss weights", model)
		}
	}
}
