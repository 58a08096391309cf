package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
	"github.com/gnnkit/gnnkit/sim"
)

// gnnConfig is what the multi-branch GNN table (-gnn) runs: mbgnn (towers
// of 1…branches hops over the dataset's graph, joined by a fusion MLP)
// at each branch count, over each device count and per-device memory
// cap, every scheduler searching m.
type gnnConfig struct {
	data     string  // a data.Open spec
	branches []int   // mbgnn's towers
	hidden   int     // width
	devices  []int   // simulated device counts
	caps     []int64 // per-device memory caps (bytes)
	preset   string
}

// gnnTable prints, per model, device count and cap, each pipeline
// scheduler's simulated iteration with m searched, the plan it chose,
// and GraphPipe over the best chain, with the gnnkit plan command that
// gives each row. The workload is the one gnnkit plan builds (a trainer's
// full batch of the training nodes, its graph and sizes), priced by the
// preset device's roofline, as plan prices it.
func gnnTable(out io.Writer, c gnnConfig) error {
	ctx := context.Background()
	ds, err := data.Open(c.data)
	if err != nil {
		return err
	}
	if ds.Graph == nil || ds.FeatureDim == 0 || ds.NumClasses == 0 || len(ds.Train) == 0 {
		return fmt.Errorf("-gnn-data %s: want a graph with features, labels and a training split (its nodes are the iteration's targets)", c.data)
	}
	be, err := cpu.New(core.BackendOptions{Devices: 1, Threads: 1})
	if err != nil {
		return err
	}
	defer be.Close()
	day := time.Now().UTC().Format(time.DateOnly)
	fmt.Fprintf(out, "simulated: multi-branch GNN (mbgnn, hidden %d) on %s (%d nodes, %d undirected edges, %d training targets a full-graph iteration), preset %s, m searched by every scheduler, roofline op costs; %s\n\n",
		c.hidden, c.data, ds.NumNodes, ds.NumEdges(), len(ds.Train), c.preset, day)
	fmt.Fprintln(out, "| model | devices | memory cap | graphpipe | 1f1b | gpipe | GraphPipe vs best chain |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|")
	for _, b := range c.branches {
		if err := gnnRows(ctx, out, c, ds, be, b); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\nany row from the command line: gnnkit plan --model mbgnn --branches B --hidden %d --data %s --preset %s --device-mem BYTES --simulate --devices N --scheduler graphpipe, 1f1b or gpipe\n",
		c.hidden, c.data, c.preset)
	return nil
}

// noFit is a GNN table cell for a scheduler's error: "does not fit", with
// the smallest per-device memory that would where the error names it,
// else the error.
func noFit(err error) string {
	if !errors.Is(err, graphpipe.ErrNoFit) {
		// One markdown cell: no column breaks, no line breaks.
		return strings.NewReplacer("|", "\\|", "\n", " ").Replace(err.Error())
	}
	var nf *graphpipe.NoFitError
	if errors.As(err, &nf) && nf.Need > 0 {
		return "does not fit (needs about " + core.FormatBytes(core.RoundUpShownBytes(nf.Need)) + ")" // as the message rounds it
	}
	return "does not fit"
}

// gnnRows prints mbgnn-b's rows: every device count and memory cap.
func gnnRows(ctx context.Context, out io.Writer, c gnnConfig, ds *data.Dataset, be *cpu.Backend, b int) error {
	// As gnnkit plan builds it (gcn's defaults: dropout 0.5, 2 layers).
	mod, err := core.BuildModel("mbgnn", core.ModelConfig{InDim: ds.FeatureDim, Hidden: c.hidden, Classes: ds.NumClasses, Layers: 2, Dropout: 0.5, Branches: b})
	if err != nil {
		return err
	}
	tr, err := engine.New(engine.Config{Model: mod, Devices: be.Devices()[:1], Seed: 1, Data: engine.Data{Graph: ds.Graph, Features: ds.Features, FeatureDim: ds.FeatureDim, Labels: ds.Labels}})
	if err != nil {
		return err
	}
	defer tr.Close()
	batch := tr.FullBatch(ds.Train)
	for _, n := range c.devices {
		for _, mem := range c.caps {
			cl, err := sim.Preset(c.preset, n)
			if err != nil {
				return err
			}
			for i := range cl.Devices {
				cl.Devices[i].MemBytes = mem
			}
			w, err := tr.Workload(batch, cl.Infos())
			if err != nil {
				return err
			}
			prof, err := sim.Roofline(w, cl.Devices[0])
			if err != nil {
				return err
			}
			var cells []string
			iters := map[string]time.Duration{}
			for _, s := range []*graphpipe.Scheduler{
				{Graph: true, Kind: graphpipe.OneFOneB, Cluster: cl, Profile: prof},
				{Kind: graphpipe.OneFOneB, Cluster: cl, Profile: prof},
				{Kind: graphpipe.GPipe, Cluster: cl, Profile: prof},
			} {
				p, err := s.Schedule(ctx, w)
				if err != nil {
					cells = append(cells, noFit(err))
					continue
				}
				res, err := sim.Simulate(p, w, prof, cl)
				if err != nil {
					return fmt.Errorf("%s on mbgnn-%d, %d devices: %w", s.Name(), b, n, err)
				}
				var peak int64
				for _, v := range res.PeakMem {
					peak = max(peak, v)
				}
				iters[s.Name()] = res.Iteration
				cells = append(cells, fmt.Sprintf("%.2f ms (m %d, %d stages, %d devices, %s)", float64(res.Iteration)/1e6,
					int(p.Metrics["micro_batches"]), int(p.Metrics["stages"]), len(res.PeakMem), core.FormatBytes(peak)))
			}
			ratio := "-"
			if gp, ok := iters["graphpipe"]; ok {
				best := time.Duration(0)
				for _, k := range []string{"1f1b", "gpipe"} {
					if it, ok := iters[k]; ok && (best == 0 || it < best) {
						best = it
					}
				}
				if best > 0 {
					ratio = fmt.Sprintf("%.2fx", float64(best)/float64(gp))
				} else {
					ratio = "no chain fits"
				}
			}
			fmt.Fprintf(out, "| mbgnn-%d | %d | %s | %s | %s |\n", b, n, core.FormatBytes(mem), strings.Join(cells, " | "), ratio)
		}
	}
	return nil
}
