package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
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

// caps are n caps spaced geometrically from lo to hi, both included,
// ascending and distinct (fewer than n where the range holds fewer). The
// ones between are rounded to what the table prints, as --device-mem
// reads it back, so that a cap the table names gives the same search.
func (sw memSweep) caps() []int64 {
	out := []int64{sw.lo}
	r := float64(sw.hi) / float64(sw.lo)
	for i := 1; i < sw.n; i++ {
		c := int64(math.Round(float64(sw.lo) * math.Pow(r, float64(i)/float64(sw.n-1))))
		if back, err := core.ParseBytes(core.FormatBytes(core.RoundUpShownBytes(c))); err == nil && back > 0 {
			c = back
		}
		if i == sw.n-1 {
			c = sw.hi
		} else if c >= sw.hi {
			continue // rounded up to HI or past it: HI comes last
		}
		if c > out[len(out)-1] {
			out = append(out, c)
		}
	}
	return out
}

// sweepRow is one cap's result.
type sweepRow struct {
	CapBytes int64 `json:"cap_bytes"`
	// The plan at this cap (absent where Error says why there is none).
	IterationMs float64 `json:"iteration_ms,omitempty"`
	PeakBytes   int64   `json:"peak_bytes,omitempty"`
	// NeedBytes: what a search must allow to keep the plan
	// (core.Alternative.NeedBytes where the scheduler says, else the
	// simulated peak).
	NeedBytes int64  `json:"need_bytes,omitempty"`
	Plan      string `json:"plan,omitempty"`
	// OverCap: the simulator found a device of the plan over the cap.
	OverCap bool   `json:"over_cap,omitempty"`
	Error   string `json:"error,omitempty"`
	// short is Error as the table gives it.
	short string
	// The fastest plan found at any cap up to this one, and the cap
	// that found it: where it is not this row's own, the cap to pass
	// as --device-mem for it.
	BestCapBytes    int64   `json:"best_cap_bytes,omitempty"`
	BestIterationMs float64 `json:"best_iteration_ms,omitempty"`
}

// sweepReport is --mem-sweep's --json.
type sweepReport struct {
	Model     string            `json:"model"`
	Data      string            `json:"data"`
	Scheduler string            `json:"scheduler"`
	SchedOpts map[string]string `json:"sched_opts,omitempty"`
	Cluster   string            `json:"cluster"`
	Profile   string            `json:"profile"`
	Rows      []sweepRow        `json:"sweep"`
	Plot      string            `json:"plot,omitempty"`
}

// sweepMemory plans with sched at every cap of sw on cluster cl (every
// device held to the cap, as --device-mem holds it; w.Devices follows),
// simulates each plan with prof (nil: the roofline), and fills in each
// row's fastest plan at any cap up to it. A cap where the scheduler
// finds no plan is a row with its error; a cancelled context ends the
// sweep with its error. progress, if set, hears each cap done.
func sweepMemory(ctx context.Context, sched core.Scheduler, w *core.Workload, cl *sim.Cluster, prof *sim.Profile, sw memSweep, progress func()) ([]sweepRow, error) {
	var rows []sweepRow
	for _, c := range sw.caps() {
		for i := range cl.Devices {
			cl.Devices[i].MemBytes = c
		}
		w.Devices = cl.Infos()
		row := sweepRow{CapBytes: c}
		plan, err := sched.Schedule(ctx, w)
		if err == nil {
			err = plan.Validate(w)
			if err != nil {
				err = fmt.Errorf("scheduler %s returned a bad plan: %w", sched.Name(), err)
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var res *sim.Result
		if err != nil {
			row.Error = core.ScheduleError(sched.Name(), err).Error()
			if nf, ok := errors.AsType[*graphpipe.NoFitError](err); ok && nf.Need > 0 {
				row.short = "no plan fits; from about " + core.FormatBytes(core.RoundUpShownBytes(nf.Need)) + " one does"
			}
		} else if res, err = sim.Simulate(plan, w, prof, cl); err != nil {
			row.Error = "simulating the plan: " + err.Error()
		} else {
			row.IterationMs = float64(res.Iteration) / 1e6
			for _, v := range res.PeakMem {
				row.PeakBytes = max(row.PeakBytes, v)
			}
			row.NeedBytes, row.OverCap = row.PeakBytes, len(res.OverCap) > 0
			row.Plan = count(len(plan.Units), "unit") + ", " + count(len(plan.Devices()), "device")
			if alts := plan.Alternatives; len(alts) > 0 && alts[0].Chosen {
				row.Plan = alts[0].Description
				row.NeedBytes = max(row.NeedBytes, alts[0].NeedBytes)
			}
		}
		rows = append(rows, row)
		if progress != nil {
			progress()
		}
	}
	fillBest(rows)
	return rows, nil
}

// fillBest gives each row (ascending caps) the fastest plan that fits at
// any cap up to its own: a plan found under a smaller cap fits a larger
// one. Ties go to the smaller cap.
func fillBest(rows []sweepRow) {
	var best *sweepRow
	for i := range rows {
		r := &rows[i]
		if r.Error == "" && !r.OverCap && (best == nil || r.IterationMs < best.IterationMs) {
			best = r
		}
		if best != nil {
			r.BestCapBytes, r.BestIterationMs = best.CapBytes, best.IterationMs
		}
	}
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
	rows, err := sweepMemory(ctx, sched, w, cl, prof, sw, func() {
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
			fmt.Fprintf(tw, "%s\t-\t-\t-\t%s\t%s\n", capText(r.CapBytes), smallerCap(r), cmp.Or(r.short, r.Error))
			continue
		}
		plan := r.Plan
		if r.OverCap {
			plan += " (over the cap in the simulation)"
		}
		fmt.Fprintf(tw, "%s\t%.4g ms\t%s\t%s\t%s\t%s\n", capText(r.CapBytes), r.IterationMs, core.FormatBytes(r.PeakBytes),
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

// capText prints a cap as --device-mem reads it back: its size, and its
// bytes where the size as printed would read back as another (LO and HI
// as given; the caps between are rounded to what prints).
func capText(c int64) string {
	if back, err := core.ParseBytes(core.FormatBytes(c)); err == nil && back == c {
		return core.FormatBytes(c)
	}
	return fmt.Sprintf("%s (%d B)", core.FormatBytes(c), c)
}

// smallerCap says, for a row whose search found a slower plan (or none)
// where a smaller cap's search found a faster one, that plan's time and
// cap: the search is not monotone in the cap, and that cap reaches it.
func smallerCap(r sweepRow) string {
	if r.BestCapBytes == 0 || r.BestCapBytes == r.CapBytes || r.Error == "" && !r.OverCap && r.BestIterationMs >= r.IterationMs {
		return "-"
	}
	return fmt.Sprintf("%.4g ms at %s", r.BestIterationMs, capText(r.BestCapBytes))
}

// sweepPlot draws each cap's plan and the fastest at any cap up to it
// against the cap, as a PNG at path, atomically.
func sweepPlot(path string, rep sweepReport) error {
	var own, best plotter.XYs
	for _, r := range rep.Rows {
		x := float64(r.CapBytes) / (1 << 20)
		if r.Error == "" && !r.OverCap {
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

// count is "1 unit", "2 units".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
