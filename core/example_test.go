package core_test

import (
	"errors"
	"fmt"

	"github.com/gnnkit/gnnkit/core"
)

// ExampleGraph builds a small undirected graph, adds self-loops and reads
// its GCN normalisation, then extracts a 1-hop neighbourhood.
func ExampleGraph() {
	g, _ := core.Undirected(4, []int32{0, 1, 2}, []int32{1, 2, 3}) // path 0-1-2-3
	s, _ := g.WithSelfLoops()
	fmt.Println("edges:", g.NumEdges(), "with self-loops:", s.NumEdges())
	fmt.Println("in-degrees:", s.InDegrees())
	fmt.Printf("norm of edge 0->0: %.3f\n", s.GCNNorm()[0])
	sub, _ := g.KHop([]int32{0}, 1)
	fmt.Println("1-hop of node 0:", sub.Nodes)
	// Output:
	// edges: 6 with self-loops: 10
	// in-degrees: [2 3 3 2]
	// norm of edge 0->0: 0.500
	// 1-hop of node 0: [0 1]
}

// ExamplePlan_Validate shows a plan that loses a batch node being rejected.
func ExamplePlan_Validate() {
	w := &core.Workload{
		Ops:     []core.OpInfo{{Index: 0, Name: "linear"}},
		Batch:   []int32{0, 1, 2},
		Devices: []core.DeviceInfo{{ID: "cpu:0"}},
	}
	p := &core.Plan{Home: "cpu:0",
		Units: []core.Unit{{ID: 0, Targets: []int32{0, 1}, LossWeight: 1}},
		Tasks: []core.Task{
			{ID: 0, Kind: core.TaskForward, Unit: 0, Device: "cpu:0", OpLo: 0, OpHi: 1},
			{ID: 1, Kind: core.TaskBackward, Unit: 0, Device: "cpu:0", OpLo: 0, OpHi: 1, Deps: []int{0}},
			{ID: 2, Kind: core.TaskStep, Unit: -1, Device: "cpu:0", Deps: []int{1}},
		}}
	err := p.Validate(w)
	fmt.Println(errors.Is(err, core.ErrInvalidPlan))
	fmt.Println(err)
	// Output:
	// true
	// core: invalid plan: 1 batch nodes are in no unit (e.g. [2])
}

// ExampleParseBytes reads a --device-mem value.
func ExampleParseBytes() {
	n, _ := core.ParseBytes("256MiB")
	fmt.Println(n, core.FormatBytes(n))
	// Output: 268435456 256.0 MiB
}

// ExamplePlan_StageGraph reads the stage DAG back from a two-stage
// pipeline plan: stage 0 (op a, replicated on two devices) feeds stage 1
// (op b).
func ExamplePlan_StageGraph() {
	w := &core.Workload{Ops: []core.OpInfo{{Index: 0, Name: "a"}, {Index: 1, Name: "b", Deps: []int{0}}}}
	p := &core.Plan{Tasks: []core.Task{
		{ID: 0, Kind: core.TaskForward, Unit: 0, Device: "cpu:0", Ops: []int{0}},
		{ID: 1, Kind: core.TaskForward, Unit: 1, Device: "cpu:1", Ops: []int{0}},
		{ID: 2, Kind: core.TaskForward, Unit: 0, Device: "cpu:2", Ops: []int{1}, Deps: []int{0}},
		{ID: 3, Kind: core.TaskForward, Unit: 1, Device: "cpu:2", Ops: []int{1}, Deps: []int{1, 2}},
	}}
	stages, err := p.StageGraph(w)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, st := range stages {
		fmt.Printf("stage %d: ops %v on %v, %d units, successors %v, k %d\n", i, st.Ops, st.Replicas, st.Units, st.Succ, st.Depth)
	}
	// Output:
	// stage 0: ops [0] on [{cpu:0 0} {cpu:1 0}], 2 units, successors [1], k 2
	// stage 1: ops [1] on [{cpu:2 0}], 2 units, successors [], k 1
}
