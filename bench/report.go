package bench

import (
	"encoding/csv"
	"fmt"
	"github.com/gnnkit/gnnkit/internal/atomicfile"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gnnkit/gnnkit/core"
)

// Source is one results file in a report.
type Source struct {
	Label string // unique within the report
	Path  string
	File  *File
}

// Report merges results files, from several machines or backends.
type Report struct {
	Runs []Source
	// Baseline selects, per workload, the cell ratios are taken against
	// (see ParseSelector); BaselineRun is the label of the run it is taken
	// from (default: the first).
	Baseline    Selector
	BaselineRun string
}

// LoadReport reads results files; any corrupt file is an error (nothing
// is merged from it). A run's label is the file's label, made unique
// with the file name where two files share one.
func LoadReport(paths ...string) (*Report, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("bench: no results files to report on")
	}
	rep := &Report{}
	labels := map[string]int{}
	for _, p := range paths {
		f, err := ReadFile(p)
		if err != nil {
			return nil, err
		}
		l := f.Label
		if l == "" {
			l = strings.TrimSuffix(filepath.Base(p), ".json")
		}
		labels[l]++
		if labels[l] > 1 {
			l = l + "(" + strings.TrimSuffix(filepath.Base(p), ".json") + ")"
			if labels[l]++; labels[l] > 1 {
				l = fmt.Sprintf("%s#%d", l, labels[l])
			}
		}
		rep.Runs = append(rep.Runs, Source{Label: l, Path: p, File: f})
	}
	return rep, nil
}

// Selector picks cells by fields: backend, devices, scheduler, mem, opts,
// model, data.
type Selector map[string]string

// DefaultBaseline is the single-device sequential CPU cell.
const DefaultBaseline = "backend=cpu,devices=1,scheduler=sequential,mem="

// ParseSelector parses "key=value,key=value".
func ParseSelector(s string) (Selector, error) {
	sel := Selector{}
	for _, kv := range strings.Split(s, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		switch k = strings.TrimSpace(k); k {
		case "backend", "devices", "scheduler", "mem", "opts", "model", "data":
		default:
			return nil, fmt.Errorf("bench: baseline %q: unknown key %q (known: backend, devices, scheduler, mem, opts, model, data)", s, k)
		}
		if !ok {
			return nil, fmt.Errorf("bench: baseline %q: want key=value", kv)
		}
		sel[k] = strings.TrimSpace(v)
	}
	return sel, nil
}

func (s Selector) String() string {
	keys := slices.Sorted(maps.Keys(s))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + s[k]
	}
	return strings.Join(parts, ",")
}

// Match reports whether c has every field the selector names.
func (s Selector) Match(c Cell) bool {
	for k, v := range s {
		var have string
		switch k {
		case "backend":
			have = c.Backend
		case "devices":
			have = strconv.Itoa(c.Devices)
		case "scheduler":
			have = c.Scheduler
		case "mem":
			have = c.DeviceMem
		case "opts":
			have = c.optsString()
		case "model":
			have = c.Model
		case "data":
			have = c.Dataset
		}
		if have != v {
			return false
		}
	}
	return true
}

func (c Cell) optsString() string {
	keys := slices.Sorted(maps.Keys(c.SchedOpts))
	kv := make([]string, len(keys))
	for i, k := range keys {
		kv[i] = k + ":" + c.SchedOpts[k]
	}
	return strings.Join(kv, ";")
}

// config names a cell within its workload: "cpu×2 graphpipe m:4 @24MiB".
func (c Cell) config() string {
	s := fmt.Sprintf("%s×%d %s", c.Backend, c.Devices, c.Scheduler)
	if o := c.optsString(); o != "" {
		s += " " + o
	}
	if c.DeviceMem != "" {
		s += " @" + c.DeviceMem
	}
	return s
}

// Row is one run's result in the merged view, with its ratios.
type Row struct {
	Run    string
	Result *Result
	// VsBase is the epoch time over the baseline cell's (0: no baseline).
	VsBase float64
	// Speedup is the same run and backend's 1-device sequential epoch time
	// (no cap) over this one's (0: none).
	Speedup float64
}

// Workload is the rows of one model on one dataset.
type Workload struct {
	Name string
	Base *Row
	Rows []Row
}

// Workloads merges the runs into workloads, rows ordered by backend,
// devices, scheduler, options, cap and run.
func (rep *Report) Workloads() []Workload {
	byName := map[string]*Workload{}
	var order []string
	runIdx := map[string]int{}
	for i, run := range rep.Runs {
		runIdx[run.Label] = i
		for j := range run.File.Cells {
			r := &run.File.Cells[j]
			if r.Status != StatusOK {
				continue
			}
			n := r.Cell.Workload()
			w := byName[n]
			if w == nil {
				w = &Workload{Name: n}
				byName[n] = w
				order = append(order, n)
			}
			w.Rows = append(w.Rows, Row{Run: run.Label, Result: r})
		}
	}
	baseRun := rep.BaselineRun
	if baseRun == "" && len(rep.Runs) > 0 {
		baseRun = rep.Runs[0].Label
	}
	sel := rep.Baseline
	if sel == nil {
		sel, _ = ParseSelector(DefaultBaseline)
	}
	seq1 := Selector{"devices": "1", "scheduler": "sequential", "mem": ""}
	out := make([]Workload, 0, len(order))
	for _, n := range order {
		w := byName[n]
		sort.SliceStable(w.Rows, func(i, j int) bool {
			a, b := w.Rows[i].Result.Cell, w.Rows[j].Result.Cell
			switch {
			case a.Backend != b.Backend:
				return a.Backend < b.Backend
			case a.Devices != b.Devices:
				return a.Devices < b.Devices
			case a.Scheduler != b.Scheduler:
				return a.Scheduler < b.Scheduler
			case a.optsString() != b.optsString():
				return optsLess(a.optsString(), b.optsString())
			case a.DeviceMem != b.DeviceMem:
				return memLess(a.DeviceMem, b.DeviceMem)
			}
			return runIdx[w.Rows[i].Run] < runIdx[w.Rows[j].Run]
		})
		for i := range w.Rows {
			if w.Base == nil && w.Rows[i].Run == baseRun && sel.Match(w.Rows[i].Result.Cell) {
				w.Base = &w.Rows[i]
			}
		}
		for i := range w.Rows {
			row := &w.Rows[i]
			if w.Base != nil && row.Result.EpochMsMedian > 0 {
				row.VsBase = row.Result.EpochMsMedian / w.Base.Result.EpochMsMedian
			}
			for _, o := range w.Rows {
				if o.Run == row.Run && o.Result.Cell.Backend == row.Result.Cell.Backend && seq1.Match(o.Result.Cell) && row.Result.EpochMsMedian > 0 {
					row.Speedup = o.Result.EpochMsMedian / row.Result.EpochMsMedian
					break
				}
			}
		}
		out = append(out, *w)
	}
	return out
}

// optsLess orders option strings numerically where they differ by a
// number ("m:2" before "m:16").
func optsLess(a, b string) bool {
	ka, va, _ := strings.Cut(a, ":")
	kb, vb, _ := strings.Cut(b, ":")
	if ka == kb {
		x, e1 := strconv.Atoi(va)
		y, e2 := strconv.Atoi(vb)
		if e1 == nil && e2 == nil {
			return x < y
		}
	}
	return a < b
}

// memLess orders caps by size, no cap first.
func memLess(a, b string) bool {
	x, _ := core.ParseBytes(a)
	y, _ := core.ParseBytes(b)
	if a == "" {
		return b != ""
	}
	if b == "" {
		return false
	}
	return x < y
}

// WriteDir writes the report into dir: report.md, results.csv, one
// benchstat file per run (benchstat-LABEL.txt) and the PNG plots. It
// returns the files written. Everything is written into a hidden staging
// folder in dir first and moved into place only when all of it was
// written and no output name is taken by a folder, so that a failure
// leaves dir as it was.
func (rep *Report) WriteDir(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	stage, err := os.MkdirTemp(dir, ".report-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(stage)
	ws := rep.Workloads()
	plots, err := rep.plots(stage, ws)
	if err != nil {
		return nil, err
	}
	var names []string
	write := func(name string, fn func(io.Writer) error) error {
		if err := atomicfile.Write(filepath.Join(stage, name), fn); err != nil {
			return fmt.Errorf("bench: %s: %w", filepath.Join(dir, name), err)
		}
		names = append(names, name)
		return nil
	}
	if err := write("report.md", func(w io.Writer) error { return rep.Markdown(w, ws, plots) }); err != nil {
		return nil, err
	}
	if err := write("results.csv", func(w io.Writer) error { return rep.CSV(w, ws) }); err != nil {
		return nil, err
	}
	for _, run := range rep.Runs {
		if err := write("benchstat-"+slug(run.Label)+".txt", func(w io.Writer) error { return Benchstat(w, run.File) }); err != nil {
			return nil, err
		}
	}
	for _, p := range plots {
		names = append(names, p.file)
	}
	for _, name := range names {
		if st, err := os.Stat(filepath.Join(dir, name)); err == nil && st.IsDir() {
			return nil, fmt.Errorf("bench: cannot write %s: it is a folder; move it away or name another --out folder (nothing was written)", filepath.Join(dir, name))
		}
	}
	files := make([]string, 0, len(names))
	for _, name := range names {
		p := filepath.Join(dir, name)
		if err := os.Rename(filepath.Join(stage, name), p); err != nil {
			return files, fmt.Errorf("bench: %w", err)
		}
		files = append(files, p)
	}
	return files, nil
}

// Markdown writes the report: machines, one table per workload with
// ratios against the baseline, the plots, and the skipped and failed
// cells with their reasons.
func (rep *Report) Markdown(w io.Writer, ws []Workload, plots []plotFile) error {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("# gnnkit benchmark matrix\n\n")
	p("## Machines\n\n| run | host | CPU | cores | memory | GPU | accelerators | Go | gnnkit | suite | ok / skipped / failed |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, run := range rep.Runs {
		m := run.File.Machine
		gpu := m.GPUNote
		if len(m.GPUs) > 0 {
			var g []string
			for _, x := range m.GPUs {
				g = append(g, x.Name+" (driver "+x.Driver+")")
			}
			gpu = strings.Join(g, ", ")
		}
		var acc []string
		for _, a := range m.Accelerators {
			acc = append(acc, string(a.ID)+" "+a.Name)
		}
		var ok, sk, fl int
		for _, c := range run.File.Cells {
			switch c.Status {
			case StatusOK:
				ok++
			case StatusSkipped:
				sk++
			default:
				fl++
			}
		}
		commit := m.Commit
		if len(commit) > 12 {
			commit = commit[:12]
		}
		if m.Dirty {
			commit += "+dirty"
		}
		p("| %s | %s | %s | %d/%d | %s | %s | %s | %s | %s %s | %s v%d | %d / %d / %d |\n", md(run.Label), md(m.Host), md(m.CPU),
			m.PhysicalCores, m.LogicalCores, core.FormatBytes(m.MemBytes), md(gpu), md(orNone(strings.Join(acc, ", "))), m.GoVersion,
			md(m.Gnnkit), commit, md(run.File.Suite.Name), run.File.Suite.Version, ok, sk, fl)
	}
	sel := rep.Baseline
	if sel == nil {
		sel, _ = ParseSelector(DefaultBaseline)
	}
	p("\nEpoch times are medians of the measured epochs (after warm-up), with p10–p90. **vs base** is the epoch time over the baseline cell's (`%s` on run %s, per workload; < 1 is faster); **speedup** is the same run and backend's 1-device sequential epoch time over this one's. Throughput counts each graph edge and training node once per epoch. *bubble* and *imbalance* are measured from the trace (idle share of device time; max/mean busy time − 1); *bubble bound* and *µ-batches* are the scheduler's plan metrics.\n",
		sel, rep.baseRunLabel())
	for _, wl := range ws {
		p("\n## %s\n\n", md(wl.Name))
		if wl.Base == nil {
			p("No baseline cell here; ratios left blank.\n\n")
		}
		p("| run | config | epoch ms (p10–p90) | vs base | speedup | edges/s | samples/s | peak mem | test acc | loss | µ-batches | bubble bound | bubble | imbalance |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, row := range wl.Rows {
			r := row.Result
			p("| %s | %s | %.2f (%.2f–%.2f) | %s | %s | %s | %s | %s | %.3f | %.4f | %s | %s | %s | %s |\n", md(row.Run), md(r.Cell.config()),
				r.EpochMsMedian, r.EpochMsP10, r.EpochMsP90, ratio(row.VsBase), ratio(row.Speedup), si(r.EdgesPerS), si(r.SamplesPerS),
				core.FormatBytes(r.PeakMax()), r.TestAcc, r.FinalLoss, metric(r, "micro_batches", "%.0f"), metric(r, "bubble_bound", "%.2f"),
				metric(r, "bubble", "%.2f"), metric(r, "imbalance", "%.2f"))
		}
		for _, pf := range plots {
			if pf.workload == wl.Name {
				p("\n![%s](%s)\n", pf.title, pf.file)
			}
		}
	}
	type skipKey struct{ id, status, reason string }
	var keys []skipKey
	runsOf := map[skipKey][]string{}
	for _, run := range rep.Runs {
		for _, c := range run.File.Cells {
			if c.Status == StatusOK {
				continue
			}
			k := skipKey{c.ID, c.Status, c.Reason}
			if _, ok := runsOf[k]; !ok {
				keys = append(keys, k)
			}
			runsOf[k] = append(runsOf[k], run.Label)
		}
	}
	for _, status := range []string{StatusFailed, StatusSkipped} {
		var n int
		for _, k := range keys {
			if k.status == status {
				n++
			}
		}
		if n == 0 {
			continue
		}
		p("\n## %s cells (%d)\n\n| runs | cell | reason |\n|---|---|---|\n", strings.ToUpper(status[:1])+status[1:], n)
		for _, k := range keys {
			if k.status == status {
				p("| %s | `%s` | %s |\n", md(strings.Join(runsOf[k], ", ")), k.id, md(k.reason))
			}
		}
	}
	return nil
}

func (rep *Report) baseRunLabel() string {
	if rep.BaselineRun != "" {
		return rep.BaselineRun
	}
	if len(rep.Runs) > 0 {
		return rep.Runs[0].Label
	}
	return ""
}

// CSV writes one row per run and cell (skipped and failed included).
func (rep *Report) CSV(w io.Writer, ws []Workload) error {
	ratios := map[string]map[string]Row{}
	for _, wl := range ws {
		for _, row := range wl.Rows {
			if ratios[row.Run] == nil {
				ratios[row.Run] = map[string]Row{}
			}
			ratios[row.Run][row.Result.ID] = row
		}
	}
	cw := csv.NewWriter(w)
	metrics := []string{"micro_batches", "bubble_bound", "bubble", "imbalance", "redundancy", "stages"}
	head := []string{"run", "host", "cell_id", "status", "reason", "backend", "devices", "scheduler", "sched_opts", "model", "dataset",
		"device_mem", "epochs", "warmup", "seed", "epoch_ms_median", "epoch_ms_p10", "epoch_ms_p90", "epoch_ms_min", "epoch_ms_max",
		"vs_base", "speedup_vs_seq1", "edges_per_s", "samples_per_s", "peak_mem_max_bytes", "peak_mem_bytes", "train_acc", "val_acc",
		"test_acc", "final_loss"}
	head = append(head, metrics...)
	if err := cw.Write(head); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	for _, run := range rep.Runs {
		for _, r := range run.File.Cells {
			c := r.Cell
			row := ratios[run.Label][r.ID]
			var peaks []string
			for _, d := range slices.Sorted(maps.Keys(r.PeakMem)) {
				peaks = append(peaks, fmt.Sprintf("%s=%d", d, r.PeakMem[d]))
			}
			rec := []string{run.Label, run.File.Machine.Host, r.ID, r.Status, r.Reason, c.Backend, strconv.Itoa(c.Devices), c.Scheduler,
				c.optsString(), c.Model, c.Dataset, c.DeviceMem, strconv.Itoa(c.Epochs), strconv.Itoa(c.Warmup), strconv.FormatUint(c.Seed, 10),
				f(r.EpochMsMedian), f(r.EpochMsP10), f(r.EpochMsP90), f(r.EpochMsMin), f(r.EpochMsMax), f(row.VsBase), f(row.Speedup),
				f(r.EdgesPerS), f(r.SamplesPerS), strconv.FormatInt(r.PeakMax(), 10), strings.Join(peaks, ";"),
				f(r.TrainAcc), f(r.ValAcc), f(r.TestAcc), f(r.FinalLoss)}
			for _, m := range metrics {
				if v, ok := r.Metrics[m]; ok {
					rec = append(rec, f(v))
				} else {
					rec = append(rec, "")
				}
			}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// Benchstat writes a run's measured epochs in the Go benchmark format,
// one line per epoch, so `benchstat old.txt new.txt` compares two runs
// (cells by name, machines or backends by file).
func Benchstat(w io.Writer, f *File) error {
	fmt.Fprintf(w, "goos: %s\ngoarch: %s\npkg: github.com/gnnkit/gnnkit/bench\ncpu: %s\nsuite: %s-v%d\nrun: %s\n",
		f.Machine.OS, f.Machine.Arch, f.Machine.CPU, f.Suite.Name, f.Suite.Version, f.Label)
	for _, r := range f.Cells {
		if r.Status != StatusOK {
			continue
		}
		name := benchName(r.Cell)
		for _, ms := range r.EpochMs {
			edges := 0.0
			if ms > 0 {
				edges = float64(r.Edges) / (ms / 1e3)
			}
			if _, err := fmt.Fprintf(w, "%s\t1\t%.0f ns/op\t%.4g edges/s\t%d peak-B\n", name, ms*1e6, edges, r.PeakMax()); err != nil {
				return err
			}
		}
	}
	return nil
}

// benchName is the cell's ID as a benchmark name: no spaces, and no /
// inside a value (benchstat splits keys on /).
func benchName(c Cell) string {
	parts := strings.Split(c.ID(), "/")
	var out []string
	for _, p := range parts {
		if len(out) > 0 && !strings.Contains(p, "=") {
			out[len(out)-1] += "_" + p // a / inside a value (plugin:./bin/x)
			continue
		}
		out = append(out, p)
	}
	return "BenchmarkMatrix/" + strings.ReplaceAll(strings.Join(out, "/"), " ", "_")
}

func ratio(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", v)
}

func metric(r *Result, key, format string) string {
	v, ok := r.Metrics[key]
	if !ok {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

// si formats v with an SI prefix (1.23M).
func si(v float64) string {
	for _, u := range []struct {
		f float64
		s string
	}{{1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if v >= u.f {
			return fmt.Sprintf("%.3g%s", v/u.f, u.s)
		}
	}
	return fmt.Sprintf("%.3g", v)
}

func md(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// slug makes a file-name-safe version of s.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 60 {
		out = out[:60]
	}
	return out
}
