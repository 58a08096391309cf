package worker_test

import (
	"context"
	"fmt"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/plugins/worker"
	"github.com/gnnkit/gnnkit/schedulers/sequential"
)

// Train GCN on Cora on the first CUDA device of a gnnkit-cuda worker. The
// host keeps the master parameters, the optimizer and evaluation on its
// CPU device; the worker runs the forward and backward passes.
func Example() {
	ctx := context.Background()
	path, err := worker.Find("gnnkit-cuda")
	if err != nil {
		fmt.Println("cuda: unavailable:", err)
		return
	}
	w, err := worker.Start(ctx, path, worker.Options{})
	if err != nil {
		fmt.Println("cuda: unavailable:", err.(*worker.StartError).Reason)
		return
	}
	defer w.Close()

	ds, _ := data.Open("cora")
	host, _ := cpu.New(core.BackendOptions{Devices: 1})
	defer host.Close()
	m, _ := core.BuildModel("gcn", core.ModelConfig{InDim: ds.FeatureDim, Hidden: 16, Classes: ds.NumClasses, Layers: 2, Dropout: 0.5})
	tr, err := engine.New(engine.Config{Model: m, Devices: host.Devices(), Remote: []engine.Remote{w}, Seed: 1,
		Data: engine.Data{Graph: ds.Graph, Features: ds.RowNormalizedFeatures(), FeatureDim: ds.FeatureDim, Labels: ds.Labels}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()
	s, err := engine.Train(ctx, tr, w.Devices()[:1], engine.TrainOptions{Epochs: 200, Scheduler: &sequential.Scheduler{},
		Train: ds.Train, Val: ds.Val, Test: ds.Test})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("test accuracy %.3f on %s\n", s.TestAcc, w.Devices()[0].ID)
}
