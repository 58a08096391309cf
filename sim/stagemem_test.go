package sim_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
	"github.com/gnnkit/gnnkit/sim"
)

// TestPipelineMemory: memory does not depend on timing, so the simulated
// peak of each device of a pipeline must be what the executor measures:
// GCN's ops split in halves over two devices, 4 whole-graph micro-batches,
// unit by unit and in GPipe order, and the pipeline schedulers' plans
// over the same halves with subgraph micro-batches. Each stage's backward is walked op by
// op from the shape pass (Point.Temp, GradIn, GradOut); with the one-device
// transient shared among the ops by what they hold, the stage holding the
// loss was 16% over and the other under.
func TestPipelineMemory(t *testing.T) {
	ctx := context.Background()
	s := newAccuracySetup(t, "gcn", 4000, 64)
	cl, err := sim.CPUCluster(ctx, s.devs)
	if err != nil {
		t.Fatal(err)
	}
	prof, err := sim.MeasureWith(ctx, s.tr, s.devs[0], sim.MeasureOptions{Ladder: []int{250, 0}, Reps: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range []struct {
		name string
		s    core.Scheduler
		// retained: a device's backward leaves the gradient of a value
		// it received until the producer's backward fetches it, and in
		// these plans the producer may start that backward before or
		// after the device's next forward (the measured peak then holds
		// one such gradient more or not); the simulator takes its
		// profile's timing, the host's load decides the executor's. Its
		// peak must be within 2% of the measured one, or apart from it
		// by at most the largest such gradient and 2%: the units'
		// gradients differ in size (subgraph micro-batches), so the
		// measured peak may hold a smaller one (a CI run measured 3.8
		// MiB where the simulator said 3.7, the largest gradient 0.85
		// MiB; under load the measured peaks spread alike with the
		// executor of ca43e7a).
		retained bool
	}{
		{"unit by unit", schedtest.Stages{K: 4, Assign: schedtest.Halves}, false},
		{"GPipe order", schedtest.Stages{K: 4, Assign: schedtest.Halves, GPipe: true}, false},
		// Subgraph micro-batches of 1,000 targets: each op is priced at
		// its own hop's size (CostModel.UnitOuts); priced at the unit's
		// rows, the first stage's 1-hop activations came out 22% small
		// and the loss's device 19% under.
		{"1F1B, subgraph units, owner steps", halves(graphpipe.OneFOneB), true},
		{"GPipe, subgraph units, owner steps", halves(graphpipe.GPipe), true},
	} {
		p, err := sc.s.Schedule(ctx, s.w)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.tr.Run(ctx, p, s.b, engine.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := sim.Simulate(p, s.w, prof, cl)
		if err != nil {
			t.Fatal(err)
		}
		// The largest gradient the other device fetches from each one (two
		// devices: a device's "recv gradients" come from the other).
		slack := map[core.DeviceID]int64{}
		for _, e := range r.Trace.Events {
			if sc.retained && strings.HasPrefix(e.Name, "recv gradients") {
				for _, d := range s.devs {
					if d.ID() != e.Device {
						slack[d.ID()] = max(slack[d.ID()], e.Bytes)
					}
				}
			}
		}
		near := func(a, b int64) bool { return math.Abs(float64(a-b)) <= 0.02*float64(b) }
		for _, d := range s.devs {
			got, want := r.PeakMem[d.ID()], res.Trace.PeakMem[d.ID()]
			if apart := math.Abs(float64(got - want)); !near(got, want) && !(slack[d.ID()] > 0 && apart <= float64(slack[d.ID()])+0.02*float64(want)) {
				t.Errorf("%s: %s peaks at %s simulated, %s measured", sc.name, d.ID(), core.FormatBytes(got), core.FormatBytes(want))
			}
		}
	}
}
