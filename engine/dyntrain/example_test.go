package dyntrain_test

import (
	"context"
	"fmt"
	"time"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data/dynamic"
	"github.com/gnnkit/gnnkit/engine/dyntrain"
	"github.com/gnnkit/gnnkit/schedulers/blad"
)

// groups cuts a synthetic dynamic graph (a DSBM spec, one snapshot per
// second) into link-prediction groups of window 2, with five negatives
// per true edge in evaluation.
func groups(spec string) (*dynamic.Set, error) {
	sp, err := dynamic.ParseDSBM(spec)
	if err != nil {
		return nil, err
	}
	d, err := dynamic.DSBM(sp)
	if err != nil {
		return nil, err
	}
	snaps, err := d.Snapshots(1)
	if err != nil {
		return nil, err
	}
	return dynamic.Build(snaps, d.NumNodes, dynamic.Options{Window: 2, Seed: 1, NegEval: 5, Features: d.Features, FeatureDim: d.FeatureDim})
}

// Planning one iteration of T-GCN training for two devices without
// running it (the devices may be simulated): the Planner turns the
// training groups into engine batches with cost estimates (Cost) and
// hands them to the scheduler, which must run every group once. On a
// graph whose activity grows over time (from 30 edges in the first
// snapshot to about 1,200 in the last), ESDG's equal-count halves leave
// the later, larger groups on one device; BLAD balances the estimated
// work.
func ExampleNewPlanner() {
	s, err := groups("dsbm,nodes=300,snapshots=14,communities=3,edges=40,skew=30,trend=grow,seed=2")
	if err != nil {
		fmt.Println(err)
		return
	}
	infos := []core.DeviceInfo{{ID: "gpu:0"}, {ID: "gpu:1"}}
	fmt.Printf("%d training groups (targets %d..%d)\n", len(s.Train), s.Train[0].Target, s.Train[len(s.Train)-1].Target)
	for _, sched := range []core.Scheduler{&blad.ESDG{}, blad.New()} {
		p, err := dyntrain.NewPlanner(dyntrain.Config{Set: s, Model: "tgcn", Hidden: 8, Scheduler: sched, Seed: 1}, infos)
		if err != nil {
			fmt.Println(err)
			return
		}
		plan, err := p.Schedule(context.Background(), 0)
		if err != nil {
			fmt.Println(err)
			return
		}
		// Each device's groups (by target snapshot, in run order) and
		// their estimated work.
		targets := map[core.DeviceID][]int{}
		load := map[core.DeviceID]float64{}
		seen := map[int]bool{}
		for _, t := range plan.Tasks {
			if t.Kind == core.TaskForward && !seen[t.Unit] {
				seen[t.Unit] = true
				g := s.Train[plan.Units[t.Unit].Targets[0]]
				c := dyntrain.Cost(g, s.FeatureDim, 8)
				targets[t.Device] = append(targets[t.Device], g.Target)
				load[t.Device] += c.Graph + c.Dense
			}
		}
		fmt.Printf("%s: gpu:0 %v, gpu:1 %v, estimated imbalance %.3f\n", sched.Name(), targets["gpu:0"], targets["gpu:1"],
			blad.Imbalance([]float64{load["gpu:0"], load["gpu:1"]}))
	}
	// Output:
	// 8 training groups (targets 2..9)
	// esdg: gpu:0 [2 3 4 5], gpu:1 [6 7 8 9], estimated imbalance 0.417
	// blad: gpu:0 [9 2 6 4], gpu:1 [8 3 7 5], estimated imbalance 0.005
}

// Training T-GCN for link prediction with BLAD on two CPU devices: ten
// epochs of three iterations (two groups per optimizer step). The loss
// falls, and the trained model ranks the test snapshots' true edges
// above sampled negatives clearly better than the untrained one (AUC
// 0.5 is chance). BLAD re-places groups from measured times, which
// changes only the order of gradient sums, so the figures are printed
// rounded.
func ExampleTrain() {
	s, err := groups("dsbm,nodes=200,snapshots=12,communities=3,edges=20,skew=10,seed=2")
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := cpu.New(core.BackendOptions{Devices: 2, Threads: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	var first float64
	iters := 0
	res, err := dyntrain.Train(context.Background(), dyntrain.Config{Set: s, Model: "tgcn", Hidden: 8, Epochs: 10, LR: 0.02,
		StepGroups: 2, Devices: b.Devices(), Scheduler: blad.New(), Seed: 1,
		Progress: func(st dyntrain.EpochStats) {
			if st.Epoch == 1 {
				first, iters = st.Loss, len(st.Traces) // a trace per iteration
			}
		}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d training groups, %d iterations per epoch\n", len(s.Train), iters)
	fmt.Printf("loss %.1f -> %.1f\n", first, res.FinalLoss)
	fmt.Printf("test AUC %.1f, untrained %.1f\n", res.Test.AUC, res.Baseline.AUC)
	// Output:
	// 6 training groups, 3 iterations per epoch
	// loss 0.7 -> 0.5
	// test AUC 0.7, untrained 0.5
}

// The evaluation metrics on a hand-scored link-prediction result: two
// queries, each a true edge (label 1) and two sampled negatives. AUC
// compares every positive with every negative; MRR ranks each positive
// within its own query; F1 and macro-F1 threshold the scores at 0.
func ExampleAUC() {
	scores := []float32{2.0, -1.0, 0.5 /* query 0 */, 0.3, 1.2, -2.0 /* query 3 */}
	labels := []int32{1, 0, 0, 1, 0, 0}
	query := []int32{0, 0, 0, 3, 3, 3}
	fmt.Printf("AUC %.3f\n", dyntrain.AUC(scores, labels))
	fmt.Printf("MRR %.3f\n", dyntrain.MRR(scores, labels, query))
	fmt.Printf("F1 %.3f, macro-F1 %.3f\n", dyntrain.F1(scores, labels), dyntrain.MacroF1(scores, labels))
	// Output:
	// AUC 0.750
	// MRR 0.750
	// F1 0.667, macro-F1 0.667
}

// Utilisation summarises traces per device: busy time is the union of a
// device's forward and backward task spans, the imbalance is max/mean - 1
// of the busy times, and the overlap is the share of all busy time during
// which two or more spans of one device were in flight (here cpu:0's two
// streams for 5 ms of the 30).
func ExampleUtilisation() {
	ms := time.Millisecond
	span := func(kind core.TaskKind, dev core.DeviceID, stream int, from, to time.Duration) core.TraceEvent {
		return core.TraceEvent{Cat: kind.String(), Device: dev, Stream: stream, Start: from, Dur: to - from}
	}
	tr := &core.Trace{Events: []core.TraceEvent{
		span(core.TaskForward, "cpu:0", 0, 0, 10*ms),
		span(core.TaskForward, "cpu:0", 1, 5*ms, 15*ms),
		span(core.TaskBackward, "cpu:0", 0, 15*ms, 20*ms),
		span(core.TaskForward, "cpu:1", 0, 0, 8*ms),
		span(core.TaskBackward, "cpu:1", 0, 8*ms, 10*ms),
	}}
	busy, imbalance, overlap := dyntrain.Utilisation(tr)
	fmt.Printf("busy cpu:0 %v, cpu:1 %v\n", busy["cpu:0"], busy["cpu:1"])
	fmt.Printf("imbalance %.3f, overlap %.3f\n", imbalance, overlap)
	// Output:
	// busy cpu:0 20ms, cpu:1 10ms
	// imbalance 0.333, overlap 0.167
}
