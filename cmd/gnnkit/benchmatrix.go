package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/gnnkit/gnnkit/bench"
)

// newBenchRunCmd is `gnnkit bench run`: the benchmark matrix of a suite,
// resumable, into one results file.
func newBenchRunCmd() *cobra.Command {
	var suite, out, label, only string
	var quiet bool
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run a benchmark-matrix suite (backends × devices × schedulers × models × datasets) into a results file",
		Long: `run trains every cell of a suite — each a fixed number of epochs after
warm-up — and writes one JSON results file with the machine's fingerprint
and, per cell, the epoch-time median and spread, throughput, peak memory
per device, accuracy and the scheduler's metrics.

Cells a backend or scheduler cannot run here (no OpenCL driver, cherry
without a memory cap, a pipeline on one device, a plugin that does not
start, a dynamic-only scheduler) are recorded as skipped with the reason.

The file is rewritten atomically after every cell. Running the same
command again skips the finished cells, so an interrupted run (Ctrl-C, a
crash) continues where it stopped; failed cells, and cells whose plugin
did not start (build it, then run again), are retried. --only that matches
no cell is an error that lists the cells. Suites: ` + strings.Join(bench.SuiteNames(), ", ") + `
(bench/suites/*.json), or a path to a suite file.`,
		Example: `  gnnkit bench run --suite smoke --out results/$(hostname).json
  gnnkit bench run --suite memory-wall --out results/laptop-memwall.json --label laptop`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := bench.LoadSuite(suite)
			if err != nil {
				return err
			}
			if out == "" {
				h, _ := os.Hostname()
				out = filepath.Join("results", h+"-"+s.Name+".json")
			}
			var bar *progressbar.ProgressBar
			total := len(s.Cells())
			if !quiet {
				bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(cmd.ErrOrStderr()),
					progressbar.OptionSetDescription(s.Name), progressbar.OptionShowCount(), progressbar.OptionSetWidth(24),
					progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetPredictTime(true))
			}
			var ok, skipped, failed, resumed, retried, launch int
			start := time.Now()
			f, err := bench.Run(cmd.Context(), s, bench.Options{Out: out, Label: label, Only: only, Progress: func(e bench.Event) {
				if e.Result == nil {
					if bar != nil {
						bar.Describe(shorten(e.Cell.ID(), 60))
					}
					return
				}
				if e.Retried {
					retried++
				}
				switch {
				case e.Resumed:
					resumed++
				case e.Result.Status == bench.StatusOK:
					ok++
				case e.Result.Status == bench.StatusSkipped:
					skipped++
					if !e.Result.Finished() {
						launch++
					}
				default:
					failed++
				}
				if bar != nil {
					_ = bar.Add(1)
				}
			}})
			if bar != nil {
				_ = bar.Finish()
				fmt.Fprintln(cmd.ErrOrStderr())
			}
			w := cmd.OutOrStdout()
			if f != nil {
				fmt.Fprintf(w, "%s: suite %s v%d, %d cells: %d ran, %d skipped, %d failed, %d kept from an earlier run (%.1f s)\n",
					out, s.Name, s.Version, total, ok, skipped, failed, resumed, time.Since(start).Seconds())
				if retried > 0 {
					fmt.Fprintf(w, "%d of them retried: an earlier run failed them or could not launch their plugin\n", retried)
				}
				if launch > 0 {
					fmt.Fprintf(w, "%d skipped because the plugin did not launch (see %s); running the same command again retries them\n", launch, out)
				}
			}
			if err != nil {
				if errors.Is(err, cmd.Context().Err()) && f != nil {
					return fmt.Errorf("interrupted; %d finished cells are in %s, run the same command again to continue", len(f.Cells), out)
				}
				return err
			}
			if failed > 0 {
				return fmt.Errorf("%d cell(s) failed (see %s; gnnkit bench report shows why)", failed, out)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&suite, "suite", "smoke", "suite name ("+strings.Join(bench.SuiteNames(), ", ")+") or path to a suite .json")
	fl.StringVar(&out, "out", "", "results file (default results/HOST-SUITE.json); an existing one is resumed")
	fl.StringVar(&label, "label", "", "name of this run in reports (default: the host name)")
	fl.StringVar(&only, "only", "", "run only cells whose id contains this, e.g. backend=opencl")
	fl.BoolVarP(&quiet, "quiet", "q", false, "no progress bar")
	return cmd
}

// newBenchReportCmd is `gnnkit bench report`: merge results files into a
// Markdown report, a CSV, benchstat text and PNG plots.
func newBenchReportCmd() *cobra.Command {
	var out, baseline, baseRun string
	cmd := &cobra.Command{
		Use:   "report RESULTS.json...",
		Short: "Merge benchmark-matrix results files into a Markdown report with CSV, benchstat text and PNG plots",
		Long: `report merges results files from several machines or backends. It writes
report.md (machines, one table per workload with ratios against a baseline
cell, skipped and failed cells with reasons), results.csv, one
benchstat-RUN.txt per file (compare two with benchstat) and PNG plots:
epoch time per configuration and run, speedup vs devices, peak memory vs
micro-batches. A corrupt results file is an error; nothing is merged from it.`,
		Example: `  gnnkit bench report results/*.json --out report/
  gnnkit bench report a.json b.json --baseline backend=opencl,devices=1,scheduler=sequential --baseline-run b`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutDir(out); err != nil {
				return err
			}
			sel, err := bench.ParseSelector(baseline)
			if err != nil {
				return err
			}
			rep, err := bench.LoadReport(args...)
			if err != nil {
				return err
			}
			rep.Baseline, rep.BaselineRun = sel, baseRun
			if baseRun != "" {
				found := false
				for _, r := range rep.Runs {
					found = found || r.Label == baseRun
				}
				if !found {
					return fmt.Errorf("--baseline-run %q: no such run (have %s)", baseRun, runLabels(rep))
				}
			}
			files, err := rep.WriteDir(out)
			if err != nil {
				return fmt.Errorf("--out %s: %w", out, err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "merged %d results file(s) (%s) into %s:\n", len(rep.Runs), runLabels(rep), out)
			for _, f := range files {
				fmt.Fprintln(w, "  "+f)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&out, "out", "report", "output folder")
	fl.StringVar(&baseline, "baseline", bench.DefaultBaseline, "baseline cell per workload, as key=value,... over backend, devices, scheduler, mem, opts")
	fl.StringVar(&baseRun, "baseline-run", "", "run (label) the baseline is taken from (default: the first file)")
	return cmd
}

// checkOutDir checks bench report's --out before the inputs are read: a
// folder name, of a folder or of none yet (WriteDir creates it).
func checkOutDir(out string) error {
	if strings.TrimSpace(out) == "" {
		return errors.New("--out is empty: name the folder to write the report into (default report; it is created if missing)")
	}
	if st, err := os.Stat(out); err == nil && !st.IsDir() {
		return fmt.Errorf("--out %s is a file, not a folder: name a folder to write report.md, results.csv and the plots into (it is created if missing)", out)
	}
	return nil
}

func runLabels(rep *bench.Report) string {
	var l []string
	for _, r := range rep.Runs {
		l = append(l, r.Label)
	}
	return strings.Join(l, ", ")
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n+1:]
}
