package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/gnnkit/gnnkit/internal/atomicfile"
)

// goal is the throughput over the best chain the benchmark aims at.
const goal = 1.3

// writePlots draws the summaries into dir (created if missing) and
// returns the files written: GraphPipe over the best chain against
// devices per table, each model with the compute bound (no plan beats the
// best chain by more; at a fixed m, no plan at that m) and the goal; and, from the fixed-m table, the
// largest device's peak memory of GraphPipe and of the 1F1B chain.
func writePlots(dir string, c config, fixed, capped []summary) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("-plot: %w", err)
	}
	var files []string
	add := func(name string, p *plot.Plot) error {
		path := filepath.Join(dir, name)
		if err := save(p, path); err != nil {
			return err
		}
		files = append(files, path)
		return nil
	}
	sub := fmt.Sprintf("simulated %s, %d samples", c.preset, c.samples)
	regime := fmt.Sprintf("m = %d", c.m)
	if c.m == 0 {
		regime = "m searched"
	}
	p, err := speedupPlot(fmt.Sprintf("GraphPipe over the best chain, %s (%s)", regime, sub), fixed)
	if err != nil {
		return nil, err
	}
	if err := add("graphpipe-speedup.png", p); err != nil {
		return nil, err
	}
	if len(capped) > 0 {
		p, err := speedupPlot(fmt.Sprintf("GraphPipe over the best chain, memory-capped, m searched (%s)", sub), capped)
		if err != nil {
			return nil, err
		}
		if err := add("graphpipe-speedup-capped.png", p); err != nil {
			return nil, err
		}
	}
	p, err = memoryPlot(fmt.Sprintf("Largest device's peak memory, %s (%s)", regime, sub), fixed)
	if err != nil {
		return nil, err
	}
	if err := add("graphpipe-memory.png", p); err != nil {
		return nil, err
	}
	return files, nil
}

// series groups the summaries by model, in first-seen order, each by
// device count as given.
func series(sums []summary) (names []string, by map[string][]summary) {
	by = map[string][]summary{}
	for _, s := range sums {
		if _, ok := by[s.name]; !ok {
			names = append(names, s.name)
		}
		by[s.name] = append(by[s.name], s)
	}
	return names, by
}

// devicesAxis puts the device counts on a log2 axis with a tick at each.
func devicesAxis(p *plot.Plot, sums []summary) {
	p.X.Label.Text = "devices"
	p.X.Scale = plot.LogScale{}
	var ticks []plot.Tick
	seen := map[int]bool{}
	lo, hi := 0, 0
	for _, s := range sums {
		if !seen[s.devices] {
			seen[s.devices] = true
			ticks = append(ticks, plot.Tick{Value: float64(s.devices), Label: strconv.Itoa(s.devices)})
		}
		if lo == 0 || s.devices < lo {
			lo = s.devices
		}
		hi = max(hi, s.devices)
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = float64(lo)/1.15, float64(hi)*1.15
}

// ratioPlot is a plot of throughput over the best chain against
// devices (the device counts of sums), titled title, its legend top left.
func ratioPlot(title string, sums []summary) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.Y.Label.Text = "throughput over the best chain"
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	devicesAxis(p, sums)
	return p
}

// addGoal draws the goal as a dashed grey line across p.
func addGoal(p *plot.Plot) {
	g := plotter.NewFunction(func(float64) float64 { return goal })
	g.Color = color.Gray{Y: 90}
	g.Width = vg.Points(1.5)
	g.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	p.Add(g)
	p.Legend.Add(fmt.Sprintf("goal %.1fx", goal), g)
}

func speedupPlot(title string, sums []summary) (*plot.Plot, error) {
	p := ratioPlot(title, sums)
	names, by := series(sums)
	hi := goal
	for i, name := range names {
		var got, bound plotter.XYs
		boundName := "compute bound"
		for _, s := range by[name] {
			if s.vsAll == 0 {
				continue // no chain plan fits: no ratio
			}
			got = append(got, plotter.XY{X: float64(s.devices), Y: s.vsAll})
			// At a fixed m, the bound at that m's micro-batches; with m
			// searched, at the m GraphPipe chose.
			b := s.headroom
			switch {
			case s.headroomM > 0:
				b, boundName = s.headroomM, "compute bound at this m"
			case s.headroomGP > 0:
				b, boundName = s.headroomGP, "compute bound at GraphPipe's m"
			}
			bound = append(bound, plotter.XY{X: float64(s.devices), Y: b})
			hi = max(hi, s.vsAll)
		}
		if len(got) == 0 {
			continue
		}
		if _, err := addSeries(p, got, i, i, name+": GraphPipe"); err != nil {
			return nil, err
		}
		b, err := plotter.NewLine(bound)
		if err != nil {
			return nil, fmt.Errorf("-plot: %w", err)
		}
		b.Color = plotutil.Color(i)
		b.Dashes = []vg.Length{vg.Points(2), vg.Points(3)}
		p.Add(b)
		p.Legend.Add(name+": "+boundName, b)
	}
	addGoal(p)
	// The bounds grow with devices far past what any plan reaches; the
	// axis follows GraphPipe's ratios and clips them (the table has them).
	p.Y.Min, p.Y.Max = 0.8, max(2, hi*1.5) // the top holds the legend
	var yt []plot.Tick
	for y := 1.0; y <= p.Y.Max; y += 0.25 {
		l := ""
		if int(y*4)%2 == 0 {
			l = strconv.FormatFloat(y, 'f', -1, 64) + "x"
		}
		yt = append(yt, plot.Tick{Value: y, Label: l})
	}
	p.Y.Tick.Marker = plot.ConstantTicks(yt)
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return p, nil
}

func memoryPlot(title string, sums []summary) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.Y.Label.Text = "MiB on the largest device"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	devicesAxis(p, sums)
	names, by := series(sums)
	hi := 0.0
	for i, name := range names {
		for j, chain := range []bool{false, true} {
			var xy plotter.XYs
			for _, s := range by[name] {
				v := s.peakGP
				if chain {
					v = s.peak1F1B
				}
				if v > 0 {
					xy = append(xy, plotter.XY{X: float64(s.devices), Y: float64(v) / (1 << 20)})
					hi = max(hi, float64(v)/(1<<20))
				}
			}
			if len(xy) == 0 {
				continue
			}
			label := name + ": GraphPipe"
			if chain {
				label = name + ": 1F1B chain"
			}
			l, err := addSeries(p, xy, i, 2*i+j, label)
			if err != nil {
				return nil, err
			}
			if chain {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
		}
	}
	p.Y.Min, p.Y.Max = 0, hi*1.5
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return p, nil
}

// addSeries adds xy to p as a line with points in color c and point
// shape sh, under label in the legend, and returns the line.
func addSeries(p *plot.Plot, xy plotter.XYs, c, sh int, label string) (*plotter.Line, error) {
	l, pts, err := plotter.NewLinePoints(xy)
	if err != nil {
		return nil, fmt.Errorf("-plot: %w", err)
	}
	l.Color, pts.Color = plotutil.Color(c), plotutil.Color(c)
	pts.Shape = plotutil.Shape(sh)
	p.Add(l, pts)
	p.Legend.Add(label, l, pts)
	return l, nil
}

// save writes p as a PNG at path, atomically.
func save(p *plot.Plot, path string) error {
	wt, err := p.WriterTo(8*vg.Inch, 4.5*vg.Inch, "png")
	if err == nil {
		err = atomicfile.WriteTo(path, wt)
	}
	if err != nil {
		return fmt.Errorf("-plot %s: %w", path, err)
	}
	return nil
}
