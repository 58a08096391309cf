package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/plugins/host"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
)

// Options configure Run.
type Options struct {
	// Out is the results file. If it exists it must be a valid results
	// file of the same suite made on this machine: its finished cells are
	// kept and not run again.
	Out string
	// Label names the machine in reports (default: the host name).
	Label string
	// Only, if set, runs just the cells whose ID contains it; the others
	// are left for a later run.
	Only string
	// Progress is called before each cell (r nil) and after it.
	Progress func(Event)
	// Machine, if set, replaces the fingerprint (tests).
	Machine *Machine
}

// Event reports progress: cell Index of Total is starting (Result nil)
// or has finished (Result set; Resumed when it came from the file).
// Retried says that the file held an unfinished result for the cell (it
// failed, or its plugin did not launch) that this run replaces.
type Event struct {
	Index, Total int
	Cell         Cell
	Result       *Result
	Resumed      bool
	Retried      bool
}

// Run runs the suite's cells that Out does not already hold, writing Out
// after every cell. Cancelling ctx stops at the running cell, which is
// not recorded; the next Run continues from there.
func Run(ctx context.Context, s *Suite, o Options) (*File, error) {
	if o.Out == "" {
		return nil, errors.New("bench: no results file (Out)")
	}
	cells := s.Cells()
	if err := checkOnly(s, cells, o.Only); err != nil {
		return nil, err
	}
	for _, c := range cells {
		if strings.HasPrefix(c.Scheduler, "plugin:") && (o.Only == "" || strings.Contains(c.ID(), o.Only)) {
			if err := host.EnvTimeouts(); err != nil {
				return nil, fmt.Errorf("bench: %w", err)
			}
			break
		}
	}
	m := o.Machine
	if m == nil {
		fp := Fingerprint(ctx)
		m = &fp
	}
	ref := SuiteRef{Name: s.Name, Version: s.Version, Digest: s.Digest()}
	f, err := resume(o.Out, ref, *m)
	if err != nil {
		return nil, err
	}
	if f == nil {
		f = &File{Schema: Schema, Suite: ref, Machine: *m, Started: time.Now().UTC()}
	}
	if o.Label != "" {
		f.Label = o.Label
	}
	if f.Label == "" {
		f.Label = m.Label()
	}
	done := map[string]int{}
	for i, r := range f.Cells {
		done[r.ID] = i
	}
	for i, c := range cells {
		ev := Event{Index: i, Total: len(cells), Cell: c}
		if j, ok := done[c.ID()]; ok {
			if f.Cells[j].Finished() {
				if o.Progress != nil {
					ev.Result, ev.Resumed = &f.Cells[j], true
					o.Progress(ev)
				}
				continue
			}
			ev.Retried = true
		}
		if o.Only != "" && !strings.Contains(c.ID(), o.Only) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return f, err
		}
		if o.Progress != nil {
			o.Progress(ev)
		}
		r := RunCell(ctx, c)
		if ctx.Err() != nil {
			// Interrupted: the cell's numbers (or error) mean nothing.
			return f, ctx.Err()
		}
		if j, ok := done[r.ID]; ok {
			f.Cells[j] = *r
		} else {
			done[r.ID] = len(f.Cells)
			f.Cells = append(f.Cells, *r)
		}
		f.Updated = time.Now().UTC()
		if err := f.Write(o.Out); err != nil {
			return f, err
		}
		if o.Progress != nil {
			ev.Result = r
			o.Progress(ev)
		}
	}
	return f, nil
}

// checkOnly refuses an Only pattern that matches none of the suite's
// cells: such a run would do nothing and look like it succeeded.
func checkOnly(s *Suite, cells []Cell, only string) error {
	if only == "" {
		return nil
	}
	ids := make([]string, len(cells))
	for i, c := range cells {
		if strings.Contains(c.ID(), only) {
			return nil
		}
		ids[i] = c.ID()
	}
	return fmt.Errorf("bench: --only %q matches none of suite %s's %d cells; give part of a cell id (e.g. backend=cpu, scheduler=sequential, devices=2). The cells: %s",
		only, s.Name, len(cells), strings.Join(ids, ", "))
}

// resume reads an existing results file at path (nil if there is none)
// and checks that it belongs to this suite and machine.
func resume(path string, ref SuiteRef, m Machine) (*File, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	f, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	if f.Suite.Name != ref.Name || f.Suite.Version != ref.Version {
		return nil, fmt.Errorf("bench: %s holds suite %s v%d, not %s v%d; use another --out", path, f.Suite.Name, f.Suite.Version, ref.Name, ref.Version)
	}
	if f.Suite.Digest != ref.Digest {
		return nil, fmt.Errorf("bench: %s was made with a different definition of suite %s v%d (digest %s, now %s): bump the suite's version or use another --out",
			path, ref.Name, ref.Version, f.Suite.Digest, ref.Digest)
	}
	if f.Machine.Host != m.Host || f.Machine.CPU != m.CPU || f.Machine.LogicalCores != m.LogicalCores {
		return nil, fmt.Errorf("bench: %s was made on %s (%s, %d cores), not this machine (%s, %s, %d cores); use another --out",
			path, f.Machine.Host, f.Machine.CPU, f.Machine.LogicalCores, m.Host, m.CPU, m.LogicalCores)
	}
	return f, nil
}

// hyper are per-model training settings (the CLI's defaults: the
// reference settings of each model's paper or PyG example).
type hyper struct {
	hidden, heads, branches int
	lr, wd, drop, attn      float64
}

var modelHyper = map[string]hyper{
	"gcn":   {hidden: 16, lr: 0.01, wd: 5e-4, drop: 0.5},
	"sage":  {hidden: 16, lr: 0.01, wd: 5e-4, drop: 0.5},
	"gat":   {hidden: 8, heads: 8, lr: 0.005, wd: 5e-4, drop: 0.6, attn: 0.6},
	"mbgnn": {hidden: 16, lr: 0.01, wd: 5e-4, drop: 0.5},
	"uno":   {hidden: 16, lr: 0.01, wd: 5e-4}, // no dropout, as train (cmd/gnnkit modelDefaults)
	"dlrm":  {hidden: 16, lr: 0.01, wd: 5e-4}, // likewise
}

// dynamicOnly explains cells that belong to other training paths.
var dynamicOnly = map[string]string{
	"blad":      "blad schedules dynamic graphs only (gnnkit train-dynamic, engine/dyntrain); not part of static suites",
	"esdg":      "esdg schedules dynamic graphs only (gnnkit train-dynamic, engine/dyntrain); not part of static suites",
	"tgcn":      "tgcn is a dynamic-graph model (gnnkit train-dynamic); not part of static suites",
	"evolvegcn": "evolvegcn is a dynamic-graph model (gnnkit train-dynamic); not part of static suites",
}

// datasets caches opened datasets: a suite reuses a few many times.
var datasets = map[string]*data.Dataset{}

func openDataset(spec string) (*data.Dataset, error) {
	if ds, ok := datasets[spec]; ok {
		return ds, nil
	}
	ds, err := data.Open(spec)
	if err != nil {
		return nil, err
	}
	datasets[spec] = ds
	return ds, nil
}

// RunCell trains one cell. It never returns nil: cells that cannot run
// here are StatusSkipped with the reason, errors StatusFailed.
func RunCell(ctx context.Context, c Cell) *Result {
	t0 := time.Now()
	r := &Result{ID: c.ID(), Cell: c, At: t0.UTC()}
	skip := func(format string, args ...any) *Result {
		r.Status, r.Reason = StatusSkipped, fmt.Sprintf(format, args...)
		r.WallS = time.Since(t0).Seconds()
		return r
	}
	fail := func(err error) *Result {
		r.Status, r.Reason = StatusFailed, err.Error()
		r.WallS = time.Since(t0).Seconds()
		return r
	}
	if why, ok := dynamicOnly[c.Scheduler]; ok {
		return skip("%s", why)
	}
	if why, ok := dynamicOnly[c.Model]; ok {
		return skip("%s", why)
	}
	if c.Scheduler == "cherry" && c.DeviceMem == "" {
		return skip("cherry needs a device memory cap to micro-batch against (set device_mem)")
	}
	if slices.Contains(graphpipe.Names(), c.Scheduler) && c.Devices < 2 {
		return skip("%s pipelines across several devices; a 1-device cell is sequential's", c.Scheduler)
	}
	h, ok := modelHyper[c.Model]
	if !ok {
		h = modelHyper["gcn"]
	}
	ds, err := openDataset(c.Dataset)
	if err != nil {
		return fail(err)
	}
	if ds.Graph == nil || ds.FeatureDim == 0 || len(ds.Labels) == 0 || len(ds.Train) == 0 {
		return skip("dataset %s has no features, labels or training split: static suites train node classification", ds.Name)
	}
	var memCap int64
	if c.DeviceMem != "" {
		if memCap, err = core.ParseBytes(c.DeviceMem); err != nil {
			return fail(fmt.Errorf("device_mem: %w", err))
		}
	}
	be, err := core.OpenBackend(c.Backend, core.BackendOptions{Devices: c.Devices, MemCap: memCap})
	if err != nil {
		if errors.Is(err, core.ErrUnknownBackend) || errors.Is(err, core.ErrNotBuilt) || errors.Is(err, core.ErrUnsupported) || c.Backend != "cpu" {
			return skip("backend %s unavailable: %v", c.Backend, err)
		}
		return fail(err)
	}
	defer be.Close()
	all := be.Devices()
	if len(all) < c.Devices {
		return skip("backend %s offers %d device(s), the cell needs %d", c.Backend, len(all), c.Devices)
	}
	devs := all[:c.Devices]
	infos := make([]core.DeviceInfo, len(devs))
	for i, d := range devs {
		infos[i] = d.Info()
	}
	sched, closer, err := resolveScheduler(ctx, c.Scheduler, c.SchedOpts)
	if err != nil {
		if strings.HasPrefix(c.Scheduler, "plugin:") {
			// Not Finished: the next run tries again (the plugin may be
			// built by then).
			return skip("%s%v", ReasonPluginLaunch, err)
		}
		if errors.Is(err, core.ErrUnknownScheduler) {
			return skip("%v", err)
		}
		return fail(err)
	}
	defer closer.Close()
	model, err := core.BuildModel(c.Model, core.ModelConfig{InDim: ds.FeatureDim, Hidden: h.hidden, Classes: ds.NumClasses,
		Layers: 2, Heads: h.heads, Branches: h.branches, Dropout: float32(h.drop), AttnDropout: float32(h.attn)})
	if err != nil {
		if errors.Is(err, core.ErrUnknownModel) {
			return skip("%v", err)
		}
		return fail(err)
	}
	tr, err := engine.New(engine.Config{Model: model, Devices: devs, Seed: c.Seed,
		Data:      engine.Data{Graph: ds.Graph, Features: ds.RowNormalizedFeatures(), FeatureDim: ds.FeatureDim, Labels: ds.Labels},
		Optimizer: engine.Optimizer{Kind: "adam", LR: float32(h.lr), WeightDecay: float32(h.wd)}})
	if err != nil {
		return classify(r, t0, err, c)
	}
	defer tr.Close()
	runtime.GC() // the previous cell's garbage should not land on this one's clock
	sum, err := engine.Train(ctx, tr, infos, engine.TrainOptions{Epochs: c.Warmup + c.Epochs, Scheduler: sched,
		Train: ds.Train, Val: ds.Val, Test: ds.Test, Trace: true})
	if err != nil {
		return classify(r, t0, err, c)
	}
	fill(r, sum, c, ds, len(devs))
	r.Status = StatusOK
	r.WallS = time.Since(t0).Seconds()
	return r
}

// classify turns a training error into a skip (the cell asks for
// something this backend or scheduler does not do, or does not fit the
// memory cap) or a failure.
func classify(r *Result, t0 time.Time, err error, c Cell) *Result {
	r.WallS = time.Since(t0).Seconds()
	switch {
	case errors.Is(err, core.ErrUnsupported), errors.Is(err, core.ErrNotBuilt):
		r.Status, r.Reason = StatusSkipped, "unsupported: "+err.Error()
	case errors.Is(err, core.ErrOutOfMemory):
		r.Status, r.Reason = StatusSkipped, fmt.Sprintf("does not fit the %s cap (the memory wall): %v", c.DeviceMem, err)
	default:
		r.Status, r.Reason = StatusFailed, err.Error()
	}
	return r
}

// fill copies a training summary into r, dropping the warm-up epochs.
func fill(r *Result, sum *engine.Summary, c Cell, ds *data.Dataset, ndev int) {
	r.EpochMs = append([]float64(nil), sum.EpochMs[c.Warmup:]...)
	st := stats(r.EpochMs)
	r.EpochMsMedian, r.EpochMsP10, r.EpochMsP90, r.EpochMsMin, r.EpochMsMax = st.median, st.p10, st.p90, st.min, st.max
	r.Nodes, r.Edges, r.TrainNodes = ds.NumNodes, int64(ds.Graph.NumEdges()), len(ds.Train)
	if st.median > 0 {
		r.EdgesPerS = float64(r.Edges) / (st.median / 1e3)
		r.SamplesPerS = float64(r.TrainNodes) / (st.median / 1e3)
	}
	r.PeakMem, r.PredictedPeak = map[string]int64{}, map[string]int64{}
	for d, v := range sum.PeakMem {
		r.PeakMem[string(d)] = v
	}
	for d, v := range sum.PredictedPeak {
		r.PredictedPeak[string(d)] = v
	}
	if len(r.PredictedPeak) == 0 {
		r.PredictedPeak = nil
	}
	r.FinalLoss, r.TrainAcc, r.ValAcc, r.TestAcc = sum.FinalLoss, sum.TrainAcc, sum.ValAcc, sum.TestAcc
	r.Iterations, r.Units = sum.Iterations, sum.Units
	r.Metrics = map[string]float64{}
	for k, v := range sum.Metrics {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			r.Metrics[k] = v
		}
	}
	if sum.Trace != nil {
		bubble, imb := busyStats(sum.Trace, sum.EpochMs, ndev)
		r.Metrics["bubble"], r.Metrics["imbalance"] = bubble, imb
	}
}

// busyStats measures, over all epochs' training (evaluation excluded),
// the bubble fraction 1 - Σ busy / (devices × training time) and the
// imbalance max busy / mean busy - 1.
func busyStats(t *core.Trace, epochMs []float64, ndev int) (bubble, imbalance float64) {
	busy := map[core.DeviceID]time.Duration{}
	for _, e := range t.Events {
		if e.Cat == "eval" {
			continue
		}
		busy[e.Device] += e.Dur
	}
	var total float64
	for _, ms := range epochMs {
		total += ms
	}
	var sum, hi float64
	for _, b := range busy {
		sum += b.Seconds() * 1e3
		hi = max(hi, b.Seconds()*1e3)
	}
	if total > 0 && ndev > 0 {
		bubble = math.Max(0, 1-sum/(float64(ndev)*total))
	}
	if mean := sum / float64(max(ndev, 1)); mean > 0 {
		imbalance = hi/mean - 1
	}
	return bubble, imbalance
}

// resolveScheduler makes a registered scheduler or launches
// "plugin:PATH[@sha256:HEX]" / "plugin:NAME" (from the plugin folder) the
// way the CLI's --scheduler does. The closer is never nil on success.
func resolveScheduler(ctx context.Context, name string, opts map[string]string) (core.Scheduler, io.Closer, error) {
	spec, ok := strings.CutPrefix(name, "plugin:")
	if !ok {
		s, err := core.NewScheduler(name, opts)
		if err != nil {
			return nil, nil, err
		}
		return s, nopCloser{}, nil
	}
	path, o, err := host.ResolveSpec(spec, opts, host.Dir)
	if err != nil {
		return nil, nil, err
	}
	return host.Launch(ctx, path, o) // o.StartTimeout: $GNNKIT_PLUGIN_START_TIMEOUT, or host's default
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
