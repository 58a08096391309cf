package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/internal/memsweep"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
	"github.com/gnnkit/gnnkit/sim"
)

// The swept baseline (-sweep N): every scheduler's fastest plan at any
// of N memory caps, beside its plan at the devices' own memory. A
// search is not monotone in the cap, so the chain baselines' plain
// searches are not always the best chains our searches find.

// swept is one scheduler's plans in one cell: at the devices' memory
// (plain) and the fastest at any cap of the sweep (best).
type swept struct {
	name        string
	plain, best *memsweep.Row // nil: no plan fits
	rows        []memsweep.Row
}

// sweptCell is one model on one device count.
type sweptCell struct {
	model   model
	devices int
	mem     int64 // the devices' memory: the largest cap
	caps    int   // caps swept, the devices' memory among them
	scheds  []swept
}

// sweptCaps are the caps a cell sweeps below the devices' memory mem,
// given the plain plans' peaks: n caps geometric from half the lightest
// to four times the heaviest, those at or above mem left out (mem is
// the plain search's).
func sweptCaps(peaks []int64, mem int64, n int) []int64 {
	lo, hi := int64(math.MaxInt64), int64(0)
	for _, p := range peaks {
		if p > 0 {
			lo, hi = min(lo, p/2), max(hi, 4*p)
		}
	}
	hi = min(hi, mem)
	if hi == 0 || lo <= 0 || lo >= hi {
		return nil
	}
	var out []int64
	for _, c := range memsweep.Caps(lo, hi, n) {
		if c < mem {
			out = append(out, c)
		}
	}
	return out
}

// sweptTable sweeps every model on every device count of c, at c.m
// micro-batches (0: searched) on the devices' memory or, with capFrac >
// 0, under the memory-capped table's cap with m searched; n caps per
// cell. progress, if set, hears each scheduler's sweep done.
func sweptTable(ctx context.Context, c config, capFrac float64, n int, progress func(string)) ([]sweptCell, error) {
	m := c.m
	if capFrac > 0 {
		m = 0
	}
	var cells []sweptCell
	for _, md := range c.models {
		mod, err := core.BuildModel(md.name, md.cfg)
		if err != nil {
			return nil, err
		}
		g, batch := samplesBatch(c.samples)
		for _, d := range c.devices {
			cl, err := c.cluster(d)
			if err != nil {
				return nil, err
			}
			w := core.NewWorkload(mod, g, md.cfg.InDim, batch, cl.Infos(), 1)
			prof, err := sim.Roofline(w, cl.Devices[0])
			if err != nil {
				return nil, err
			}
			mem := cl.Devices[0].MemBytes
			if capFrac > 0 {
				cm, err := sim.NewCostModel(w, prof, cl)
				if err != nil {
					return nil, err
				}
				mem = capLimit(cm, capFrac)
			}
			cell := sweptCell{model: md, devices: d, mem: mem}
			// Each scheduler on a cluster of its own, which the sweep
			// holds to each cap in turn.
			type run struct {
				s  *graphpipe.Scheduler
				cl *sim.Cluster
				w  *core.Workload
			}
			var runs []run
			for _, s := range []*graphpipe.Scheduler{
				{Graph: true, Kind: graphpipe.OneFOneB, GPipeOrder: c.gpipeOrder},
				{Kind: graphpipe.OneFOneB},
				{Kind: graphpipe.GPipe},
			} {
				own := *cl
				own.Devices = slices.Clone(cl.Devices)
				s.MicroBatches, s.Cluster, s.Profile, s.Simulate = m, &own, prof, c.simulate
				runs = append(runs, run{s, &own, core.NewWorkload(mod, g, md.cfg.InDim, batch, own.Infos(), 1)})
			}
			// The plain searches first: their peaks bound the sweep.
			var peaks []int64
			for _, r := range runs {
				rows, err := memsweep.Run(ctx, r.s, r.w, r.cl, prof, []int64{mem}, nil)
				if err != nil {
					return nil, err
				}
				if rows[0].Fits() {
					peaks = append(peaks, rows[0].PeakBytes)
				}
				cell.scheds = append(cell.scheds, swept{name: r.s.Name(), rows: rows})
			}
			caps := sweptCaps(peaks, mem, n)
			cell.caps = len(caps) + 1
			for i, r := range runs {
				rows, err := memsweep.Run(ctx, r.s, r.w, r.cl, prof, caps, nil)
				if err != nil {
					return nil, err
				}
				sw := &cell.scheds[i]
				sw.rows = append(rows, sw.rows...) // ascending: the devices' memory last
				memsweep.FillBest(sw.rows)
				if last := &sw.rows[len(sw.rows)-1]; last.Fits() {
					sw.plain = last
				}
				sw.best = memsweep.Fastest(sw.rows, 0)
				if progress != nil {
					progress(fmt.Sprintf("%s / %d: %s", md, d, sw.name))
				}
			}
			cells = append(cells, cell)
		}
	}
	return cells, nil
}

// chains are a cell's 1F1B chain and its faster chain (1F1B or GPipe),
// plain (best false) or swept.
func (c sweptCell) chains(best bool) (oneF, fastest *memsweep.Row) {
	pick := func(s swept) *memsweep.Row {
		if best {
			return s.best
		}
		return s.plain
	}
	oneF = pick(c.scheds[1])
	for _, s := range c.scheds[1:] {
		if r := pick(s); r != nil && (fastest == nil || r.IterationMs < fastest.IterationMs) {
			fastest = r
		}
	}
	return oneF, fastest
}

// goal says whether the swept cell meets the benchmark's goal, judged on
// swept plans: GraphPipe's fastest at least goal× the faster swept chain
// and lighter than the swept 1F1B chain's plan; failing that, its
// fastest plan at any cap under that plan's peak; or not, and why.
func (c sweptCell) goal() string {
	gp := c.scheds[0].best
	oneF, chain := c.chains(true)
	switch {
	case gp == nil:
		return "- (no GraphPipe plan)"
	case chain == nil:
		return "- (no chain plan)"
	}
	ratio := chain.IterationMs / gp.IterationMs
	if oneF == nil {
		if ratio < goal {
			return fmt.Sprintf("no: %.3fx", math.Floor(ratio*1000)/1000)
		}
		return "no 1F1B chain plan to compare peaks with"
	}
	if ratio >= goal && gp.PeakBytes < oneF.PeakBytes {
		return "yes"
	}
	if h := memsweep.Fastest(c.scheds[0].rows, oneF.PeakBytes); h != nil && chain.IterationMs/h.IterationMs >= goal {
		return fmt.Sprintf("under the 1F1B chain's peak: %.3fx, %s (%s at %s)", math.Floor(chain.IterationMs/h.IterationMs*1000)/1000, core.FormatBytes(h.PeakBytes), h.Plan, memsweep.CapText(h.CapBytes))
	}
	if ratio < goal {
		return fmt.Sprintf("no: %.3fx", math.Floor(ratio*1000)/1000)
	}
	return fmt.Sprintf("no: %s vs %s", core.FormatBytes(gp.PeakBytes), core.FormatBytes(oneF.PeakBytes))
}

// printSwept prints the swept cells' table: per scheduler its plain
// plan and its fastest at any cap (where faster), then GraphPipe's
// ratio over the faster chain, plain and swept, and the goal on swept
// plans.
func printSwept(out io.Writer, title string, cells []sweptCell) {
	fmt.Fprintf(out, "\n%s\n\n", title)
	fmt.Fprintf(out, "| model | devices | memory | caps | graphpipe: plain → swept | 1f1b: plain → swept | gpipe: plain → swept | vs best chain, plain | vs best chain, swept | ≥ %.1fx the best swept chain and lighter than the swept 1F1B chain |\n", goal)
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|")
	for _, c := range cells {
		fmt.Fprintf(out, "| %s | %d | %s | %d |", c.model, c.devices, core.FormatBytes(c.mem), c.caps)
		for _, s := range c.scheds {
			fmt.Fprintf(out, " %s |", sweptText(s))
		}
		ratio := func(best bool) string {
			_, chain := c.chains(best)
			gp := c.scheds[0].plain
			if best {
				gp = c.scheds[0].best
			}
			if chain == nil || gp == nil {
				return "-"
			}
			return fmt.Sprintf("%.2fx", chain.IterationMs/gp.IterationMs)
		}
		fmt.Fprintf(out, " %s | %s | %s |\n", ratio(false), ratio(true), c.goal())
	}
}

// sweptText is a scheduler's plain plan and, where a cap's search found
// a faster one (by 0.01 ms or more, as printed), that plan and its cap
// (as --device-mem reads it back).
func sweptText(s swept) string {
	if s.best == nil {
		return "no plan fits"
	}
	text := "-"
	if s.plain != nil {
		text = fmt.Sprintf("%.2f ms, %s", s.plain.IterationMs, core.FormatBytes(s.plain.PeakBytes))
	}
	// Where the swept plan is faster by what two decimals show.
	if s.plain == nil || fmt.Sprintf("%.2f", s.best.IterationMs) != fmt.Sprintf("%.2f", s.plain.IterationMs) {
		text += fmt.Sprintf(" → %.2f ms, %s (at %s: %s)", s.best.IterationMs, core.FormatBytes(s.best.PeakBytes), memsweep.CapText(s.best.CapBytes), s.best.Plan)
	}
	return text
}

// sweptMain is -sweep n: the swept tables (at the devices' memory, then
// memory-capped with m searched where c.capFrac > 0), with a line of
// progress per scheduler's sweep on errOut, then the commands that
// reproduce any plan; with plotDir, each table's plot there
// (graphpipe-swept.png, graphpipe-swept-capped.png).
func sweptMain(out, errOut io.Writer, c config, n int, plotDir string) error {
	day := time.Now().UTC().Format(time.DateOnly)
	t0 := time.Now()
	progress := func(s string) {
		fmt.Fprintf(errOut, "graphpipebench: swept %s (%s)\n", s, time.Since(t0).Round(time.Second))
	}
	fmt.Fprintf(out, "swept: preset %s, %d samples per iteration, roofline op costs; every scheduler planned at the devices' memory (plain) and at up to %d caps below it, geometric from half the lightest plain plan's peak to four times the heaviest (swept: its fastest plan at any of them); %s\n", c.preset, c.samples, n, day)
	cells, err := sweptTable(context.Background(), c, 0, n, progress)
	if err != nil {
		return err
	}
	title := fmt.Sprintf("Swept, m = %d:", c.m)
	if c.m == 0 {
		title = "Swept, m searched:"
	}
	printSwept(out, title, cells)
	draw := func(file, title string, cells []sweptCell) error {
		if plotDir == "" {
			return nil
		}
		p, err := sweptPlot(fmt.Sprintf("GraphPipe over the best chain, plain and swept: %s (%s)", title, c.preset), cells)
		if err == nil {
			err = save(p, filepath.Join(plotDir, file))
		}
		if err == nil {
			fmt.Fprintln(errOut, "graphpipebench: wrote", filepath.Join(plotDir, file))
		}
		return err
	}
	regime := fmt.Sprintf("m = %d", c.m)
	if c.m == 0 {
		regime = "m searched"
	}
	if err := draw("graphpipe-swept.png", regime, cells); err != nil {
		return err
	}
	if c.capFrac > 0 {
		cells, err := sweptTable(context.Background(), c, c.capFrac, n, progress)
		if err != nil {
			return err
		}
		printSwept(out, fmt.Sprintf("Swept, memory-capped (the model's training state / %.2f per device), m searched:", c.capFrac), cells)
		if err := draw("graphpipe-swept-capped.png", fmt.Sprintf("memory-capped (state / %.2f), m searched", c.capFrac), cells); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\na swept plan from the command line: its row's command below with --device-mem set to the cap named (%s)\n", time.Since(t0).Round(time.Second))
	return reproduce(out, c)
}

// sweptPlot draws GraphPipe's throughput over the best chain against
// devices, per model: plain (each scheduler's search at the devices'
// memory, dashed) and swept (each one's fastest at any cap, solid), with
// the goal.
func sweptPlot(title string, cells []sweptCell) (*plot.Plot, error) {
	var axis []summary
	var names []string
	by := map[string][]sweptCell{}
	for _, c := range cells {
		axis = append(axis, summary{devices: c.devices})
		name := c.model.String()
		if _, ok := by[name]; !ok {
			names = append(names, name)
		}
		by[name] = append(by[name], c)
	}
	p := ratioPlot(title, axis)
	hi := goal
	for i, name := range names {
		for j, best := range []bool{false, true} {
			var xy plotter.XYs
			for _, c := range by[name] {
				_, chain := c.chains(best)
				gp := c.scheds[0].plain
				if best {
					gp = c.scheds[0].best
				}
				if chain != nil && gp != nil {
					r := chain.IterationMs / gp.IterationMs
					xy = append(xy, plotter.XY{X: float64(c.devices), Y: r})
					hi = max(hi, r)
				}
			}
			if len(xy) == 0 {
				continue
			}
			label := name + ": swept"
			if !best {
				label = name + ": plain"
			}
			l, err := addSeries(p, xy, i, 2*i+j, label)
			if err != nil {
				return nil, err
			}
			if !best {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
		}
	}
	addGoal(p)
	p.Y.Min, p.Y.Max = 0.8, max(2, hi*1.4) // the top holds the legend
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return p, nil
}
