package sim_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// TestMeasure profiles GCN and GAT on a small graph at a subgraph size and
// the whole graph, and checks the profile against what the executor and
// the memory estimator say.
func TestMeasure(t *testing.T) {
	ctx := context.Background()
	for _, model := range []string{"gcn", "gat"} {
		t.Run(model, func(t *testing.T) {
			s := newAccuracySetup(t, model, 300, 16)
			prof, err := sim.Measure(ctx, s.tr, s.devs[0], []int{20, 0}, 2)
			if err != nil {
				t.Fatal(err)
			}
			m := s.tr.Model()
			if len(prof.Ops) != len(m.Ops) || prof.Model != model || prof.ParamBytes != m.ParamBytes() {
				t.Fatalf("profile of %d ops, model %q, %d param bytes", len(prof.Ops), prof.Model, prof.ParamBytes)
			}
			if prof.OptStateBytes != 2*m.ParamBytes() {
				t.Errorf("optimizer state %d bytes, want Adam's 2 × %d", prof.OptStateBytes, m.ParamBytes())
			}
			g := s.tr.Graph()
			for i, op := range prof.Ops {
				if op.Name != m.Ops[i].Name() || len(op.Points) != 2 {
					t.Fatalf("op %d: %+v", i, op)
				}
				whole := op.Points[1]
				if whole.Rows != int64(g.NumDst) || whole.Edges != int64(g.NumEdges()) {
					t.Errorf("%s: whole-graph point at %d rows, %d edges; want %d, %d", op.Name, whole.Rows, whole.Edges, g.NumDst, g.NumEdges())
				}
				if sub := op.Points[0]; sub.Rows <= 20 || sub.Rows >= whole.Rows {
					t.Errorf("%s: the 20-target point computes %d rows; want its receptive field", op.Name, sub.Rows)
				}
			}
			// The unit's memory adds up to the estimator's peak: what the ops
			// hold, plus the backward's peak walking the ops from the last
			// (each op's Temp over the gradients alive at its start).
			for k, unit := range []core.Unit{{Targets: spread(20, 300), Subgraph: true, LossWeight: 1}, {Targets: s.b.Targets, LossWeight: 1}} {
				_, peak, err := s.tr.Estimate(s.tr.FullBatch(unit.Targets), []core.Unit{unit}, s.devs[0].Info())
				if err != nil {
					t.Fatal(err)
				}
				total := prof.Setup[k].Mem
				var live, walk int64
				for i := len(prof.Ops) - 1; i >= 0; i-- {
					pt := prof.Ops[i].Points[k]
					total += pt.Mem
					walk = max(walk, live+pt.Temp)
					live = max(live+pt.GradIn-pt.GradOut, 0)
				}
				total += walk
				if d := total - peak; d < -int64(len(prof.Ops)) || d > int64(len(prof.Ops)) {
					t.Errorf("point %d: ops hold %d bytes in all, the estimator says %d", k, total, peak)
				}
			}
			// The roofline model's sizes come from a shape-only pass: they
			// must be what the executor traced.
			roof, err := sim.Roofline(s.w, sim.DeviceModel{GFLOPS: 10, MemGBps: 10})
			if err != nil {
				t.Fatal(err)
			}
			for i, op := range roof.Ops {
				if got, want := op.At(int64(g.NumDst), int64(g.NumEdges())).OutBytes, prof.Ops[i].Points[1].OutBytes; got != want {
					t.Errorf("%s: roofline output %d bytes, traced %d", op.Name, got, want)
				}
				if got, want := op.At(int64(g.NumDst), int64(g.NumEdges())).Mem, prof.Ops[i].Points[1].Mem; got != want {
					t.Errorf("%s: roofline holds %d bytes, measured profile %d", op.Name, got, want)
				}
			}
			var buf bytes.Buffer
			if err := sim.WriteProfile(&buf, prof); err != nil {
				t.Fatal(err)
			}
			back, err := sim.ReadProfile(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if len(back.Ops) != len(prof.Ops) || back.Ops[3].Points[1] != prof.Ops[3].Points[1] {
				t.Errorf("JSON round trip changed the profile")
			}
		})
	}
}

func spread(k, n int) []int32 {
	out := make([]int32, k)
	for i := range out {
		out[i] = int32(i * n / k)
	}
	return out
}
