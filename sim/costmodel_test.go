package sim_test

import (
	"math"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// TestCostModelPricesLikeSimulate: a sequential plan's simulated
// iteration is the sum of what the cost model says its parts cost (every
// op forward and backward at the unit's size, the unit's setup, the
// step), and a two-device pipeline's adds the link transfers the cost
// model prices; SimulateModel on a (cloned) cost model gives what
// Simulate gives.
func TestCostModelPricesLikeSimulate(t *testing.T) {
	const nOps = 4
	w := chain(nOps, devIDs(2)...)
	prof := flat(w, 3*time.Millisecond, 5*time.Millisecond, 100, 1<<20)
	prof.Setup = []sim.Point{{Rows: 1, Fwd: time.Millisecond, Bwd: 2 * time.Millisecond}}
	prof.Step = 4 * time.Millisecond
	cl := sim.CPU(2, sim.DeviceModel{GFLOPS: 100, MemGBps: 10}, sim.Link{GBps: 1, Latency: 10 * time.Microsecond})
	cm, err := sim.NewCostModel(w, prof, cl)
	if err != nil {
		t.Fatal(err)
	}
	unit := core.Unit{ID: 0, Targets: []int32{0}, LossWeight: 1}
	rows, edges := cm.UnitSize(unit)
	d0, d1 := core.DeviceID("cpu:0"), core.DeviceID("cpu:1")
	var want time.Duration
	for o := range nOps {
		c := cm.Op(d0, o, rows, edges)
		want += c.Fwd + c.Bwd
	}
	s := cm.Setup(d0, rows, edges, !unit.Subgraph)
	want += s.Fwd + s.Bwd + cm.Step(d0)

	seq := &core.Plan{Scheduler: "seq", Home: d0, Units: []core.Unit{unit}, Tasks: []core.Task{
		{ID: 0, Kind: core.TaskForward, Unit: 0, Device: d0, OpLo: 0, OpHi: nOps},
		{ID: 1, Kind: core.TaskBackward, Unit: 0, Device: d0, OpLo: 0, OpHi: nOps, Deps: []int{0}},
		{ID: 2, Kind: core.TaskStep, Unit: -1, Device: d0, Deps: []int{1}},
	}}
	res, err := sim.Simulate(seq, w, prof, cl)
	if err != nil {
		t.Fatal(err)
	}
	if res.Iteration != want {
		t.Errorf("sequential: simulated %v, the cost model's parts add up to %v", res.Iteration, want)
	}

	// Two stages: ops 0-1 on cpu:0, 2-3 on cpu:1 (synchronous copies:
	// the activation and its gradient cross the link inside the tasks),
	// cpu:1's gradients reduced into home, the step, the refresh.
	pipe := &core.Plan{Scheduler: "pipe", Home: d0, Units: []core.Unit{unit}, Tasks: []core.Task{
		{ID: 0, Kind: core.TaskForward, Unit: 0, Device: d0, OpLo: 0, OpHi: 2},
		{ID: 1, Kind: core.TaskForward, Unit: 0, Device: d1, OpLo: 2, OpHi: 4, Deps: []int{0}},
		{ID: 2, Kind: core.TaskBackward, Unit: 0, Device: d1, OpLo: 2, OpHi: 4, Deps: []int{1}},
		{ID: 3, Kind: core.TaskBackward, Unit: 0, Device: d0, OpLo: 0, OpHi: 2, Deps: []int{0, 2}},
		{ID: 4, Kind: core.TaskReduceGrads, Unit: -1, Device: d0, Stream: 1, From: d1, Deps: []int{2}},
		{ID: 5, Kind: core.TaskStep, Unit: -1, Device: d0, Stream: 1, Deps: []int{3, 4}},
	}}
	out := cm.Op(d0, 1, rows, edges).OutBytes
	x := cm.Transfer(d0, d1, out)
	wantPipe := want + 2*x + s.Fwd + s.Bwd // the second device sets the unit up too
	res, err = sim.Simulate(pipe, w, prof, cl)
	if err != nil {
		t.Fatal(err)
	}
	// The ops read no parameters here: the reduction moves nothing but
	// pays the link's latency, and there is nothing to refresh.
	wantPipe += cm.Transfer(d1, d0, 0) + cm.ReduceSum(d0, 0)
	if res.Iteration != wantPipe {
		t.Errorf("pipeline: simulated %v, the cost model's parts add up to %v", res.Iteration, wantPipe)
	}
	again, err := sim.SimulateModel(pipe, cm.Clone(), sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Iteration != res.Iteration {
		t.Errorf("SimulateModel: %v, Simulate: %v", again.Iteration, res.Iteration)
	}
	if r := cm.Resident(true, false, 0); r != 2*cm.ParamBytes()+2*cm.ParamBytes() {
		t.Errorf("home resident %d, want parameters, gradients and Adam's two moments", r)
	}
	if u := cm.ParamBytes() / 2; cm.Resident(false, false, u) != 2*u {
		t.Errorf("resident off home with %d parameter bytes read: %d, want its parameters and gradients (%d)", u, cm.Resident(false, false, u), 2*u)
	}
}

// TestClusterFor: a scheduler that is only given DeviceInfos recovers the
// preset they came from (links included), logical CPU devices get the cpu
// preset, anything else a stated guess.
func TestClusterFor(t *testing.T) {
	pre, err := sim.Preset("nvlink-h100", 16)
	if err != nil {
		t.Fatal(err)
	}
	c := sim.ClusterFor(pre.Infos())
	if c.Link != pre.Link || c.InterNode != pre.InterNode || c.NodeSize != pre.NodeSize || len(c.Devices) != 16 || c.Devices[3] != pre.Devices[3] {
		t.Errorf("nvlink-h100 infos: got cluster %+v", c)
	}
	cpu := sim.ClusterFor([]core.DeviceInfo{{ID: "cpu:0", Backend: "cpu"}, {ID: "cpu:1", Backend: "cpu", MemCap: 1 << 30}})
	if !cpu.SyncTransfers || cpu.HostCores <= 0 || cpu.Devices[1].MemBytes != 1<<30 || cpu.Devices[0].GFLOPS != 100 {
		t.Errorf("cpu infos: got %+v", cpu)
	}
	g := sim.ClusterFor([]core.DeviceInfo{{ID: "x:0", GFLOPS: 7}})
	if g.SyncTransfers || g.Devices[0].GFLOPS != 7 || g.Devices[0].MemGBps != 20 || g.Link.GBps != 10 || math.IsNaN(g.Link.GBps) {
		t.Errorf("other infos: got %+v", g)
	}
}

// TestUnitSizeFollowsMessagePassing: a subgraph unit of a model that
// passes messages computes its targets' receptive field; one of a model
// without graph inputs (uno, an MLP over node features) computes only its
// targets, as the executor does, however many layers the model has.
func TestUnitSizeFollowsMessagePassing(t *testing.T) {
	// A path 0-1-2-...-9.
	var src, dst []int32
	for i := int32(0); i < 9; i++ {
		src, dst = append(src, i), append(dst, i+1)
	}
	g, err := core.Undirected(10, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	unit := core.Unit{Targets: []int32{0}, LossWeight: 1, Subgraph: true}
	for _, c := range []struct {
		model string
		rows  int64
	}{{"gcn", 3}, {"uno", 1}} {
		m, err := core.BuildModel(c.model, core.ModelConfig{InDim: 4, Hidden: 4, Classes: 2, Layers: 2})
		if err != nil {
			t.Fatal(err)
		}
		w := core.NewWorkload(m, g, 4, []int32{0}, []core.DeviceInfo{{ID: "cpu:0"}}, 1)
		cm, err := sim.NewCostModel(w, nil, sim.CPU(1, sim.DeviceModel{GFLOPS: 100, MemGBps: 10}, sim.Link{GBps: 1}))
		if err != nil {
			t.Fatal(err)
		}
		if rows, _ := cm.UnitSize(unit); rows != c.rows {
			t.Errorf("%s: a unit of target 0 on a path has %d rows, want %d", c.model, rows, c.rows)
		}
	}
}
