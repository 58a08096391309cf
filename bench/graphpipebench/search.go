package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
	"github.com/gnnkit/gnnkit/sim"
)

// searchModels are the search table's models: uno of 2 to 5 branches and
// 8 (the benchmark's widths), the benchmark's two DLRMs, and the 1,000-op
// uno of the search-time acceptance test.
var searchModels = []model{
	{"uno", 2, core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 2}, ""},
	{"uno", 3, core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 3}, ""},
	{"uno", 4, core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}, ""},
	{"uno", 5, core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 5}, ""},
	{"uno", 8, core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 8}, ""},
	{"dlrm", 8, core.ModelConfig{InDim: 512, Hidden: 1024, Classes: 2, Layers: 3, Branches: 8}, ""},
	{"dlrm", 4, core.ModelConfig{InDim: 4, Hidden: 64, Classes: 2, Layers: 2, Branches: 4, TableRows: 1_000_000}, "dlrm-4 (10⁶×64)"},
	{"uno", 16, core.ModelConfig{InDim: 256, Hidden: 512, Classes: 8, Layers: 20, Branches: 16}, "uno-16×20 (1,000 ops)"},
}

// searchConfig is what the search table runs.
type searchConfig struct {
	models  []model
	devices []int
	preset  string
	samples int
	m       int
	limit   time.Duration // a search running longer is stopped and reported so
	reps    int           // searches timed per cell (the median is shown); one when a search takes over 10 s
}

// searchResult is one scheduler's search on one cell.
type searchResult struct {
	wall    time.Duration // median of the runs
	runs    int
	iter    time.Duration // the plan's simulated iteration
	peak    int64         // and its largest device's peak memory
	err     error
	stopped bool // past the time limit
}

// searchTable times the three partitioners' whole searches (Schedule:
// the DPs, the estimate, the candidates' simulation) on one core each,
// PipeDream's chain DP, Piper's downset DP and GraphPipe's
// series-parallel DP, and simulates the plan each picks, and the plan
// GraphPipe picks when it weighs Piper's chains too (dp=piper; not run
// where Piper's DP alone was stopped or refused).
func searchTable(out io.Writer, c searchConfig) error {
	prev := runtime.GOMAXPROCS(1) // every search on one core: PipeDream's tables and GraphPipe's DAG search otherwise run side by side, Piper's DP on one goroutine
	defer runtime.GOMAXPROCS(prev)
	fmt.Fprintf(out, "search time: preset %s, %d samples in %d micro-batches, roofline op costs, the devices' own memory, each search on one core (GOMAXPROCS=1), median of up to %d runs, stopped after %v; %s\n\n",
		c.preset, c.samples, c.m, c.reps, c.limit, time.Now().UTC().Format(time.DateOnly))
	fmt.Fprintln(out, "| model | ops | downsets | devices | pipedream s | piper s | graphpipe s | piper / graphpipe | 1f1b (pipedream): ms, peak | 1f1b (piper): ms, peak | graphpipe: ms, peak | graphpipe vs best chain | graphpipe dp=piper: ms, peak |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, md := range c.models {
		mod, err := core.BuildModel(md.name, md.cfg)
		if err != nil {
			return err
		}
		g, batch := samplesBatch(c.samples)
		for _, n := range c.devices {
			cl, err := sim.Preset(c.preset, n)
			if err != nil {
				return err
			}
			w := core.NewWorkload(mod, g, md.cfg.InDim, batch, cl.Infos(), 1)
			prof, err := sim.Roofline(w, cl.Devices[0])
			if err != nil {
				return err
			}
			downsets := "—"
			if k, err := graphpipe.Downsets(context.Background(), w); err == nil {
				downsets = fmt.Sprintf("%d", k)
			} else if errors.Is(err, graphpipe.ErrTooManyDownsets) {
				downsets = "too many" // past Piper's limit (graphpipe.ErrTooManyDownsets says it)
			} else {
				return err
			}
			scheds := []*graphpipe.Scheduler{
				{Kind: graphpipe.OneFOneB, MicroBatches: c.m, Cluster: cl, Profile: prof},
				{Kind: graphpipe.OneFOneB, MicroBatches: c.m, Cluster: cl, Profile: prof, ChainDP: graphpipe.ChainPiper},
				{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: c.m, Cluster: cl, Profile: prof},
				{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: c.m, Cluster: cl, Profile: prof, ChainDP: graphpipe.ChainPiper},
			}
			res := make([]searchResult, len(scheds))
			for i, s := range scheds {
				if i == 3 && res[1].err != nil {
					res[i] = res[1] // Piper's DP again: stopped or refused as before
					continue
				}
				res[i] = timeSearch(s, w, prof, cl, c)
			}
			cell := func(r searchResult) string {
				switch {
				case r.stopped:
					return fmt.Sprintf("> %.0f (stopped)", c.limit.Seconds())
				case errors.Is(r.err, graphpipe.ErrTooManyDownsets):
					return "refused: too many downsets"
				case r.err != nil:
					return "error: " + r.err.Error()
				}
				return fmt.Sprintf("%.3f", r.wall.Seconds())
			}
			iter := func(r searchResult) string {
				if r.err != nil {
					return "—"
				}
				return fmt.Sprintf("%.2f, %s", float64(r.iter)/1e6, core.FormatBytes(r.peak))
			}
			ratio := "—"
			if res[1].err == nil && res[2].err == nil {
				ratio = fmt.Sprintf("%.1fx", res[1].wall.Seconds()/res[2].wall.Seconds())
			} else if res[1].stopped && res[2].err == nil {
				ratio = fmt.Sprintf("> %.0fx", c.limit.Seconds()/res[2].wall.Seconds())
			}
			vs := "—"
			if res[2].err == nil {
				var best time.Duration
				for _, r := range res[:2] {
					if r.err == nil && (best == 0 || r.iter < best) {
						best = r.iter
					}
				}
				if best > 0 {
					vs = fmt.Sprintf("%.2fx", float64(best)/float64(res[2].iter))
				}
			}
			fmt.Fprintf(out, "| %s | %d | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", md, len(w.Ops), downsets, n,
				cell(res[0]), cell(res[1]), cell(res[2]), ratio, iter(res[0]), iter(res[1]), iter(res[2]), vs, iter(res[3]))
		}
	}
	return nil
}

// timeSearch runs s's search up to c.reps times (once when it takes over
// 10 s, stopped at c.limit) and simulates the plan of the first.
func timeSearch(s *graphpipe.Scheduler, w *core.Workload, prof *sim.Profile, cl *sim.Cluster, c searchConfig) searchResult {
	var walls []time.Duration
	var r searchResult
	for i := range max(c.reps, 1) {
		ctx, cancel := context.WithTimeout(context.Background(), c.limit)
		start := time.Now()
		p, err := s.Schedule(ctx, w)
		el := time.Since(start)
		cancel()
		if err != nil && len(walls) > 0 {
			break // a repeat past the limit: keep the runs that finished
		}
		if err != nil {
			r.err = err
			r.stopped = errors.Is(err, context.DeadlineExceeded)
			return r
		}
		walls = append(walls, el)
		if i == 0 {
			sr, err := sim.Simulate(p, w, prof, cl)
			if err != nil {
				r.err = err
				return r
			}
			r.iter = sr.Iteration
			for _, v := range sr.PeakMem {
				r.peak = max(r.peak, v)
			}
		}
		if el > 10*time.Second {
			break
		}
	}
	slices.Sort(walls)
	r.wall, r.runs = walls[len(walls)/2], len(walls)
	return r
}
