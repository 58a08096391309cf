package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/internal/atomicfile"
	"github.com/gnnkit/gnnkit/models"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
	"github.com/gnnkit/gnnkit/sim"
)

type planFlags struct {
	model, dataSpec, scheduler, preset, trace, profile, featNorm, dot, deviceMem, cluster, writeCluster, measureBackend, cpuprofile, optimizer, memSweep, sweepPlot string
	devices, hidden, heads, layers, batchSize, reps, branches, tableRows                                                                                            int
	fanout                                                                                                                                                          []int
	schedOpts                                                                                                                                                       []string
	speedup                                                                                                                                                         float64
	seed                                                                                                                                                            uint64
	simulate, measure, asJSON                                                                                                                                       bool
}

func newPlanCmd() *cobra.Command {
	f := &planFlags{}
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Show the plan a scheduler makes for N devices, and simulate it",
		Long: `plan builds the workload of one training iteration (model and dataset as
for 'gnnkit train'), asks the scheduler for a plan on N simulated devices of
a preset cluster, and prints the plan: its units, the tasks per device and
stream, and, when units span devices, the stage DAG (each stage's
replicas, ops and successors) and every stream's schedule (--dot writes
the DAG for Graphviz).

With --simulate it replays the plan in the discrete-event simulator (package
sim) and prints the predicted iteration time, bubble fraction, per-device
busy time and peak memory; --trace FILE also writes the simulated schedule
as a trace to open in ui.perfetto.dev.
Op costs come from --profile FILE (a GraphPipe-schema profile), from
--measure (profile the model on this machine's CPU first, or on the first
device of --measure-backend; with --profile the profile is also written
there), or else from a roofline model of the
preset's devices. The pipeline schedulers (graphpipe, 1f1b, gpipe) plan
with the same costs (--measure measures them before planning, at every
micro-batch size they may try; an existing --profile is handed to them;
--sched-opt profile=FILE overrides), so planner and simulator price ops
alike.

Presets: cpu (logical CPU devices of this machine), pcie-a100, nvlink-h100.
For another machine, write a preset with --write-cluster FILE, edit its
speeds, memory and links, and plan with --cluster FILE.

--mem-sweep LO:HI[:N] plans at N memory caps per device from LO to HI
instead (a search each), simulates every plan, and prints the fastest plan
at each cap and, where a smaller cap's search found a faster one, that
plan and its cap (the search is not monotone in the cap); --sweep-plot
FILE draws it.`,
		Example: `  gnnkit plan --scheduler sequential --devices 1 --simulate
  gnnkit plan --scheduler graphpipe --model gcn --devices 16 --preset nvlink-h100 --simulate --trace plan.json
  gnnkit plan --scheduler cherry --preset cpu --devices 1 --simulate --measure --profile gcn-cora.json
  gnnkit plan --scheduler graphpipe --model uno --devices 8 --preset pcie-a100 --mem-sweep 256KiB:2MiB --sweep-plot sweep.png`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withCPUProfile(f.cpuprofile, func() error { return runPlan(cmd, f) })
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.scheduler, "scheduler", "sequential", "scheduler: "+strings.Join(core.Schedulers(), ", "))
	fl.StringArrayVar(&f.schedOpts, "sched-opt", nil, schedOptUsage)
	fl.StringVar(&f.model, "model", "gcn", "model: "+strings.Join(trainModels(), ", ")+" (tgcn and evolvegcn: gnnkit train-dynamic)")
	fl.StringVar(&f.dataSpec, "data", "cora", "dataset: cora (embedded), a folder in the shared layout, an edge-list file, or synthetic:KIND,key=val,...")
	fl.IntVar(&f.devices, "devices", 1, "number of simulated devices")
	fl.StringVar(&f.preset, "preset", "cpu", "device cluster: "+strings.Join(sim.Presets(), ", "))
	fl.StringVar(&f.cluster, "cluster", "", "device cluster from a JSON FILE instead of --preset/--devices (start from one --write-cluster wrote)")
	fl.StringVar(&f.writeCluster, "write-cluster", "", "write the cluster planned for (after --device-mem, --speedup) as JSON to FILE")
	fl.BoolVar(&f.simulate, "simulate", false, "simulate the plan and print the predicted iteration")
	fl.StringVar(&f.trace, "trace", "", "with --simulate, write the simulated schedule as a Chrome/Perfetto trace to FILE")
	fl.StringVar(&f.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run (the search's time) to FILE (go tool pprof); a failed run leaves FILE as it was")
	fl.StringVar(&f.profile, "profile", "", "op profile (GraphPipe JSON schema) to simulate with; with --measure, where to write it")
	fl.BoolVar(&f.measure, "measure", false, "profile the model on this machine's cpu:0 (or --measure-backend's first device): before planning for graphpipe, 1f1b and gpipe (they plan with it), else before simulating")
	fl.IntVar(&f.reps, "reps", 5, "with --measure, timed runs per profile size")
	fl.StringVar(&f.measureBackend, "measure-backend", "cpu", "with --measure, the backend whose first device the profile is taken on: "+strings.Join(backendNames(), ", ")+" (e.g. cuda: a GPU through gnnkit-cuda; opencl: a GPU's OpenCL driver, or PoCL); the preset's devices are then priced at --speedup times it")
	fl.Float64Var(&f.speedup, "speedup", 0, "divide the profile's times by this on every simulated device (e.g. a GPU vs the profiled CPU)")
	fl.IntVar(&f.hidden, "hidden", 0, "hidden width per head (default: per model)")
	fl.IntVar(&f.heads, "heads", 0, "attention heads, gat (default 8)")
	fl.IntVar(&f.layers, "layers", 2, "message-passing layers")
	fl.IntVar(&f.branches, "branches", 0, "branches of a multi-branch model: uno's MLP branches, mbgnn's towers (of 1..N hops: its depth), dlrm's embedding tables (default 4; at most 1024, mbgnn 64)")
	fl.IntVar(&f.tableRows, "table-rows", 0, fmt.Sprintf("dlrm: rows of each embedding table (default %d; GraphPipe's DLRM has 1000000, with --hidden 64)", models.DefaultTableRows))
	fl.IntVar(&f.batchSize, "batch-size", 0, "target nodes per mini-batch (0 with no --fanout: full-graph training)")
	fl.IntSliceVar(&f.fanout, "fanout", nil, "neighbours sampled per layer for mini-batches, e.g. 15,10 (-1: all)")
	fl.StringVar(&f.optimizer, "optimizer", "adam", "optimizer the plan prices (its state's memory and its step), as gnnkit train's: adam or sgd")
	fl.StringVar(&f.featNorm, "feature-norm", "row", "feature preprocessing: row or none")
	fl.Uint64Var(&f.seed, "seed", 1, "random seed")
	fl.StringVar(&f.deviceMem, "device-mem", "", "memory of every simulated device, e.g. 2GiB (default: the preset's; cpu: no cap): plan under a tighter cap, or see the smallest memory a model fits in")
	fl.StringVar(&f.dot, "dot", "", "write the plan's stage DAG for Graphviz to FILE (render with: dot -Tsvg FILE > stages.svg)")
	fl.BoolVar(&f.asJSON, "json", false, "print one JSON object (plan summary and simulation)")
	fl.StringVar(&f.memSweep, "mem-sweep", "", "LO:HI[:N]: plan and simulate at N memory caps per device (default 8) spaced geometrically from LO to HI, e.g. 200MiB:1GiB, and print the fastest plan at each cap (a search each)")
	fl.StringVar(&f.sweepPlot, "sweep-plot", "", "with --mem-sweep, draw the simulated iteration against the cap as a PNG to FILE")
	return cmd
}

// planReport is what plan --json prints.
type planReport struct {
	Model     string `json:"model"`
	Data      string `json:"data"`
	Scheduler string `json:"scheduler"`
	// SchedOpts are the --sched-opt options the scheduler was made with.
	SchedOpts map[string]string `json:"sched_opts,omitempty"`
	Cluster   string            `json:"cluster"`
	Units     int               `json:"units"`
	Tasks     int               `json:"tasks"`
	Plan      *core.Plan        `json:"plan"`
	Profile   string            `json:"profile,omitempty"`
	// PlannedOn says where the op costs a pipeline scheduler planned with
	// came from, when --measure measured them for it.
	PlannedOn string `json:"planned_on,omitempty"`
	// Notes are warnings about the figures (e.g. a profile taken on
	// another kind of device than the cluster's, at speedup 1).
	Notes []string    `json:"notes,omitempty"`
	Sim   *sim.Result `json:"simulation,omitempty"`
	// Bound is the compute bound at the plan's units (sim.PlanBound), with
	// --simulate; NoBound says why there is none.
	Bound   *boundReport `json:"compute_bound,omitempty"`
	NoBound string       `json:"no_compute_bound,omitempty"`
	Stages  []planStage  `json:"stages,omitempty"`
	// StageDAG is the plan's stage DAG (core.Plan.StageGraph) when its
	// units span devices and it has one.
	StageDAG []core.Stage `json:"stage_dag,omitempty"`
	// NoStageDAG says why a plan whose units span devices has none
	// (it is not a stage pipeline).
	NoStageDAG string         `json:"no_stage_dag,omitempty"`
	Streams    []streamReport `json:"streams"`
	// Owners lists, for a plan that steps each parameter on its owner,
	// the parameters each device steps (bytes).
	Owners []ownerReport `json:"owners,omitempty"`
	Trace  string        `json:"trace,omitempty"`
}

// boundReport is the shortest iteration any plan running each op once on
// each of the plan's units could reach on the cluster (sim.PlanBound),
// and the simulated iteration over it.
type boundReport struct {
	Ns time.Duration `json:"ns"`
	// WorkNs is the units' work and the optimizer steps spread evenly
	// over the devices; PathNs one unit's longest path of ops, forward
	// and back. Ns is the larger.
	WorkNs  time.Duration `json:"work_ns"`
	PathNs  time.Duration `json:"path_ns"`
	Units   int           `json:"units"`
	Devices int           `json:"devices"`
	// SpreadOver is what the work is spread over: the devices, or the
	// host cores they share if fewer (a cluster's host_cores).
	SpreadOver float64 `json:"spread_over"`
	Ratio      float64 `json:"iteration_over_bound"`
}

type planStage struct {
	Device core.DeviceID `json:"device"`
	// Stream is the device's stream the ops run on (a device hosting
	// several stages, e.g. GraphPipe's shared trunk, runs each on its own).
	Stream int      `json:"stream,omitempty"`
	Ops    []string `json:"ops"`
}

type ownerReport struct {
	Device core.DeviceID `json:"device"`
	Params int           `json:"params"`
	Bytes  int64         `json:"bytes"`
}

// ownersOf lists, for a StepOwners plan, how many parameters (and bytes)
// each device steps.
func ownersOf(p *core.Plan, w *core.Workload) []ownerReport {
	if !p.StepOwners {
		return nil
	}
	size := map[string]int64{}
	for _, o := range w.Ops {
		for _, r := range o.Params {
			size[r.Name] = r.Bytes
		}
	}
	by := map[core.DeviceID]*ownerReport{}
	for name, d := range p.ParamOwners(w.OpParams()) {
		if by[d] == nil {
			by[d] = &ownerReport{Device: d}
		}
		by[d].Params++
		by[d].Bytes += size[name]
	}
	var out []ownerReport
	for _, d := range naturalDevices(p.Devices()) {
		if r := by[d]; r != nil {
			out = append(out, *r)
		}
	}
	return out
}

type streamReport struct {
	Device   core.DeviceID `json:"device"`
	Stream   int           `json:"stream"`
	Forward  int           `json:"forward"`
	Backward int           `json:"backward"`
	Reduce   int           `json:"reduce_grads"`
	Step     int           `json:"step"`
}

func runPlan(cmd *cobra.Command, f *planFlags) error {
	ctx := cmd.Context()
	if f.devices <= 0 {
		return fmt.Errorf("--devices must be positive, got %d", f.devices)
	}
	if f.trace != "" && !f.simulate {
		return fmt.Errorf("--trace needs --simulate")
	}
	written := f.profile
	if !f.measure {
		written = "" // read, not written
	}
	if err := checkOutputs([2]string{"trace", f.trace}, [2]string{"dot", f.dot}, [2]string{"write-cluster", f.writeCluster}, [2]string{"profile", written}, [2]string{"cpuprofile", f.cpuprofile}, [2]string{"sweep-plot", f.sweepPlot}); err != nil {
		return err
	}
	fl := cmd.Flags()
	if err := checkSweepFlags(f); err != nil {
		return err
	}
	if f.batchSize < 0 {
		return fmt.Errorf("--batch-size must not be negative, got %d", f.batchSize)
	}
	if isDynamic(f.model) {
		return fmt.Errorf("--model %s: %s is a dynamic-graph model: gnnkit plan plans %s (train %s with gnnkit train-dynamic)", f.model, f.model, strings.Join(trainModels(), ", "), f.model)
	}
	defHidden := modelDefaults["gcn"].hidden
	if d, ok := modelDefaults[f.model]; ok {
		defHidden = d.hidden
	}
	if err := checkModelSize(fl, f.model, defHidden, f.hidden, f.heads, f.layers); err != nil {
		return err
	}
	if err := gatOnlyFlags(fl, f.model); err != nil {
		return err
	}
	if err := checkMeasureFlags(f, fl.Changed("measure-backend")); err != nil {
		return err
	}
	if err := checkProfileFlags(f, fl); err != nil {
		return err
	}
	// --branches and --table-rows before any work.
	branches, err := branchesFlag(f.model, f.branches, fl.Changed("branches"), fl.Changed("layers"))
	if err != nil {
		return err
	}
	if err := tableRowsFlag(f.model, f.tableRows, fl.Changed("table-rows")); err != nil {
		return err
	}
	var cl *sim.Cluster
	if f.cluster != "" {
		if fl.Changed("preset") {
			return fmt.Errorf("--cluster and --preset both name the devices: give one")
		}
		fh, err := os.Open(f.cluster)
		if err != nil {
			return fmt.Errorf("--cluster: %w", err)
		}
		cl, err = sim.ReadCluster(fh)
		fh.Close()
		if err != nil {
			return fmt.Errorf("--cluster %s: %w", f.cluster, err)
		}
		if fl.Changed("devices") && f.devices != len(cl.Devices) {
			return fmt.Errorf("--devices %d, but the cluster %s has %d devices (leave --devices out)", f.devices, f.cluster, len(cl.Devices))
		}
	} else {
		var err error
		if cl, err = sim.Preset(f.preset, f.devices); err != nil {
			return err
		}
	}
	if fl.Changed("speedup") || f.cluster == "" {
		for i := range cl.Devices {
			cl.Devices[i].Speedup = f.speedup
		}
	}
	if f.deviceMem != "" {
		n, err := core.ParseBytes(f.deviceMem)
		if err != nil {
			return fmt.Errorf("--device-mem: %w", err)
		}
		if n <= 0 {
			return fmt.Errorf("--device-mem must be positive, got %s", f.deviceMem)
		}
		if n > sim.MaxMemBytes {
			return fmt.Errorf("--device-mem %s: at most %s per device", f.deviceMem, core.FormatBytes(sim.MaxMemBytes))
		}
		for i := range cl.Devices {
			cl.Devices[i].MemBytes = n
		}
	}
	if err := cl.Validate(); err != nil {
		return fmt.Errorf("the devices with --device-mem and --speedup applied: %w", err)
	}
	def, ok := modelDefaults[f.model]
	if !ok {
		def = modelDefaults["gcn"]
	}
	hidden, heads := f.hidden, f.heads
	if !fl.Changed("hidden") {
		hidden = def.hidden
	}
	if !fl.Changed("heads") {
		heads = def.heads
	}
	ds, feats, err := openNodeClassification(f.dataSpec, f.featNorm)
	if err != nil {
		return err
	}
	m, err := core.BuildModel(f.model, core.ModelConfig{InDim: ds.FeatureDim, Hidden: hidden, Classes: ds.NumClasses,
		Layers: f.layers, Heads: heads, Dropout: float32(def.drop), AttnDropout: float32(def.attn), Branches: branches, TableRows: f.tableRows})
	if err != nil {
		return err
	}
	if err := planModelFits(m); err != nil {
		return err
	}
	// A trainer on this machine's CPU builds the workload (and profiles
	// with --measure, unless --measure-backend names another backend); the
	// plan is made for the preset's devices. With the
	// cpu preset the CPU is split into as many logical devices as the plan
	// has, as 'gnnkit train --devices cpu:0,...' splits it, so that the
	// profile is measured with a training device's thread budget.
	logical := len(cl.Devices) // logical CPU devices (the cpu preset), else 1
	for _, d := range cl.Devices {
		if b, _, _ := core.ParseDeviceID(string(d.ID)); b != "cpu" {
			logical = 1
		}
	}
	be, err := core.OpenBackend("cpu", core.BackendOptions{Devices: logical})
	if err != nil {
		return err
	}
	defer be.Close()
	dat := engine.Data{Graph: ds.Graph, Features: feats, FeatureDim: ds.FeatureDim, Labels: ds.Labels}
	optim := engine.Optimizer{Kind: f.optimizer}
	tr, err := engine.New(engine.Config{Model: m, Devices: be.Devices()[:1], Seed: f.seed, Data: dat, Optimizer: optim})
	if err != nil {
		return err
	}
	defer tr.Close()
	b := tr.FullBatch(ds.Train)
	if f.batchSize > 0 || f.fanout != nil {
		fanouts := f.fanout
		if fanouts == nil {
			for range max(1, m.Config.Layers) { // the model's depth (mbgnn's: its branches)
				fanouts = append(fanouts, -1)
			}
		}
		perm := slices.Clone(ds.Train)
		r := rand.New(rand.NewPCG(f.seed, 1))
		r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		bs := f.batchSize
		if bs <= 0 || bs > len(perm) {
			bs = len(perm)
		}
		if b, err = engine.Sample(ds.Graph, perm[:bs], fanouts, f.seed); err != nil {
			return err
		}
	}
	w, err := tr.Workload(b, cl.Infos())
	if err != nil {
		return err
	}
	opts, err := parseSchedOpts(f.schedOpts)
	if err != nil {
		return err
	}
	userOpts := maps.Clone(opts) // as the user gave them, for the report
	if len(userOpts) == 0 {
		userOpts = nil
	}
	// The pipeline schedulers plan with the op costs the simulator will
	// use: hand them an existing --profile unless told otherwise.
	if _, set := opts["profile"]; !set && f.profile != "" && !f.measure {
		if pipelineScheduler(f.scheduler) {
			if _, err := os.Stat(f.profile); err == nil {
				opts["profile"] = f.profile
			}
		}
	}
	sched, closer, err := resolveScheduler(ctx, f.scheduler, opts)
	if err != nil {
		return err
	}
	defer closer.Close()
	// The pipeline schedulers plan for the cluster the simulator replays
	// on (--cluster, --speedup), unless --sched-opt cluster= names one.
	otherCluster := false // --sched-opt cluster= planned for other devices
	if gp, ok := sched.(*graphpipe.Scheduler); ok {
		if gp.Cluster == nil {
			gp.Cluster = cl
		} else {
			otherCluster = !reflect.DeepEqual(gp.Cluster, cl)
		}
	}
	// With --measure they also plan with the measured costs, so planner
	// and simulator price ops alike: measured before planning, at the unit
	// sizes they may make.
	// --measure profiles on the cpu backend's logical devices or on the
	// first device of --measure-backend (a worker's, for cuda).
	target := profTarget{local: be.Devices()}
	if f.measure && f.measureBackend != "cpu" {
		if isWorkerBackend(f.measureBackend) {
			td, err := openTrainDevices(ctx, f.measureBackend, "", 0, 0)
			if err != nil {
				return fmt.Errorf("--measure-backend %s: %w", f.measureBackend, err)
			}
			defer td.Close()
			target = profTarget{local: td.local, remote: td.remote}
		} else {
			mbe, err := core.OpenBackend(f.measureBackend, core.BackendOptions{Devices: 1})
			if err != nil {
				return fmt.Errorf("--measure-backend %s: %w", f.measureBackend, err)
			}
			defer mbe.Close()
			target = profTarget{local: mbe.Devices()[:1]}
		}
	}
	var planned *plannerCosts
	if gp, ok := sched.(*graphpipe.Scheduler); ok && f.measure {
		if gp.Profile != nil {
			return errBothCosts(opts["profile"])
		}
		if planned, err = measurePlannerCosts(ctx, gp, m, dat, optim, target, ds.Train, len(b.Targets), false, f.reps, f.seed); err != nil {
			return err
		}
		planned.use(gp)
	}
	if f.memSweep != "" {
		rep := sweepReport{Model: f.model, Data: ds.Name, Scheduler: sched.Name(), SchedOpts: userOpts, Cluster: cl.Name}
		prof, text, err := givenProfile(f, planned, cl)
		if err != nil {
			return err
		}
		if planned != nil && f.profile != "" {
			if err := writeProfile(f.profile, prof); err != nil {
				return err
			}
			text += ", written to " + f.profile
		}
		rep.Profile = text
		return runMemSweep(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), f, sched, w, cl, prof, rep)
	}
	t0 := time.Now()
	endBar := piperBar(sched, !f.asJSON)
	plan, err := sched.Schedule(ctx, w)
	endBar()
	if err != nil {
		return core.ScheduleError(sched.Name(), err)
	}
	schedTime := time.Since(t0)
	if err := plan.Validate(w); err != nil {
		return fmt.Errorf("scheduler %s returned a bad plan: %w", sched.Name(), err)
	}
	rep := planReport{Model: f.model, Data: ds.Name, Scheduler: sched.Name(), SchedOpts: userOpts, Cluster: cl.Name,
		Units: len(plan.Units), Tasks: len(plan.Tasks), Plan: plan, Streams: streams(plan), Stages: stagesOf(plan, w),
		Owners: ownersOf(plan, w)}
	if planned != nil {
		rep.PlannedOn = planned.describe()
		if f.profile != "" {
			if err := writeProfile(f.profile, planned.prof); err != nil {
				return err
			}
			rep.PlannedOn += ", written to " + f.profile
		}
	}
	if gp, ok := sched.(*graphpipe.Scheduler); ok && gp.Profile != nil {
		rep.Notes = speedupNote(gp.Profile, cl)
	}
	if asked := plan.Metrics["micro_batches_asked"]; asked > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("m = %.0f asked for, but the batch has %d targets: %.0f micro-batches of one target each", asked, len(w.Batch), plan.Metrics["micro_batches"]))
	}
	dag, dagErr := plan.StageGraph(w)
	if f.dot != "" {
		if dagErr != nil {
			return fmt.Errorf("--dot: the %s plan has no stage DAG: %w", sched.Name(), dagErr)
		}
	}
	if rep.Stages != nil {
		if dagErr == nil {
			rep.StageDAG = dag
		} else {
			rep.NoStageDAG = dagErr.Error()
		}
	}

	if f.simulate {
		var prof *sim.Profile
		if planned == nil && f.measure {
			// The trainer that built the workload profiles on the cpu;
			// another backend's device gets a trainer of its own.
			mtr := tr
			if target.local[0] != be.Devices()[0] || len(target.remote) > 0 {
				if mtr, err = target.trainer(m, dat, optim, f.seed); err != nil {
					return fmt.Errorf("--measure-backend %s: %w", f.measureBackend, err)
				}
				defer mtr.Close()
			}
			ladder := ladderOf(plan, w)
			if prof, err = target.measure(ctx, mtr, sim.MeasureOptions{Ladder: ladder, Reps: f.reps, Nodes: ds.Train}); err != nil {
				return err
			}
			rep.Profile = measuredOn(prof)
			if f.profile != "" {
				if err := writeProfile(f.profile, prof); err != nil {
					return err
				}
				rep.Profile += ", written to " + f.profile
			}
		} else {
			if prof, rep.Profile, err = givenProfile(f, planned, cl); err != nil {
				return err
			}
			if planned != nil {
				rep.Profile += " (the planner priced ops with it too)"
			}
		}
		res, err := sim.Simulate(plan, w, prof, cl)
		if err != nil {
			return err
		}
		rep.Sim = res
		switch b, err := sim.PlanBound(plan, w, prof, cl); {
		case err == nil && b.Time() > 0:
			rep.Bound = &boundReport{Ns: b.Time(), WorkNs: b.Work, PathNs: b.Path, Units: len(plan.Units), Devices: len(cl.Devices), SpreadOver: b.Devices, Ratio: float64(res.Iteration) / float64(b.Time())}
		case errors.Is(err, sim.ErrNoBound):
			rep.NoBound = strings.TrimPrefix(err.Error(), sim.ErrNoBound.Error()+": ")
		case err != nil:
			return err
		}
		if prof != nil && len(rep.Notes) == 0 {
			rep.Notes = speedupNote(prof, cl)
		}
	}
	if otherCluster && f.simulate {
		rep.Notes = append(rep.Notes, "the plan was made for the cluster --sched-opt cluster= names, and is simulated on the preset's or --cluster's devices: give the file as --cluster instead to plan and simulate on the same devices")
	}
	// The files last, so that a run that fails leaves existing ones as
	// they were.
	if f.trace != "" && rep.Sim != nil {
		if err := atomicfile.Write(f.trace, func(w io.Writer) error { return rep.Sim.Trace.WriteChrome(w) }); err != nil {
			return fmt.Errorf("writing trace: %w", err)
		}
		rep.Trace = f.trace
	}
	if f.dot != "" {
		title := fmt.Sprintf("%s on %s: %d stages", sched.Name(), cl.Name, len(dag))
		if err := atomicfile.Write(f.dot, func(out io.Writer) error { return writeDOT(out, dag, w, title) }); err != nil {
			return fmt.Errorf("writing the stage DAG: %w", err)
		}
	}
	if f.writeCluster != "" {
		if err := atomicfile.Write(f.writeCluster, func(w io.Writer) error { return sim.WriteCluster(w, cl) }); err != nil {
			return fmt.Errorf("--write-cluster: %w", err)
		}
	}
	out := cmd.OutOrStdout()
	if f.asJSON {
		return json.NewEncoder(out).Encode(rep)
	}
	printPlan(out, rep, w, cl, schedTime)
	return nil
}

// ladderOf picks profile sizes for a plan: the distinct unit sizes (at
// most four, spread) and the whole graph.
func ladderOf(p *core.Plan, w *core.Workload) []int {
	sizes := map[int]bool{}
	for _, u := range p.Units {
		if u.Subgraph {
			sizes[len(u.Targets)] = true
		}
	}
	var ls []int
	for s := range sizes {
		ls = append(ls, s)
	}
	sort.Ints(ls)
	if len(ls) > 4 {
		ls = []int{ls[0], ls[len(ls)/3], ls[2*len(ls)/3], ls[len(ls)-1]}
	}
	return append(ls, 0)
}

func streams(p *core.Plan) []streamReport {
	by := map[streamKey]*streamReport{}
	var order []streamKey
	for _, t := range p.Tasks {
		k := streamKey{t.Device, t.Stream}
		r := by[k]
		if r == nil {
			r = &streamReport{Device: t.Device, Stream: t.Stream}
			by[k] = r
			order = append(order, k)
		}
		switch t.Kind {
		case core.TaskForward:
			r.Forward++
		case core.TaskBackward:
			r.Backward++
		case core.TaskReduceGrads:
			r.Reduce++
		case core.TaskStep:
			r.Step++
		}
	}
	sortStreams(order)
	out := make([]streamReport, len(order))
	for i, k := range order {
		out[i] = *by[k]
	}
	return out
}

// stagesOf lists, when some unit's ops span devices, the ops each device
// runs forward (over all units).
func stagesOf(p *core.Plan, w *core.Workload) []planStage {
	span := false
	devOf := map[[2]int]core.DeviceID{}
	for _, t := range p.Tasks {
		if t.Kind != core.TaskForward {
			continue
		}
		for _, o := range t.OpIndices() {
			devOf[[2]int{t.Unit, o}] = t.Device
		}
	}
	for _, t := range p.Tasks {
		if t.Kind == core.TaskForward && t.Unit >= 0 {
			for o := range w.Ops {
				if d, ok := devOf[[2]int{t.Unit, o}]; ok && d != t.Device {
					span = true
				}
			}
		}
	}
	if !span {
		return nil
	}
	type ds struct {
		d core.DeviceID
		s int
	}
	ops := map[ds]map[int]bool{}
	for _, t := range p.Tasks {
		if t.Kind != core.TaskForward {
			continue
		}
		k := ds{t.Device, t.Stream}
		if ops[k] == nil {
			ops[k] = map[int]bool{}
		}
		for _, o := range t.OpIndices() {
			ops[k][o] = true
		}
	}
	var out []planStage
	for _, d := range naturalDevices(p.Devices()) {
		var streams []int
		for k := range ops {
			if k.d == d {
				streams = append(streams, k.s)
			}
		}
		sort.Ints(streams)
		for _, sn := range streams {
			var idx []int
			for o := range ops[ds{d, sn}] {
				idx = append(idx, o)
			}
			sort.Ints(idx)
			st := planStage{Device: d, Stream: sn}
			for _, o := range idx {
				st.Ops = append(st.Ops, w.Ops[o].Name)
			}
			out = append(out, st)
		}
	}
	return out
}

func printPlan(out io.Writer, r planReport, w *core.Workload, cl *sim.Cluster, schedTime time.Duration) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	p := r.Plan
	row("model / data", fmt.Sprintf("%s / %s (%d nodes, %d edges, %d ops)", r.Model, r.Data, w.Dims.Nodes, w.Dims.Edges, len(w.Ops)))
	row("cluster", r.Cluster)
	schedOpts := ""
	for _, k := range slices.Sorted(maps.Keys(r.SchedOpts)) {
		schedOpts += " " + k + "=" + r.SchedOpts[k]
	}
	if schedOpts != "" {
		schedOpts = "," + schedOpts
	}
	row("scheduler", fmt.Sprintf("%s%s (planned in %v)", r.Scheduler, schedOpts, schedTime.Round(time.Microsecond)))
	sizes := make([]int, len(p.Units))
	sub := 0
	for i, u := range p.Units {
		sizes[i] = len(u.Targets)
		if u.Subgraph {
			sub++
		}
	}
	sort.Ints(sizes)
	kind := "whole-graph"
	if sub == len(p.Units) {
		kind = "subgraph"
	} else if sub > 0 {
		kind = fmt.Sprintf("%d subgraph, %d whole-graph", sub, len(p.Units)-sub)
	}
	if len(sizes) > 0 {
		row("units", fmt.Sprintf("%d %s; targets per unit min %d, median %d, max %d", len(p.Units), kind, sizes[0], sizes[len(sizes)/2], sizes[len(sizes)-1]))
	}
	keys := make([]string, 0, len(p.Metrics))
	for k := range p.Metrics {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		row("  "+strings.ReplaceAll(k, "_", " "), metricText(k, p.Metrics[k]))
	}
	if r.PlannedOn != "" {
		row("  planned on", r.PlannedOn)
	}
	if alts := p.Alternatives; len(alts) > 1 {
		head := "the chosen plan, then the search's other simulated plans that fit, each lighter than every faster one"
		if p.Metrics["slack_chosen"] == 1 {
			head = "the chosen plan (the lightest within the slack), then the faster plans it passed over, then the lighter ones; each lighter than every faster one"
		}
		for _, a := range alts {
			if needsMore(a) {
				head += "; needs: the --device-mem a search must allow to keep it, where its estimate's worst case is above the simulated peak"
				break
			}
		}
		row("alternatives", head)
		shown := map[string]int{} // rows whose peaks print alike get their bytes
		for _, a := range alts {
			shown[core.FormatBytes(a.PeakBytes)]++
		}
		for _, a := range alts {
			d := a.Description
			if a.Chosen {
				d += " (chosen)"
			}
			if needsMore(a) {
				d += ", needs " + core.FormatBytes(core.RoundUpShownBytes(a.NeedBytes))
			}
			pk := core.FormatBytes(a.PeakBytes)
			if shown[pk] > 1 {
				pk = fmt.Sprintf("%s (%d B)", pk, a.PeakBytes)
			}
			row(fmt.Sprintf("  %.4g ms, %s", a.IterationMs, pk), d)
		}
	}
	if len(r.StageDAG) > 0 {
		printStageDAG(row, r, w)
	}
	row("tasks", fmt.Sprint(len(p.Tasks)))
	for _, s := range r.Streams {
		if len(r.StageDAG) > 0 {
			break // the schedule above lists every stream
		}
		var parts []string
		for _, c := range []struct {
			n    int
			name string
		}{{s.Forward, "forward"}, {s.Backward, "backward"}, {s.Reduce, "reduce"}, {s.Step, "step"}} {
			if c.n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", c.n, c.name))
			}
		}
		row(fmt.Sprintf("  %s stream %d", s.Device, s.Stream), strings.Join(parts, ", "))
	}
	if len(r.Stages) > 0 && len(r.StageDAG) == 0 {
		nd := map[core.DeviceID]bool{}
		for _, st := range r.Stages {
			nd[st.Device] = true
		}
		head := fmt.Sprintf("%d devices hold parts of a unit", len(nd))
		if len(nd) < len(r.Stages) {
			head += fmt.Sprintf(" (%d stage replicas: some devices run several stages, each on its own stream)", len(r.Stages))
		}
		row("stages", head)
		if r.NoStageDAG != "" {
			row("  no stage DAG", r.NoStageDAG)
		}
		for _, st := range r.Stages {
			k := "  " + string(st.Device)
			if len(nd) < len(r.Stages) {
				k += fmt.Sprintf(" stream %d", st.Stream)
			}
			row(k, strings.Join(st.Ops, " "))
		}
	}
	if len(r.Owners) > 0 {
		row("optimizer", fmt.Sprintf("each parameter stepped on its owner (%d devices)", len(r.Owners)))
		for _, o := range r.Owners {
			row("  "+string(o.Device), fmt.Sprintf("%d parameters, %s", o.Params, core.FormatBytes(o.Bytes)))
		}
	} else {
		row("optimizer", "stepped on home "+string(p.Home))
	}
	devs := naturalDevices(p.Devices())
	for _, d := range devs {
		if est, ok := p.MemEstimate[d]; ok {
			row("predicted peak (scheduler) "+string(d), core.FormatBytes(est))
		}
	}
	if s := r.Sim; s != nil {
		row("simulated with", r.Profile)
		row("iteration time", fmt.Sprintf("%.3f ms", float64(s.Iteration)/1e6))
		row("bubble fraction", fmt.Sprintf("%.3f", s.Bubble))
		if b := r.Bound; b != nil {
			over := fmt.Sprintf("the %d devices", b.Devices)
			if b.SpreadOver < float64(b.Devices) {
				over = fmt.Sprintf("the %g host cores the %d devices share", b.SpreadOver, b.Devices)
			}
			why := fmt.Sprintf("every op of the %s at its cheapest device's cost, and every optimizer step, spread evenly over %s", units(b.Units), over)
			switch {
			case b.PathNs > b.WorkNs && b.Units == 1:
				why = fmt.Sprintf("the unit's ops in dependency order: those every path crosses one after another, the others between them spread evenly over %s, forward and backward apart; more than its work spread evenly (%.3f ms); more, smaller micro-batches might overlap them", over, float64(b.WorkNs)/1e6)
			case b.PathNs > b.WorkNs:
				why = fmt.Sprintf("one unit's longest path of ops, forward and back, at their cheapest devices' cost; more than the work spread evenly over %s (%.3f ms), so more devices cannot make these units faster; more, smaller micro-batches might", over, float64(b.WorkNs)/1e6)
			}
			row("compute bound", fmt.Sprintf("%.3f ms: the iteration is %.3fx it (%s; no plan running these units simulates faster)", float64(b.Ns)/1e6, b.Ratio, why))
		} else if r.NoBound != "" {
			row("compute bound", "none: "+r.NoBound)
		}
		row("bytes moved", core.FormatBytes(s.BytesMoved))
		for _, d := range devs {
			v := fmt.Sprintf("busy %.3f ms, comm %.3f ms, peak %s", float64(s.Busy[d])/1e6, float64(s.Comm[d])/1e6, core.FormatBytes(s.PeakMem[d]))
			if m, ok := cl.Device(d); ok && m.MemBytes > 0 {
				v += fmt.Sprintf(" of %s", core.FormatBytes(m.MemBytes))
			}
			if slices.Contains(s.OverCap, d) {
				v += " (OVER CAPACITY)"
			}
			row("  "+string(d), v)
		}
		if len(r.Stages) > 0 {
			stages := slices.Clone(s.Stages)
			sort.SliceStable(stages, func(i, j int) bool { return deviceLess(stages[i].Device, stages[j].Device) })
			for _, st := range stages {
				row(fmt.Sprintf("  stage %s ops %s", st.Device, compactOps(st.Ops)), fmt.Sprintf("%s, at most %d in flight", units(st.Units), st.MaxInFlight))
			}
		}
		if r.Trace != "" {
			row("trace", r.Trace+" (open in ui.perfetto.dev or chrome://tracing)")
		} else {
			row("trace", "not written (--trace FILE writes the simulated schedule for ui.perfetto.dev)")
		}
	}
	for _, n := range r.Notes {
		row("note", n)
	}
	tw.Flush()
}

// printStageDAG prints the stage DAG and every stream's schedule.
func printStageDAG(row func(k, v string), r planReport, w *core.Workload) {
	depth := 0
	for _, st := range r.StageDAG {
		depth = max(depth, st.Depth)
	}
	head := fmt.Sprintf("%d stages, depth %d (k: stages on the longest path to a sink, 1F1B's in-flight bound)", len(r.StageDAG), depth)
	hosts := map[core.DeviceID]int{}
	for _, st := range r.StageDAG {
		for _, rp := range st.Replicas {
			hosts[rp.Device]++
		}
	}
	for _, n := range hosts {
		if n > 1 {
			head += "; some devices run several stages, each on its own stream"
			if r.Plan != nil && len(r.Plan.Exclusive) > 0 {
				head += ", one task at a time"
			}
			if r.Plan != nil && slices.ContainsFunc(r.Plan.Tasks, func(t core.Task) bool { return t.Priority != 0 }) {
				head += ", the stage nearer the sink first when both are ready"
			}
			break
		}
	}
	row("stage DAG", head)
	for i, st := range r.StageDAG {
		row("  "+stageEdges(i, st), fmt.Sprintf("%s · %s · %s · k %d", replicasString(st.Replicas), opsString(st.Ops, w), units(st.Units), st.Depth))
	}
	row("schedule", "per device stream in plan order: F/B = forward/backward of micro-batch N; a-b, a,b…c = runs; (n×) = n alternating pairs")
	for _, s := range scheduleOf(r.Plan, r.StageDAG) {
		k := fmt.Sprintf("  %s stream %d", s.Device, s.Stream)
		v := s.Tasks
		if s.Stage >= 0 {
			v = fmt.Sprintf("s%d: %s", s.Stage, v)
		}
		row(k, v)
	}
}

// compactOps writes ascending op indices as runs: 0-8,36-44.
func compactOps(ops []int) string {
	if len(ops) == 0 {
		return "-"
	}
	var b strings.Builder
	for i := 0; i < len(ops); {
		j := i
		for j+1 < len(ops) && ops[j+1] == ops[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteByte(',')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", ops[i], ops[j])
		} else {
			fmt.Fprintf(&b, "%d", ops[i])
		}
		i = j + 1
	}
	return b.String()
}

// deviceLess orders device ids by backend, then index (cuda:2 before
// cuda:10).
func deviceLess(a, b core.DeviceID) bool {
	ba, ia, ea := core.ParseDeviceID(string(a))
	bb, ib, eb := core.ParseDeviceID(string(b))
	if ea != nil || eb != nil || ba != bb {
		return a < b
	}
	return ia < ib
}

func naturalDevices(ids []core.DeviceID) []core.DeviceID {
	out := slices.Clone(ids)
	sort.SliceStable(out, func(i, j int) bool { return deviceLess(out[i], out[j]) })
	return out
}

// branchesFlag checks --branches: only the multi-branch models take it,
// and it must be positive when given. mbgnn's towers span 1..B hops, so
// its depth is its branch count and --layers is refused for it.
func branchesFlag(model string, n int, set, layersSet bool) (int, error) {
	if model == "mbgnn" && layersSet {
		return 0, fmt.Errorf("--layers does not apply to mbgnn: its towers span 1..B hops, so its depth is --branches")
	}
	if !set {
		return 0, nil
	}
	switch model {
	case "uno", "mbgnn", "dlrm":
	default:
		return 0, fmt.Errorf("--branches applies to the multi-branch models (uno, mbgnn, dlrm), not %s", model)
	}
	if n < 1 {
		return 0, fmt.Errorf("--branches must be positive, got %d", n)
	}
	most := maxBranches
	if model == "mbgnn" {
		most = maxTowers
	}
	if n > most {
		if model == "mbgnn" {
			return 0, fmt.Errorf("--branches %d: mbgnn takes at most %d towers (tower b is b hops deep, so B towers are B(B+1)/2 rounds of aggregation: %d at %d)", n, most, most*(most+1)/2, most)
		}
		return 0, fmt.Errorf("--branches %d: %s takes at most %d branches (each has parameters of its own, trained with their gradients and optimizer state: uno on Cora holds about 1.6 MB per branch)", n, model, most)
	}
	return n, nil
}

// maxBranches bounds --branches for uno and dlrm, and maxTowers for mbgnn,
// whose towers grow quadratically: past them the model is built op by op
// on the host (uno with 100000 branches held about 1.8 MB per branch until
// the machine's memory ran out), so a typo fails here instead.
const (
	maxBranches = 1024
	maxTowers   = 64
)

// tableRowsFlag checks --table-rows: only dlrm takes it, and it must be
// positive when given.
// gatOnlyFlags refuses gat's attention flags given for another model,
// which would ignore them (before, --heads 4 with gcn trained a gcn and
// said nothing). fl is the command's flags; plan has no --attn-dropout.
func gatOnlyFlags(fl interface{ Changed(string) bool }, model string) error {
	if model == "gat" {
		return nil
	}
	for _, name := range []string{"heads", "attn-dropout"} {
		if fl.Changed(name) {
			return fmt.Errorf("--%s applies to gat's attention, not %s (leave it out, or --model gat)", name, model)
		}
	}
	return nil
}

func tableRowsFlag(model string, n int, set bool) error {
	switch {
	case !set:
		return nil
	case model != "dlrm":
		return fmt.Errorf("--table-rows applies to dlrm's embedding tables, not %s", model)
	case n < 1:
		return fmt.Errorf("--table-rows must be positive, got %d", n)
	}
	return nil
}

// streamKey is one device stream of a plan.
type streamKey struct {
	d core.DeviceID
	s int
}

// sortStreams orders streams by device (cuda:2 before cuda:10), then
// stream number.
func sortStreams(ks []streamKey) {
	sort.Slice(ks, func(i, j int) bool {
		if ks[i].d != ks[j].d {
			return deviceLess(ks[i].d, ks[j].d)
		}
		return ks[i].s < ks[j].s
	})
}

// speedupNote warns when a profile taken on one kind of device prices a
// cluster of another at the profile's own speed (speedup 0 or 1): a
// profile measured on this CPU or PoCL says little about an A100 unless
// --speedup (or the cluster file's speedup) scales it.
func speedupNote(prof *sim.Profile, cl *sim.Cluster) []string {
	for _, d := range cl.Devices {
		if d.Name != prof.Device.Name && d.Speedup <= 1 && !strings.HasPrefix(string(d.ID), "cpu:") {
			return []string{fmt.Sprintf("ops are priced at the speed of the device profiled (%s, %s), not of %s: pass --speedup S (how many times faster %s runs them)",
				prof.Device.ID, prof.Device.Name, d.Name, d.Name)}
		}
	}
	return nil
}

// pipelineScheduler reports whether the named scheduler plans with op
// costs (and takes a profile): graphpipe, 1f1b, gpipe.
func pipelineScheduler(name string) bool {
	switch name {
	case "graphpipe", "1f1b", "gpipe":
		return true
	}
	return false
}

// maxReps bounds --reps: each size of each op is timed that many times.
const maxReps = 1000

// checkMeasureFlags refuses --measure and --measure-backend where they
// would do nothing or cannot work, before any data is loaded.
func checkMeasureFlags(f *planFlags, backendSet bool) error {
	if backendSet && !f.measure {
		return fmt.Errorf("--measure-backend %s: add --measure (it says where --measure profiles)", f.measureBackend)
	}
	if !f.measure {
		return nil
	}
	if f.reps < 1 || f.reps > maxReps {
		return fmt.Errorf("--reps %d: want from 1 to %d timed runs per profile size", f.reps, maxReps)
	}
	if !slices.Contains(core.Backends(), f.measureBackend) && !isWorkerBackend(f.measureBackend) {
		return fmt.Errorf("--measure-backend %q: want one of %s", f.measureBackend, strings.Join(backendNames(), ", "))
	}
	if !f.simulate && !pipelineScheduler(f.scheduler) {
		return fmt.Errorf("--measure with scheduler %s profiles for the simulation: add --simulate (graphpipe, 1f1b and gpipe also plan with the profile)", f.scheduler)
	}
	return nil
}

// checkProfileFlags refuses the flags that act on measured op costs
// when the plan has none, which would ignore them: --reps without
// --measure, and --speedup (it divides a profile's times) without
// --measure, --profile or --sched-opt profile=FILE, where the ops are
// priced on the devices' roofline (set their speeds in --cluster),
// unless --write-cluster keeps it in the cluster file for later.
func checkProfileFlags(f *planFlags, fl interface{ Changed(string) bool }) error {
	if f.speedup != 0 && !(f.speedup >= sim.MinSpeedup && f.speedup <= sim.MaxSpeedup) {
		return fmt.Errorf("--speedup %g: want a factor from %g to %g (or 0: none)", f.speedup, sim.MinSpeedup, sim.MaxSpeedup)
	}
	if fl.Changed("reps") && !f.measure {
		return fmt.Errorf("--reps %d: it sets --measure's timed runs; add --measure, or leave --reps out", f.reps)
	}
	if !fl.Changed("speedup") || f.speedup == 0 || f.measure || f.profile != "" || f.writeCluster != "" {
		return nil // none asked, a profile to divide, or a cluster file to keep it for
	}
	if opts, err := parseSchedOpts(f.schedOpts); err != nil || opts["profile"] != "" {
		return nil // a profile after all, or an error reported where the options are read
	}
	return fmt.Errorf("--speedup %g divides a profile's measured times, and this plan has none: its ops are priced on the devices' roofline (GFLOP/s and bandwidth: set them with --cluster). Add --measure or --profile FILE, or leave --speedup out", f.speedup)
}

// metricText is a plan metric as plan prints it: bytes in their unit
// (a key ending _bytes), counts in full (--sched-opt m=12345 printed
// 1.234e+04), the rest to 4 significant digits.
func metricText(key string, v float64) string {
	switch {
	case strings.HasSuffix(key, "_bytes") && v >= 0 && v < math.MaxInt64:
		return core.FormatBytes(int64(v))
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return fmt.Sprintf("%.4g", v)
}

// measuredOn names where a profile was measured.
func measuredOn(prof *sim.Profile) string {
	return fmt.Sprintf("measured on %s (%s)", prof.Device.ID, prof.Device.Name)
}

// writeProfile writes prof to path atomically.
func writeProfile(path string, prof *sim.Profile) error {
	if err := atomicfile.Write(path, func(w io.Writer) error { return sim.WriteProfile(w, prof) }); err != nil {
		return fmt.Errorf("writing the profile: %w", err)
	}
	return nil
}

// errBothCosts refuses --measure beside a profile file given to the
// scheduler: both would give the op costs.
func errBothCosts(file string) error {
	return fmt.Errorf("--measure and --sched-opt profile=%s both give the op costs; drop one", file)
}

// needsMore reports whether alternative a needs more memory to be kept
// by a search than its simulated peak shows (core.Alternative.NeedBytes),
// by more than the rounding of the figures printed.
func needsMore(a core.Alternative) bool {
	return a.NeedBytes > a.PeakBytes && core.FormatBytes(core.RoundUpShownBytes(a.NeedBytes)) != core.FormatBytes(core.RoundUpShownBytes(a.PeakBytes))
}

// givenProfile is the profile a plan is simulated with unless it is
// measured after planning: the costs the planner measured, --profile's
// file, or nil (the roofline), and how the report names it.
func givenProfile(f *planFlags, planned *plannerCosts, cl *sim.Cluster) (*sim.Profile, string, error) {
	switch {
	case planned != nil:
		return planned.prof, measuredOn(planned.prof) + " before planning", nil
	case f.profile != "":
		prof, err := readProfileFile(f.profile)
		return prof, f.profile, err
	}
	return nil, "roofline model of " + cl.Devices[0].Name, nil
}

// readProfileFile reads --profile's file.
func readProfileFile(path string) (*sim.Profile, error) {
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("--profile %s does not exist (add --measure to measure and write it)", path)
	} else if err != nil {
		return nil, err
	}
	defer fh.Close()
	prof, err := sim.ReadProfile(fh)
	if err != nil {
		return nil, fmt.Errorf("--profile %s: %w", path, err)
	}
	return prof, nil
}

// checkSweepFlags refuses what does not go with --mem-sweep (or
// --sweep-plot without it), before any work.
func checkSweepFlags(f *planFlags) error {
	if f.memSweep == "" {
		if f.sweepPlot != "" {
			return fmt.Errorf("--sweep-plot needs --mem-sweep")
		}
		return nil
	}
	if _, err := parseMemSweep(f.memSweep); err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		set  bool
		why  string
	}{
		{"device-mem", f.deviceMem != "", "the sweep sets every device's memory to each cap in turn"},
		{"trace", f.trace != "", "one trace per cap is not written; plan at one cap with --device-mem for its trace"},
		{"dot", f.dot != "", "plan at one cap with --device-mem for its stage DAG"},
		{"write-cluster", f.writeCluster != "", "the cluster's memory changes with every cap"},
		{"measure", f.measure && !pipelineScheduler(f.scheduler), "only graphpipe, 1f1b and gpipe plan on measured costs, taken once; for " + f.scheduler + " measure a profile first (--measure --profile FILE) and sweep with --profile FILE"},
	} {
		if c.set {
			return fmt.Errorf("--%s does not go with --mem-sweep: %s", c.name, c.why)
		}
	}
	return nil
}
