// Command bladbench compares BLAD with the equal-count snapshot partition
// (ESDG) and the vertex partition on skewed dynamic graphs (issue 6).
//
// Measured: epoch time on 2 real logical CPU devices of this machine (1
// thread each), the schedulers' epochs interleaved round by round (A B C …
// A B C …, the order rotating each round) so that machine noise hits all
// alike; medians, per-round paired ratios, the devices' busy-time
// imbalance (max/mean − 1) and the overlap achieved (the share of busy
// time during which two task spans of one device ran at once, from the
// executor's trace), with unpinned and pinned threads.
//
// Simulated (package sim, the one simulator): each scheduler's plan
// replayed on the "cpu" preset (to check the simulator against the
// measurement) and on 4 and 8 devices of a GPU preset, with per-group,
// per-op costs profiled on this machine (every op of every group, timed
// from the executor's op trace, interleaved with the measurement) or from
// the preset's roofline.
//
// Usage:
//
//	go run ./bench/bladbench                 # the bench/RESULTS.md run
//	go run ./bench/bladbench -rounds 9 -pin both -json out.json
//	go run ./bench/bladbench -data synthetic:dsbm,nodes=4000,trend=bitcoin
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/gnnkit/gnnkit/internal/atomicfile"
	"github.com/gnnkit/gnnkit/internal/stats"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/cpuid/v2"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data"
	"github.com/gnnkit/gnnkit/data/dynamic"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/engine/dyntrain"
	"github.com/gnnkit/gnnkit/schedulers/blad"
	"github.com/gnnkit/gnnkit/sim"
)

// config is one benchmark run.
type config struct {
	Data       string  `json:"data"`
	Model      string  `json:"model"`
	Window     int     `json:"window"`
	Hidden     int     `json:"hidden"`
	StepGroups int     `json:"step_groups"`
	Rounds     int     `json:"rounds"`
	Warmup     int     `json:"warmup"`
	Pin        string  `json:"pin"` // off, on, both
	Schedulers string  `json:"schedulers"`
	GPUs       string  `json:"gpus"`
	Preset     string  `json:"preset"`
	Overlap    float64 `json:"stream_overlap"`
	Seed       uint64  `json:"seed"`
	SimData    string  `json:"sim_data,omitempty"`
}

func main() {
	var c config
	flag.StringVar(&c.Data, "data", "synthetic:dsbm,nodes=20000,snapshots=40,edges=150,skew=50,trend=grow", "dynamic dataset (as train-dynamic --data)")
	flag.StringVar(&c.Model, "model", "tgcn", "model: tgcn or evolvegcn (vertexpart: tgcn only)")
	flag.IntVar(&c.Window, "window", 5, "BPTT window")
	flag.IntVar(&c.Hidden, "hidden", 32, "hidden width")
	flag.IntVar(&c.StepGroups, "step-groups", 0, "groups per iteration (0: all training groups, one step per epoch)")
	flag.IntVar(&c.Rounds, "rounds", 7, "measured rounds (one epoch of each scheduler per round)")
	flag.IntVar(&c.Warmup, "warmup", 2, "warm-up rounds first (BLAD adapts in them)")
	flag.StringVar(&c.Pin, "pin", "both", "CPU thread pinning: off, on or both")
	flag.StringVar(&c.Schedulers, "schedulers", "esdg,blad-1stream,blad,vertexpart", "schedulers to compare (esdg first: the baseline)")
	flag.StringVar(&c.GPUs, "gpus", "4,8", "simulated device counts")
	flag.StringVar(&c.Preset, "preset", "nvlink-h100", "simulated GPU cluster preset")
	flag.Float64Var(&c.Overlap, "stream-overlap", 0.5, "simulated GPUs' StreamOverlap for BLAD's two streams (an assumption; 0 also reported)")
	flag.Uint64Var(&c.Seed, "seed", 1, "seed")
	flag.StringVar(&c.SimData, "sim-data", "", "also simulate the GPUs (roofline costs) on this larger dynamic dataset")
	asJSON := flag.String("json", "", "also write the results as JSON to this file")
	flag.Parse()
	rep, err := run(context.Background(), c, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bladbench:", err)
		os.Exit(1)
	}
	rep.markdown(os.Stdout)
	if *asJSON != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := atomicfile.WriteBytes(*asJSON, append(b, '\n')); err != nil {
			fmt.Fprintln(os.Stderr, "bladbench:", err)
			os.Exit(1)
		}
	}
}

// report is everything a run found.
type report struct {
	Config   config       `json:"config"`
	Machine  string       `json:"machine"`
	Started  time.Time    `json:"started"`
	LoadAvg  [2]string    `json:"load_average"` // at start and end
	Data     dataSummary  `json:"data"`
	Measured []measured   `json:"measured"`
	Sim      []simulated  `json:"simulated"`
	Notes    []string     `json:"notes"`
	Profile  profileStats `json:"profile"`
}

type dataSummary struct {
	Name          string  `json:"name"`
	Snapshots     int     `json:"snapshots"`
	TrainGroups   int     `json:"train_groups"`
	SnapEdgesMin  int     `json:"snapshot_edges_min"`
	SnapEdgesMax  int     `json:"snapshot_edges_max"`
	GroupCostSkew float64 `json:"group_cost_max_over_min"`
	// The placement's imbalance of the estimated group costs.
	ESDGImbalance map[int]float64 `json:"esdg_estimated_imbalance"`
	LPTImbalance  map[int]float64 `json:"lpt_estimated_imbalance"`
}

// measured is one scheduler at one pinning on the real devices.
type measured struct {
	Scheduler string    `json:"scheduler"`
	Pinned    bool      `json:"pinned"`
	EpochMs   []float64 `json:"epoch_ms"`
	RunMs     []float64 `json:"run_ms"`
	Imbalance []float64 `json:"imbalance"`
	Overlap   []float64 `json:"overlap"`
	Loss      []float64 `json:"loss"`
	// Medians, and the median over rounds of this epoch / ESDG's epoch of
	// the same round.
	MedianMs, MedianRunMs, MedImbalance, MedOverlap, PairedRatio float64
	Replans                                                      int
	// SimMs is the simulated iteration time of the scheduler's last plan
	// on the measured machine model ("cpu" preset, HostCores measured).
	SimMs float64 `json:"sim_ms"`
}

// simulated is one scheduler on a simulated cluster.
type simulated struct {
	Data      string  `json:"data"`
	Groups    int     `json:"groups"`
	Cluster   string  `json:"cluster"`
	Devices   int     `json:"devices"`
	Costs     string  `json:"costs"` // "measured" or "roofline"
	Overlap   float64 `json:"stream_overlap"`
	Scheduler string  `json:"scheduler"`
	EpochMs   float64 `json:"epoch_ms"`
	Imbalance float64 `json:"imbalance"`
	// OverlapShare is the share of busy time two tasks of a device ran at
	// once (sim.Result.Overlap over Busy).
	OverlapShare float64 `json:"overlap"`
	Reduction    float64 `json:"reduction_vs_esdg"`
	Error        string  `json:"error,omitempty"`
}

type profileStats struct {
	Rounds    int     `json:"rounds"`
	HostCores float64 `json:"host_cores"`
	// GraphShare and HoistedShare are the shares of the measured op time
	// (all groups, forward and backward) in graph ops and in the ops BLAD's
	// topology manager hoists (what its two streams can overlap with the
	// rest).
	GraphShare, HoistedShare float64
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func loadSet(c config, spec string, negEval int) (*dynamic.Set, error) {
	var d *data.Dataset
	var err error
	if strings.HasPrefix(spec, "synthetic:dsbm") || spec == "dsbm" {
		spec, err := dynamic.ParseDSBM(spec)
		if err != nil {
			return nil, err
		}
		if d, err = dynamic.DSBM(spec); err != nil {
			return nil, err
		}
	} else if d, err = data.Open(spec); err != nil {
		return nil, err
	}
	if d.Kind != data.KindDynamic {
		return nil, fmt.Errorf("%s is not a dynamic dataset", spec)
	}
	sn, err := d.Snapshots(d.SnapshotSeconds)
	if err != nil {
		return nil, err
	}
	return dynamic.Build(sn, d.NumNodes, dynamic.Options{Window: c.Window, Seed: c.Seed, Features: d.Features, FeatureDim: d.FeatureDim, NegEval: negEval})
}

// variant is one scheduler of the comparison.
type variant struct {
	name  string
	parts bool // vertex partition: one part per device
	new   func() core.Scheduler
}

func variants(list string) ([]variant, error) {
	var out []variant
	for _, n := range strings.Split(list, ",") {
		switch n = strings.TrimSpace(n); n {
		case "esdg":
			out = append(out, variant{name: n, new: func() core.Scheduler { return &blad.ESDG{} }})
		case "blad":
			out = append(out, variant{name: n, new: func() core.Scheduler { return blad.New() }})
		case "blad-1stream":
			out = append(out, variant{name: n, new: func() core.Scheduler { s := blad.New(); s.Streams = 1; return s }})
		case "vertexpart":
			out = append(out, variant{name: n, parts: true, new: func() core.Scheduler { return blad.NewVertexPartition() }})
		default:
			return nil, fmt.Errorf("unknown scheduler %q (known: esdg, blad, blad-1stream, vertexpart)", n)
		}
	}
	if len(out) == 0 || out[0].name != "esdg" {
		return nil, fmt.Errorf("-schedulers must start with esdg (the baseline)")
	}
	return out, nil
}

func run(ctx context.Context, c config, log io.Writer) (*report, error) {
	rep := &report{Config: c, Machine: fmt.Sprintf("%s, %d logical CPUs, %s/%s, %s", strings.TrimSpace(cpuid.CPU.BrandName), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version()),
		Started: time.Now()}
	rep.LoadAvg[0] = loadAvg()
	vs, err := variants(c.Schedulers)
	if err != nil {
		return nil, err
	}
	set, err := loadSet(c, c.Data, 0)
	if err != nil {
		return nil, err
	}
	if c.Model != "tgcn" {
		var keep []variant
		for _, v := range vs {
			if !v.parts {
				keep = append(keep, v)
			}
		}
		vs = keep
	}
	summarise(rep, set, c)
	fmt.Fprintf(log, "bladbench: %s: %d training groups, group cost skew %.1fx\n", rep.Data.Name, rep.Data.TrainGroups, rep.Data.GroupCostSkew)
	pins := map[string][]bool{"off": {false}, "on": {true}, "both": {false, true}}[c.Pin]
	if pins == nil {
		return nil, fmt.Errorf("-pin %q: want off, on or both", c.Pin)
	}
	var prof *groupProfile
	for _, pin := range pins {
		ms, p, err := measure(ctx, c, set, vs, pin, log)
		if err != nil {
			return nil, err
		}
		rep.Measured = append(rep.Measured, ms...)
		if prof == nil || !pin {
			prof = p
		}
	}
	rep.Profile = profileStats{Rounds: prof.rounds, HostCores: prof.hostCores}
	rep.Profile.GraphShare, rep.Profile.HoistedShare = prof.shares()
	rep.Sim, err = simulate(ctx, c, set, c.Data, vs, prof, true, log)
	if err != nil {
		return nil, err
	}
	if c.SimData != "" {
		// Only the training groups matter: one negative per evaluation pair
		// keeps building the set quick.
		big, err := loadSet(c, c.SimData, 1)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "bladbench: %s: %d training groups\n", c.SimData, len(big.Train))
		more, err := simulate(ctx, c, big, c.SimData, vs, prof, false, log)
		if err != nil {
			return nil, err
		}
		rep.Sim = append(rep.Sim, more...)
	}
	rep.LoadAvg[1] = loadAvg()
	return rep, nil
}

func summarise(rep *report, set *dynamic.Set, c config) {
	rep.Data = dataSummary{Name: c.Data, Snapshots: set.Snapshots, TrainGroups: len(set.Train),
		ESDGImbalance: map[int]float64{}, LPTImbalance: map[int]float64{}, SnapEdgesMin: math.MaxInt}
	var cost []float64
	lo, hi := math.Inf(1), 0.0
	for _, g := range set.Train {
		gc := dyntrain.Cost(g, set.FeatureDim, c.Hidden)
		x := gc.Graph + gc.Dense
		cost = append(cost, x)
		lo, hi = math.Min(lo, x), math.Max(hi, x)
		for _, s := range g.Snaps {
			rep.Data.SnapEdgesMin = min(rep.Data.SnapEdgesMin, s.NumEdges())
			rep.Data.SnapEdgesMax = max(rep.Data.SnapEdgesMax, s.NumEdges())
		}
	}
	rep.Data.GroupCostSkew = hi / lo
	for _, d := range []int{2, 4, 8} {
		loads := make([]float64, d)
		for i, x := range cost {
			loads[i*d/len(cost)] += x
		}
		rep.Data.ESDGImbalance[d] = blad.Imbalance(loads)
		loads = make([]float64, d)
		for k, gs := range blad.LPT(cost, d) {
			for _, g := range gs {
				loads[k] += cost[g]
			}
		}
		rep.Data.LPTImbalance[d] = blad.Imbalance(loads)
	}
}

// groupProfile is what the profiling epochs measured: per group (in
// set.Train order) and op, forward and backward times; per group the
// overhead outside the ops; the optimizer step; output bytes per op.
type groupProfile struct {
	set       *dynamic.Set
	parts     int
	model     *core.Model
	fwd, bwd  [][][]time.Duration // group, op, sample
	setF      [][]time.Duration
	setB      [][]time.Duration
	out       [][]int64
	steps     []time.Duration
	rounds    int
	hostCores float64
	cores     []float64
	info      core.DeviceInfo
	// The same for each vertex-partitioned model, by part count.
	vp map[int]*groupProfile
}

func newGroupProfile(set *dynamic.Set, parts int, m *core.Model, groups int, info core.DeviceInfo) *groupProfile {
	p := &groupProfile{set: set, parts: parts, model: m, info: info, vp: map[int]*groupProfile{}}
	n := len(m.Ops)
	p.fwd, p.bwd, p.out = make([][][]time.Duration, groups), make([][][]time.Duration, groups), make([][]int64, groups)
	p.setF, p.setB = make([][]time.Duration, groups), make([][]time.Duration, groups)
	for g := range groups {
		p.fwd[g], p.bwd[g], p.out[g] = make([][]time.Duration, n), make([][]time.Duration, n), make([]int64, n)
	}
	return p
}

// collect adds one single-device epoch's traces (units = groups in order).
func (p *groupProfile) collect(st dyntrain.EpochStats, plans []*core.Plan) {
	idx := map[string]int{}
	for i, op := range p.model.Ops {
		idx[op.Name()] = i
	}
	base := 0
	for k, tr := range st.Traces {
		units := plans[k].Units
		type acc struct{ task, ops [2]time.Duration }
		per := map[int]*acc{}
		get := func(u int) *acc {
			if per[u] == nil {
				per[u] = &acc{}
			}
			return per[u]
		}
		fwd, bwd := map[[2]int]time.Duration{}, map[[2]int]time.Duration{}
		for _, e := range tr.Events {
			switch e.Cat {
			case "op_forward":
				if i, ok := idx[e.Name]; ok && e.Unit >= 0 {
					fwd[[2]int{e.Unit, i}] += e.Dur
					get(e.Unit).ops[0] += e.Dur
					p.out[base+int(units[e.Unit].Targets[0])][i] = e.Bytes
				}
			case "op_backward":
				if i, ok := idx[e.Name]; ok && e.Unit >= 0 {
					bwd[[2]int{e.Unit, i}] += e.Dur
					get(e.Unit).ops[1] += e.Dur
				}
			case core.TaskForward.String():
				get(e.Unit).task[0] += e.Dur
			case core.TaskBackward.String():
				get(e.Unit).task[1] += e.Dur
			case "step":
				p.steps = append(p.steps, e.Dur)
			}
		}
		for u, un := range units {
			g := base + int(un.Targets[0])
			for i := range p.model.Ops {
				p.fwd[g][i] = append(p.fwd[g][i], fwd[[2]int{u, i}])
				p.bwd[g][i] = append(p.bwd[g][i], bwd[[2]int{u, i}])
			}
			a := get(u)
			p.setF[g] = append(p.setF[g], max(0, a.task[0]-a.ops[0]))
			p.setB[g] = append(p.setB[g], max(0, a.task[1]-a.ops[1]))
		}
		base += len(units)
	}
	p.rounds++
}

// simProfile turns the measurements into a sim.Profile: per op one point
// per distinct size of the groups (rows ascending; groups of the same rows
// averaged), so that looking a group's op up at its own size returns its
// measured median.
func (p *groupProfile) simProfile(shapes []sim.UnitShape) (*sim.Profile, error) {
	m := p.model
	deps := m.OpDeps()
	pr := &sim.Profile{Model: m.Name, Device: p.info, ParamBytes: m.ParamBytes(), OptStateBytes: 2 * m.ParamBytes(), Step: stats.Median(p.steps)}
	type pt struct {
		rows, edges int64
		f, b        time.Duration
		out         int64
	}
	points := func(get func(g int) pt) []sim.Point {
		var ps []pt
		for g := range shapes {
			ps = append(ps, get(g))
		}
		sort.SliceStable(ps, func(i, j int) bool { return ps[i].rows < ps[j].rows })
		var out []sim.Point
		for i := 0; i < len(ps); {
			j := i
			var e int64
			var f, b time.Duration
			var o int64
			for j < len(ps) && ps[j].rows == ps[i].rows {
				e += ps[j].edges
				f += ps[j].f
				b += ps[j].b
				o += ps[j].out
				j++
			}
			k := int64(j - i)
			out = append(out, sim.Point{Rows: max(ps[i].rows, 1), Edges: e / k, Fwd: f / time.Duration(k), Bwd: b / time.Duration(k), OutBytes: o / k})
			i = j
		}
		return out
	}
	for i, op := range m.Ops {
		o := sim.OpProfile{Name: op.Name(), Kind: op.Kind(), Preds: deps[i]}
		o.Points = points(func(g int) pt {
			d := shapes[g].Ops[i]
			return pt{d.Nodes, d.Edges, stats.Median(p.fwd[g][i]), stats.Median(p.bwd[g][i]), p.out[g][i]}
		})
		pr.Ops = append(pr.Ops, o)
	}
	pr.Setup = points(func(g int) pt {
		return pt{shapes[g].Setup.Nodes, shapes[g].Setup.Edges, stats.Median(p.setF[g]), stats.Median(p.setB[g]), 0}
	})
	return pr, pr.Validate()
}

// measure runs the interleaved epochs on 2 logical CPU devices.
func measure(ctx context.Context, c config, set *dynamic.Set, vs []variant, pin bool, log io.Writer) ([]measured, *groupProfile, error) {
	be, err := cpu.NewConfig(cpu.Config{BackendOptions: core.BackendOptions{Devices: 2, Threads: 1}, Pin: pin})
	if err != nil {
		return nil, nil, err
	}
	defer be.Close()
	devs := be.Devices()
	cfg := func(sched core.Scheduler, ds []core.Device, parts int, opTrace bool) dyntrain.Config {
		return dyntrain.Config{Set: set, Model: c.Model, Hidden: c.Hidden, Epochs: 1 << 20, LR: 0.01, Devices: ds,
			Scheduler: sched, StepGroups: c.StepGroups, Seed: c.Seed, OpTrace: opTrace, VertexParts: parts}
	}
	sessions := make([]*dyntrain.Session, len(vs))
	for i, v := range vs {
		parts := 0
		if v.parts {
			parts = len(devs)
		}
		if sessions[i], err = dyntrain.NewSession(cfg(v.new(), devs, parts, false)); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", v.name, err)
		}
		defer sessions[i].Close()
	}
	// The profile: ESDG's plan on one device (every group in turn, alone
	// on the machine's devices) with per-op tracing, once per round.
	profSess, err := dyntrain.NewSession(cfg(&blad.ESDG{}, devs[:1], 0, true))
	if err != nil {
		return nil, nil, err
	}
	defer profSess.Close()
	prof := newGroupProfile(set, 0, profSess.Model(), len(set.Train), devs[0].Info())
	// The vertex-partitioned models (one per part count: the measured
	// devices' and the simulated ones') are profiled the same way: all
	// parts on one device, in turn.
	vpSess := map[int]*dyntrain.Session{}
	if slices.ContainsFunc(vs, func(v variant) bool { return v.parts }) {
		counts, err := gpuCounts(c.GPUs)
		if err != nil {
			return nil, nil, err
		}
		for _, k := range append([]int{len(devs)}, counts...) {
			if vpSess[k] != nil {
				continue
			}
			s, err := dyntrain.NewSession(cfg(&blad.ESDG{}, devs[:1], k, true))
			if err != nil {
				return nil, nil, err
			}
			defer s.Close()
			vpSess[k] = s
			prof.vp[k] = newGroupProfile(set, k, s.Model(), len(set.Train), devs[0].Info())
		}
	}
	out := make([]measured, len(vs))
	for i, v := range vs {
		out[i] = measured{Scheduler: v.name, Pinned: pin}
	}
	for round := -c.Warmup; round < c.Rounds; round++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		times := make([]float64, len(vs))
		losses := make([]float64, len(vs))
		for k := range vs {
			i := (k + max(round, 0)) % len(vs) // rotate the order
			runtime.GC()
			st, err := sessions[i].Epoch(ctx)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", vs[i].name, err)
			}
			times[i], losses[i] = ms(st.Time), st.Loss
			if round >= 0 {
				m := &out[i]
				m.EpochMs = append(m.EpochMs, ms(st.Time))
				m.RunMs = append(m.RunMs, ms(st.Run))
				m.Imbalance = append(m.Imbalance, st.Imbalance)
				m.Overlap = append(m.Overlap, st.Overlap)
			}
			out[i].Loss = append(out[i].Loss, st.Loss)
		}
		for i := range vs {
			if d := math.Abs(losses[i]-losses[0]) / math.Max(math.Abs(losses[0]), 1e-30); d > 1e-5 {
				return nil, nil, fmt.Errorf("epoch %d: %s's loss %.9g differs from esdg's %.9g (rel %.2g): the schedulers must train identically", round+c.Warmup+1, vs[i].name, losses[i], losses[0], d)
			}
		}
		runtime.GC()
		st, err := profSess.Epoch(ctx)
		if err != nil {
			return nil, nil, err
		}
		if round >= 0 {
			prof.collect(st, profSess.Plans())
		}
		fmt.Fprintf(log, "bladbench: profile epoch (1 device, op trace) %.1f ms\n", ms(st.Time))
		for k, s := range vpSess {
			if k != len(devs) && round >= 2 {
				continue // the simulated part counts: 2 rounds
			}
			runtime.GC()
			st, err := s.Epoch(ctx)
			if err != nil {
				return nil, nil, err
			}
			if round >= 0 {
				prof.vp[k].collect(st, s.Plans())
			}
		}
		if round >= 0 {
			hc, err := sim.MeasureHostCores(ctx, devs)
			if err != nil {
				return nil, nil, err
			}
			prof.cores = append(prof.cores, hc)
		}
		fmt.Fprintf(log, "bladbench: pin=%v round %d: %s (load %s)\n", pin, round, fmtTimes(vs, times), loadAvg())
	}
	prof.hostCores = engine.Median(prof.cores)
	for i := range out {
		m := &out[i]
		m.MedianMs, m.MedianRunMs = engine.Median(m.EpochMs), engine.Median(m.RunMs)
		m.MedImbalance, m.MedOverlap = engine.Median(m.Imbalance), engine.Median(m.Overlap)
		var ratios []float64
		for r := range m.EpochMs {
			ratios = append(ratios, m.EpochMs[r]/out[0].EpochMs[r])
		}
		m.PairedRatio = engine.Median(ratios)
		m.Replans = sessions[i].Replans()
	}
	// The simulator on this machine's model, with this run's profile.
	for i, v := range vs {
		p := prof
		if v.parts {
			p = prof.vp[len(devs)]
		}
		cl, err := sim.Preset("cpu", len(devs))
		if err != nil {
			return nil, nil, err
		}
		cl.HostCores = prof.hostCores
		t, _, _, err := simSession(sessions[i], set, p, cl, true)
		if err != nil {
			fmt.Fprintf(log, "bladbench: simulating %s on cpu: %v\n", v.name, err)
			continue
		}
		out[i].SimMs = ms(t)
	}
	return out, prof, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

func fmtTimes(vs []variant, t []float64) string {
	var s []string
	for i, v := range vs {
		s = append(s, fmt.Sprintf("%s %.1f ms", v.name, t[i]))
	}
	return strings.Join(s, ", ")
}

// shapes returns each training group's sim.UnitShape for model m (in
// set.Train order), with output bytes from the profile when it has them:
// measured per group on the profiled set, else each op's measured bytes
// per output row times its rows.
func shapes(set *dynamic.Set, m *core.Model, p *groupProfile, parts int) []sim.UnitShape {
	out := make([]sim.UnitShape, len(set.Train))
	var perRow []float64
	if p != nil && p.rounds > 0 && p.set != set {
		perRow = p.bytesPerRow()
	}
	for g, gr := range set.Train {
		var ops []core.Dims
		var rows []int64
		var total core.Dims
		if parts > 0 {
			ops, total = dyntrain.VertexOpDims(gr, m, parts)
			rows = dyntrain.VertexOpOutRows(gr, m, parts)
		} else {
			ops, total = dyntrain.OpDims(gr, m)
			rows = dyntrain.OpOutRows(gr, m)
		}
		out[g] = sim.UnitShape{Ops: ops, Setup: total}
		switch {
		case perRow != nil:
			out[g].Out = make([]int64, len(ops))
			for i := range ops {
				out[g].Out[i] = int64(perRow[i] * float64(rows[i]))
			}
		case p != nil && p.rounds > 0:
			out[g].Out = p.out[g]
		}
	}
	return out
}

// shares returns the shares of the measured op time in graph ops and in
// the ops blad.Hoisted splits off.
func (p *groupProfile) shares() (graph, hoisted float64) {
	w := core.NewWorkload(p.model, nil, 0, []int32{0}, nil, 0)
	h, _ := blad.Hoisted(w.Ops)
	in := map[int]bool{}
	for _, i := range h {
		in[i] = true
	}
	var all, g, hs time.Duration
	for gr := range p.fwd {
		for i, op := range p.model.Ops {
			t := stats.Median(p.fwd[gr][i]) + stats.Median(p.bwd[gr][i])
			all += t
			if op.Kind() == core.KindGraph {
				g += t
			}
			if in[i] {
				hs += t
			}
		}
	}
	if all == 0 {
		return 0, 0
	}
	return float64(g) / float64(all), float64(hs) / float64(all)
}

// bytesPerRow is each op's measured output bytes per output row (median
// over the profiled groups).
func (p *groupProfile) bytesPerRow() []float64 {
	per := make([][]float64, len(p.model.Ops))
	for g, gr := range p.set.Train {
		var rows []int64
		if p.parts > 0 {
			rows = dyntrain.VertexOpOutRows(gr, p.model, p.parts)
		} else {
			rows = dyntrain.OpOutRows(gr, p.model)
		}
		for i, r := range rows {
			if r > 0 {
				per[i] = append(per[i], float64(p.out[g][i])/float64(r))
			}
		}
	}
	out := make([]float64, len(per))
	for i, xs := range per {
		out[i] = engine.Median(xs)
	}
	return out
}

// simSession simulates the session's current plans (one per iteration)
// and returns the summed iteration time, imbalance and overlap share.
func simSession(s *dyntrain.Session, set *dynamic.Set, p *groupProfile, cl *sim.Cluster, measuredCosts bool) (time.Duration, float64, float64, error) {
	groups, ws := s.Groups()
	plans := s.Plans()
	return simPlans(plans, ws, groups, set, s.Model(), p, cl, measuredCosts, s.Parts())
}

func simPlans(plans []*core.Plan, ws []*core.Workload, groups [][]*engine.Batch, set *dynamic.Set, m *core.Model, p *groupProfile, cl *sim.Cluster, measuredCosts bool, parts int) (time.Duration, float64, float64, error) {
	all := shapes(set, m, p, parts)
	var prof *sim.Profile
	if measuredCosts {
		var err error
		if prof, err = p.simProfile(all); err != nil {
			return 0, 0, 0, err
		}
	}
	var total time.Duration
	busy := map[core.DeviceID]time.Duration{}
	var ov time.Duration
	base := 0
	for k, pl := range plans {
		sh := make([]sim.UnitShape, len(pl.Units))
		for u, un := range pl.Units {
			sh[u] = all[base+int(un.Targets[0])]
		}
		res, err := sim.SimulateUnits(pl, ws[k], prof, cl, sim.Options{}, sh)
		if err != nil {
			return 0, 0, 0, err
		}
		total += res.Iteration
		for d, b := range res.Busy {
			busy[d] += b
		}
		for _, o := range res.Overlap {
			ov += o
		}
		base += len(groups[k])
	}
	var loads []float64
	var sum time.Duration
	for _, b := range busy {
		loads = append(loads, b.Seconds())
		sum += b
	}
	share := 0.0
	if sum > 0 {
		share = ov.Seconds() / sum.Seconds()
	}
	return total, blad.Imbalance(loads), share, nil
}

// simulate replays each scheduler on nGPU devices of the preset: a fresh
// plan from the scheduler, the simulated trace fed back to it (BLAD
// re-places from it, as after a first epoch), then the plan it keeps.
func simulate(ctx context.Context, c config, set *dynamic.Set, dataName string, vs []variant, prof *groupProfile, measuredToo bool, log io.Writer) ([]simulated, error) {
	var out []simulated
	counts, err := gpuCounts(c.GPUs)
	if err != nil {
		return nil, err
	}
	for _, n := range counts {
		costList := []string{"roofline"}
		if measuredToo {
			costList = append(costList, "measured")
		}
		for _, costs := range costList {
			overlaps := []float64{0}
			if c.Overlap > 0 {
				overlaps = append(overlaps, c.Overlap)
			}
			for _, so := range overlaps {
				cl, err := sim.Preset(c.Preset, n)
				if err != nil {
					return nil, err
				}
				for i := range cl.Devices {
					cl.Devices[i].StreamOverlap = so
				}
				var base float64
				for _, v := range vs {
					r := simulated{Data: dataName, Groups: len(set.Train), Cluster: cl.Name, Devices: n, Costs: costs, Overlap: so, Scheduler: v.name}
					t, imb, ovs, err := simOne(ctx, c, set, v, prof, cl, costs == "measured")
					if err != nil {
						r.Error = err.Error()
						fmt.Fprintf(log, "bladbench: %s x%d %s: %v\n", v.name, n, costs, err)
					} else {
						r.EpochMs, r.Imbalance, r.OverlapShare = ms(t), imb, ovs
						if v.name == "esdg" {
							base = r.EpochMs
						}
						if base > 0 {
							r.Reduction = 1 - r.EpochMs/base
						}
					}
					out = append(out, r)
				}
			}
		}
	}
	return out, nil
}

func gpuCounts(list string) ([]int, error) {
	var counts []int
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-gpus %q: want device counts", list)
		}
		counts = append(counts, n)
	}
	return counts, nil
}

// simOne plans one scheduler for the cluster's devices and simulates it.
func simOne(ctx context.Context, c config, set *dynamic.Set, v variant, prof *groupProfile, cl *sim.Cluster, measuredCosts bool) (time.Duration, float64, float64, error) {
	n := len(cl.Devices)
	parts := 0
	p := prof
	if v.parts {
		parts = n
		p = prof.vp[n]
		if measuredCosts && p == nil {
			return 0, 0, 0, fmt.Errorf("no measured profile of the %d-part model (profiled: the measured device count only)", n)
		}
	}
	s, err := dyntrain.NewPlanner(dyntrain.Config{Set: set, Model: c.Model, Hidden: c.Hidden, Scheduler: v.new(), StepGroups: c.StepGroups,
		Seed: c.Seed, VertexParts: parts}, cl.Infos())
	if err != nil {
		return 0, 0, 0, err
	}
	groups, ws := s.Groups()
	all := shapes(set, s.Model(), p, parts)
	var sp *sim.Profile
	if measuredCosts {
		if sp, err = p.simProfile(all); err != nil {
			return 0, 0, 0, err
		}
	}
	var plans []*core.Plan
	base := 0
	for k, w := range ws {
		pl, err := s.Schedule(ctx, k)
		if err != nil {
			return 0, 0, 0, err
		}
		if fb, ok := s.Scheduler().(core.SchedulerWithFeedback); ok {
			sh := make([]sim.UnitShape, len(pl.Units))
			for u, un := range pl.Units {
				sh[u] = all[base+int(un.Targets[0])]
			}
			res, err := sim.SimulateUnits(pl, w, sp, cl, sim.Options{}, sh)
			if err != nil {
				return 0, 0, 0, err
			}
			np, err := fb.Observe(ctx, w, res.Trace)
			if err != nil {
				return 0, 0, 0, err
			}
			if np != nil {
				pl = np
			}
		}
		plans = append(plans, pl)
		base += len(groups[k])
	}
	return simPlans(plans, ws, groups, set, s.Model(), p, cl, measuredCosts, parts)
}

func (r *report) markdown(w io.Writer) {
	fmt.Fprintf(w, "## bladbench\n\nMachine: %s. Load average at start %s, at end %s. Started %s.\n\n", r.Machine, r.LoadAvg[0], r.LoadAvg[1], r.Started.Format(time.RFC3339))
	d := r.Data
	fmt.Fprintf(w, "Data: `%s`: %d snapshots, %d training groups (one iteration = all of them unless -step-groups), snapshot edges %d..%d, estimated group cost max/min %.1f.\n",
		d.Name, d.Snapshots, d.TrainGroups, d.SnapEdgesMin, d.SnapEdgesMax, d.GroupCostSkew)
	fmt.Fprintf(w, "Estimated-cost imbalance (max/mean − 1) of ESDG's contiguous equal-count partition vs LPT: ")
	for _, k := range []int{2, 4, 8} {
		fmt.Fprintf(w, "%d devices %.3f vs %.3f; ", k, d.ESDGImbalance[k], d.LPTImbalance[k])
	}
	fmt.Fprintf(w, "\n\n### Measured: 2 logical CPU devices, 1 thread each (%d rounds after %d warm-up, interleaved)\n\n", r.Config.Rounds, r.Config.Warmup)
	fmt.Fprintln(w, "| scheduler | pinned | epoch median | in Trainer.Run | vs esdg (paired median) | imbalance | overlap achieved | re-placements | simulated (cpu preset) | sim/meas |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, m := range r.Measured {
		simRatio := "–"
		if m.SimMs > 0 {
			simRatio = fmt.Sprintf("%.2f", m.SimMs/m.MedianRunMs)
		}
		fmt.Fprintf(w, "| %s | %v | %.1f ms | %.1f ms | %+.1f%% | %.3f | %.3f | %d | %.1f ms | %s |\n", m.Scheduler, m.Pinned, m.MedianMs, m.MedianRunMs,
			100*(m.PairedRatio-1), m.MedImbalance, m.MedOverlap, m.Replans, m.SimMs, simRatio)
	}
	fmt.Fprintf(w, "\nProfile: %d rounds; host cores available to the two devices (sim.MeasureHostCores, median): %.2f; share of the op time in graph ops %.3f, in the ops BLAD hoists onto its second stream %.3f.\n\n",
		r.Profile.Rounds, r.Profile.HostCores, r.Profile.GraphShare, r.Profile.HoistedShare)
	data := ""
	for _, s := range r.Sim {
		if s.Data != data {
			data = s.Data
			fmt.Fprintf(w, "\n### Simulated (%s preset): `%s`, %d training groups\n\n", r.Config.Preset, s.Data, s.Groups)
			fmt.Fprintln(w, "| devices | op costs | stream overlap | scheduler | epoch | imbalance | overlap achieved | vs esdg |")
			fmt.Fprintln(w, "|---:|---|---:|---|---:|---:|---:|---:|")
		}
		if s.Error != "" {
			fmt.Fprintf(w, "| %d | %s | %.2f | %s | – | – | – | %s |\n", s.Devices, s.Costs, s.Overlap, s.Scheduler, s.Error)
			continue
		}
		fmt.Fprintf(w, "| %d | %s | %.2f | %s | %.3f ms | %.3f | %.3f | %+.1f%% |\n", s.Devices, s.Costs, s.Overlap, s.Scheduler, s.EpochMs, s.Imbalance, s.OverlapShare, -100*s.Reduction)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "\n"+n)
	}
}
