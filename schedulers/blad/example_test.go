package blad_test

import (
	"context"
	"fmt"
	"time"

	"github.com/gnnkit/gnnkit/core"
	mdyn "github.com/gnnkit/gnnkit/models/dynamic"
	"github.com/gnnkit/gnnkit/schedulers/blad"
)

// groupWorkload is a T-GCN workload (window 3) of n snapshot groups on
// the given devices, group i costing 10·(i+1) units (activity that grows
// over time), alternately graph-heavy (80% graph work) and dense-heavy
// (20%).
func groupWorkload(n int, devs ...core.DeviceID) (*core.Workload, error) {
	m, err := mdyn.TGCN(mdyn.Config{ModelConfig: core.ModelConfig{InDim: 8, Hidden: 8, Layers: 3}})
	if err != nil {
		return nil, err
	}
	var infos []core.DeviceInfo
	for _, d := range devs {
		infos = append(infos, core.DeviceInfo{ID: d})
	}
	batch := make([]int32, n)
	for i := range batch {
		batch[i] = int32(i)
	}
	w := core.NewWorkload(m, nil, 8, batch, infos, 1)
	for i := range n {
		cost, share := float64(10*(i+1)), 0.8
		if i%2 == 1 {
			share = 0.2
		}
		w.Groups = append(w.Groups, blad.GroupCost{Key: i, Graph: share * cost, Dense: (1 - share) * cost, Samples: 10 * (i + 1)})
	}
	return w, nil
}

// placed returns each device's groups in run order (the order of their
// first forward tasks) and its estimated load.
func placed(p *core.Plan, w *core.Workload) (map[core.DeviceID][]int32, map[core.DeviceID]float64) {
	groups, load := map[core.DeviceID][]int32{}, map[core.DeviceID]float64{}
	seen := map[int]bool{}
	for _, t := range p.Tasks {
		if t.Kind != core.TaskForward || seen[t.Unit] {
			continue
		}
		seen[t.Unit] = true
		g := p.Units[t.Unit].Targets[0]
		groups[t.Device] = append(groups[t.Device], g)
		load[t.Device] += w.Groups[g].Graph + w.Groups[g].Dense
	}
	return groups, load
}

// Eight snapshot groups whose cost grows over time, on two devices: the
// ESDG baseline cuts the sequence into two equal-count halves, so the
// later, larger groups all land on one device; BLAD places them longest
// first where they finish first, which here balances the loads exactly,
// and orders each device's groups so graph-heavy and dense-heavy ones
// alternate (the graph phase of one overlaps the dense phase of the
// other on the second stream). Both run every group exactly once.
func ExampleScheduler() {
	w, err := groupWorkload(8, "cpu:0", "cpu:1")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range []core.Scheduler{&blad.ESDG{}, blad.New()} {
		p, err := s.Schedule(context.Background(), w)
		if err != nil {
			fmt.Println(err)
			return
		}
		if err := blad.GroupsOnce(p, w); err != nil {
			fmt.Println(err)
			return
		}
		groups, load := placed(p, w)
		fmt.Printf("%s (%v streams, %v hoisted ops): imbalance %.2f\n", s.Name(), p.Metrics["streams"], p.Metrics["hoisted_ops"],
			blad.Imbalance([]float64{load["cpu:0"], load["cpu:1"]}))
		for _, d := range []core.DeviceID{"cpu:0", "cpu:1"} {
			fmt.Printf("  %s: groups %v, load %v\n", d, groups[d], load[d])
		}
	}
	// Output:
	// esdg (1 streams, 4 hoisted ops): imbalance 0.44
	//   cpu:0: groups [0 1 2 3], load 100
	//   cpu:1: groups [4 5 6 7], load 260
	// blad (2 streams, 4 hoisted ops): imbalance 0.00
	//   cpu:0: groups [0 7 4 3], load 180
	//   cpu:1: groups [2 5 6 1], load 180
}

// BLAD's feedback: the trace of an iteration in which every group took
// time proportional to its estimated cost, but twice as long on cpu:1
// (a slower device, or one sharing its cores). Observe measures each
// device's slowness, and once the gain is worth it re-places the groups
// so that the slow device gets about a third of the work. The home
// device (where the parameters live) stays cpu:0.
func ExampleScheduler_Observe() {
	w, err := groupWorkload(8, "cpu:0", "cpu:1")
	if err != nil {
		fmt.Println(err)
		return
	}
	s := blad.New()
	p, err := s.Schedule(context.Background(), w)
	if err != nil {
		fmt.Println(err)
		return
	}
	for k := 1; k <= 3; k++ {
		tr := &core.Trace{}
		for _, t := range p.Tasks {
			if t.Kind != core.TaskForward && t.Kind != core.TaskBackward {
				continue
			}
			g := w.Groups[p.Units[t.Unit].Targets[0]]
			d := time.Duration((g.Graph + g.Dense) * float64(time.Millisecond) / 4) // four tasks per group
			if t.Device == "cpu:1" {
				d *= 2
			}
			tr.Events = append(tr.Events, core.TraceEvent{Cat: t.Kind.String(), Device: t.Device, Unit: t.Unit, Dur: d})
		}
		np, err := s.Observe(context.Background(), w, tr)
		if err != nil {
			fmt.Println(err)
			return
		}
		if np == nil {
			fmt.Printf("observation %d: plan kept\n", k)
			continue
		}
		if err := blad.GroupsOnce(np, w); err != nil {
			fmt.Println(err)
			return
		}
		p = np
		groups, load := placed(p, w)
		fmt.Printf("observation %d: re-placed, home %s\n", k, p.Home)
		for _, d := range []core.DeviceID{"cpu:0", "cpu:1"} {
			fmt.Printf("  %s: groups %v, load %v\n", d, groups[d], load[d])
		}
	}
	// Output:
	// observation 1: re-placed, home cpu:0
	//   cpu:0: groups [2 7 4 5 1], load 240
	//   cpu:1: groups [0 3 6], load 120
	// observation 2: plan kept
	// observation 3: plan kept
}

// LPT (longest processing time first) is greedy: on five items of cost
// 5, 4, 3, 3, 3 over two bins its largest load is 10 where 9 is possible
// ({5, 4} and {3, 3, 3}), within its 4/3 bound. LPTSpeed weighs bins by
// speed: a bin twice as slow gets one of three equal items.
func ExampleLPT() {
	cost := []float64{5, 4, 3, 3, 3}
	for b, items := range blad.LPT(cost, 2) {
		load := 0.0
		for _, i := range items {
			load += cost[i]
		}
		fmt.Printf("bin %d: items %v, load %v\n", b, items, load)
	}
	fmt.Println("by speed:", blad.LPTSpeed([]float64{4, 4, 4}, []float64{1, 2}))
	// Output:
	// bin 0: items [0 3], load 8
	// bin 1: items [1 2 4], load 10
	// by speed: [[0 1] [2]]
}

// The topology manager's split of T-GCN (window 3): the hoisted ops are
// the first graph ops and what they depend on, Â_t·X·W for every t,
// which do not read the hidden state and so can run ahead of the
// recurrence on a second stream.
func ExampleHoisted() {
	m, err := mdyn.TGCN(mdyn.Config{ModelConfig: core.ModelConfig{InDim: 4, Hidden: 4, Layers: 3}})
	if err != nil {
		fmt.Println(err)
		return
	}
	w := core.NewWorkload(m, nil, 4, []int32{0}, nil, 0)
	hoist, rest := blad.Hoisted(w.Ops)
	for _, i := range hoist {
		fmt.Println("hoisted:", w.Ops[i].Name)
	}
	fmt.Printf("dense phase: %d of %d ops\n", len(rest), len(w.Ops))
	// Output:
	// hoisted: gcn.xw
	// hoisted: gcn.agg.t0
	// hoisted: gcn.agg.t1
	// hoisted: gcn.agg.t2
	// dense phase: 57 of 61 ops
}

// Fitting BLAD's cost model, seconds = a·graph + b·dense + c with
// non-negative coefficients, to measured group times: exact data gives
// the coefficients back; fewer than three points give no fit.
func ExampleFitCost() {
	var xs [][3]float64
	var ys []float64
	for i := range 6 {
		graph, dense := float64(1000*(i+1)), float64(400*(6-i)+30*i*i)
		xs = append(xs, [3]float64{graph, dense, 1})
		ys = append(ys, 2e-6*graph+5e-7*dense+1e-3)
	}
	c := blad.FitCost(xs, ys)
	fmt.Printf("a %.3g s, b %.3g s, c %.3g s\n", c[0], c[1], c[2])
	if blad.FitCost(xs[:2], ys[:2]) == nil {
		fmt.Println("two points: no fit")
	}
	// Output:
	// a 2e-06 s, b 5e-07 s, c 0.001 s
	// two points: no fit
}

// The vertex-partition baseline on a T-GCN cut into two parts, one per
// device: every group runs on both devices (device k computes part k of
// its nodes, and the parts exchange halo rows), where BLAD and ESDG put
// each group on one device. Per group, each device runs two forward
// tasks (what its part computes from its own rows, then the pair scores
// that read the other part's rows) and their backwards; the home device
// also gathers the pair logits and computes the loss (a third task each
// way), then sums the other device's gradients and steps.
func ExampleVertexPartition() {
	m, err := mdyn.TGCNVertex(mdyn.Config{ModelConfig: core.ModelConfig{InDim: 4, Hidden: 4, Layers: 2}}, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	w := core.NewWorkload(m, nil, 4, []int32{0, 1, 2}, []core.DeviceInfo{{ID: "cpu:0"}, {ID: "cpu:1"}}, 1)
	p, err := blad.NewVertexPartition().Schedule(context.Background(), w)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := blad.GroupsOnce(p, w); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: %v parts, %v groups, home %s\n", p.Scheduler, p.Metrics["parts"], p.Metrics["groups"], p.Home)
	for _, d := range []core.DeviceID{"cpu:0", "cpu:1"} {
		units, kinds := map[int]bool{}, map[core.TaskKind]int{}
		for _, t := range p.Tasks {
			if t.Device == d {
				kinds[t.Kind]++
				if t.Unit >= 0 {
					units[t.Unit] = true
				}
			}
		}
		fmt.Printf("  %s: %d groups; %d forward, %d backward, %d reduce, %d step tasks\n", d, len(units),
			kinds[core.TaskForward], kinds[core.TaskBackward], kinds[core.TaskReduceGrads], kinds[core.TaskStep])
	}
	// Output:
	// vertexpart: 2 parts, 3 groups, home cpu:0
	//   cpu:0: 3 groups; 9 forward, 9 backward, 1 reduce, 1 step tasks
	//   cpu:1: 3 groups; 6 forward, 6 backward, 0 reduce, 0 step tasks
}
