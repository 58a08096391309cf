package sequential_test

import (
	"context"
	"fmt"

	"github.com/gnnkit/gnnkit/core"
	_ "github.com/gnnkit/gnnkit/models"
	"github.com/gnnkit/gnnkit/schedulers/sequential"
)

// The reference plan for a 2-layer GCN on a 6-node path graph over two
// devices, asked for by name with option device=cpu:1 (what
// --scheduler sequential --sched-opt device=cpu:1 does): the whole batch
// is one unit computing the whole graph, run forward and then backward
// over every op of the model, then one optimizer step, all on the chosen
// device and one stream. A device the workload lacks is an error.
func ExampleScheduler() {
	m, err := core.BuildModel("gcn", core.ModelConfig{InDim: 8, Hidden: 16, Classes: 3, Layers: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := core.Undirected(6, []int32{0, 1, 2, 3, 4}, []int32{1, 2, 3, 4, 5}) // path 0-1-2-3-4-5
	if err != nil {
		fmt.Println(err)
		return
	}
	devs := []core.DeviceInfo{{ID: "cpu:0"}, {ID: "cpu:1"}}
	w := core.NewWorkload(m, g, 8, []int32{0, 2, 5}, devs, 1)

	s, err := core.NewScheduler("sequential", map[string]string{"device": "cpu:1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := s.Schedule(context.Background(), w)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, u := range p.Units {
		fmt.Printf("unit %d: targets %v, loss weight %g, whole graph: %v\n", u.ID, u.Targets, u.LossWeight, !u.Subgraph)
	}
	for _, t := range p.Tasks {
		ops := t.OpIndices()
		if len(ops) == 0 {
			fmt.Printf("task %d: %s on %s stream %d after %v\n", t.ID, t.Kind, t.Device, t.Stream, t.Deps)
			continue
		}
		fmt.Printf("task %d: %s of unit %d, ops %s..%s (%d of %d), on %s stream %d after %v\n", t.ID, t.Kind, t.Unit,
			w.Ops[ops[0]].Name, w.Ops[ops[len(ops)-1]].Name, len(ops), len(w.Ops), t.Device, t.Stream, t.Deps)
	}
	fmt.Println("home", p.Home, "devices", p.Devices(), "valid:", p.Validate(w) == nil)

	_, err = (&sequential.Scheduler{Device: "cuda:0"}).Schedule(context.Background(), w)
	fmt.Println(err)
	// Output:
	// unit 0: targets [0 2 5], loss weight 1, whole graph: true
	// task 0: forward of unit 0, ops drop0..loss (10 of 10), on cpu:1 stream 0 after []
	// task 1: backward of unit 0, ops drop0..loss (10 of 10), on cpu:1 stream 0 after [0]
	// task 2: step on cpu:1 stream 0 after [1]
	// home cpu:1 devices [cpu:1] valid: true
	// sequential: device cuda:0 is not among the workload's devices
}
