// Command graphpipebench compares GraphPipe's DAG pipelines with the chain
// baselines (PipeDream-style partition with 1F1B, and GPipe) in the
// simulator (package sim) on multi-branch models over 4-32 devices of a
// cluster preset, and on 2 real logical CPU devices of this machine:
// iteration time (throughput), pipeline depth and peak memory per device.
//
//	go run ./bench/graphpipebench                 # simulated pcie-a100 + measured cpu
//	go run ./bench/graphpipebench -preset nvlink-h100 -measure=false
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/engine"
	_ "github.com/gnnkit/gnnkit/models"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
	"github.com/gnnkit/gnnkit/sim"
)

type model struct {
	name     string
	branches int
	cfg      core.ModelConfig
}

func main() {
	preset := flag.String("preset", "pcie-a100", "simulated cluster preset")
	m := flag.Int("m", 16, "micro-batches per iteration")
	samples := flag.Int("samples", 8192, "samples (rows) per iteration")
	measure := flag.Bool("measure", true, "also measure on 2 real logical CPU devices")
	flag.Parse()
	models := []model{
		{"uno", 4, core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}},
		{"uno", 8, core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 8}},
		{"dlrm", 8, core.ModelConfig{InDim: 512, Hidden: 1024, Classes: 2, Layers: 3, Branches: 8}},
	}
	scheds := []*graphpipe.Scheduler{
		{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: *m},
		{Kind: graphpipe.OneFOneB, MicroBatches: *m},
		{Kind: graphpipe.GPipe, MicroBatches: *m},
	}
	fmt.Printf("simulated: preset %s, %d samples per iteration in %d micro-batches; %s\n\n", *preset, *samples, *m, time.Now().UTC().Format(time.DateOnly))
	fmt.Println("| model | devices | scheduler | stages | depth | iteration ms | throughput vs best chain | max peak memory per device |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, md := range models {
		mod, err := core.BuildModel(md.name, md.cfg)
		check(err)
		g, _ := core.Undirected(*samples, nil, nil)
		batch := make([]int32, *samples)
		for i := range batch {
			batch[i] = int32(i)
		}
		for _, n := range []int{4, 8, 16, 32} {
			cl, err := sim.Preset(*preset, n)
			check(err)
			w := core.NewWorkload(mod, g, md.cfg.InDim, batch, cl.Infos(), 1)
			prof, err := sim.Roofline(w, cl.Devices[0])
			check(err)
			type row struct {
				name          string
				stages, depth float64
				iter          time.Duration
				peak          int64
			}
			var rows []row
			for _, s := range scheds {
				p, err := s.Schedule(context.Background(), w)
				if err != nil {
					fmt.Printf("| %s-%d | %d | %s | - | - | - | %v | - |\n", md.name, md.branches, n, s.Name(), err)
					continue
				}
				check(p.Validate(w))
				res, err := sim.Simulate(p, w, prof, cl)
				check(err)
				var peak int64
				for _, v := range res.PeakMem {
					peak = max(peak, v)
				}
				rows = append(rows, row{s.Name(), p.Metrics["stages"], p.Metrics["depth"], res.Iteration, peak})
			}
			bestChain := time.Duration(0)
			for _, r := range rows {
				if r.name != "graphpipe" && (bestChain == 0 || r.iter < bestChain) {
					bestChain = r.iter
				}
			}
			for _, r := range rows {
				fmt.Printf("| %s-%d | %d | %s | %.0f | %.0f | %.2f | %.2fx | %s |\n", md.name, md.branches, n, r.name, r.stages, r.depth,
					float64(r.iter)/1e6, float64(bestChain)/float64(r.iter), core.FormatBytes(r.peak))
			}
		}
	}
	if *measure {
		measured(*m)
	}
}

// measured runs graphpipe and the best chain schedule for real on 2
// logical CPU devices (interleaved, medians).
func measured(m int) {
	be, err := cpu.New(core.BackendOptions{Devices: 2, Threads: 1})
	check(err)
	defer be.Close()
	devs := be.Devices()
	infos := []core.DeviceInfo{devs[0].Info(), devs[1].Info()}
	cfg := core.ModelConfig{InDim: 256, Hidden: 256, Classes: 4, Layers: 2, Branches: 4}
	mod, err := core.BuildModel("uno", cfg)
	check(err)
	const n = 2048
	g, _ := core.Undirected(n, nil, nil)
	feats := make([]float32, n*cfg.InDim)
	labels := make([]int32, n)
	for i := range feats {
		feats[i] = float32((i*7919)%97) / 97
	}
	for i := range labels {
		labels[i] = int32(i % cfg.Classes)
	}
	batch := make([]int32, n)
	for i := range batch {
		batch[i] = int32(i)
	}
	type run struct {
		name string
		tr   *engine.Trainer
		p    *core.Plan
		b    *engine.Batch
		ms   []float64
	}
	var runs []*run
	for _, s := range []*graphpipe.Scheduler{{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: m}, {Kind: graphpipe.OneFOneB, MicroBatches: m}, {Kind: graphpipe.GPipe, MicroBatches: m}} {
		tr, err := engine.New(engine.Config{Model: mod, Devices: devs, Seed: 1, Data: engine.Data{Graph: g, Features: feats, FeatureDim: cfg.InDim, Labels: labels}})
		check(err)
		b := tr.FullBatch(batch)
		w, err := tr.Workload(b, infos)
		check(err)
		p, err := s.Schedule(context.Background(), w)
		check(err)
		runs = append(runs, &run{name: s.Name(), tr: tr, p: p, b: b})
	}
	for round := 0; round < 6; round++ {
		for _, r := range runs {
			t0 := time.Now()
			_, err := r.tr.Run(context.Background(), r.p, r.b, engine.RunOptions{})
			check(err)
			if round > 0 {
				r.ms = append(r.ms, float64(time.Since(t0))/1e6)
			}
		}
	}
	fmt.Printf("\nmeasured: 2 logical CPU devices (1 thread each), uno-4 (256 in, 256 hidden), %d samples, %d micro-batches, medians of 5\n\n", n, m)
	fmt.Println("| scheduler | stages | depth | iteration ms |")
	fmt.Println("|---|---|---|---|")
	for _, r := range runs {
		sort.Float64s(r.ms)
		fmt.Printf("| %s | %.0f | %.0f | %.1f |\n", r.name, r.p.Metrics["stages"], r.p.Metrics["depth"], r.ms[len(r.ms)/2])
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "graphpipebench:", err)
		os.Exit(1)
	}
}
