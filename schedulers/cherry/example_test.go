package cherry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data"
	"github.com/gnnkit/gnnkit/engine"
	_ "github.com/gnnkit/gnnkit/models"
	"github.com/gnnkit/gnnkit/schedulers/cherry"
	"github.com/gnnkit/gnnkit/schedulers/sequential"
)

// Full-graph training of a 2-layer GCN on a 2,000-node synthetic graph,
// 400 target nodes, on a CPU device capped at 512 KiB. The whole batch as
// one unit needs over three times the cap, so the sequential plan runs out
// of memory. Cherry starts from ceil(estimate / free memory) = 3 parts,
// halves each part still over the cap (one half, 68 targets, is halved
// again into 33 and 35) and ends with 7 micro-batches, each computed over
// its targets' receptive field only and its loss weighted by its share of
// the targets. The plan's predicted peak fits the cap, and so does the
// peak measured over two training iterations.
func ExampleScheduler() {
	const memCap = 512 << 10
	ds, err := data.Open("synthetic:sbm,nodes=2000,classes=4,feat=32,avgdeg=4,train=100,seed=1")
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := core.BuildModel("gcn", core.ModelConfig{InDim: ds.FeatureDim, Hidden: 32, Classes: ds.NumClasses, Layers: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	be, err := cpu.New(core.BackendOptions{Devices: 1, Threads: 1, MemCap: memCap})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer be.Close()
	dev := be.Devices()[0]
	tr, err := engine.New(engine.Config{Model: m, Devices: be.Devices(), Seed: 1,
		Data: engine.Data{Graph: ds.Graph, Features: ds.Features, FeatureDim: ds.FeatureDim, Labels: ds.Labels}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()
	b := tr.FullBatch(ds.Train)
	w, err := tr.Workload(b, []core.DeviceInfo{dev.Info()}) // the device's info carries its cap
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()

	// The whole batch as one unit: over the cap, predicted and in fact.
	seq, err := (&sequential.Scheduler{}).Schedule(ctx, w)
	if err != nil {
		fmt.Println(err)
		return
	}
	resident, peak, err := w.Estimator(seq.Units, dev.ID())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d targets; one unit needs over 3x the cap: %v\n", len(b.Targets), resident+peak > 3*memCap)
	_, err = tr.Run(ctx, seq, b, engine.RunOptions{})
	fmt.Println("sequential runs out of memory:", errors.Is(err, core.ErrOutOfMemory))

	p, err := (&cherry.Scheduler{}).Schedule(ctx, w)
	if err != nil {
		fmt.Println(err)
		return
	}
	var sizes []int
	var covered []int32
	weights := 0.0
	for _, u := range p.Units {
		sizes = append(sizes, len(u.Targets))
		covered = append(covered, u.Targets...)
		weights += u.LossWeight
	}
	slices.Sort(covered)
	fmt.Printf("cherry: %v micro-batches of %v targets\n", p.Metrics["micro_batches"], sizes)
	fmt.Println("each target in one micro-batch:", slices.Equal(covered, b.Targets), "loss weights sum to 1:", math.Abs(weights-1) < 1e-9)
	fmt.Println("valid:", p.Validate(w) == nil, "predicted peak fits the cap:", p.MemEstimate[dev.ID()] <= memCap)

	var measured int64
	for range 2 {
		res, err := tr.Run(ctx, p, b, engine.RunOptions{})
		if err != nil {
			fmt.Println(err)
			return
		}
		measured = max(measured, res.Trace.PeakMem[dev.ID()])
	}
	fmt.Println("two iterations trained; measured peak fits the cap:", measured <= memCap)
	// Output:
	// 400 targets; one unit needs over 3x the cap: true
	// sequential runs out of memory: true
	// cherry: 7 micro-batches of [72 33 35 69 65 62 64] targets
	// each target in one micro-batch: true loss weights sum to 1: true
	// valid: true predicted peak fits the cap: true
	// two iterations trained; measured peak fits the cap: true
}
