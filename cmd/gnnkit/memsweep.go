package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/internal/atomicfile"
	"github.com/gnnkit/gnnkit/internal/memsweep"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
	"github.com/gnnkit/gnnkit/sim"
)

// A memory sweep (gnnkit plan --mem-sweep): the scheduler plans at
// several memory caps, each plan is simulated, and the rows say the
// fastest plan at each cap and the fastest found at any cap up to it.

// maxSweepCaps bounds --mem-sweep's N: each cap is a search.
const maxSweepCaps = 64

// memSweep is a parsed --mem-sweep LO:HI[:N].
type memSweep struct {
	lo, hi int64
	n      int
}

// parseMemSweep reads LO:HI or LO:HI:N (sizes as --device-mem takes
// them; N caps, default 8, from 2 to maxSweepCaps).
func parseMemSweep(s string) (memSweep, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return memSweep{}, fmt.Errorf("--mem-sweep %q: want LO:HI or LO:HI:N, e.g. 200MiB:1GiB or 200MiB:1GiB:12", s)
	}
	sw := memSweep{n: 8}
	var err error
	if sw.lo, err = core.ParseBytes(strings.TrimSpace(parts[0])); err != nil {
		return memSweep{}, fmt.Errorf("--mem-sweep %q: LO: %w", s, err)
	}
	if sw.hi, err = core.ParseBytes(strings.TrimSpace(parts[1])); err != nil {
		return memSweep{}, fmt.Errorf("--mem-sweep %q: HI: %w", s, err)
	}
	if len(parts) == 3 {
		if sw.n, err = strconv.Atoi(strings.TrimSpace(parts[2])); err != nil || sw.n < 2 || sw.n > maxSweepCaps {
			return memSweep{}, fmt.Errorf("--mem-sweep %q: N must be a whole number of caps from 2 to %d", s, maxSweepCaps)
		}
	}
	switch {
	case sw.lo <= 0:
		return memSweep{}, fmt.Errorf("--mem-sweep %q: LO must be positive", s)
	case sw.hi <= sw.lo:
		return memSweep{}, fmt.Errorf("--mem-sweep %q: HI must be above LO", s)
	case sw.hi > sim.MaxMemBytes:
		return memSweep{}, fmt.Errorf("--mem-sweep %q: at most %s per device", s, core.FormatBytes(sim.MaxMemBytes))
	}
	return sw, nil
}

// caps are the sweep's caps (memsweep.Caps).
func (sw memSweep) caps() []int64 { return memsweep.Caps(sw.lo, sw.hi, sw.n) }

// sweepReport is --mem-sweep's --json.
type sweepReport struct {
	Model     string            `json:"model"`
	Data      string            `json:"data"`
	Scheduler string            `json:"scheduler"`
	SchedOpts map[string]string `json:"sched_opts,omitempty"`
	Cluster   string            `json:"cluster"`
	Profile   string            `json:"profile"`
	Rows      []memsweep.Row    `json:"sweep"`
	Plot      string            `json:"plot,omitempty"`
}

// runMemSweep is gnnkit plan --mem-sweep: the sweep, then its table (or
// --json) and --sweep-plot.
func runMemSweep(ctx context.Context, out, errOut io.Writer, f *planFlags, sched core.Scheduler, w *core.Workload, cl *sim.Cluster, prof *sim.Profile, rep sweepReport) error {
	sw, err := parseMemSweep(f.memSweep)
	if err != nil {
		return err
	}
	var bar *progressbar.ProgressBar
	if !f.asJSON {
		bar = progressbar.NewOptions(len(sw.caps()), progressbar.OptionSetWriter(errOut),
			progressbar.OptionSetDescription("memory sweep: searches"), progressbar.OptionShowCount(), progressbar.OptionSetWidth(24),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetPredictTime(true), progressbar.OptionClearOnFinish())
	}
	t0 := time.Now()
	rows, err := memsweep.Run(ctx, sched, w, cl, prof, sw.caps(), func() {
		if bar != nil {
			_ = bar.Add(1)
		}
	})
	if bar != nil {
		_ = bar.Finish()
	}
	if err != nil {
		return err
	}
	rep.Rows = rows
	if f.sweepPlot != "" {
		if err := sweepPlot(f.sweepPlot, rep); err != nil {
			return err
		}
		rep.Plot = f.sweepPlot
	}
	if f.asJSON {
		return json.NewEncoder(out).Encode(rep)
	}
	fmt.Fprintf(out, "memory sweep: %s on %s (%s), %s / %s, %d caps from %s to %s, a search each (%s)\n",
		rep.Scheduler, rep.Cluster, rep.Profile, rep.Model, rep.Data, len(rows), core.FormatBytes(rows[0].CapBytes), core.FormatBytes(rows[len(rows)-1].CapBytes), time.Since(t0).Round(time.Millisecond))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "cap\titeration\tpeak\tneeds\tfaster at a smaller cap\tplan")
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t%s\t%s\n", memsweep.CapText(r.CapBytes), smallerCap(r), shortError(r))
			continue
		}
		plan := r.Plan
		if r.OverCap {
			plan += " (over the cap in the simulation)"
		}
		fmt.Fprintf(tw, "%s\t%.4g ms\t%s\t%s\t%s\t%s\n", memsweep.CapText(r.CapBytes), r.IterationMs, core.FormatBytes(r.PeakBytes),
			core.FormatBytes(core.RoundUpShownBytes(r.NeedBytes)), smallerCap(r), plan)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rep.Plot != "" {
		fmt.Fprintf(out, "plot: %s\n", rep.Plot)
	}
	return nil
}

// smallerCap says, for a row whose search found a slower plan (or none)
// where a smaller cap's search found a faster one, that plan's time and
// cap: the search is not monotone in the cap, and that cap reaches it.
func smallerCap(r memsweep.Row) string {
	if r.BestCapBytes == 0 || r.BestCapBytes == r.CapBytes || r.Fits() && r.BestIterationMs >= r.IterationMs {
		return "-"
	}
	return fmt.Sprintf("%.4g ms at %s", r.BestIterationMs, memsweep.CapText(r.BestCapBytes))
}

// shortError is a row's error as the table gives it: a no-fit error by
// its figure.
func shortError(r memsweep.Row) string {
	if nf, ok := errors.AsType[*graphpipe.NoFitError](r.Err); ok && nf.Need > 0 {
		return "no plan fits; from about " + core.FormatBytes(core.RoundUpShownBytes(nf.Need)) + " one does"
	}
	return r.Error
}

// sweepPlot draws each cap's plan and the fastest at any cap up to it
// against the cap, as a PNG at path, atomically.
func sweepPlot(path string, rep sweepReport) error {
	var own, best plotter.XYs
	for _, r := range rep.Rows {
		x := float64(r.CapBytes) / (1 << 20)
		if r.Fits() {
			own = append(own, plotter.XY{X: x, Y: r.IterationMs})
		}
		if r.BestCapBytes > 0 {
			best = append(best, plotter.XY{X: x, Y: r.BestIterationMs})
		}
	}
	if len(own) == 0 {
		return fmt.Errorf("--sweep-plot %s: no cap of the sweep has a plan that fits: nothing to draw", path)
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Iteration vs memory per device: %s, %s on %s", rep.Scheduler, rep.Model, rep.Cluster)
	p.X.Label.Text = "memory cap per device (MiB)"
	p.Y.Label.Text = "simulated iteration (ms)"
	p.Add(plotter.NewGrid())
	steps, err := plotter.NewLine(best)
	if err != nil {
		return fmt.Errorf("--sweep-plot: %w", err)
	}
	steps.StepStyle = plotter.PostStep
	steps.Color, steps.Width = plotutil.Color(1), vg.Points(2)
	pts, err := plotter.NewScatter(own)
	if err != nil {
		return fmt.Errorf("--sweep-plot: %w", err)
	}
	pts.Color, pts.Shape, pts.Radius = plotutil.Color(0), plotutil.Shape(0), vg.Points(4)
	p.Add(steps, pts)
	p.Legend.Add("the search at this cap", pts)
	p.Legend.Add("fastest found at any cap up to it", steps)
	p.Y.Min = 0 // the legend sits low on the right, under the curves
	wt, err := p.WriterTo(8*vg.Inch, 4.5*vg.Inch, "png")
	if err == nil {
		err = atomicfile.WriteTo(path, wt)
	}
	if err != nil {
		return fmt.Errorf("--sweep-plot %s: %w", path, err)
	}
	return nil
}
