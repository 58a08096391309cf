package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data"
	"github.com/gnnkit/gnnkit/data/dynamic"
	"github.com/gnnkit/gnnkit/engine/dyntrain"
	mdyn "github.com/gnnkit/gnnkit/models/dynamic"
	"github.com/gnnkit/gnnkit/schedulers/blad"
)

type dynamicFlags struct {
	model, dataSpec, scheduler, backend, devices, task string
	window, hidden, epochs, stepGroups, threads        int
	negTrain, negEval, evalEvery                       int
	seconds                                            int64
	lr                                                 float32
	seed                                               uint64
	cpuprofile                                         string
}

func newDynamicCmd() *cobra.Command {
	f := &dynamicFlags{}
	cmd := &cobra.Command{
		Use:   "train-dynamic",
		Short: "Train a dynamic GNN (T-GCN, EvolveGCN-O) on snapshot groups",
		Long: `train-dynamic cuts a timestamped edge stream into snapshots, groups them into
BPTT windows (--window w snapshots predict the next one) and trains a dynamic
GNN for link prediction (AUC, MRR) or edge-sign classification (F1), with a
group-aware scheduler: blad (LPT placement from measured cost, two streams
per device overlapping graph and dense ops), esdg (equal-count partition of
the groups) or vertexpart (every group on every device, each device a slice
of every snapshot's nodes, exchanging halo rows).

Examples:
  gnnkit train-dynamic --data ../shared/data/bitcoin_alpha --model tgcn --devices cpu:0,cpu:1
  gnnkit train-dynamic --data synthetic:dsbm,nodes=2000,skew=50 --scheduler esdg --window 5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			return withCPUProfile(f.cpuprofile, func() error { return runDynamic(cmd, f) })
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "tgcn", "model: "+strings.Join(mdyn.Models(), " or ")+" (static models train with gnnkit train)")
	fl.StringVar(&f.dataSpec, "data", "synthetic:dsbm", "a dynamic dataset folder (e.g. bitcoin_alpha) or synthetic:dsbm[,key=value...]")
	fl.StringVar(&f.task, "task", "link", "task: link (AUC, MRR) or edge-sign (F1)")
	fl.StringVar(&f.scheduler, "scheduler", "blad", "blad, esdg or vertexpart (vertexpart: tgcn only)")
	fl.StringVar(&f.backend, "backend", "cpu", "backend")
	fl.StringVar(&f.devices, "devices", "", "comma-separated devices, e.g. cpu:0,cpu:1")
	fl.IntVar(&f.window, "window", 5, "BPTT window: snapshots per group (>= 1)")
	fl.Int64Var(&f.seconds, "snapshot-seconds", 0, "snapshot length in seconds (0: the dataset's own)")
	fl.IntVar(&f.hidden, "hidden", 32, "hidden width (>= 1)")
	fl.IntVar(&f.epochs, "epochs", 30, "training epochs (>= 1)")
	fl.IntVar(&f.stepGroups, "step-groups", 8, "groups per optimizer step (0: all training groups)")
	fl.IntVar(&f.negTrain, "neg-train", 1, "negative samples per positive, link task (training; >= 1)")
	fl.IntVar(&f.negEval, "neg-eval", 20, "negative samples per positive, link task (val/test; MRR ranks among them; >= 1)")
	fl.IntVar(&f.evalEvery, "eval-every", 0, "also evaluate on val every N epochs (0: only at the end, where val and test always are)")
	fl.IntVar(&f.threads, "threads", 0, "threads per device (0: backend default)")
	fl.Float32Var(&f.lr, "lr", 0.01, "Adam learning rate (finite, > 0)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed")
	fl.StringVar(&f.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run to FILE (go tool pprof); a failed run leaves FILE as it was")
	return cmd
}

// dynamicSchedulers are the schedulers train-dynamic takes (runDynamic
// builds them).
var dynamicSchedulers = []string{"blad", "esdg", "vertexpart"}

// check rejects flag values that mean nothing, before any data is
// loaded: each error names the flag, the value and the allowed range.
func (f *dynamicFlags) check() error {
	if err := checkDynamicModel(f.model); err != nil {
		return err
	}
	if !slices.Contains(dynamicSchedulers, f.scheduler) {
		return fmt.Errorf("--scheduler %q: train-dynamic needs a group-aware scheduler: blad, esdg or vertexpart", f.scheduler)
	}
	if f.scheduler == "vertexpart" && f.model != "tgcn" {
		return fmt.Errorf("--scheduler vertexpart partitions tgcn only, not --model %s: use --scheduler blad or esdg, or --model tgcn", f.model)
	}
	for _, c := range []struct {
		name     string
		v, least int64
		want     string
	}{
		{"window", int64(f.window), 1, "want >= 1 snapshots per group"},
		{"snapshot-seconds", f.seconds, 0, "want a positive snapshot length in seconds (0: the dataset's own)"},
		{"hidden", int64(f.hidden), 1, "want a hidden width >= 1"},
		{"epochs", int64(f.epochs), 1, "want >= 1 training epochs"},
		{"step-groups", int64(f.stepGroups), 0, "want >= 1 groups per optimizer step (0: all training groups)"},
		{"neg-train", int64(f.negTrain), 1, "want >= 1 negative samples per positive"},
		{"neg-eval", int64(f.negEval), 1, "want >= 1 negative samples per positive"},
		{"eval-every", int64(f.evalEvery), 0, "want >= 1 epochs (0: evaluate on val only at the end)"},
		{"threads", int64(f.threads), 0, "want >= 1 threads per device (0: the backend's default)"},
	} {
		if c.v < c.least {
			return fmt.Errorf("--%s %d: %s", c.name, c.v, c.want)
		}
	}
	if lr := float64(f.lr); !(lr > 0) || math.IsInf(lr, 0) {
		return fmt.Errorf("--lr %s: want a finite learning rate > 0 (default 0.01)", strconv.FormatFloat(lr, 'g', -1, 32))
	}
	return nil
}

// checkDynamicModel accepts the dynamic models (models/dynamic) and
// points a static model at gnnkit train.
func checkDynamicModel(name string) error {
	dyn := mdyn.Models()
	if slices.Contains(dyn, name) {
		return nil
	}
	want := strings.Join(dyn, " or ")
	if slices.Contains(core.Models(), name) {
		return fmt.Errorf("--model %s is a static model; train-dynamic trains %s (train %s with gnnkit train)", name, want, name)
	}
	return fmt.Errorf("--model %q: unknown; train-dynamic trains %s", name, want)
}

func loadDynamic(spec string, seconds int64) ([]data.Snapshot, int, []float32, int, error) {
	d, err := openDataset(spec)
	if err != nil {
		return nil, 0, nil, 0, err
	}
	if d.Kind != data.KindDynamic {
		return nil, 0, nil, 0, fmt.Errorf("--data %s is a %s dataset; train-dynamic needs timestamped events (use gnnkit train)", spec, d.Kind)
	}
	if seconds == 0 {
		seconds = d.SnapshotSeconds
	}
	if seconds <= 0 {
		return nil, 0, nil, 0, fmt.Errorf("--data %s states no snapshot length; pass --snapshot-seconds", spec)
	}
	sn, err := d.Snapshots(seconds)
	if err != nil {
		return nil, 0, nil, 0, err
	}
	return sn, d.NumNodes, d.Features, d.FeatureDim, nil
}

func runDynamic(cmd *cobra.Command, f *dynamicFlags) error {
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	task, err := dynamic.ParseTask(f.task)
	if err != nil {
		return err
	}
	sn, n, feats, fd, err := loadDynamic(f.dataSpec, f.seconds)
	if err != nil {
		return err
	}
	set, err := dynamic.Build(sn, n, dynamic.Options{Window: f.window, Task: task, NegTrain: f.negTrain, NegEval: f.negEval,
		Seed: f.seed, Features: feats, FeatureDim: fd})
	if err != nil {
		return err
	}
	backendName, ids, err := parseDevices(f.backend, f.devices)
	if err != nil {
		return err
	}
	need := 1
	for _, id := range ids {
		name, i, _ := core.ParseDeviceID(string(id))
		if err := checkLogicalIndex(id, name, i); err != nil {
			return err
		}
		need = max(need, i+1)
	}
	cpuDevs := 0
	if backendName == cpu.Name {
		cpuDevs = need
	}
	if err := checkThreads(f.threads, cpuDevs, backendName); err != nil {
		return err
	}
	be, err := core.OpenBackend(backendName, core.BackendOptions{Devices: need, Threads: f.threads})
	if err != nil {
		return err
	}
	defer be.Close()
	byID := map[core.DeviceID]core.Device{}
	for _, d := range be.Devices() {
		byID[d.ID()] = d
	}
	if len(ids) == 0 {
		ids = []core.DeviceID{be.Devices()[0].ID()}
	}
	var devs []core.Device
	for _, id := range ids {
		d, ok := byID[id]
		if !ok {
			return fmt.Errorf("device %s not found on backend %s", id, backendName)
		}
		devs = append(devs, d)
	}
	var sched core.Scheduler
	parts := 0
	switch f.scheduler {
	case "blad":
		sched = blad.New()
	case "esdg":
		sched = &blad.ESDG{}
	case "vertexpart":
		// Every group on every device, part k of its nodes on device k.
		sched, parts = blad.NewVertexPartition(), len(devs)
	default:
		return fmt.Errorf("--scheduler %q: train-dynamic needs a group-aware scheduler: blad, esdg or vertexpart", f.scheduler)
	}
	fmt.Fprintf(out, "data: %d snapshots, %d nodes; window %d: %d train / %d val / %d test groups (%d empty targets skipped); task %s\n",
		set.Snapshots, set.NumNodes, set.Window, len(set.Train), len(set.Val), len(set.Test), set.SkippedEmptyTargets, set.Task)
	res, err := dyntrain.Train(ctx, dyntrain.Config{Set: set, Model: f.model, Hidden: f.hidden, Epochs: f.epochs, LR: f.lr,
		Devices: devs, Scheduler: sched, StepGroups: f.stepGroups, Seed: f.seed, EvalEvery: f.evalEvery, VertexParts: parts,
		Progress: func(e dyntrain.EpochStats) {
			if e.Val != nil || e.Epoch == 1 || e.Epoch%10 == 0 {
				fmt.Fprintf(out, "epoch %3d  loss %.4f  %6.1f ms", e.Epoch, e.Loss, float64(e.Time.Microseconds())/1e3)
				if e.Val != nil {
					fmt.Fprintf(out, "  val %v", *e.Val)
				}
				fmt.Fprintln(out)
			}
		}})
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("model", f.model)
	row("scheduler", fmt.Sprintf("%s on %d device(s), %v stream(s) each, %d re-placements", f.scheduler, len(devs), res.Plan.Metrics["streams"], res.Replans))
	row("epoch time", fmt.Sprintf("median %.1f ms", res.EpochMsMedian))
	var dev []core.DeviceID
	for d := range res.Busy {
		dev = append(dev, d)
	}
	sort.Slice(dev, func(i, j int) bool { return dev[i] < dev[j] })
	for _, d := range dev {
		row("busy "+string(d), fmt.Sprintf("%.1f ms (last iteration)", float64(res.Busy[d].Microseconds())/1e3))
	}
	row("imbalance", fmt.Sprintf("%.3f (max/mean - 1 of busy time)", res.Imbalance))
	row("overlap", fmt.Sprintf("%.3f (share of busy time with both streams active)", res.Overlap))
	row("final loss", fmt.Sprintf("%.4f", res.FinalLoss))
	row("untrained (test)", res.Baseline.String())
	row("val", res.Val.String())
	row("test", res.Test.String())
	tw.Flush()
	if res.Test.AUC <= res.Baseline.AUC {
		fmt.Fprintln(os.Stderr, "warning: test AUC is not above the untrained model's")
	}
	return nil
}
