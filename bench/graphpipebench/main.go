// Command graphpipebench compares GraphPipe's DAG pipelines with the chain
// baselines (PipeDream-style partition with 1F1B, and GPipe) in the
// simulator (package sim) on multi-branch models over 4-32 devices of a
// cluster preset, and on 2 real logical CPU devices of this machine:
// iteration time (throughput), pipeline depth and peak memory per device,
// and each partitioner's predicted iteration time for the plan it chose.
// Every scheduler plans with the cluster and profile the simulator replays
// its plan on.
//
//	go run ./bench/graphpipebench                 # simulated pcie-a100 + measured cpu
//	go run ./bench/graphpipebench -preset nvlink-h100 -measure=false
//	go run ./bench/graphpipebench -m 8 -devices 4,8 -simulate 4
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
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
	simulate := flag.Int("simulate", 0, "candidate plans each scheduler simulates to choose among (0: the scheduler's default, 8)")
	devList := flag.String("devices", "4,8,16,32", "simulated device counts")
	flag.Parse()
	var devices []int
	for _, f := range strings.Split(*devList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			check(fmt.Errorf("-devices %q: want positive integers separated by commas", *devList))
		}
		devices = append(devices, n)
	}
	models := []model{
		{"uno", 4, core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}},
		{"uno", 8, core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 8}},
		{"dlrm", 8, core.ModelConfig{InDim: 512, Hidden: 1024, Classes: 2, Layers: 3, Branches: 8}},
	}
	fmt.Printf("simulated: preset %s, %d samples per iteration in %d micro-batches, roofline op costs; %s\n\n", *preset, *samples, *m, time.Now().UTC().Format(time.DateOnly))
	fmt.Println("| model | devices | scheduler | order | used | stages | depth | predicted ms | iteration ms | vs chain 1F1B | vs best chain | max peak memory per device |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	type summary struct {
		name          string
		devices       int
		vs1f1b, vsAll float64
	}
	var sums []summary
	for _, md := range models {
		mod, err := core.BuildModel(md.name, md.cfg)
		check(err)
		g, _ := core.Undirected(*samples, nil, nil)
		batch := make([]int32, *samples)
		for i := range batch {
			batch[i] = int32(i)
		}
		for _, n := range devices {
			cl, err := sim.Preset(*preset, n)
			check(err)
			w := core.NewWorkload(mod, g, md.cfg.InDim, batch, cl.Infos(), 1)
			prof, err := sim.Roofline(w, cl.Devices[0])
			check(err)
			// Every scheduler plans with the cluster and profile the
			// simulator then replays its plan on: one cost model.
			scheds := []*graphpipe.Scheduler{
				{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: *m, Cluster: cl, Profile: prof, Simulate: *simulate},
				{Kind: graphpipe.OneFOneB, MicroBatches: *m, Cluster: cl, Profile: prof, Simulate: *simulate},
				{Kind: graphpipe.GPipe, MicroBatches: *m, Cluster: cl, Profile: prof, Simulate: *simulate},
			}
			type row struct {
				name          string
				order         string
				used          int
				stages, depth float64
				pred          float64
				iter          time.Duration
				peak          int64
			}
			var rows []row
			for _, s := range scheds {
				p, err := s.Schedule(context.Background(), w)
				if err != nil {
					fmt.Printf("| %s-%d | %d | %s | - | - | - | - | - | - | - | - | %v |\n", md.name, md.branches, n, s.Name(), err)
					continue
				}
				check(p.Validate(w))
				res, err := sim.Simulate(p, w, prof, cl)
				check(err)
				var peak int64
				for _, v := range res.PeakMem {
					peak = max(peak, v)
				}
				order := "1f1b"
				if p.Metrics["gpipe_order"] == 1 || p.Metrics["fallback_gpipe"] == 1 || s.Kind == graphpipe.GPipe {
					order = "gpipe"
				}
				rows = append(rows, row{s.Name(), order, len(p.Devices()), p.Metrics["stages"], p.Metrics["depth"], p.Metrics["predicted_iteration_ms"], res.Iteration, peak})
			}
			var chain1, bestChain time.Duration
			for _, r := range rows {
				if r.name == "1f1b" {
					chain1 = r.iter
				}
				if r.name != "graphpipe" && (bestChain == 0 || r.iter < bestChain) {
					bestChain = r.iter
				}
			}
			for _, r := range rows {
				fmt.Printf("| %s-%d | %d | %s | %s | %d | %.0f | %.0f | %.2f | %.2f | %.2fx | %.2fx | %s |\n", md.name, md.branches, n, r.name, r.order, r.used, r.stages, r.depth,
					r.pred, float64(r.iter)/1e6, float64(chain1)/float64(r.iter), float64(bestChain)/float64(r.iter), core.FormatBytes(r.peak))
				if r.name == "graphpipe" {
					sums = append(sums, summary{fmt.Sprintf("%s-%d", md.name, md.branches), n, float64(chain1) / float64(r.iter), float64(bestChain) / float64(r.iter)})
				}
			}
		}
	}
	fmt.Println("\nGraphPipe's throughput over the chain baselines (simulated):")
	fmt.Println()
	fmt.Println("| model | devices | vs chain 1F1B | vs best chain (1F1B or GPipe) |")
	fmt.Println("|---|---|---|---|")
	for _, s := range sums {
		fmt.Printf("| %s | %d | %.2fx | %.2fx |\n", s.name, s.devices, s.vs1f1b, s.vsAll)
	}
	if *measure {
		measured(*m)
	}
}

// measured runs graphpipe and the chain schedules for real on 2 logical
// CPU devices (interleaved, medians). The schedulers plan with a profile
// and a cluster measured on this machine (sim.MeasureWith, sim.CPUCluster),
// and the simulator's prediction for each plan is printed beside the
// measurement.
func measured(m int) {
	ctx := context.Background()
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
	data := engine.Data{Graph: g, Features: feats, FeatureDim: cfg.InDim, Labels: labels}
	// The machine and the model's op costs, measured (a trainer of its
	// own: profiling takes optimizer steps).
	pt, err := engine.New(engine.Config{Model: mod, Devices: devs, Seed: 1, Data: data})
	check(err)
	cl, err := sim.CPUCluster(ctx, devs)
	check(err)
	prof, err := sim.MeasureWith(ctx, pt, devs[0], sim.MeasureOptions{Ladder: []int{n / max(1, m), 0}, Reps: 5})
	check(err)
	cores, err := sim.MeasureConcurrency(ctx, pt, devs, 5)
	check(err)
	cl.HostCores = cores
	pt.Close()
	type run struct {
		name string
		tr   *engine.Trainer
		p    *core.Plan
		b    *engine.Batch
		pred time.Duration
		ms   []float64
	}
	var runs []*run
	for _, s := range []*graphpipe.Scheduler{
		{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: m, Cluster: cl, Profile: prof},
		{Kind: graphpipe.OneFOneB, MicroBatches: m, Cluster: cl, Profile: prof},
		{Kind: graphpipe.GPipe, MicroBatches: m, Cluster: cl, Profile: prof},
	} {
		tr, err := engine.New(engine.Config{Model: mod, Devices: devs, Seed: 1, Data: data})
		check(err)
		defer tr.Close()
		b := tr.FullBatch(batch)
		w, err := tr.Workload(b, infos)
		check(err)
		p, err := s.Schedule(ctx, w)
		check(err)
		res, err := sim.Simulate(p, w, prof, cl)
		check(err)
		runs = append(runs, &run{name: s.Name(), tr: tr, p: p, b: b, pred: res.Iteration})
	}
	for round := 0; round < 6; round++ {
		for _, r := range runs {
			runtime.GC()
			t0 := time.Now()
			_, err := r.tr.Run(ctx, r.p, r.b, engine.RunOptions{})
			check(err)
			if round > 0 {
				r.ms = append(r.ms, float64(time.Since(t0))/1e6)
			}
		}
	}
	fmt.Printf("\nmeasured: 2 logical CPU devices (1 thread each; measured cluster: %.0f GFLOP/s, link %.1f GB/s, host cores %.2f), uno-4 (256 in, 256 hidden, 2 layers), %d samples, %d micro-batches, medians of 5\n\n",
		cl.Devices[0].GFLOPS, cl.Link.GBps, cl.HostCores, n, m)
	fmt.Println("| scheduler | order | devices used | stages | depth | simulated ms | measured ms | measured vs chain 1F1B | measured vs best chain |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	med := make([]float64, len(runs))
	var chain1, bestChain float64
	for i, r := range runs {
		sort.Float64s(r.ms)
		med[i] = r.ms[len(r.ms)/2]
		if r.name == "1f1b" {
			chain1 = med[i]
		}
		if r.name != "graphpipe" && (bestChain == 0 || med[i] < bestChain) {
			bestChain = med[i]
		}
	}
	for i, r := range runs {
		order := "1f1b"
		if r.p.Metrics["gpipe_order"] == 1 || r.p.Metrics["fallback_gpipe"] == 1 || r.name == "gpipe" {
			order = "gpipe"
		}
		fmt.Printf("| %s | %s | %d | %.0f | %.0f | %.1f | %.1f | %.2fx | %.2fx |\n", r.name, order, len(r.p.Devices()), r.p.Metrics["stages"], r.p.Metrics["depth"],
			float64(r.pred)/1e6, med[i], chain1/med[i], bestChain/med[i])
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "graphpipebench:", err)
		os.Exit(1)
	}
}
