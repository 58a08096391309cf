package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/gnnkit/gnnkit/internal/stats"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/klauspost/cpuid/v2"
	"github.com/spf13/cobra"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data"
	"github.com/gnnkit/gnnkit/engine"
)

// newBenchCmd is the parent of the measurement commands. It holds
// `kernels` and `epoch` (the CPU backend's kernels and training epochs);
// other commands join it later.
func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure kernels and training epochs",
		Long: `bench measures gnnkit where it runs.

  gnnkit bench kernels   copy bandwidth, FMA peak, GEMM GFLOP/s and SpMM GB/s of the CPU backend
  gnnkit bench epoch     median training epoch time of models on datasets
  gnnkit bench run       the benchmark matrix of a suite (bench/suites), resumable
  gnnkit bench report    merge results files into tables, CSV and plots

kernels and epoch take --json, --threads, --pin (bind worker threads to CPUs, for stable
numbers on machines that stack threads on one CPU) and --variant (the CPU
kernel variant: generic, avx2, avx512, or all; default: GNN_CPU or the best).
The machine's other load shows up in every number: compare runs made
together, and prefer medians.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newBenchKernelsCmd(), newBenchEpochCmd(), newBenchRunCmd(), newBenchReportCmd())
	return cmd
}

// benchCommon are the flags both subcommands share.
type benchCommon struct {
	threads int
	pin     bool
	variant string
	asJSON  bool
}

func (c *benchCommon) flags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.IntVar(&c.threads, "threads", 0, fmt.Sprintf("worker threads (default: all cores; at most %d)", cpu.MaxThreads))
	fl.BoolVar(&c.pin, "pin", false, "pin worker threads to their own CPUs")
	fl.StringVar(&c.variant, "variant", "", "CPU kernel variant: "+strings.Join(cpu.Variants(), ", ")+", or all (default: GNN_CPU or the best)")
	fl.BoolVar(&c.asJSON, "json", false, "print JSON")
}

// variants checks --threads and resolves --variant to the variants to
// run ("" keeps the backend's own choice).
func (c *benchCommon) variants() ([]string, error) {
	switch {
	case c.threads < 0:
		return nil, fmt.Errorf("--threads %d: want >= 1 worker threads (0: all cores)", c.threads)
	case c.threads > cpu.MaxThreads:
		// Each is an OS thread when pinned, and in the FMA peak loop; the
		// Go runtime dies past 10,000.
		return nil, fmt.Errorf("--threads %d: the cpu backend starts at most %d worker threads; use --threads %d or fewer", c.threads, cpu.MaxThreads, cpu.MaxThreads)
	}
	switch c.variant {
	case "all":
		return cpu.Variants(), nil
	case "":
		return []string{""}, nil
	}
	if !slices.Contains(cpu.Variants(), c.variant) {
		return nil, fmt.Errorf("--variant %q: this binary and CPU offer %s", c.variant, strings.Join(cpu.Variants(), ", "))
	}
	return []string{c.variant}, nil
}

func (c *benchCommon) open(variant string) (*cpu.Backend, error) {
	return cpu.NewConfig(cpu.Config{BackendOptions: core.BackendOptions{Threads: c.threads}, Variant: variant, Pin: c.pin})
}

// benchMachine describes where a measurement ran.
type benchMachine struct {
	CPU     string `json:"cpu"`
	Family  int    `json:"family"`
	Model   int    `json:"model"`
	Cores   int    `json:"logical_cores"`
	Threads int    `json:"threads"`
	Pinned  bool   `json:"pinned"`
	Go      string `json:"go"`
	Kernel  string `json:"kernel"`
}

func machine(b *cpu.Backend, pinned bool) benchMachine {
	info := b.Device(0).Info()
	return benchMachine{CPU: strings.TrimSpace(cpuid.CPU.BrandName), Family: cpuid.CPU.Family, Model: cpuid.CPU.Model,
		Cores: runtime.NumCPU(), Threads: info.Threads, Pinned: pinned, Go: runtime.Version(), Kernel: info.Kernel}
}

// timeReps runs f once to warm up, then reps times, and returns the
// sorted durations in seconds.
func timeReps(reps int, f func() error) ([]float64, error) {
	if err := f(); err != nil {
		return nil, err
	}
	out := make([]float64, max(reps, 1))
	for i := range out {
		t0 := time.Now()
		if err := f(); err != nil {
			return nil, err
		}
		out[i] = time.Since(t0).Seconds()
	}
	slices.Sort(out)
	return out, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return stats.Median(xs)
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// ---------------------------------------------------------------- kernels

type kernelsReport struct {
	Machine benchMachine   `json:"machine"`
	Copy    copyResult     `json:"copy"`
	Peak    []peakResult   `json:"peak"`
	GEMM    []gemmResult   `json:"gemm"`
	SpMM    []spmmResult   `json:"spmm"`
	Notes   []string       `json:"notes,omitempty"`
	Command string         `json:"command"`
	When    string         `json:"when"`
	Extra   map[string]any `json:"extra,omitempty"`
}

type copyResult struct {
	Bytes         int64   `json:"bytes_per_buffer"`
	Threads       int     `json:"threads"`
	GBsBest       float64 `json:"gbs_best"`
	GBsMedian     float64 `json:"gbs_median"`
	OneThreadBest float64 `json:"gbs_1thread_best"`
}

type peakResult struct {
	Variant string  `json:"variant"`
	Threads int     `json:"threads"`
	GFLOPS  float64 `json:"gflops"`
}

type gemmResult struct {
	Variant      string  `json:"variant"`
	M            int     `json:"m"`
	K            int     `json:"k"`
	N            int     `json:"n"`
	TransA       bool    `json:"trans_a"`
	TransB       bool    `json:"trans_b"`
	MsMedian     float64 `json:"ms_median"`
	MsMin        float64 `json:"ms_min"`
	GFLOPSMedian float64 `json:"gflops_median"`
	GFLOPSBest   float64 `json:"gflops_best"`
	PeakFraction float64 `json:"peak_fraction_median"`
}

type spmmResult struct {
	Variant  string  `json:"variant"`
	Graph    string  `json:"graph"`
	Nodes    int     `json:"nodes"`
	NNZ      int     `json:"nnz"`
	Width    int     `json:"width"`
	Weighted bool    `json:"weighted"`
	MsMedian float64 `json:"ms_median"`
	MsMin    float64 `json:"ms_min"`
	// GBs is nnz*width*4 bytes (every gathered row) per second.
	GBs float64 `json:"gathered_gbs_median"`
	// NoReuseFloorMs is nnz*width*4 bytes / copy bandwidth (the issue's
	// definition); FloorFraction = NoReuseFloorMs / MsMedian.
	NoReuseFloorMs float64 `json:"noreuse_floor_ms"`
	FloorFraction  float64 `json:"noreuse_floor_fraction"`
	// The anchor's byte counts: with the CSR arrays and the output
	// (no reuse), and each byte once (compulsory).
	NoReuseFullMs    float64 `json:"noreuse_floor_full_ms"`
	CompulsoryMs     float64 `json:"compulsory_floor_ms"`
	CompulsoryGBs    float64 `json:"compulsory_gbs_median"`
	CopyGBsForFloors float64 `json:"copy_gbs_used"`
}

func newBenchKernelsCmd() *cobra.Command {
	var c benchCommon
	var graphs []string
	var width, reps, gemmRows, cube int
	var copyMiB int64
	cmd := &cobra.Command{
		Use:   "kernels",
		Short: "Copy bandwidth, FMA peak, GEMM GFLOP/s and SpMM GB/s of the CPU backend",
		Long: `kernels measures the machine (a large copy, a register-only FMA loop) and
the CPU backend's main kernels against it:

  GEMM  [N x W] x [W x W] (N = --gemm-rows; also with W x W transposed, and the
        weight gradient's [W x N] x [N x W]) and S x S x S (S = --gemm-cube), as
        GFLOP/s and as a fraction of the measured FMA peak
  SpMM  the GCN-normalised adjacency with self-loops of each --graph times a
        [nodes x W] matrix, as gathered GB/s (nnz*W*4 bytes per second) and as a
        fraction of the no-reuse floor (nnz*W*4 bytes / copy bandwidth)

with W = --width (128).`,
		Example: `  gnnkit bench kernels
  gnnkit bench kernels --variant all --pin --json
  gnnkit bench kernels --graph ../shared/data/rmat1m --reps 5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBenchKernels(cmd, &c, graphs, width, reps, gemmRows, cube, copyMiB)
		},
	}
	c.flags(cmd)
	fl := cmd.Flags()
	fl.StringArrayVar(&graphs, "graph", []string{"synthetic:rmat,nodes=100000,edges=1000000,feat=0"}, "graph for SpMM (a data spec, as train --data; repeat for more)")
	fl.IntVar(&width, "width", 128, "feature width W of the SpMM and GEMM operands")
	fl.IntVar(&reps, "reps", 10, "timed repetitions per kernel (after one warm-up)")
	fl.IntVar(&gemmRows, "gemm-rows", 100000, "N of the [N x W] x [W x W] GEMM")
	fl.IntVar(&cube, "gemm-cube", 1024, "size S of the S x S x S GEMM (0: none)")
	fl.Int64Var(&copyMiB, "copy-mib", 1024, "size of each buffer of the copy-bandwidth measurement, MiB")
	return cmd
}

// maxBenchReps bounds --reps: each repetition keeps its time.
const maxBenchReps = 1_000_000

// checkKernelSizes checks bench kernels' sizes: positive (--gemm-cube
// may be 0), and the buffers each measurement allocates within avail,
// the memory the machine has (0: unknown, when only sizes no int64 can
// hold are refused).
func checkKernelSizes(width, reps, gemmRows, cube int, copyMiB, avail int64) error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"width", int64(width)}, {"reps", int64(reps)}, {"gemm-rows", int64(gemmRows)}, {"copy-mib", copyMiB}} {
		if f.v < 1 {
			return fmt.Errorf("--%s %d: must be positive", f.name, f.v)
		}
	}
	if cube < 0 {
		return fmt.Errorf("--gemm-cube %d: want a positive size S, or 0 for no S x S x S GEMM", cube)
	}
	if reps > maxBenchReps {
		return fmt.Errorf("--reps %d: at most %d timed repetitions", reps, maxBenchReps)
	}
	// Two float32 buffers of --copy-mib MiB each.
	if need := satMul(2, copyMiB, 1<<20); exceeds(need, avail) {
		return fmt.Errorf("--copy-mib %d: the copy measurement's two buffers need %s, %s; use a smaller --copy-mib", copyMiB, core.FormatBytes(need), overWhat(avail))
	}
	// The [N x W] x [W x W] GEMM and its transposes: two N x W operands
	// and a W x W one, float32.
	n, w := int64(gemmRows), int64(width)
	if need := satMul(4, satAdd(satMul(2, n, w), satMul(w, w))); exceeds(need, avail) {
		return fmt.Errorf("--gemm-rows %d with --width %d: the GEMM operands ([N x W] input and output, [W x W] weights) need %s, %s; use a smaller --gemm-rows or --width",
			gemmRows, width, core.FormatBytes(need), overWhat(avail))
	}
	if need := satMul(3*4, int64(cube), int64(cube)); exceeds(need, avail) {
		return fmt.Errorf("--gemm-cube %d: the S x S x S GEMM's three S x S operands need %s, %s; use a smaller --gemm-cube (0: none)", cube, core.FormatBytes(need), overWhat(avail))
	}
	return nil
}

// checkSpMMSize checks that the SpMM operands on graph g (from --graph
// spec), [sources x W] in and [destinations x W] out, fit in avail.
func checkSpMMSize(spec string, g *core.Graph, width int, avail int64) error {
	if need := satMul(4, int64(width), int64(g.NumSrc)+int64(g.NumDst)); exceeds(need, avail) {
		return fmt.Errorf("--width %d on --graph %s (%d nodes): the SpMM operands need %s, %s; use a smaller --width", width, spec, g.NumDst, core.FormatBytes(need), overWhat(avail))
	}
	return nil
}

// satMul multiplies non-negative factors, saturating at math.MaxInt64.
func satMul(xs ...int64) int64 {
	p := int64(1)
	for _, x := range xs {
		if x != 0 && p > math.MaxInt64/x {
			return math.MaxInt64
		}
		p *= x
	}
	return p
}

// satAdd adds non-negative terms, saturating at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// exceeds reports whether need bytes are more than avail (0: unknown)
// or more than an int64 holds.
func exceeds(need, avail int64) bool {
	return need == math.MaxInt64 || (avail > 0 && need > avail)
}

// overWhat says what a need that exceeds avail is over.
func overWhat(avail int64) string {
	if avail <= 0 {
		return "more than any machine has"
	}
	return "over the " + core.FormatBytes(avail) + " this machine has available"
}

func runBenchKernels(cmd *cobra.Command, c *benchCommon, graphs []string, width, reps, gemmRows, cube int, copyMiB int64) error {
	variants, err := c.variants()
	if err != nil {
		return err
	}
	avail := cpu.HostMemory()
	if err := checkKernelSizes(width, reps, gemmRows, cube, copyMiB, avail); err != nil {
		return err
	}
	threads := c.threads
	if threads == 0 {
		threads = runtime.NumCPU()
	}
	rep := kernelsReport{Command: "gnnkit " + strings.Join(os.Args[1:], " "), When: time.Now().UTC().Format(time.RFC3339)}

	// The graphs before any measuring, so that a bad --graph fails at
	// once, and their SpMM operands checked against the memory.
	type loaded struct {
		name string
		g    *core.Graph
		w    []float32
	}
	var gs []loaded
	for _, spec := range graphs {
		ds, err := data.Open(spec)
		if err != nil {
			return fmt.Errorf("--graph %s: %w", spec, err)
		}
		g, err := ds.Graph.WithSelfLoops()
		if err != nil {
			return fmt.Errorf("--graph %s: %w", spec, err)
		}
		if err := checkSpMMSize(spec, g, width, avail); err != nil {
			return err
		}
		gs = append(gs, loaded{name: ds.Name, g: g, w: g.GCNNorm()})
	}
	runtime.GC()

	// copy bandwidth first, in a fresh heap
	bw := cpu.CopyBandwidth(copyMiB<<20, threads, 5)
	bw1 := cpu.CopyBandwidth(copyMiB<<20, 1, 3)
	rep.Copy = copyResult{Bytes: copyMiB << 20, Threads: threads, GBsBest: round(bw[len(bw)-1]/1e9, 2),
		GBsMedian: round(median(bw)/1e9, 2), OneThreadBest: round(bw1[len(bw1)-1]/1e9, 2)}
	copyGBs := math.Max(rep.Copy.GBsBest, rep.Copy.OneThreadBest)
	runtime.GC()

	peak := 0.0
	for _, v := range cpu.Variants() {
		p, err := cpu.PeakFLOPS(v, threads, c.pin, 5)
		if err != nil {
			continue
		}
		rep.Peak = append(rep.Peak, peakResult{Variant: v, Threads: threads, GFLOPS: round(p/1e9, 1)})
		peak = max(peak, p)
	}

	r := rand.New(rand.NewPCG(1, 2))
	randT := func(shape ...int) *core.Tensor {
		t, _ := core.NewHostTensor(make([]float32, core.NumElems(shape)), shape...)
		for i := range t.F32() {
			t.F32()[i] = r.Float32()*2 - 1
		}
		return t
	}
	type gemmCase struct {
		m, k, n int
		ta, tb  bool
	}
	gemms := []gemmCase{{gemmRows, width, width, false, false}, {gemmRows, width, width, false, true}, {width, gemmRows, width, true, false}}
	if cube > 0 {
		gemms = append(gemms, gemmCase{cube, cube, cube, false, false})
	}
	for _, v := range variants {
		b, err := c.open(v)
		if err != nil {
			return err
		}
		if rep.Machine.CPU == "" {
			rep.Machine = machine(b, c.pin)
		}
		k := b.Device(0).Kernels()
		name := b.Device(0).Kernels().(*cpu.Kernels).Variant()
		for _, gc := range gemms {
			as, bs := []int{gc.m, gc.k}, []int{gc.k, gc.n}
			if gc.ta {
				as = []int{gc.k, gc.m}
			}
			if gc.tb {
				bs = []int{gc.n, gc.k}
			}
			a, bm, out := randT(as...), randT(bs...), randT(gc.m, gc.n)
			ts, err := timeReps(reps, func() error { return k.GEMM(gc.ta, gc.tb, 1, a, bm, 0, out) })
			if err != nil {
				b.Close()
				return err
			}
			fl := 2 * float64(gc.m) * float64(gc.k) * float64(gc.n)
			med := median(ts)
			rep.GEMM = append(rep.GEMM, gemmResult{Variant: name, M: gc.m, K: gc.k, N: gc.n, TransA: gc.ta, TransB: gc.tb,
				MsMedian: round(med*1e3, 3), MsMin: round(ts[0]*1e3, 3), GFLOPSMedian: round(fl/med/1e9, 1),
				GFLOPSBest: round(fl/ts[0]/1e9, 1), PeakFraction: round(fl/med/peak, 3)})
		}
		for _, lg := range gs {
			g := lg.g
			nnz := g.NumEdges()
			x, out := randT(g.NumSrc, width), randT(g.NumDst, width)
			wt, _ := core.NewHostTensor(lg.w, nnz, 1)
			for _, weighted := range []bool{true, false} {
				var w *core.Tensor
				if weighted {
					w = wt
				}
				ts, err := timeReps(reps, func() error { return k.SpMM(g, core.ReduceSum, w, x, out) })
				if err != nil {
					b.Close()
					return err
				}
				med := median(ts)
				gathered := float64(nnz) * float64(width) * 4
				structB := float64(g.NumDst+1)*8 + float64(nnz)*4
				if weighted {
					structB += float64(nnz) * 4
				}
				dense := 2 * float64(g.NumDst) * float64(width) * 4
				floor := gathered / (copyGBs * 1e9)
				rep.SpMM = append(rep.SpMM, spmmResult{Variant: name, Graph: lg.name, Nodes: g.NumDst, NNZ: nnz, Width: width,
					Weighted: weighted, MsMedian: round(med*1e3, 3), MsMin: round(ts[0]*1e3, 3),
					GBs: round(gathered/med/1e9, 2), NoReuseFloorMs: round(floor*1e3, 3), FloorFraction: round(floor/med, 3),
					NoReuseFullMs: round((gathered+structB+dense/2)/(copyGBs*1e9)*1e3, 3),
					CompulsoryMs:  round((structB+dense)/(copyGBs*1e9)*1e3, 3), CompulsoryGBs: round((structB+dense)/med/1e9, 2),
					CopyGBsForFloors: copyGBs})
			}
		}
		b.Close()
		runtime.GC()
	}
	rep.Notes = append(rep.Notes, "floors use the better of the 1-thread and all-thread copy bandwidth; peak is the best variant's FMA loop on all threads")
	out := cmd.OutOrStdout()
	if c.asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printKernels(out, &rep)
	return nil
}

func printKernels(out io.Writer, r *kernelsReport) {
	m := r.Machine
	fmt.Fprintf(out, "machine  %s (family %d model %d), %d logical cores; %d threads, pinned %v; %s\n", m.CPU, m.Family, m.Model, m.Cores, m.Threads, m.Pinned, m.Go)
	fmt.Fprintf(out, "copy     %.1f GB/s best, %.1f median (%d threads); %.1f GB/s 1 thread (read+write bytes, 2 x %d MiB)\n",
		r.Copy.GBsBest, r.Copy.GBsMedian, r.Copy.Threads, r.Copy.OneThreadBest, r.Copy.Bytes>>20)
	for _, p := range r.Peak {
		fmt.Fprintf(out, "peak     %-8s %7.1f GFLOP/s (%d threads, register-only FMA loop)\n", p.Variant, p.GFLOPS, p.Threads)
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "GEMM\tvariant\tM x K x N\ttrans\tms median\tms min\tGFLOP/s\tof peak\t")
	for _, g := range r.GEMM {
		tr := map[[2]bool]string{{false, false}: "NN", {true, false}: "TN", {false, true}: "NT", {true, true}: "TT"}[[2]bool{g.TransA, g.TransB}]
		fmt.Fprintf(tw, "\t%s\t%dx%dx%d\t%s\t%.2f\t%.2f\t%.1f\t%.0f%%\t\n", g.Variant, g.M, g.K, g.N, tr, g.MsMedian, g.MsMin, g.GFLOPSMedian, 100*g.PeakFraction)
	}
	tw.Flush()
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SpMM\tvariant\tgraph\tnnz\twidth\tweights\tms median\tms min\tgathered GB/s\tno-reuse floor ms\tof floor\tcompulsory ms\t")
	for _, s := range r.SpMM {
		w := "none"
		if s.Weighted {
			w = "gcn"
		}
		fmt.Fprintf(tw, "\t%s\t%s\t%d\t%d\t%s\t%.2f\t%.2f\t%.1f\t%.1f\t%.0f%%\t%.1f\t\n", s.Variant, s.Graph, s.NNZ, s.Width, w, s.MsMedian, s.MsMin, s.GBs, s.NoReuseFloorMs, 100*s.FloorFraction, s.CompulsoryMs)
	}
	tw.Flush()
}

// ---------------------------------------------------------------- epoch

type epochResult struct {
	Model          string       `json:"model"`
	Data           string       `json:"data"`
	Nodes          int          `json:"nodes"`
	Edges          int          `json:"csr_entries"`
	Features       int          `json:"features"`
	Hidden         int          `json:"hidden"`
	Heads          int          `json:"heads,omitempty"`
	Variant        string       `json:"variant"`
	Epochs         int          `json:"epochs"`
	Warmup         int          `json:"warmup_epochs"`
	EpochMsMedian  float64      `json:"epoch_ms_median"`
	EpochMsMin     float64      `json:"epoch_ms_min"`
	EpochMsMean    float64      `json:"epoch_ms_mean"`
	EpochMsMax     float64      `json:"epoch_ms_max"`
	AllocsPerEpoch float64      `json:"allocs_per_epoch"`
	BytesPerEpoch  float64      `json:"alloc_bytes_per_epoch"`
	FinalLoss      float64      `json:"final_loss"`
	TestAcc        float64      `json:"test_acc"`
	ValAcc         float64      `json:"val_acc"`
	Machine        benchMachine `json:"machine"`
}

func newBenchEpochCmd() *cobra.Command {
	var c benchCommon
	var models, datasets []string
	var epochs, warmup, hidden, heads int
	var featNorm, profile string
	var seed uint64
	cmd := &cobra.Command{
		Use:   "epoch",
		Short: "Median training epoch time of models on datasets (CPU backend)",
		Long: `epoch trains each --model on each --data for --warmup + --epochs full-graph
epochs through engine.Train (forward, loss, backward and Adam, as gnnkit train
does, with each model's reference hyper-parameters) and reports the median
epoch time over the epochs after the warm-up. Evaluation after each epoch is
not timed.`,
		Example: `  gnnkit bench epoch
  gnnkit bench epoch --models gcn,sage,gat --data cora --data synthetic:rmat,nodes=10000,feat=64 --json
  gnnkit bench epoch --data ../shared/data/rmat100k --hidden 128 --epochs 10 --pin`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withCPUProfile(profile, func() error {
				return runBenchEpoch(cmd, &c, models, datasets, epochs, warmup, hidden, heads, featNorm, seed)
			})
		},
	}
	c.flags(cmd)
	fl := cmd.Flags()
	fl.StringSliceVar(&models, "models", []string{"gcn"}, "models: "+strings.Join(trainModels(), ", ")+" (tgcn and evolvegcn: gnnkit train-dynamic)")
	fl.StringArrayVar(&datasets, "data", []string{"cora"}, "dataset (as train --data; repeat for more)")
	fl.IntVar(&epochs, "epochs", 20, "timed epochs")
	fl.IntVar(&warmup, "warmup", 3, "untimed warm-up epochs first")
	fl.IntVar(&hidden, "hidden", 0, "hidden width per head (default: per model, as train)")
	fl.IntVar(&heads, "heads", 0, "attention heads, gat (default 8)")
	fl.StringVar(&featNorm, "feature-norm", "row", "feature preprocessing: row or none (as train)")
	fl.Uint64Var(&seed, "seed", 1, "random seed")
	fl.StringVar(&profile, "cpuprofile", "", "write a CPU profile of the whole run to FILE; a failed run leaves FILE as it was")
	return cmd
}

func runBenchEpoch(cmd *cobra.Command, c *benchCommon, models, datasets []string, epochs, warmup, hidden, heads int, featNorm string, seed uint64) error {
	variants, err := c.variants()
	if err != nil {
		return err
	}
	if epochs < 1 || warmup < 0 {
		return fmt.Errorf("--epochs must be positive and --warmup not negative")
	}
	for _, m := range models {
		if isDynamic(m) {
			return fmt.Errorf("--models %s: %s is a dynamic-graph model: bench epoch times %s (train %s with gnnkit train-dynamic)", m, m, strings.Join(trainModels(), ", "), m)
		}
	}
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	var results []epochResult
	for _, spec := range datasets {
		ds, err := data.Open(spec)
		if err != nil {
			return err
		}
		if ds.Graph == nil || ds.FeatureDim == 0 || len(ds.Labels) == 0 || len(ds.Train) == 0 {
			return fmt.Errorf("dataset %s needs features, labels and a training split", ds.Name)
		}
		feats := ds.Features
		switch featNorm {
		case "row":
			feats = ds.RowNormalizedFeatures()
		case "none":
		default:
			return fmt.Errorf("--feature-norm %q: want row or none", featNorm)
		}
		for _, model := range models {
			def, ok := modelDefaults[model]
			if !ok {
				def = modelDefaults["gcn"]
			}
			h, hd := def.hidden, def.heads
			if hidden > 0 {
				h = hidden
			}
			if heads > 0 {
				hd = heads
			}
			for _, v := range variants {
				b, err := c.open(v)
				if err != nil {
					return err
				}
				res, err := benchOneEpoch(ctx, b, ds, feats, model, h, hd, def.lr, def.wd, def.drop, def.attn, epochs, warmup, seed)
				if err != nil {
					b.Close()
					return fmt.Errorf("%s on %s: %w", model, ds.Name, err)
				}
				res.Machine = machine(b, c.pin)
				res.Data = ds.Name
				b.Close()
				runtime.GC()
				if c.asJSON {
					line, _ := json.Marshal(res)
					fmt.Fprintln(out, string(line))
				} else {
					results = append(results, res)
				}
			}
		}
	}
	if c.asJSON {
		return nil
	}
	if len(results) > 0 {
		m := results[0].Machine
		fmt.Fprintf(out, "machine  %s, %d threads, pinned %v\n\n", m.CPU, m.Threads, m.Pinned)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tdata\tnodes\tvariant\thidden\tepoch ms median\tmin\tmax\tallocs/epoch\ttest acc\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%.2f\t%.2f\t%.2f\t%.0f\t%.3f\t\n", r.Model, r.Data, r.Nodes, r.Variant, r.Hidden, r.EpochMsMedian, r.EpochMsMin, r.EpochMsMax, r.AllocsPerEpoch, r.TestAcc)
	}
	return tw.Flush()
}

func benchOneEpoch(ctx context.Context, b *cpu.Backend, ds *data.Dataset, feats []float32, model string, hidden, heads int, lr, wd, drop, attn float64, epochs, warmup int, seed uint64) (epochResult, error) {
	dev := b.Device(0)
	sched, err := core.NewScheduler("sequential", nil)
	if err != nil {
		return epochResult{}, err
	}
	m, err := core.BuildModel(model, core.ModelConfig{InDim: ds.FeatureDim, Hidden: hidden, Classes: ds.NumClasses,
		Layers: 2, Heads: heads, Dropout: float32(drop), AttnDropout: float32(attn)})
	if err != nil {
		return epochResult{}, err
	}
	tr, err := engine.New(engine.Config{Model: m, Devices: []core.Device{dev}, Seed: seed,
		Data:      engine.Data{Graph: ds.Graph, Features: feats, FeatureDim: ds.FeatureDim, Labels: ds.Labels},
		Optimizer: engine.Optimizer{Kind: "adam", LR: float32(lr), WeightDecay: float32(wd)}})
	if err != nil {
		return epochResult{}, err
	}
	defer tr.Close()
	var times []float64
	var ms0, ms1 runtime.MemStats
	if warmup == 0 {
		runtime.ReadMemStats(&ms0)
	}
	sum, err := engine.Train(ctx, tr, []core.DeviceInfo{dev.Info()}, engine.TrainOptions{
		Epochs: warmup + epochs, Scheduler: sched, Train: ds.Train, Val: ds.Val, Test: ds.Test,
		Progress: func(s engine.EpochStats) {
			if s.Epoch == warmup {
				runtime.ReadMemStats(&ms0)
			}
			if s.Epoch > warmup {
				times = append(times, float64(s.Time)/1e6)
			}
			if s.Epoch == warmup+epochs {
				runtime.ReadMemStats(&ms1)
			}
		},
	})
	if err != nil {
		return epochResult{}, err
	}
	if len(times) == 0 {
		return epochResult{}, fmt.Errorf("no timed epochs")
	}
	var mean float64
	for _, t := range times {
		mean += t
	}
	mean /= float64(len(times))
	n := float64(len(times))
	return epochResult{Model: model, Nodes: ds.Graph.NumDst, Edges: ds.Graph.NumEdges(), Features: ds.FeatureDim,
		Hidden: hidden, Heads: heads, Variant: dev.Kernels().(*cpu.Kernels).Variant(), Epochs: epochs, Warmup: warmup,
		EpochMsMedian: round(median(times), 3), EpochMsMin: round(slices.Min(times), 3), EpochMsMean: round(mean, 3),
		EpochMsMax: round(slices.Max(times), 3), AllocsPerEpoch: round(float64(ms1.Mallocs-ms0.Mallocs)/n, 1),
		BytesPerEpoch: round(float64(ms1.TotalAlloc-ms0.TotalAlloc)/n, 0), FinalLoss: sum.FinalLoss,
		TestAcc: sum.TestAcc, ValAcc: sum.ValAcc}, nil
}
