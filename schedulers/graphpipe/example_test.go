package graphpipe_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/gnnkit/gnnkit/core"
	_ "github.com/gnnkit/gnnkit/models"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
	"github.com/gnnkit/gnnkit/sim"
)

// Planning a CANDLE-Uno-like model of four branches over 8 simulated
// PCIe A100s at 16 micro-batches: GraphPipe's stages form a DAG (the
// branches side by side, shallower than their count), and its plan is
// at least as fast in the simulator as the best 1F1B chain's.
func ExampleScheduler() {
	cfg := core.ModelConfig{InDim: 1024, Hidden: 512, Classes: 2, Layers: 2, Branches: 4}
	m, err := core.BuildModel("uno", cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	cl, _ := sim.Preset("pcie-a100", 8)
	g, _ := core.Undirected(2048, nil, nil)
	batch := make([]int32, 2048)
	for i := range batch {
		batch[i] = int32(i)
	}
	w := core.NewWorkload(m, g, cfg.InDim, batch, cl.Infos(), 1)
	plan := func(s *graphpipe.Scheduler) *core.Plan {
		s.Kind, s.MicroBatches, s.Cluster = graphpipe.OneFOneB, 16, cl
		p, err := s.Schedule(context.Background(), w)
		if err != nil {
			panic(err)
		}
		return p
	}
	gp, chain := plan(&graphpipe.Scheduler{Graph: true}), plan(&graphpipe.Scheduler{})
	fmt.Printf("graphpipe: %v stages, depth %v, %d devices\n", gp.Metrics["stages"], gp.Metrics["depth"], len(gp.Devices()))
	fmt.Println("no slower than the 1F1B chain:", gp.Metrics["simulated_iteration_ms"] <= chain.Metrics["simulated_iteration_ms"])
	// Output:
	// graphpipe: 5 stages, depth 2, 8 devices
	// no slower than the 1F1B chain: true
}

// Trading time for memory (option slack=F): uno-4 over 32 simulated
// PCIe A100s at 16 micro-batches. The fastest plan shares the trunk; with
// 1% slack the search takes the lightest plan it simulated within 1% of
// that one, and says what it passed over.
func ExampleScheduler_slack() {
	cfg := core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}
	m, err := core.BuildModel("uno", cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	cl, _ := sim.Preset("pcie-a100", 32)
	g, _ := core.Undirected(8192, nil, nil)
	batch := make([]int32, 8192)
	for i := range batch {
		batch[i] = int32(i)
	}
	w := core.NewWorkload(m, g, cfg.InDim, batch, cl.Infos(), 1)
	s := &graphpipe.Scheduler{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: 16, Cluster: cl, Slack: 0.01}
	p, err := s.Schedule(context.Background(), w)
	if err != nil {
		fmt.Println(err)
		return
	}
	mib := func(b float64) string { return core.FormatBytes(int64(b)) }
	fmt.Printf("chosen:  %.2f ms, %s\n", p.Metrics["simulated_iteration_ms"], core.FormatBytes(p.Alternatives[0].PeakBytes))
	fmt.Printf("fastest: %.2f ms, %s\n", p.Metrics["fastest_iteration_ms"], mib(p.Metrics["fastest_peak_bytes"]))
	// Output:
	// chosen:  23.24 ms, 248.0 MiB
	// fastest: 23.12 ms, 384.1 MiB
}

// GPipe's order on request (option gpipe=on): a DLRM-like model over 8
// simulated A100s, where holding every micro-batch in flight wins, so
// the search, which then weighs it beside the generalised 1F1B, takes it.
func ExampleScheduler_gpipeOrder() {
	cfg := core.ModelConfig{InDim: 512, Hidden: 1024, Classes: 2, Layers: 3, Branches: 8}
	m, err := core.BuildModel("dlrm", cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	cl, _ := sim.Preset("pcie-a100", 8)
	g, _ := core.Undirected(8192, nil, nil)
	batch := make([]int32, 8192)
	for i := range batch {
		batch[i] = int32(i)
	}
	w := core.NewWorkload(m, g, cfg.InDim, batch, cl.Infos(), 1)
	for _, on := range []string{"off", "on"} {
		s, err := core.NewScheduler("graphpipe", map[string]string{"gpipe": on, "m": "16"})
		if err != nil {
			fmt.Println(err)
			return
		}
		s.(*graphpipe.Scheduler).Cluster = cl
		p, err := s.Schedule(context.Background(), w)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("gpipe=%s: GPipe's order chosen: %v\n", on, p.Metrics["gpipe_order"] == 1)
	}
	// Output:
	// gpipe=off: GPipe's order chosen: false
	// gpipe=on: GPipe's order chosen: true
}

// Piper's chain DP (option dp=piper) over a three-branch uno: its
// states are the op graph's downsets, and its chains may cut every
// branch at once; on eight branches there are too many downsets, and
// the DP refuses before it starts.
func ExampleDownsets() {
	for _, branches := range []int{3, 8} {
		cfg := core.ModelConfig{InDim: 256, Hidden: 256, Classes: 2, Layers: 3, Branches: branches}
		m, err := core.BuildModel("uno", cfg)
		if err != nil {
			fmt.Println(err)
			return
		}
		cl, _ := sim.Preset("pcie-a100", 4)
		g, _ := core.Undirected(512, nil, nil)
		batch := make([]int32, 512)
		for i := range batch {
			batch[i] = int32(i)
		}
		w := core.NewWorkload(m, g, cfg.InDim, batch, cl.Infos(), 1)
		n, err := graphpipe.Downsets(context.Background(), w)
		fmt.Printf("uno-%d: %d ops, %d downsets, err %v\n", branches, len(w.Ops), n, err != nil)
		s := &graphpipe.Scheduler{Kind: graphpipe.OneFOneB, MicroBatches: 4, Cluster: cl, ChainDP: graphpipe.ChainPiper}
		if _, err := s.Schedule(context.Background(), w); err != nil {
			fmt.Println("piper refused:", errors.Is(err, graphpipe.ErrTooManyDownsets))
		} else {
			fmt.Println("piper planned")
		}
	}
	// Output:
	// uno-3: 35 ops, 1017 downsets, err false
	// piper planned
	// uno-8: 85 ops, 0 downsets, err true
	// piper refused: true
}

// A model that fits no partition of the devices' memory: the error says
// the least per-device memory that fits (NoFitError.Need), which a
// caller can read, and which, given back, gets a plan.
func ExampleNoFitError() {
	cfg := core.ModelConfig{InDim: 1024, Hidden: 512, Classes: 2, Layers: 2, Branches: 4}
	m, err := core.BuildModel("uno", cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	g, _ := core.Undirected(2048, nil, nil)
	batch := make([]int32, 2048)
	for i := range batch {
		batch[i] = int32(i)
	}
	plan := func(memory int64) error {
		cl, _ := sim.Preset("pcie-a100", 4)
		for i := range cl.Devices {
			cl.Devices[i].MemBytes = memory
		}
		w := core.NewWorkload(m, g, cfg.InDim, batch, cl.Infos(), 1)
		_, err := (&graphpipe.Scheduler{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: 8, Cluster: cl}).Schedule(context.Background(), w)
		return err
	}
	err = plan(8 << 20)
	var nf *graphpipe.NoFitError
	if !errors.As(err, &nf) {
		fmt.Println("unexpected:", err)
		return
	}
	fmt.Printf("%s: no fit on %d devices of %s; needs about %s\n", nf.Scheduler, nf.Devices, core.FormatBytes(nf.DeviceMem), core.FormatBytes(core.RoundUpShownBytes(nf.Need)))
	fmt.Println("planned at that memory:", plan(nf.Need) == nil)
	// Output:
	// graphpipe: no fit on 4 devices of 8.0 MiB; needs about 27.6 MiB
	// planned at that memory: true
}
