// Package graphpipe holds pipeline-parallel schedulers: GraphPipe
// (ASPLOS'25; papers.md §3), whose stages form a DAG so independent
// branches run concurrently, and the chain baselines GPipe and 1F1B
// (PipeDream-Flush) over a PipeDream-style contiguous partition (with
// the option dp=piper, over Piper's chains of convex stages).
//
// Every plan is synchronous: m micro-batches (loss weights |O_i|/|O|)
// flow through the stages, gradients accumulate, and the optimizer steps
// (each parameter once, on its owner, or the whole model on home with
// step=home) end the iteration, so training is exactly sequential
// training's.
package graphpipe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

var _ core.Scheduler = (*Scheduler)(nil)

// registered are the schedulers this package registers: GraphPipe and
// its two chain baselines.
var registered = []struct {
	name  string
	graph bool
	kind  Kind
}{{"graphpipe", true, OneFOneB}, {"1f1b", false, OneFOneB}, {"gpipe", false, GPipe}}

// Names returns the names of the schedulers this package registers
// (graphpipe, 1f1b, gpipe): the pipelines, whose micro-batch count
// (--sched-opt m=N) sets what a device holds.
func Names() []string {
	out := make([]string, len(registered))
	for i, s := range registered {
		out[i] = s.name
	}
	return out
}

func init() {
	for _, s := range registered {
		core.RegisterScheduler(s.name, func(opts map[string]string) (core.Scheduler, error) {
			sc := &Scheduler{Graph: s.graph, Kind: s.kind, reuse: &searchReuse{}}
			switch v := opts["reuse"]; v {
			case "", "on", "true":
			case "off", "false":
				sc.reuse = nil
			default:
				return nil, fmt.Errorf("%s: option reuse=%q: want on (a workload of the last one's shape, such as the next sampled mini-batch of the same size, gets the last search's choice, rebuilt for it) or off (search every time)", s.name, v)
			}
			// microbatches and m are one option: both given, they must
			// agree (the map's order would otherwise pick one at random).
			if a, b := opts["microbatches"], opts["m"]; a != "" && b != "" && a != b {
				return nil, fmt.Errorf("%s: options microbatches=%s and m=%s are one option given twice: give it once", s.name, a, b)
			}
			// The on/off options: each sets its field to on, or with
			// inverted set, to !on; graphOnly ones are refused by the
			// chain schedulers.
			switches := map[string]struct {
				field               *bool
				inverted, graphOnly bool
				want                string
			}{
				"trim":      {&sc.KeepWarmup, true, false, "on (lower the 1F1B warm-up while the simulated iteration does not grow) or off"},
				"groups":    {&sc.NoStepGroups, true, false, "on (also weigh owners stepping in readiness groups) or off (one step per owner)"},
				"shared":    {&sc.Disjoint, true, false, "on (weigh shared-trunk partitions too) or off (every stage on devices of its own)"},
				"gpipe":     {&sc.GPipeOrder, false, true, "on (graphpipe also weighs GPipe's order, every micro-batch in flight) or off (its generalised 1F1B only, the default)"},
				"sinkfirst": {&sc.NoSinkFirst, true, false, "on (also weigh running the stage nearer the sink first on a device hosting several) or off (the earliest ready task first)"},
			}
			// The options that take one of a few words: each word's
			// setting, and what the error says they mean.
			enums := map[string]struct {
				values map[string]func()
				want   string
			}{
				"step": {map[string]func(){"owners": func() { sc.Step = StepOwners }, "home": func() { sc.Step = StepHome }},
					"owners (each parameter stepped on its owner) or home (the whole model on home)"},
				"dp": {map[string]func(){"pipedream": func() { sc.ChainDP = ChainPipeDream }, "piper": func() { sc.ChainDP = ChainPiper }},
					"pipedream (the chains from PipeDream's DP over a topological order, the default) or piper (also from Piper's DP over the op graph's downsets: every chain of convex stages, far slower on many branches)"},
			}
			for k, v := range opts {
				if sw, ok := switches[k]; ok {
					on, ok := onOff(v)
					if !ok {
						return nil, fmt.Errorf("%s: option %s=%q: want %s", s.name, k, v, sw.want)
					}
					if sw.graphOnly && !s.graph {
						return nil, fmt.Errorf("%s: option %s: only graphpipe takes it (a chain scheduler has one order: %s)", s.name, k, s.kind)
					}
					*sw.field = on != sw.inverted
					continue
				}
				switch k {
				case "reuse":
					continue // above
				case "profile":
					p, err := readOption(v, sim.ReadProfile)
					if err != nil {
						return nil, fmt.Errorf("%s: option profile=%s: %w", s.name, v, err)
					}
					sc.Profile = p
					continue
				case "cluster":
					c, err := readOption(v, sim.ReadCluster)
					if err != nil {
						return nil, fmt.Errorf("%s: option cluster=%s: %w", s.name, v, err)
					}
					sc.Cluster = c
					continue
				}
				if e, ok := enums[k]; ok {
					set, ok := e.values[v]
					if !ok {
						return nil, fmt.Errorf("%s: option %s=%q: want %s", s.name, k, v, e.want)
					}
					set()
					continue
				}
				if k == "slack" {
					f, err := parseSlack(v)
					if err != nil {
						return nil, fmt.Errorf("%s: option slack=%q: %w", s.name, v, err)
					}
					sc.Slack = f
					continue
				}
				n, err := strconv.Atoi(v)
				switch k {
				case "microbatches", "m":
					if err != nil || n < 1 {
						return nil, fmt.Errorf("%s: option %s=%q: want a positive integer", s.name, k, v)
					}
					sc.MicroBatches = n
				case "simulate":
					if err != nil {
						return nil, fmt.Errorf("%s: option %s=%q: want an integer (candidates to simulate; negative: none)", s.name, k, v)
					}
					sc.Simulate = n
				case "memcaps":
					if err != nil {
						return nil, fmt.Errorf("%s: option %s=%q: want an integer (memory caps the chain DP also runs under; 0: %d; negative: none)", s.name, k, v, DefaultMemCaps)
					}
					sc.MemCaps = n
				case "replicas":
					if err != nil || n < 0 {
						return nil, fmt.Errorf("%s: option %s=%q: want a non-negative integer (0: no cap)", s.name, k, v)
					}
					sc.MaxReplicas = n
				case "bucket":
					if err != nil {
						return nil, fmt.Errorf("%s: option %s=%q: want the gradient bucket in bytes (0: %d, DDP's 25 MiB; negative: none)", s.name, k, v, DefaultBucketBytes)
					}
					sc.BucketBytes = int64(n)
				default:
					return nil, fmt.Errorf("%s: unknown option %q (known: microbatches (m), simulate, replicas, slack, memcaps, profile, cluster, step, shared, trim, bucket, groups, sinkfirst, gpipe, dp, reuse)", s.name, k)
				}
			}
			return sc, nil
		})
	}
}

// parseSlack reads option slack's value: a fraction ("0.01") or a
// percentage ("1%"), at least 0 and below 1 (100%).
func parseSlack(v string) (float64, error) {
	num, pct := strings.CutSuffix(strings.TrimSpace(v), "%")
	f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("want a fraction (0.01) or a percentage (1%%) of the fastest plan's iteration that the search may give up for a lighter plan")
	}
	if pct {
		f /= 100
	}
	if err := checkSlack(f); err != nil {
		return 0, err
	}
	return f, nil
}

// checkSlack says what Scheduler.Slack takes when f is not that (NaN
// included).
func checkSlack(f float64) error {
	if !(f >= 0 && f < 1) {
		return fmt.Errorf("want at least 0 and below 1 (100%%): the share of the fastest plan's iteration the search may give up for a lighter plan")
	}
	return nil
}

// Scheduler partitions the model into stages over the workload's devices
// and pipelines micro-batches through them.
//
// Both partitioners plan with the simulator's cost model
// (sim.CostModel on Cluster and Profile): op times and sizes at the
// micro-batch size, links, the gradient flush (into each parameter's
// owner, or into home with Step = StepHome), the steps and memory are
// the simulator's. Each weighs its candidate partitions (the
// chain DP on every device budget and replica cap; for GraphPipe also the
// DAG DP's answers at every replica cap and time target it tried, and
// the chain answers as stage DAGs, and their shared-trunk variants unless
// Disjoint) by a pipeline estimate, simulates the
// best Simulate of each family (and of the same candidates with the
// devices they leave idle spent on replicas: widened) and keeps the
// fastest that fits. The
// chain baselines get exactly the same search over their own candidates,
// and GraphPipe weighs the 1F1B chain's candidates too (with GPipeOrder
// the GPipe chain's as well), so at a fixed MicroBatches it is never
// slower than that baseline (those baselines) in the simulator. The plan's metrics report
// the estimate (predicted_iteration_ms) and the simulation
// (simulated_iteration_ms) of the chosen candidate. Without MicroBatches
// every scheduler also searches the micro-batch count the same way
// (searchM) and reports the chosen count as micro_batches.
type Scheduler struct {
	// Graph selects GraphPipe's DAG partitioner; false is the chain
	// (PipeDream) baseline.
	Graph bool
	// Kind is the micro-batch schedule.
	Kind Kind
	// MicroBatches per iteration; 0: searched (searchM: a walk over 1,
	// 2, 4, … up to min(samples, 64), keeping the count whose best
	// candidates are fastest and fit every device's memory; the same
	// search for every scheduler). Registry option: m=N or microbatches=N.
	MicroBatches int
	// Cluster is the machine to plan for; nil: sim.ClusterFor(the
	// workload's devices). Its device ids must be the workload's.
	Cluster *sim.Cluster
	// Profile holds the ops' costs; nil: the roofline model of the
	// cluster's devices (what sim.Simulate uses without a profile). The
	// registry option profile=FILE reads one in GraphPipe's schema (the
	// file `gnnkit plan --profile FILE` simulates with).
	Profile *sim.Profile
	// Simulate is how many of the best-estimated candidates of each
	// family are simulated to choose among (0: 8; negative: none, the
	// estimate decides), besides the best of each micro-batch count the
	// m search tried, as many again from each of the partitioners'
	// added passes where they run (the second: the optimizer steps
	// weighed; the third: each stage's whole flush weighed), and as many
	// widened plans and widened shared-trunk plans per pass (the
	// devices a candidate leaves idle spent on replicas, where that
	// estimates among the pass's best); the last two not when negative.
	// Registry option: simulate=N.
	Simulate int
	// Slack, when above 0, trades time for memory in the search's final
	// choice: of the simulated plans that fit, those whose iteration is
	// within (1+Slack) of the fastest's, the one with the lowest largest
	// device peak in the simulation (not the estimate's, which the
	// alternatives' NeedBytes also weigh; ties: the faster, then fewer
	// devices). 0: the fastest (ties within 1e-9: fewer devices).
	// Without simulation (Simulate < 0) it is not read. A plan it moved
	// says slack_chosen, with fastest_iteration_ms and
	// fastest_peak_bytes of the plan passed over (a rebuilt choice:
	// those of the batch searched). At least 0, below 1. Registry
	// option: slack=F, a fraction (0.01) or a percentage (1%).
	Slack float64
	// MemCaps is how many per-device memory caps below the devices'
	// own the chain DP also runs under (0: DefaultMemCaps; negative:
	// none), spaced geometrically between the least and the largest
	// estimated peak of its plain answers that fit (memLadder). A
	// stage that no longer fits under a cap moves a boundary, so the DP
	// answers other chains, and some of them, widened, simulate faster
	// than anything the plain DP proposes (the 1F1B chain on uno-4 over
	// 16 A100s: 46.91 → 44.20 ms). Those answers are one more pass,
	// simulated beside the others' (its best Simulate and their widened
	// plans), so the plan is never slower for it; with MicroBatches
	// searched, at the counts whose best estimate is within 25% of the
	// best count's (Scheduler.ladder). Only the PipeDream
	// chain DP (not Piper's, nor GraphPipe's DAG DP), with simulation
	// on, more than one device, and at most 256 ops. A plan it found
	// says dp_mem_cap_bytes. Registry option: memcaps=N.
	MemCaps int
	// MaxReplicas caps the devices of one stage (0: no cap), the shared
	// trunk's too: it runs on every device of its plan, so a
	// shared-trunk plan on more devices is not a candidate. Registry
	// option: replicas=N.
	MaxReplicas int
	// Step is where the plan steps the optimizer: StepOwners (the
	// default) steps each parameter on its owner (core.Plan.StepOwners;
	// owners spread over the replicas reading them, spreadOwners), when
	// the workload names its ops' parameters; StepHome flushes every device's gradients
	// into home, which steps the whole model. The partitioners price the
	// flush and the memory of the mode they plan for. Registry option:
	// step=owners or step=home.
	Step StepMode
	// BucketBytes is PlanOptions.BucketBytes for the plans it builds: 0
	// is DefaultBucketBytes, negative no buckets.
	BucketBytes int64
	// Disjoint keeps every stage on devices of its own. By default
	// GraphPipe also weighs the shared-trunk variant of each DAG answer
	// (the trunk after the last branches join as one more stage
	// replicated over every device, beside the branch stages) on clusters
	// whose devices run streams independently (not logical CPU devices),
	// with owner steps. Registry option: shared=off (or on).
	Disjoint bool
	// KeepWarmup keeps the chosen 1F1B plan's device-weighted warm-up
	// (option trim=off); by default the search lowers it while the
	// simulated iteration does not grow (Partition.WarmupCap).
	KeepWarmup bool
	// NoStepGroups keeps one optimizer step per owner (option
	// groups=off); by default the search also simulates its fastest
	// plans with each owner stepping its parameters in readiness groups
	// (PlanOptions.StepGroups) and keeps a grouped plan that is faster.
	NoStepGroups bool
	// NoSinkFirst keeps the earliest ready task first on devices hosting
	// several stages (option sinkfirst=off); by default the search also
	// simulates its candidates with the stage nearer a sink first there
	// (PlanOptions.SinkFirst) and keeps the faster order.
	NoSinkFirst bool
	// GPipeOrder makes GraphPipe also weigh GPipe's order (option
	// gpipe=on): its DAG answers and the GPipe chain baseline's whole
	// search, every micro-batch in flight, beside its generalised 1F1B,
	// so that it is never slower than either chain baseline in the
	// simulator (with m searched too: each chain family is its
	// baseline's own walk over the counts). It trades
	// memory for time: off (the default), GraphPipe keeps the paper's
	// schedule, whose in-flight bound is what makes it lighter than the
	// chains.
	GPipeOrder bool
	// ChainDP is where the chain partitions come from: ChainPipeDream,
	// PipeDream's DP over one topological order (the default), or
	// ChainPiper, Piper's DP over the op DAG's downsets, which searches
	// every chain of convex stages at the cost of every pair of nested
	// downsets (ErrTooManyDownsets past its limits). The chain baselines
	// (Graph false) then weigh Piper's answers instead of PipeDream's;
	// GraphPipe weighs them as a family of their own beside its others
	// (and as stage DAGs), so that it is never slower than either chain
	// in the simulator.
	// Registry option: dp=pipedream or dp=piper.
	ChainDP ChainDP
	// Progress, when set, is told how far Piper's DP is (ChainDP =
	// ChainPiper, which can take minutes): the pairs of nested downsets
	// priced and their total, from 0 to the total in each run of the DP
	// (at most one per micro-batch count tried, pass and schedule order:
	// with m searched, a chain baseline's walk inside GraphPipe's finds
	// the tables GraphPipe's own walk made at a count, and reports no run
	// there). It may be called from several goroutines at once.
	Progress func(done, total int64)

	// memo is what one search's walks share (searchMemo): set by
	// Schedule on the copy that searches, so concurrent Schedule calls
	// on one Scheduler share nothing.
	memo   *searchMemo
	chosen *candidate // the candidate search chose (on the run's copy)
	// reuse, when set (the registry's schedulers, option reuse=on),
	// keeps the last search's choice for the next workload of the same
	// shape (searchReuse).
	reuse *searchReuse
}

// connected rejects op graphs with ops that do not lead to the loss (the
// last op): their stages would receive no gradient and the pipeline
// would have dangling branches.
func connected(w *core.Workload, name string) error {
	n := len(w.Ops)
	reaches := make([]bool, n)
	reaches[n-1] = true
	for o := n - 1; o >= 0; o-- {
		if !reaches[o] {
			continue
		}
		for _, d := range w.Ops[o].Deps {
			if d < 0 || d >= o {
				return fmt.Errorf("%s: op %s depends on op %d, which does not come before it: the op graph is not a DAG in topological order", name, w.Ops[o].Name, d)
			}
			reaches[d] = true
		}
	}
	for o, ok := range reaches {
		if !ok {
			return fmt.Errorf("%s: op %s does not lead to the loss (%s): the op graph is disconnected", name, w.Ops[o].Name, w.Ops[n-1].Name)
		}
	}
	return nil
}

// Name returns "graphpipe", "1f1b" or "gpipe".
func (s *Scheduler) Name() string {
	if s.Graph {
		return "graphpipe"
	}
	return s.Kind.String()
}

// MaxDevices is the most devices Schedule plans.
const MaxDevices = 4096

// Schedule partitions and schedules one iteration. Cancelling ctx stops
// the search between the rows of its DP tables and the steps of its
// binary searches.
func (s *Scheduler) Schedule(ctx context.Context, w *core.Workload) (*core.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkSlack(s.Slack); err != nil {
		return nil, fmt.Errorf("%s: Slack %v: %w", s.Name(), s.Slack, err)
	}
	if len(w.Devices) == 0 || len(w.Ops) == 0 {
		return nil, errors.New(s.Name() + ": the workload has no devices or no ops")
	}
	if len(w.Devices) > MaxDevices {
		return nil, fmt.Errorf("%s: %d devices: the search plans at most %d (its time grows with their square: uno-4 on 1,024 devices takes about 17 s a micro-batch count)", s.Name(), len(w.Devices), MaxDevices)
	}
	devs := make([]core.DeviceID, len(w.Devices))
	for i, d := range w.Devices {
		devs[i] = d.ID
	}
	if err := connected(w, s.Name()); err != nil {
		return nil, err
	}
	cl := s.Cluster
	if cl == nil {
		cl = sim.ClusterFor(w.Devices)
	}
	cm, err := sim.NewCostModel(w, s.Profile, cl)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name(), err)
	}
	for _, d := range devs {
		if _, ok := cl.Device(d); !ok {
			return nil, fmt.Errorf("%s: the cluster %q has no device %s of the workload", s.Name(), cl.Name, d)
		}
	}
	if s.reuse != nil {
		p, ok, err := s.reuse.replan(ctx, s, w, cm, devs)
		if err != nil || ok {
			return p, err
		}
	}
	run := *s
	run.memo = &searchMemo{}
	p, err := run.search(ctx, w, cm, devs)
	if nf, ok := errors.AsType[*NoFitError](err); ok && nf.Need > 0 {
		return nil, s.checkFigure(ctx, w, cl, devs, err, nf)
	}
	if err != nil {
		return nil, err
	}
	if s.Graph {
		_, coarse := Decompose(w)
		lost := 0
		for _, r := range coarse {
			lost += len(r)
		}
		p.Metrics["coarsened_ops"] = float64(lost)
	}
	if s.reuse != nil {
		s.reuse.keep(s, w, run.chosen, p)
	}
	return p, nil
}

// planOptions are the options the scheduler builds its plans with.
func (s *Scheduler) planOptions() PlanOptions {
	b := s.BucketBytes
	if b == 0 {
		b = DefaultBucketBytes
	}
	return PlanOptions{Step: s.Step, BucketBytes: b}
}

// readOption opens the file an option names and reads it with read.
func readOption[T any](path string, read func(io.Reader) (T, error)) (T, error) {
	f, err := os.Open(path)
	if err != nil {
		var zero T
		return zero, err
	}
	defer f.Close()
	return read(f)
}

// onOff reads an on/off option value (on, true, off, false).
func onOff(v string) (on, ok bool) {
	switch v {
	case "on", "true":
		return true, true
	case "off", "false":
		return false, true
	}
	return false, false
}

// checkFigure plans again, at the micro-batch count nf names, with every
// device held to the memory nf names (rounded up as its message shows
// it), and where that search finds no plan either, names what it says
// instead: the figure is bisected with
// the estimate, which can be a little under the simulation, so a plan
// that fits by it may not fit the simulator (overCap). At most three
// rounds. It returns err (which wraps nf) with the figure the last
// round found in its text and in the NoFitError it wraps.
func (s *Scheduler) checkFigure(ctx context.Context, w *core.Workload, cl *sim.Cluster, devs []core.DeviceID, err error, nf *NoFitError) error {
	shown := func(n int64) string { return core.FormatBytes(core.RoundUpShownBytes(n)) }
	first := shown(nf.Need)
	cur := nf
	for range 3 {
		need := core.RoundUpShownBytes(cur.Need)
		ccl := *cl
		ccl.Devices = slices.Clone(cl.Devices)
		for i := range ccl.Devices {
			ccl.Devices[i].MemBytes = need
		}
		cw := *w
		cw.Devices = slices.Clone(w.Devices)
		for i := range cw.Devices {
			cw.Devices[i].MemCap = need
		}
		cm, cerr := sim.NewCostModel(&cw, s.Profile, &ccl)
		if cerr != nil {
			return err
		}
		run := *s
		run.memo = &searchMemo{}
		if cur.M > 0 {
			run.MicroBatches = cur.M // the count the figure is at: one count, not a walk
		}
		_, rerr := run.search(ctx, &cw, cm, devs)
		next, ok := errors.AsType[*NoFitError](rerr)
		if rerr == nil || ctx.Err() != nil || !ok || next.Need <= cur.Need {
			break
		}
		cur = next
	}
	if cur == nf {
		return err
	}
	fix := func(text string) string {
		text = strings.Replace(text, "about "+first, "about "+shown(cur.Need)+", checked by planning at it: at "+first+" no plan fit", 1)
		if cur.M != nf.M {
			text = strings.Replace(text, fmt.Sprintf(" at m = %d ", nf.M), fmt.Sprintf(" at m = %d ", cur.M), 1)
		}
		return text
	}
	out := *nf
	out.Need, out.M, out.msg = cur.Need, cur.M, fix(nf.Error())
	if err == error(nf) {
		return &out
	}
	return &figureError{msg: fix(err.Error()), nf: &out}
}

// figureError is a search's no-fit error (one that wraps a *NoFitError
// with more to say) with the figure checkFigure corrected.
type figureError struct {
	msg string
	nf  *NoFitError
}

func (e *figureError) Error() string { return e.msg }
func (e *figureError) Unwrap() error { return e.nf }
