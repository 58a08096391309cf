package bench

import (
	"fmt"
	"github.com/gnnkit/gnnkit/internal/atomicfile"
	"path/filepath"
	"slices"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plotFile is a PNG written for a workload.
type plotFile struct {
	workload, title, file string
}

// plots draws, per workload: epoch time per configuration and run
// (horizontal bars), speedup against devices (where some cell uses more
// than one device), and peak memory against micro-batches (where a
// scheduler reports micro-batches).
func (rep *Report) plots(dir string, ws []Workload) ([]plotFile, error) {
	var out []plotFile
	for _, wl := range ws {
		s := slug(wl.Name)
		pf := plotFile{wl.Name, "epoch time: " + wl.Name, "epoch-time-" + s + ".png"}
		if err := rep.epochPlot(filepath.Join(dir, pf.file), wl); err != nil {
			return nil, err
		}
		out = append(out, pf)
		multi, micro := false, false
		for _, r := range wl.Rows {
			multi = multi || r.Result.Cell.Devices > 1
			_, ok := r.Result.Metrics["micro_batches"]
			micro = micro || ok && r.Result.Cell.Devices == 1
		}
		if multi {
			pf := plotFile{wl.Name, "speedup vs devices: " + wl.Name, "speedup-" + s + ".png"}
			ok, err := speedupPlot(filepath.Join(dir, pf.file), wl)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, pf)
			}
		}
		if micro {
			pf := plotFile{wl.Name, "peak memory vs micro-batches: " + wl.Name, "memory-" + s + ".png"}
			if err := memoryPlot(filepath.Join(dir, pf.file), wl); err != nil {
				return nil, err
			}
			out = append(out, pf)
		}
	}
	return out, nil
}

// epochPlot: one bar group per configuration, one bar per run.
func (rep *Report) epochPlot(path string, wl Workload) error {
	var configs []string
	idx := map[string]int{}
	for _, r := range wl.Rows {
		c := r.Result.Cell.config()
		if _, ok := idx[c]; !ok {
			idx[c] = len(configs)
			configs = append(configs, c)
		}
	}
	p := plot.New()
	p.Title.Text = "Epoch time (median), " + wl.Name
	p.X.Label.Text = "ms per epoch (shorter is faster)"
	p.Legend.Top = true
	var runs []string
	for _, run := range rep.Runs {
		for _, r := range wl.Rows {
			if r.Run == run.Label {
				runs = append(runs, run.Label)
				break
			}
		}
	}
	barW := vg.Points(min(14, 28/float64(max(1, len(runs)))))
	for i, run := range runs {
		vals := make(plotter.Values, len(configs))
		for _, r := range wl.Rows {
			if r.Run == run {
				vals[idx[r.Result.Cell.config()]] = r.Result.EpochMsMedian
			}
		}
		b, err := plotter.NewBarChart(vals, barW)
		if err != nil {
			return fmt.Errorf("bench: plot: %w", err)
		}
		b.Horizontal = true
		b.LineStyle.Width = 0
		b.Color = plotutil.Color(i)
		b.Offset = barW * vg.Length(float64(i)-float64(len(runs)-1)/2)
		p.Add(b)
		p.Legend.Add(run, b)
	}
	p.NominalY(configs...)
	p.Add(plotter.NewGrid())
	hi := 0.0
	for _, r := range wl.Rows {
		hi = max(hi, r.Result.EpochMsMedian)
	}
	p.X.Min, p.X.Max = 0, hi*1.3 // room for the legend
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	h := vg.Length(1.4)*vg.Inch + vg.Length(len(configs))*(barW*vg.Length(len(runs))+6)
	return save(p, 8*vg.Inch, h, path)
}

// speedupPlot: per run, backend and scheduler, the speedup against
// devices (the table's speedup column).
func speedupPlot(path string, wl Workload) (bool, error) {
	type key struct{ run, backend, sched string }
	series := map[key]plotter.XYs{}
	var keys []key
	for _, r := range wl.Rows {
		c := r.Result.Cell
		if r.Speedup == 0 || c.DeviceMem != "" {
			continue
		}
		k := key{r.Run, c.Backend, c.Scheduler}
		if o := c.optsString(); o != "" {
			k.sched += " " + o
		}
		if _, ok := series[k]; !ok {
			keys = append(keys, k)
		}
		series[k] = append(series[k], plotter.XY{X: float64(c.Devices), Y: r.Speedup})
	}
	keys = slices.DeleteFunc(keys, func(k key) bool {
		return !slices.ContainsFunc(series[k], func(xy plotter.XY) bool { return xy.X > 1 })
	})
	if len(keys) == 0 {
		return false, nil
	}
	p := plot.New()
	p.Title.Text = "Speedup vs devices, " + wl.Name
	p.X.Label.Text = "devices"
	p.Y.Label.Text = "speedup over 1-device sequential (same run, backend)"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	maxDev := 1.0
	for i, k := range keys {
		xy := series[k]
		sort.Slice(xy, func(a, b int) bool { return xy[a].X < xy[b].X })
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return false, fmt.Errorf("bench: plot: %w", err)
		}
		l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i / 7)
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(fmt.Sprintf("%s %s %s", k.run, k.backend, k.sched), l, pts)
		maxDev = max(maxDev, xy[len(xy)-1].X)
	}
	p.X.Min, p.X.Max, p.Y.Min = 0.5, maxDev+0.5+0.9*maxDev, 0 // the right part holds the legend
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	var ticks []plot.Tick
	for d := 1.0; d <= maxDev; d++ {
		ticks = append(ticks, plot.Tick{Value: d, Label: fmt.Sprint(d)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	return true, save(p, 8*vg.Inch, vg.Length(3.5+0.16*float64(len(keys)))*vg.Inch, path)
}

// memoryPlot: peak memory (largest device) against micro-batches per
// iteration (1 for schedulers that report none), per run, backend,
// scheduler and device count.
func memoryPlot(path string, wl Workload) error {
	type key struct {
		run, backend, sched string
		devices             int
	}
	series := map[key]plotter.XYs{}
	var keys []key
	for _, r := range wl.Rows {
		c := r.Result.Cell
		if c.Devices != 1 {
			continue // pipelines' memory is per stage; their rows are in the table
		}
		k := key{r.Run, c.Backend, c.Scheduler, c.Devices}
		mb, ok := r.Result.Metrics["micro_batches"]
		if !ok {
			mb = 1
		}
		if _, ok := series[k]; !ok {
			keys = append(keys, k)
		}
		series[k] = append(series[k], plotter.XY{X: mb, Y: float64(r.Result.PeakMax()) / (1 << 20)})
	}
	p := plot.New()
	p.Title.Text = "Peak memory vs micro-batches, " + wl.Name
	p.X.Label.Text = "micro-batches per iteration"
	p.Y.Label.Text = "peak memory, largest device (MiB)"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	for i, k := range keys {
		xy := series[k]
		sort.Slice(xy, func(a, b int) bool { return xy[a].X < xy[b].X })
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return fmt.Errorf("bench: plot: %w", err)
		}
		l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		pts.Radius = vg.Points(4)
		p.Add(l, pts)
		p.Legend.Add(fmt.Sprintf("%s %s×%d %s", k.run, k.backend, k.devices, k.sched), l, pts)
	}
	hiX := 1.0
	for _, xy := range series {
		for _, v := range xy {
			hiX = max(hiX, v.X)
		}
	}
	p.Y.Min, p.X.Min, p.X.Max = 0, 0, hiX*1.8 // the right part holds the legend
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return save(p, 8*vg.Inch, vg.Length(3.5+0.16*float64(len(keys)))*vg.Inch, path)
}

func save(p *plot.Plot, w, h vg.Length, path string) error {
	wt, err := p.WriterTo(w, h, "png")
	if err == nil {
		err = atomicfile.WriteTo(path, wt)
	}
	if err != nil {
		return fmt.Errorf("bench: plot %s: %w", path, err)
	}
	return nil
}
