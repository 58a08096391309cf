package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/internal/atomicfile"
	"github.com/gnnkit/gnnkit/models"
	mdyn "github.com/gnnkit/gnnkit/models/dynamic"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
)

type trainFlags struct {
	model, dataSpec, scheduler, backend, devices, deviceMem, trace, featNorm, optimizer string
	epochs, hidden, heads, layers, threads, batchSize, branches, evalEvery, tableRows   int
	fanout                                                                              []int
	lr, wd, dropout, attnDropout                                                        float64
	seed                                                                                uint64
	asJSON, quiet, measure                                                              bool
	schedOpts                                                                           []string
}

// dlrmNote is what train says (on stderr, not with --json) before it
// trains dlrm: its accuracy on a graph dataset is not a result (Cora:
// train 1.000, test 0.092).
const dlrmNote = "gnnkit: note: dlrm looks its tables up by synthetic ids (hashes of the node ids), not by categorical features of the data: " +
	"it memorises the training nodes, and its validation and test accuracy stay near chance; it is a pipeline benchmark's model"

// modelDefaults are the reference settings of each model's paper / PyG
// example (a model not listed takes gcn's). uno and dlrm, the pipeline
// benchmarks' models, have no dropout unless asked: their dropout ops
// would change the op graphs `gnnkit plan` prints and the benchmarks
// (bench/graphpipebench) weigh, and DLRM has none.
var modelDefaults = map[string]struct {
	hidden, heads      int
	lr, wd, drop, attn float64
}{
	"gcn":  {hidden: 16, lr: 0.01, wd: 5e-4, drop: 0.5},
	"sage": {hidden: 16, lr: 0.01, wd: 5e-4, drop: 0.5},
	"gat":  {hidden: 8, heads: 8, lr: 0.005, wd: 5e-4, drop: 0.6, attn: 0.6},
	"uno":  {hidden: 16, lr: 0.01, wd: 5e-4},
	"dlrm": {hidden: 16, lr: 0.01, wd: 5e-4},
}

func newTrainCmd() *cobra.Command {
	f := &trainFlags{}
	cmd := &cobra.Command{
		Use:   "train",
		Short: "Train a model (default: GCN on the embedded Cora, 200 epochs)",
		Example: `  gnnkit train
  gnnkit train --model gat --epochs 200
  gnnkit train --data ../shared/data/cora --model sage --json
  gnnkit train --data synthetic:sbm,nodes=10000,classes=5 --devices cpu:0 --trace t.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runTrain(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "gcn", "model: "+strings.Join(trainModels(), ", ")+" (tgcn and evolvegcn: gnnkit train-dynamic)")
	fl.StringVar(&f.dataSpec, "data", "cora", "dataset: cora (embedded), a folder in the shared layout, an edge-list file, or synthetic:KIND,key=val,...")
	fl.StringVar(&f.scheduler, "scheduler", "sequential", "scheduler: "+strings.Join(core.Schedulers(), ", ")+", or plugin:PATH|NAME (see gnnkit plugins list)")
	fl.StringArrayVar(&f.schedOpts, "sched-opt", nil, schedOptUsage)
	fl.StringVar(&f.backend, "backend", "cpu", "backend: "+strings.Join(backendNames(), ", "))
	fl.StringVar(&f.devices, "devices", "", "comma-separated devices, e.g. cpu:0,cpu:1 or cuda:0, naming their backend (default: --backend's first device); cpu:i opens the logical devices cpu:0 to cpu:i, at most cpu:63 (opencl:i likewise, at most opencl:63)")
	fl.StringVar(&f.deviceMem, "device-mem", "", "memory cap per device, e.g. 256MiB (default: no cap; the cpu devices' tensors together never pass the memory the machine had available)")
	fl.IntVar(&f.threads, "threads", 0, fmt.Sprintf("worker threads per CPU device (default: cores / devices; at most %d in all; CPU devices only)", cpu.MaxThreads))
	fl.IntVar(&f.epochs, "epochs", 200, "training epochs")
	fl.IntVar(&f.evalEvery, "eval-every", 1, "evaluate train and validation accuracy after every N-th epoch and the last (0: the last only, as train-dynamic's 0); evaluation runs the whole graph")
	fl.IntVar(&f.batchSize, "batch-size", 0, "target nodes per mini-batch (0 with no --fanout: full-graph training)")
	fl.IntSliceVar(&f.fanout, "fanout", nil, "neighbours sampled per layer for mini-batches, e.g. 15,10 (-1: all)")
	fl.Float64Var(&f.lr, "lr", 0, "learning rate, positive (default: per model: 0.005 for gat, else 0.01)")
	fl.Float64Var(&f.wd, "weight-decay", -1, "L2 weight decay, 0 or more (default: per model, 5e-4)")
	fl.StringVar(&f.optimizer, "optimizer", "adam", "optimizer: adam or sgd")
	fl.IntVar(&f.hidden, "hidden", 0, "hidden width per head, positive (default: per model: 8 for gat, else 16)")
	fl.IntVar(&f.heads, "heads", 0, "attention heads, gat, positive (default 8)")
	fl.IntVar(&f.layers, "layers", 2, fmt.Sprintf("message-passing layers, 1 to %d", maxLayers))
	fl.IntVar(&f.branches, "branches", 0, "branches of a multi-branch model: uno's MLP branches, mbgnn's towers (of 1..N hops: its depth), dlrm's embedding tables (default 4; at most 1024, mbgnn 64)")
	fl.IntVar(&f.tableRows, "table-rows", 0, fmt.Sprintf("dlrm: rows of each embedding table (default %d)", models.DefaultTableRows))
	fl.Float64Var(&f.dropout, "dropout", -1, "feature dropout, in [0, 1) (default: per model: 0.6 for gat, 0 for uno and dlrm, else 0.5)")
	fl.Float64Var(&f.attnDropout, "attn-dropout", -1, "attention dropout, gat, in [0, 1) (default: per model, 0.6)")
	fl.StringVar(&f.featNorm, "feature-norm", "row", "feature preprocessing: row (divide each row by the sum of its absolute values: Kipf & Welling's row sum on non-negative features; signs kept) or none")
	fl.Uint64Var(&f.seed, "seed", 1, "random seed (initialisation, dropout, synthetic data)")
	fl.StringVar(&f.trace, "trace", "", "write a Chrome/Perfetto trace of the run to FILE")
	fl.BoolVar(&f.asJSON, "json", false, "print one JSON object with the result (and no progress bar)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress bar")
	fl.BoolVar(&f.measure, "measure", true, "pipeline schedulers (graphpipe, 1f1b, gpipe) on the cpu backend: profile the model on these devices first and plan with the measured costs (false: a roofline model)")
	return cmd
}

type trainResult struct {
	Model         string          `json:"model"`
	Data          string          `json:"data"`
	Scheduler     string          `json:"scheduler"`
	Backend       string          `json:"backend"`
	Devices       []core.DeviceID `json:"devices"`
	Epochs        int             `json:"epochs"`
	EpochMsMedian float64         `json:"epoch_ms_median"`
	// IterationMsMedian is the median time of one iteration (the plan's
	// run, without scheduling and evaluation; without the first, warm-up
	// iteration when there are more).
	IterationMsMedian float64 `json:"iteration_ms_median"`
	// SchedulingMs is the time spent planning, over Plans plans (one
	// per sampled batch; the epochs hold it).
	SchedulingMs float64 `json:"scheduling_ms"`
	Plans        int     `json:"plans"`
	// PlannedOn says what a scheduler that plans with op costs priced
	// them with: measured here (--measure), a profile file, or a roofline.
	PlannedOn    string                  `json:"planned_on,omitempty"`
	WallSeconds  float64                 `json:"wall_s"`
	PeakMemBytes map[core.DeviceID]int64 `json:"peak_mem_bytes"`
	FinalLoss    float64                 `json:"final_loss"`
	TrainAcc     float64                 `json:"train_acc"`
	ValAcc       float64                 `json:"val_acc"`
	TestAcc      float64                 `json:"test_acc"`
	Units        int                     `json:"units"`
	Iterations   int                     `json:"iterations_per_epoch"`
	// EvalFallbacks counts the evaluations that ran on the host because
	// the capped devices could not hold them.
	EvalFallbacks int                     `json:"eval_fallbacks,omitempty"`
	PredictedPeak map[core.DeviceID]int64 `json:"predicted_peak_mem_bytes,omitempty"`
	SchedMetrics  map[string]float64      `json:"scheduler_metrics,omitempty"`
	Seed          uint64                  `json:"seed"`
	Trace         string                  `json:"trace,omitempty"`
	// noVal and noTest say the dataset has no validation or test nodes:
	// that accuracy is absent (JSON null, "n/a" in the summary), not 0.
	noVal, noTest bool
}

// MarshalJSON writes the result with an absent accuracy as null.
func (r trainResult) MarshalJSON() ([]byte, error) {
	type plain trainResult // without this method
	if !r.noVal && !r.noTest {
		return json.Marshal(plain(r))
	}
	acc := func(v float64, absent bool) *float64 {
		if absent {
			return nil
		}
		return &v
	}
	return json.Marshal(struct {
		plain
		ValAcc  *float64 `json:"val_acc"`
		TestAcc *float64 `json:"test_acc"`
	}{plain(r), acc(r.ValAcc, r.noVal), acc(r.TestAcc, r.noTest)})
}

// isDynamic reports whether model trains on snapshots of a dynamic graph
// (models/dynamic): gnnkit train-dynamic trains it.
func isDynamic(model string) bool { return slices.Contains(mdyn.Models(), model) }

// trainModels lists the models gnnkit train trains.
func trainModels() []string {
	var out []string
	for _, m := range core.Models() {
		if !isDynamic(m) {
			out = append(out, m)
		}
	}
	return out
}

func runTrain(cmd *cobra.Command, f *trainFlags) error {
	ctx := cmd.Context()
	if isDynamic(f.model) {
		return fmt.Errorf("--model %s: %s is a dynamic-graph model: use gnnkit train-dynamic (gnnkit train trains %s)", f.model, f.model, strings.Join(trainModels(), ", "))
	}
	def, ok := modelDefaults[f.model]
	if !ok {
		def = modelDefaults["gcn"]
	}
	fl := cmd.Flags()
	if err := checkTrainNumbers(fl, f, def.hidden); err != nil {
		return err
	}
	pick := func(name string, set, dflt float64) float64 {
		if fl.Changed(name) {
			return set
		}
		return dflt
	}
	hidden := f.hidden
	if !fl.Changed("hidden") {
		hidden = def.hidden
	}
	heads := f.heads
	if !fl.Changed("heads") {
		heads = def.heads
	}
	lr, wd := pick("lr", f.lr, def.lr), pick("weight-decay", f.wd, def.wd)
	drop, attn := pick("dropout", f.dropout, def.drop), pick("attn-dropout", f.attnDropout, def.attn)
	if drop < 0 || drop >= 1 || attn < 0 || attn >= 1 {
		return fmt.Errorf("dropout must be in [0, 1), got %g (attention %g)", drop, attn)
	}
	if f.epochs <= 0 {
		return fmt.Errorf("--epochs must be positive, got %d", f.epochs)
	}
	if f.batchSize < 0 {
		return fmt.Errorf("--batch-size must not be negative, got %d", f.batchSize)
	}
	if f.evalEvery < 0 {
		return fmt.Errorf("--eval-every must not be negative, got %d (0: evaluate after the last epoch only)", f.evalEvery)
	}
	if err := checkOutputs([2]string{"trace", f.trace}); err != nil {
		return err
	}
	evalEvery := f.evalEvery
	if evalEvery == 0 {
		evalEvery = f.epochs // the last epoch only
	}
	branches, err := branchesFlag(f.model, f.branches, fl.Changed("branches"), fl.Changed("layers"))
	if err != nil {
		return err
	}
	if err := tableRowsFlag(f.model, f.tableRows, fl.Changed("table-rows")); err != nil {
		return err
	}

	ds, feats, err := openNodeClassification(f.dataSpec, f.featNorm)
	if err != nil {
		return err
	}

	var memCap int64
	if f.deviceMem != "" {
		if memCap, err = core.ParseBytes(f.deviceMem); err != nil {
			return fmt.Errorf("--device-mem: %w", err)
		}
	}
	if fl.Changed("backend") {
		if err := checkBackendDevices(f.backend, f.devices); err != nil {
			return err
		}
	}
	td, err := openTrainDevices(ctx, f.backend, f.devices, f.threads, memCap)
	if err != nil {
		return err
	}
	defer td.Close()
	backendName, ids, devs, infos := td.backend, td.ids, td.local, td.infos
	warnCPUVariant(cmd.ErrOrStderr(), devs)

	opts, err := parseSchedOpts(f.schedOpts)
	if err != nil {
		return err
	}
	sched, closer, err := resolveScheduler(ctx, f.scheduler, opts)
	if err != nil {
		return err
	}
	defer closer.Close()
	m, err := core.BuildModel(f.model, core.ModelConfig{InDim: ds.FeatureDim, Hidden: hidden, Classes: ds.NumClasses,
		Layers: f.layers, Heads: heads, Dropout: float32(drop), AttnDropout: float32(attn), Branches: branches, TableRows: f.tableRows})
	if err != nil {
		return err
	}
	if err := paramsFit(m, f.optimizer, td.local[0]); err != nil {
		return err
	}
	if f.model == "dlrm" && !f.asJSON {
		fmt.Fprintln(cmd.ErrOrStderr(), dlrmNote)
	}
	dat := engine.Data{Graph: ds.Graph, Features: feats, FeatureDim: ds.FeatureDim, Labels: ds.Labels}
	optim := engine.Optimizer{Kind: f.optimizer, LR: float32(lr), WeightDecay: float32(wd)}
	plannedOn, err := planOnMeasuredCosts(ctx, cmd, f, sched, opts, m, dat, optim, td, ds.Train)
	if err != nil {
		return err
	}
	// Capped cpu devices evaluate on the host when they cannot hold it
	// (evaluation reads whole neighbourhoods; a budget is not the host's
	// memory).
	var evalDev core.Device
	if len(td.remote) == 0 {
		dev, closer, err := hostTwin(td.local[0])
		if err != nil {
			return err
		}
		if closer != nil {
			defer closer.Close()
			evalDev = dev
		}
	}
	tr, err := engine.New(engine.Config{Model: m, Devices: devs, Remote: td.remote, Seed: f.seed,
		Data:       dat,
		Optimizer:  optim,
		EvalDevice: evalDev})
	if err != nil {
		return err
	}
	defer tr.Close()

	var bar *progressbar.ProgressBar
	if !f.asJSON && !f.quiet {
		bar = progressbar.NewOptions(f.epochs,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription(fmt.Sprintf("%s on %s", f.model, ds.Name)),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(24),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionClearOnFinish())
	}
	evaluated := false // the progress bar shows a validation accuracy once there is one
	endPiper := piperBar(sched, !f.asJSON && !f.quiet)
	sum, err := engine.Train(ctx, tr, infos, engine.TrainOptions{
		Epochs: f.epochs, Scheduler: sched, Train: ds.Train, Val: ds.Val, Test: ds.Test, Trace: f.trace != "",
		BatchSize: f.batchSize, Fanouts: f.fanout, EvalEvery: evalEvery,
		Progress: func(s engine.EpochStats) {
			if bar != nil {
				evaluated = evaluated || s.Evaluated
				val := "–"
				switch {
				case len(ds.Val) == 0:
					val = "n/a"
				case evaluated:
					val = fmt.Sprintf("%.3f", s.ValAcc)
				}
				bar.Describe(fmt.Sprintf("%s on %s  loss %.4f  val %s", f.model, ds.Name, s.Loss, val))
				_ = bar.Add(1)
			}
		},
	})
	endPiper()
	if bar != nil {
		_ = bar.Finish()
	}
	if err != nil {
		return oomHint(err, f.scheduler)
	}
	res := trainResult{Model: f.model, Data: ds.Name, Scheduler: sum.Scheduler, Backend: backendName, Devices: ids,
		Epochs: f.epochs, EpochMsMedian: sum.EpochMsMedian, IterationMsMedian: sum.IterationMsMedian, PlannedOn: plannedOn, WallSeconds: sum.Wall.Seconds(), PeakMemBytes: sum.PeakMem,
		FinalLoss: sum.FinalLoss, TrainAcc: sum.TrainAcc, ValAcc: sum.ValAcc, TestAcc: sum.TestAcc, Units: sum.Units, Seed: f.seed,
		Iterations: sum.Iterations, PredictedPeak: sum.PredictedPeak, SchedMetrics: sum.Metrics, SchedulingMs: sum.SchedulingMs, Plans: sum.Plans, EvalFallbacks: sum.EvalFallbacks,
		noVal: len(ds.Val) == 0, noTest: len(ds.Test) == 0}
	if f.trace != "" {
		if err := atomicfile.Write(f.trace, func(w io.Writer) error { return sum.Trace.WriteChrome(w) }); err != nil {
			return fmt.Errorf("writing trace: %w", err)
		}
		res.Trace = f.trace
	}
	out := cmd.OutOrStdout()
	if f.asJSON {
		enc := json.NewEncoder(out)
		return enc.Encode(res)
	}
	printSummary(out, res)
	return nil
}

func printSummary(w io.Writer, r trainResult) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("model", r.Model)
	row("data", r.Data)
	row("scheduler", fmt.Sprintf("%s (%d unit(s) per iteration, %d iteration(s) per epoch)", r.Scheduler, r.Units, r.Iterations))
	keys := make([]string, 0, len(r.SchedMetrics))
	for k := range r.SchedMetrics {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		row("  "+strings.ReplaceAll(k, "_", " "), metricText(k, r.SchedMetrics[k]))
	}
	if r.PlannedOn != "" {
		row("  planned on", r.PlannedOn)
	}
	devs := make([]string, len(r.Devices))
	for i, d := range r.Devices {
		devs[i] = string(d)
	}
	row("backend / devices", r.Backend+" / "+strings.Join(devs, ","))
	row("epochs", fmt.Sprint(r.Epochs))
	row("epoch time (median)", fmt.Sprintf("%.2f ms", r.EpochMsMedian))
	it := fmt.Sprintf("%.2f ms measured", r.IterationMsMedian)
	if p, ok := r.SchedMetrics["simulated_iteration_ms"]; ok && r.IterationMsMedian > 0 {
		if r.Epochs*r.Iterations > 1 {
			it += fmt.Sprintf(", %.2f ms predicted (%+.1f%%)", p, 100*(p/r.IterationMsMedian-1))
		} else {
			it += fmt.Sprintf(", %.2f ms predicted (the one iteration measured includes the warm-up: run more to compare)", p)
		}
	}
	row("iteration time (median)", it)
	if r.Plans > 1 {
		row("planning time", fmt.Sprintf("%.2f ms over %d plans (one per sampled batch), %.3f ms each", r.SchedulingMs, r.Plans, r.SchedulingMs/float64(r.Plans)))
	} else {
		row("planning time", fmt.Sprintf("%.2f ms", r.SchedulingMs))
	}
	row("wall time", fmt.Sprintf("%.2f s", r.WallSeconds))
	ids := make([]string, 0, len(r.PeakMemBytes))
	for d := range r.PeakMemBytes {
		ids = append(ids, string(d))
	}
	sort.Strings(ids)
	for _, d := range ids {
		v := core.FormatBytes(r.PeakMemBytes[core.DeviceID(d)]) + " measured"
		if p, ok := r.PredictedPeak[core.DeviceID(d)]; ok {
			v += fmt.Sprintf(", %s predicted (%+.1f%%)", core.FormatBytes(p), 100*(float64(p)/float64(r.PeakMemBytes[core.DeviceID(d)])-1))
		}
		row("peak memory "+d, v)
	}
	row("final loss", fmt.Sprintf("%.4f", r.FinalLoss))
	acc := func(v float64, absent bool) string {
		if absent {
			return "n/a"
		}
		return fmt.Sprintf("%.3f", v)
	}
	row("accuracy train / val / test", acc(r.TrainAcc, false)+" / "+acc(r.ValAcc, r.noVal)+" / "+acc(r.TestAcc, r.noTest))
	if r.EvalFallbacks > 0 {
		row("evaluated on the host", fmt.Sprintf("%d time(s): the devices' --device-mem could not hold it (evaluation reads whole neighbourhoods)", r.EvalFallbacks))
	}
	if r.Trace != "" {
		row("trace", r.Trace+" (open in ui.perfetto.dev or chrome://tracing)")
	}
	tw.Flush()
}

// parseDevices splits "--devices cpu:0,cpu:1" and checks they name one backend.
func parseDevices(backend, list string) (string, []core.DeviceID, error) {
	if strings.TrimSpace(list) == "" {
		return backend, nil, nil
	}
	var ids []core.DeviceID
	seen := map[core.DeviceID]bool{}
	b := ""
	for _, s := range strings.Split(list, ",") {
		name, i, err := core.ParseDeviceID(s)
		if err != nil {
			return "", nil, fmt.Errorf("--devices: %w", err)
		}
		if b != "" && name != b {
			return "", nil, fmt.Errorf("--devices mixes backends %s and %s; one backend per run", b, name)
		}
		b = name
		id := core.DeviceID(fmt.Sprintf("%s:%d", name, i))
		if seen[id] {
			return "", nil, fmt.Errorf("--devices lists %s twice", id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	return b, ids, nil
}

// openNodeClassification opens a dataset for node classification and
// returns it with its features preprocessed per --feature-norm.
func openNodeClassification(spec, norm string) (*data.Dataset, []float32, error) {
	ds, err := openDataset(spec)
	if err != nil {
		return nil, nil, err
	}
	if ds.Kind == data.KindDynamic {
		return nil, nil, fmt.Errorf("--data %s is a dynamic dataset (timestamped edge events): train it with gnnkit train-dynamic", spec)
	}
	if ds.Graph == nil || ds.FeatureDim == 0 || len(ds.Labels) == 0 || ds.NumClasses == 0 {
		return nil, nil, fmt.Errorf("dataset %s has no node features or labels; node classification needs both", ds.Name)
	}
	if len(ds.Train) == 0 {
		return nil, nil, fmt.Errorf("dataset %s has no training split (train.txt)", ds.Name)
	}
	switch norm {
	case "row":
		return ds, ds.RowNormalizedFeatures(), nil
	case "none":
		return ds, ds.Features, nil
	}
	return nil, nil, fmt.Errorf("--feature-norm %q: want row or none", norm)
}

// planOnMeasuredCosts gives a scheduler that plans with op costs
// (graphpipe, 1f1b, gpipe, without profile=) costs measured on the
// training devices, unless --measure=false or off the cpu backend, and
// says what the plan is priced on ("" for schedulers that price nothing).
// train are the training nodes (a mini-batch's targets come from them).
// Where measuring runs out of memory under --device-mem, an explicit
// --measure fails; the default plans on the roofline and says why.
func planOnMeasuredCosts(ctx context.Context, cmd *cobra.Command, f *trainFlags, sched core.Scheduler, opts map[string]string, m *core.Model, d engine.Data, opt engine.Optimizer, td *trainDevices, train []int32) (string, error) {
	gp, ok := sched.(*graphpipe.Scheduler)
	explicit := cmd.Flags().Changed("measure") && f.measure
	const roofline = "a roofline model of the devices"
	switch {
	case !ok:
		if explicit {
			return "", fmt.Errorf("--measure: scheduler %s plans without op costs (graphpipe, 1f1b and gpipe plan with them)", sched.Name())
		}
		return "", nil
	case gp.Profile != nil:
		if explicit {
			return "", errBothCosts(opts["profile"])
		}
		return "the profile " + opts["profile"], nil
	}
	cpu := td.backend == "cpu" && len(td.remote) == 0
	if explicit && !cpu {
		return "", fmt.Errorf("--measure profiles the training devices on the cpu backend only, not %s; take a profile with 'gnnkit plan --scheduler %s --model %s --measure --measure-backend opencl --profile FILE' (on a GPU, through its OpenCL driver) and pass --sched-opt profile=FILE (or --measure=false)", td.backend, sched.Name(), f.model)
	}
	if !f.measure {
		return roofline + " (--measure=false)", nil
	}
	if !cpu {
		return roofline + " (--measure profiles on the cpu backend only)", nil
	}
	whole := f.batchSize == 0 && f.fanout == nil
	samples := len(train)
	if !whole && f.batchSize > 0 {
		samples = min(samples, f.batchSize)
	}
	if !f.quiet && !f.asJSON {
		fmt.Fprintf(cmd.ErrOrStderr(), "measuring op costs on %s for the %s planner (--measure=false skips this)...\n", td.local[0].ID(), sched.Name())
	}
	target := profTarget{local: td.local}
	probe, closer, err := hostTwin(td.local[0])
	if err != nil {
		return "", err
	}
	if closer != nil {
		defer closer.Close()
		target.probe = probe
	}
	c, err := measurePlannerCosts(ctx, gp, m, d, opt, target, train, samples, whole, 5, f.seed)
	if errors.Is(err, core.ErrOutOfMemory) && !explicit {
		fmt.Fprintf(cmd.ErrOrStderr(), "gnnkit: planning on a roofline model: measuring the op costs ran out of memory under --device-mem (%v)\n", err)
		return roofline + " (measuring ran out of memory under --device-mem)", nil
	}
	if err != nil {
		return "", fmt.Errorf("%w (--measure=false plans on a roofline model instead)", err)
	}
	c.use(gp)
	return c.describe(), nil
}

// maxLayers bounds --layers: the model is built op by op on the host, so
// a mistyped depth (--layers 100000000) would fill the machine's memory
// before training starts.
const maxLayers = 1024

// maxHidden and maxHeads bound --hidden and --heads so that no weight's
// dimension (heads × hidden) overflows an int before the memory checks
// (paramsFit, planModelFits) can refuse the model in bytes.
const (
	maxHidden = 1 << 30
	maxHeads  = 1 << 10
)

// checkTrainNumbers checks the numeric model and optimizer flags given
// explicitly (a flag left out takes the model's default): the learning
// rate and the widths must be positive, as --epochs, --branches and
// --table-rows must (0 is not a stand-in for "the default"), and the
// rates must be finite numbers in range, so that NaN or Inf is refused
// here instead of ending training with a NaN loss. hidden is the model's
// default width, for the message.
func checkTrainNumbers(fl interface{ Changed(string) bool }, f *trainFlags, hidden int) error {
	if err := checkModelSize(fl, f.model, hidden, f.hidden, f.heads, f.layers); err != nil {
		return err
	}
	if err := gatOnlyFlags(fl, f.model); err != nil {
		return err
	}
	floats := []struct {
		name   string
		v      float64
		ok     func(float64) bool
		should string
	}{
		{"lr", f.lr, func(x float64) bool { return x > 0 }, "a positive number, e.g. 0.01"},
		{"weight-decay", f.wd, func(x float64) bool { return x >= 0 }, "a non-negative number, e.g. 5e-4 (0: none)"},
		{"dropout", f.dropout, func(x float64) bool { return x >= 0 && x < 1 }, "in [0, 1)"},
		{"attn-dropout", f.attnDropout, func(x float64) bool { return x >= 0 && x < 1 }, "in [0, 1)"},
	}
	for _, c := range floats {
		if !fl.Changed(c.name) {
			continue
		}
		if math.IsNaN(c.v) || math.IsInf(c.v, 0) || !c.ok(c.v) {
			return fmt.Errorf("--%s must be %s, got %g (leave it out for the model's default)", c.name, c.should, c.v)
		}
	}
	return nil
}

// checkModelSize checks the model's size flags given explicitly (train's
// and plan's): --hidden and --heads positive, --layers from 1 to
// maxLayers. defHidden is the model's default width, for the message.
func checkModelSize(fl interface{ Changed(string) bool }, model string, defHidden, hidden, heads, layers int) error {
	for _, c := range []struct {
		name     string
		v, most  int
		leaveOut string
	}{
		{"hidden", hidden, maxHidden, fmt.Sprintf("%d for %s", defHidden, model)},
		{"heads", heads, maxHeads, "8 for gat"},
		{"layers", layers, maxLayers, "2"},
	} {
		if !fl.Changed(c.name) {
			continue
		}
		if c.v < 1 {
			return fmt.Errorf("--%s must be positive, got %d (leave it out for the model's default, %s)", c.name, c.v, c.leaveOut)
		}
		if c.most > 0 && c.v > c.most {
			return fmt.Errorf("--%s %d: at most %d", c.name, c.v, c.most)
		}
	}
	return nil
}

// paramsFit refuses, before anything is allocated, a model whose
// parameters with their gradients (and Adam's two moments) pass the
// memory the cpu devices share (cpu.Device.HostMem): every run holds
// them all on the host, and without this uno with --branches 100000
// allocated about 1.6 MB per branch until that memory ran out. home is
// the device holding the master parameters; off the cpu backend it
// checks nothing.
func paramsFit(m *core.Model, optimizer string, home core.Device) error {
	cd, ok := home.(*cpu.Device)
	if !ok {
		return nil
	}
	limit := cd.HostMem().Stats().Cap
	if limit <= 0 {
		return nil
	}
	params := paramBytesF(m)
	copies, with := 2.0, "their gradients"
	if optimizer == "adam" {
		copies, with = 4, "their gradients and Adam's two moments"
	}
	if need := copies * params; need > float64(limit) {
		return fmt.Errorf("model %s has %s of parameters, %s with %s: more than the %s of memory this machine has for the cpu devices; use a smaller --hidden, fewer --layers or --branches (or --optimizer sgd)",
			m.Name, fmtBytesF(params), fmtBytesF(need), with, core.FormatBytes(limit))
	}
	return nil
}

// paramBytesF is m's parameter bytes, in float64: a shape's byte count
// may overflow an int64.
func paramBytesF(m *core.Model) float64 {
	var params float64
	for _, p := range m.Params {
		n := 4.0
		for _, d := range p.Shape {
			n *= float64(d)
		}
		params += n
	}
	return params
}

// maxPlanModel is the most parameter bytes (with gradients and Adam's
// moments) gnnkit plan takes: a profile's ops together may claim at most
// 32 PiB (sim.ParseProfile's bound), and far past it the simulator's
// integer sizes overflow into plausible-looking wrong plans. It bounds
// the parameters only; a huge graph's activations can still pass it.
const maxPlanModel = 32 << 50

// planModelFits refuses a model too large for the simulator to price.
func planModelFits(m *core.Model) error {
	params := paramBytesF(m)
	if need := 4 * params; need > maxPlanModel {
		return fmt.Errorf("model %s has %s of parameters, %s with their gradients and Adam's two moments: more than the simulator prices (%s); use a smaller --hidden, --heads, --layers or --branches",
			m.Name, fmtBytesF(params), fmtBytesF(need), core.FormatBytes(maxPlanModel))
	}
	return nil
}

// fmtBytesF is core.FormatBytes for a byte count that may pass an int64.
func fmtBytesF(n float64) string {
	if n >= math.MaxInt64 {
		return fmt.Sprintf("%.3g EiB", n/(1<<60))
	}
	return core.FormatBytes(int64(n))
}
