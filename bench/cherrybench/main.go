// Command cherrybench measures the time cost of Cherry's micro-batching:
// the epoch time of cherry at K = 2, 4, 8, 16 relative to the uncapped
// sequential run, on the same machine in one run. Configurations are run
// round-robin (A B C … A B C …) so machine noise hits all alike; the table
// gives medians and ratios, plus Cherry's redundancy (receptive-field
// inputs of all micro-batches / inputs of the batch).
//
//	go run ./bench/cherrybench                  # Cora full graph + a sampled synthetic graph
//	go run ./bench/cherrybench -rounds 9 -json
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/gnnkit/gnnkit/internal/stats"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/cpuid/v2"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data"
	"github.com/gnnkit/gnnkit/engine"
	_ "github.com/gnnkit/gnnkit/models"
	"github.com/gnnkit/gnnkit/schedulers/cherry"
	"github.com/gnnkit/gnnkit/schedulers/sequential"
)

type workload struct {
	name      string
	data      string
	model     string
	hidden    int
	batchSize int
	fanouts   []int
}

type cell struct {
	Workload   string    `json:"workload"`
	Scheduler  string    `json:"scheduler"`
	K          int       `json:"k"`
	Reuse      bool      `json:"reuse,omitempty"`
	NoTrim     bool      `json:"no_trim,omitempty"`
	Ms         []float64 `json:"ms"`
	MedianMs   float64   `json:"median_ms"`
	Ratio      float64   `json:"ratio_vs_sequential"`
	Redundancy float64   `json:"redundancy"`
	PeakBytes  int64     `json:"peak_bytes"`
}

func main() {
	rounds := flag.Int("rounds", 7, "measured rounds per configuration (after one warm-up)")
	asJSON := flag.Bool("json", false, "print JSON instead of Markdown")
	reuse := flag.Bool("reuse", true, "also measure cherry with activation reuse")
	only := flag.String("only", "", "measure only the workloads whose name contains this")
	kList := flag.String("k", "2,4,8,16", "micro-batch counts to measure (the uncapped sequential run is always measured)")
	noTrim := flag.Bool("notrim", true, "also measure the sequential run computing every layer on every row (engine.Config.NoTrim), as PyG does without trim_to_layer")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cherrybench:", err)
			os.Exit(1)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "cherrybench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	loads := []workload{
		{name: "cora full graph, gcn", data: "cora", model: "gcn", hidden: 16},
		{name: "sbm 50k sampled (batch 1024, fan-out 10,10), sage h128", data: "synthetic:sbm,nodes=50000,classes=8,feat=128,avgdeg=20,train=200,seed=2",
			model: "sage", hidden: 128, batchSize: 1024, fanouts: []int{10, 10}},
	}
	var ks []config
	kk := []int{0} // 0: sequential
	for _, f := range strings.Split(*kList, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 {
			fmt.Fprintf(os.Stderr, "cherrybench: -k %q: want positive integers separated by commas\n", *kList)
			os.Exit(2)
		}
		kk = append(kk, k)
	}
	for _, k := range kk {
		ks = append(ks, config{k: k})
		if k == 0 && *noTrim {
			ks = append(ks, config{noTrim: true})
		}
		if k > 0 && *reuse {
			ks = append(ks, config{k: k, reuse: true})
		}
	}
	var cells []cell
	for _, wl := range loads {
		if !strings.Contains(wl.name, *only) {
			continue
		}
		cs, err := measure(wl, ks, *rounds)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cherrybench:", err)
			os.Exit(1)
		}
		cells = append(cells, cs...)
	}
	if *asJSON {
		json.NewEncoder(os.Stdout).Encode(cells)
		return
	}
	fmt.Printf("machine: %s, %d logical cores, GOMAXPROCS %d; %s; %d rounds, medians\n\n", cpuid.CPU.BrandName, cpuid.CPU.LogicalCores, runtime.GOMAXPROCS(0), time.Now().UTC().Format(time.DateOnly), *rounds)
	fmt.Println("| workload | scheduler | epoch ms (median) | × sequential | redundancy | peak memory |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, c := range cells {
		name := "sequential"
		if c.K > 0 {
			name = fmt.Sprintf("cherry K=%d", c.K)
		}
		if c.Reuse {
			name += " reuse"
		}
		if c.NoTrim {
			name += ", every row (no trim)"
		}
		fmt.Printf("| %s | %s | %.1f | %.2f | %.2f | %s |\n", c.Workload, name, c.MedianMs, c.Ratio, c.Redundancy, core.FormatBytes(c.PeakBytes))
	}
}

// config is one scheduler setting: K micro-batches (0: sequential), with
// or without activation reuse.
type config struct {
	k      int
	reuse  bool
	noTrim bool
}

func measure(wl workload, ks []config, rounds int) ([]cell, error) {
	ds, err := data.Open(wl.data)
	if err != nil {
		return nil, err
	}
	be, err := cpu.New(core.BackendOptions{})
	if err != nil {
		return nil, err
	}
	defer be.Close()
	devs := be.Devices()
	m, err := core.BuildModel(wl.model, core.ModelConfig{InDim: ds.FeatureDim, Hidden: wl.hidden, Classes: ds.NumClasses, Dropout: 0.5})
	if err != nil {
		return nil, err
	}
	type run struct {
		tr       *engine.Trainer
		resident int64 // device bytes this trainer keeps between runs
		plans    []*core.Plan
		bs       []*engine.Batch
		c        *cell
	}
	// The same batches for every configuration.
	var targets [][]int32
	if wl.batchSize == 0 {
		targets = [][]int32{ds.Train}
	} else {
		for lo := 0; lo < len(ds.Train); lo += wl.batchSize {
			targets = append(targets, ds.Train[lo:min(len(ds.Train), lo+wl.batchSize)])
		}
	}
	var runs []*run
	for _, kc := range ks {
		k := kc.k
		tr, err := engine.New(engine.Config{Model: m, Devices: devs, Seed: 1, NoTrim: kc.noTrim,
			Data: engine.Data{Graph: ds.Graph, Features: ds.RowNormalizedFeatures(), FeatureDim: ds.FeatureDim, Labels: ds.Labels}})
		if err != nil {
			return nil, err
		}
		defer tr.Close()
		var s core.Scheduler = &sequential.Scheduler{}
		if k > 0 {
			s = &cherry.Scheduler{K: k, Reuse: kc.reuse}
		}
		r := &run{tr: tr, c: &cell{Workload: wl.name, Scheduler: s.Name(), K: k, Reuse: kc.reuse, NoTrim: kc.noTrim}}
		for i, t := range targets {
			b := tr.FullBatch(t)
			if wl.batchSize > 0 {
				if b, err = engine.Sample(ds.Graph, t, wl.fanouts, uint64(i)); err != nil {
					return nil, err
				}
			}
			w, err := tr.Workload(b, []core.DeviceInfo{devs[0].Info()})
			if err != nil {
				return nil, err
			}
			p, err := s.Schedule(context.Background(), w)
			if err != nil {
				return nil, err
			}
			if err := p.Validate(w); err != nil {
				return nil, err
			}
			r.plans, r.bs = append(r.plans, p), append(r.bs, b)
			r.c.Redundancy += p.Metrics["redundancy"] / float64(len(targets))
		}
		if k == 0 {
			r.c.Redundancy = 1
		}
		runs = append(runs, r)
	}
	for round := 0; round <= rounds; round++ {
		for _, r := range runs {
			t0 := time.Now()
			for i, p := range r.plans {
				// The device is shared by every configuration's trainer:
				// count only what this run adds to what the others hold.
				others := devs[0].Mem().Stats().Used - r.resident
				res, err := r.tr.Run(context.Background(), p, r.bs[i], engine.RunOptions{})
				if err != nil {
					return nil, err
				}
				r.c.PeakBytes = max(r.c.PeakBytes, res.Trace.PeakMem[devs[0].ID()]-others)
				r.resident = devs[0].Mem().Stats().Used - others
			}
			if round > 0 { // round 0 warms up
				r.c.Ms = append(r.c.Ms, float64(time.Since(t0))/1e6)
			}
		}
	}
	var out []cell
	for _, r := range runs {
		r.c.MedianMs = stats.Median(r.c.Ms)
		r.c.Ratio = r.c.MedianMs / stats.Median(runs[0].c.Ms)
		out = append(out, *r.c)
	}
	fmt.Fprintf(os.Stderr, "%s: done (%s)\n", wl.name, strings.Repeat("·", len(runs)))
	return out, nil
}
