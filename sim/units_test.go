package sim_test

import (
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// TestSimulateUnits: per-(unit, op) sizes cost each op at its own size
// (graph ops by edges, the rest by rows), unit by unit.
func TestSimulateUnits(t *testing.T) {
	w := chain(2, "cpu:0", "cpu:1")
	w.Ops[0].Kind = core.KindGraph
	w.Batch = []int32{0, 1}
	// op0 (graph): 1 µs per edge each way; op1 (dense): 1 µs per row.
	prof := &sim.Profile{Model: "chain", Ops: []sim.OpProfile{
		{Name: "op0", Kind: core.KindGraph, Points: []sim.Point{
			{Rows: 1, Edges: 10, Fwd: 10 * time.Microsecond, Bwd: 10 * time.Microsecond},
			{Rows: 2, Edges: 20, Fwd: 20 * time.Microsecond, Bwd: 20 * time.Microsecond}}},
		{Name: "op1", Kind: core.KindDense, Preds: []int{0}, Points: []sim.Point{
			{Rows: 1, Fwd: time.Microsecond, Bwd: time.Microsecond},
			{Rows: 2, Fwd: 2 * time.Microsecond, Bwd: 2 * time.Microsecond}}},
	}}
	p := &core.Plan{Scheduler: "t", Home: "cpu:0",
		Units: []core.Unit{{ID: 0, Targets: []int32{0}, LossWeight: 0.5}, {ID: 1, Targets: []int32{1}, LossWeight: 0.5}},
		Tasks: []core.Task{
			{ID: 0, Kind: core.TaskForward, Unit: 0, Device: "cpu:0", OpLo: 0, OpHi: 2},
			{ID: 1, Kind: core.TaskBackward, Unit: 0, Device: "cpu:0", OpLo: 0, OpHi: 2, Deps: []int{0}},
			{ID: 2, Kind: core.TaskForward, Unit: 1, Device: "cpu:1", OpLo: 0, OpHi: 2},
			{ID: 3, Kind: core.TaskBackward, Unit: 1, Device: "cpu:1", OpLo: 0, OpHi: 2, Deps: []int{2}},
			{ID: 4, Kind: core.TaskReduceGrads, Unit: -1, Device: "cpu:0", Stream: 1, From: "cpu:1", Deps: []int{3}},
			{ID: 5, Kind: core.TaskStep, Unit: -1, Device: "cpu:0", Stream: 1, Deps: []int{1, 4}},
		}}
	if err := p.Validate(w); err != nil {
		t.Fatal(err)
	}
	c := sim.CPU(2, sim.DeviceModel{Name: "cpu", GFLOPS: 100, MemGBps: 40}, sim.Link{})
	shapes := []sim.UnitShape{
		{Ops: []core.Dims{{Nodes: 5, Edges: 100}, {Nodes: 5}}, Setup: core.Dims{Nodes: 5}},
		{Ops: []core.Dims{{Nodes: 50, Edges: 1000}, {Nodes: 50}}, Setup: core.Dims{Nodes: 50}},
	}
	res, err := sim.SimulateUnits(p, w, prof, c, sim.Options{}, shapes)
	if err != nil {
		t.Fatal(err)
	}
	want := map[core.DeviceID]time.Duration{"cpu:0": 2 * (100 + 5) * time.Microsecond, "cpu:1": 2 * (1000 + 50) * time.Microsecond}
	for d, b := range want {
		if res.Busy[d] != b {
			t.Errorf("busy %s %v, want %v", d, res.Busy[d], b)
		}
	}
	if _, err := sim.SimulateUnits(p, w, prof, c, sim.Options{}, shapes[:1]); err == nil {
		t.Error("one shape for two units: want an error")
	}
}
