package sim_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// A two-stage GPipe pipeline: op 0 on cpu:0, op 1 on cpu:1, four
// micro-batches, every forward before any backward. With T = forward +
// backward per stage, the iteration takes (m + depth − 1)·T and the
// bubble is (depth − 1)/(m + depth − 1). (twoStages, below, builds the
// workload, the plan, the profile and the cluster.)
func ExampleSimulate() {
	w, p, prof, cluster := twoStages(4)
	res, err := sim.Simulate(p, w, prof, cluster)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("iteration %v, bubble %.2f\n", res.Iteration, res.Bubble)
	for _, st := range res.Stages {
		fmt.Printf("stage %s ops %v: %d units, at most %d in flight\n", st.Device, st.Ops, st.Units, st.MaxInFlight)
	}
	// Output:
	// iteration 40ms, bubble 0.20
	// stage cpu:0 ops [0]: 4 units, at most 4 in flight
	// stage cpu:1 ops [1]: 4 units, at most 4 in flight
}

// twoStages is ExampleSimulate's pipeline with m micro-batches.
func twoStages(m int) (*core.Workload, *core.Plan, *sim.Profile, *sim.Cluster) {
	w := &core.Workload{ModelName: "two", Dims: core.Dims{Nodes: 4}, Batch: []int32{0, 1, 2, 3},
		Ops:     []core.OpInfo{{Index: 0, Name: "a"}, {Index: 1, Name: "b", Deps: []int{0}}},
		Devices: []core.DeviceInfo{{ID: "cpu:0"}, {ID: "cpu:1"}}}
	p := &core.Plan{Home: "cpu:0"}
	for u := range m {
		lo, hi := u*len(w.Batch)/m, (u+1)*len(w.Batch)/m
		p.Units = append(p.Units, core.Unit{ID: u, Targets: w.Batch[lo:hi], LossWeight: float64(hi-lo) / float64(len(w.Batch)), Subgraph: true})
	}
	add := func(t core.Task) int { t.ID = len(p.Tasks); p.Tasks = append(p.Tasks, t); return t.ID }
	f0, f1 := make([]int, m), make([]int, m)
	for u := range m {
		f0[u] = add(core.Task{Kind: core.TaskForward, Unit: u, Device: "cpu:0", Ops: []int{0}})
		f1[u] = add(core.Task{Kind: core.TaskForward, Unit: u, Device: "cpu:1", Ops: []int{1}, Deps: []int{f0[u]}})
	}
	var b0, b1 []int
	for u := range m {
		b1 = append(b1, add(core.Task{Kind: core.TaskBackward, Unit: u, Device: "cpu:1", Ops: []int{1}, Deps: []int{f1[u]}}))
		b0 = append(b0, add(core.Task{Kind: core.TaskBackward, Unit: u, Device: "cpu:0", Ops: []int{0}, Deps: []int{f0[u], b1[u]}}))
	}
	r := add(core.Task{Kind: core.TaskReduceGrads, Unit: -1, Device: "cpu:0", Stream: 1, From: "cpu:1", Deps: b1})
	add(core.Task{Kind: core.TaskStep, Unit: -1, Device: "cpu:0", Stream: 1, Deps: append(b0, r)})

	// Each op takes 3 ms forward and 5 ms backward whatever the size.
	flat := []sim.Point{{Rows: 1, Fwd: 3 * time.Millisecond, Bwd: 5 * time.Millisecond},
		{Rows: 2, Fwd: 3 * time.Millisecond, Bwd: 5 * time.Millisecond}}
	prof := &sim.Profile{Model: "two", Ops: []sim.OpProfile{{Name: "a", Points: flat}, {Name: "b", Preds: []int{0}, Points: flat}}}
	cluster := sim.CPU(2, sim.DeviceModel{}, sim.Link{}) // free transfers
	return w, p, prof, cluster
}

// How far a plan is from the best any plan at its micro-batches could
// do: the same two-stage pipeline, each op 3 ms forward and 5 ms
// backward. Four micro-batches hold 64 ms of work, 32 ms per device; one
// micro-batch's two ops must run one after the other, 16 ms, which binds
// when there is only one.
func ExamplePlanBound() {
	for _, m := range []int{4, 1} {
		w, p, prof, cluster := twoStages(m)
		b, err := sim.PlanBound(p, w, prof, cluster)
		if err != nil {
			fmt.Println(err)
			return
		}
		res, err := sim.Simulate(p, w, prof, cluster)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("m = %d: work %v, path %v; simulated %v, %.2fx the bound\n", m, b.Work, b.Path, res.Iteration, float64(res.Iteration)/float64(b.Time()))
	}
	// Output:
	// m = 4: work 32ms, path 16ms; simulated 40ms, 1.25x the bound
	// m = 1: work 8ms, path 16ms; simulated 16ms, 1.00x the bound
}

// Reading a profile in GraphPipe's schema: per op the predecessor ids,
// the per-sample input size, the weight bytes, and forward+backward time
// (ms) and reserved memory by batch size.
func ExampleParseProfile() {
	p, err := sim.ParseProfile([]byte(`[
	  {"id": 0, "inputs": [], "input_size": 4096, "weight_size": 1048576, "runtime": {"32": 1.2, "64": 2.1}, "reserved_mem": {"32": 524288, "64": 1048576}},
	  {"id": 1, "inputs": [0], "input_size": 256, "weight_size": 0, "runtime": {"32": 0.3, "64": 0.5}, "reserved_mem": {"32": 32768, "64": 65536}}
	]`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, op := range p.Ops {
		c := op.At(48, 0) // between the profiled sizes
		fmt.Printf("%s: fwd %v bwd %v, holds %d bytes, %g output bytes per sample\n", op.Name, c.Fwd, c.Bwd, c.Mem, op.OutBytesPerRow)
	}
	_, err = sim.ParseProfile([]byte(`[{"inputs": [], "runtime": {"many": 1}}]`))
	fmt.Println(strings.TrimPrefix(err.Error(), "sim: "))
	// Output:
	// op0: fwd 550µs bwd 1.1ms, holds 786432 bytes, 1024 output bytes per sample
	// op1: fwd 133.333µs bwd 266.667µs, holds 49152 bytes, 0 output bytes per sample
	// malformed profile: op 0 (""): runtime key "many" is not a positive batch size
}

// ExampleReadCluster describes a machine of two GPUs by hand: a misspelt
// field is an error, not a silent default.
func ExampleReadCluster() {
	good := `{"name": "my box", "devices": [
	  {"id": "cuda:0", "name": "L4", "gflops": 18000, "mem_gbps": 240, "mem_bytes": 24000000000, "launch_ns": 5000, "sms": 58},
	  {"id": "cuda:1", "name": "L4", "gflops": 18000, "mem_gbps": 240, "mem_bytes": 24000000000, "launch_ns": 5000, "sms": 58}],
	 "link": {"gbps": 12, "latency_ns": 15000, "port_gbps": 12}, "sync_transfers": false}`
	c, err := sim.ReadCluster(strings.NewReader(good))
	fmt.Println(c.Name, len(c.Devices), c.LinkBetween("cuda:0", "cuda:1").Time(12_000_000), err)
	_, err = sim.ReadCluster(strings.NewReader(strings.Replace(good, "port_gbps", "port_gpbs", 1)))
	fmt.Println(err)
	// Output:
	// my box 2 1.015ms <nil>
	// sim: bad cluster: json: unknown field "port_gpbs"
}
