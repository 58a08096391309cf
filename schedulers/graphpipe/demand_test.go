package graphpipe

import (
	"slices"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// TestDemandFirst replays two plans of the benchmark's memory-capped
// uno-4 on 4 PCIe A100s with the transfers through a port shared evenly
// and with the demanded ones first (sim.Cluster.DemandFirst): GraphPipe's
// in the earliest-ready order on its shared devices, where cuda:3 waits
// for a gradient that cuda:0 sends to three devices at once (RESULTS,
// eighteenth session), and the 1F1B chain's data parallelism, whose
// owners wait for their reductions. The same bytes move, and both
// iterations end sooner. GraphPipe's plan as chosen runs the trunk first
// on its shared devices (PlanOptions.SinkFirst), which sends that
// gradient before the next forward's activations: it gains nothing from
// demand first, and loses nothing.
func TestDemandFirst(t *testing.T) {
	w, cl, prof, _, _ := unoWithMemory(t, core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}, 8192, 4, 1521789653)
	demand := *cl
	demand.DemandFirst = true
	// both simulates p with the transfers shared evenly and demanded first.
	both := func(p *core.Plan) (even, first *sim.Result) {
		t.Helper()
		even, err := sim.Simulate(p, w, prof, cl)
		if err != nil {
			t.Fatal(err)
		}
		first, err = sim.Simulate(p, w, prof, &demand)
		if err != nil {
			t.Fatal(err)
		}
		return even, first
	}
	for _, s := range []*Scheduler{
		{Graph: true, Kind: OneFOneB, Cluster: cl, Profile: prof},
		{Kind: OneFOneB, Cluster: cl, Profile: prof},
	} {
		p, err := s.Schedule(t.Context(), w)
		if err != nil {
			t.Fatal(err)
		}
		if s.Graph {
			chosen, first := both(p)
			if first.Iteration != chosen.Iteration {
				t.Errorf("%s as chosen: %v demanded first, %v shared evenly", s.Name(), first.Iteration, chosen.Iteration)
			}
			t.Logf("%s as chosen: %v shared evenly and demanded first", s.Name(), chosen.Iteration)
			ranked := false
			q := *p
			q.Tasks = slices.Clone(p.Tasks)
			for i := range q.Tasks {
				ranked = ranked || q.Tasks[i].Priority != 0
				q.Tasks[i].Priority = 0
			}
			if !ranked || p.Metrics["sink_first"] != 1 {
				t.Fatalf("%s: the chosen plan does not run its trunk first (sink_first %v)", s.Name(), p.Metrics["sink_first"])
			}
			p = &q
		}
		even, first := both(p)
		if first.BytesMoved != even.BytesMoved {
			t.Errorf("%s: %d bytes moved demanded first, %d shared evenly", s.Name(), first.BytesMoved, even.BytesMoved)
		}
		if first.Iteration >= even.Iteration {
			t.Errorf("%s: %v demanded first, not shorter than %v shared evenly", s.Name(), first.Iteration, even.Iteration)
		}
		t.Logf("%s (m = %d): %v shared evenly, %v demanded first", s.Name(), len(p.Units), even.Iteration, first.Iteration)
	}
}
