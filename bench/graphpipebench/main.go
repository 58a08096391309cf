// Command graphpipebench compares GraphPipe's DAG pipelines with the chain
// baselines (PipeDream-style partition with 1F1B, and GPipe) in the
// simulator (package sim) on multi-branch models over 4-32 devices of a
// cluster preset, and on 2 real logical CPU devices of this machine:
// iteration time (throughput), pipeline depth and peak memory per device,
// and each partitioner's predicted iteration time for the plan it chose.
// Every scheduler plans with the cluster and profile the simulator replays
// its plan on.
//
//	go run ./bench/graphpipebench                 # simulated pcie-a100 + measured cpu
//	go run ./bench/graphpipebench -preset nvlink-h100 -measure=false
//	go run ./bench/graphpipebench -m 8 -devices 4,8 -simulate 4
//	go run ./bench/graphpipebench -capfrac 0    # the fixed-m table only
//	go run ./bench/graphpipebench -measure=false -piper   # also the 1F1B chain from Piper's downset DP
//	go run ./bench/graphpipebench -search       # search time: PipeDream, Piper, GraphPipe, one core each
//	go run ./bench/graphpipebench -gnn          # the multi-branch GNN under memory caps, m searched
//	go run ./bench/graphpipebench -sweep 24     # every scheduler's fastest plan at any of 24 memory caps
//
// Two simulated tables: every scheduler at the same fixed m (-m), on
// the preset's devices; and memory-capped, where every scheduler searches
// m (graphpipe.Scheduler with MicroBatches 0) and each device's memory
// is the model's training state / -capfrac (default 0.75: the state
// fills three quarters of a device, e.g. 30 GB of a 40 GB A100; above 1
// the model's state does not fit one device, the regime pipelines are
// for, e.g. -capfrac 1.5). With -piper a fifth row per cell, 1f1b-piper,
// plans the 1F1B chain with Piper's DP over the op graph's downsets
// (every chain of convex stages) and counts among the best chains.
//
// -search prints instead the search-time table: each partitioner's
// whole search timed on one core, with the plan it picks. -gnn prints
// instead the multi-branch GNN table: mbgnn on a graph, under per-device
// memory caps, every scheduler searching m. -sweep N prints instead the
// swept tables: each scheduler's plan at the devices' memory beside its
// fastest at any of N caps below it (a search is not monotone in the
// cap), with the goal judged on the swept plans.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/internal/atomicfile"
	_ "github.com/gnnkit/gnnkit/models"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
	"github.com/gnnkit/gnnkit/sim"
)

type model struct {
	name     string
	branches int
	cfg      core.ModelConfig
	label    string // the tables' name for it ("": name-branches)
}

func (md model) String() string {
	if md.label != "" {
		return md.label
	}
	return fmt.Sprintf("%s-%d", md.name, md.branches)
}

type summary struct {
	name          string
	devices       int
	vs1f1b, vsAll float64
	ms            [3]int // micro-batches graphpipe, 1f1b and gpipe chose (0: no plan)
	// headroom is the best chain's iteration time over the compute bound
	// (every op's work at the whole batch, its cheapest per sample, and
	// every parameter's optimizer step, spread evenly over the devices,
	// nothing else; or the largest parameter's step, which runs whole on
	// its owner, if longer): no plan beats the best chain by more.
	headroom float64
	// headroomM, in the fixed-m table, is the best chain's time over the
	// compute bound at that m: every op's work on each of BuildPlan's m
	// micro-batches (each runs whole on one replica of its stage, in
	// every plan) and the steps, spread evenly (or the largest step);
	// 0 in the capped table. Both bounds hold because a preset device's
	// streams share it (no StreamOverlap).
	headroomM float64
	// headroomGP, in the tables where m is searched, is the same bound at
	// the m GraphPipe chose (0: no plan, or a fixed m): no plan at that m
	// beats the best chain by more. Its plan runs every op on those
	// micro-batches, so it is at most this.
	headroomGP float64
	// disjoint is GraphPipe with every stage on devices of its own
	// (Scheduler.Disjoint: the paper's stage graphs, no shared trunk),
	// vs the best chain.
	disjoint float64
	// busy is the share of GraphPipe's iteration its busiest device
	// spends computing: near 1, only cheaper compute (larger micro-batches)
	// makes it faster.
	busy float64
	// peakGP, peakDisjoint and peak1F1B are the largest per-device peak
	// memory of GraphPipe's plan, of its disjoint-stage variant's and of
	// the 1F1B chain's (0: no plan).
	peakGP, peakDisjoint, peak1F1B int64
	// alt is the fastest other plan of GraphPipe's own search
	// (Plan.Alternatives) that meets the goal, vs the best chain (0:
	// none), with its peak and description.
	alt     float64
	altPeak int64
	altWhat string
	// iso is GraphPipe's plan searched with every device's memory held
	// just under the 1F1B chain's largest peak, vs the best chain (0: no
	// plan fits there), with its peak and description.
	iso     float64
	isoPeak int64
	isoWhat string
}

// heldUnder plans with GraphPipe scheduler gp on its cluster with every
// device's memory held at limit (or its own, if less) and simulates the
// plan on that cluster: its iteration, its largest peak and what it is
// (iteration 0: no plan fits, or the chosen one goes over; with what
// set, the scheduler's error).
func heldUnder(mod *core.Model, g *core.Graph, inDim int, batch []int32, gp graphpipe.Scheduler, limit int64) (time.Duration, int64, string, error) {
	cl := gp.Cluster
	held := *cl
	held.Devices = slices.Clone(cl.Devices)
	for i := range held.Devices {
		if d := &held.Devices[i]; d.MemBytes == 0 || d.MemBytes > limit { // 0: unlimited
			d.MemBytes = limit
		}
	}
	w := core.NewWorkload(mod, g, inDim, batch, held.Infos(), 1)
	gp.Cluster = &held
	p, err := gp.Schedule(context.Background(), w)
	if errors.Is(err, graphpipe.ErrNoFit) {
		return 0, 0, "", nil
	}
	if err != nil {
		return 0, 0, fmt.Sprintf("no plan: %v", err), nil // as a row whose scheduler fails
	}
	if err := p.Validate(w); err != nil {
		return 0, 0, "", fmt.Errorf("graphpipe held under %s: invalid plan: %w", core.FormatBytes(limit), err)
	}
	res, err := sim.Simulate(p, w, gp.Profile, &held)
	if err != nil {
		return 0, 0, "", fmt.Errorf("graphpipe held under %s: %w", core.FormatBytes(limit), err)
	}
	if len(res.OverCap) > 0 {
		return 0, 0, "", nil
	}
	var peak int64
	for _, v := range res.PeakMem {
		peak = max(peak, v)
	}
	what := ""
	for _, a := range p.Alternatives {
		if a.Chosen {
			what = a.Description
		}
	}
	return res.Iteration, peak, what, nil
}

// goal says whether a cell meets the benchmark's goal, GraphPipe at
// least goal× the best chain with a lower largest-device peak than the
// 1F1B chain: with the default plan, with the plan of the same search
// held under the 1F1B chain's peak (heldUnder), with another plan the
// same search simulated (its Pareto front, Plan.Alternatives), with the
// disjoint-stage variant only, or not (and why). Exact ratios, not the
// tables' rounded ones.
func (s summary) goal() string {
	meets := func(ratio float64, peak int64) bool {
		return ratio >= goal && peak > 0 && s.peak1F1B > 0 && peak < s.peak1F1B
	}
	switch {
	case s.vsAll == 0:
		return "- (no chain plan)"
	case meets(s.vsAll, s.peakGP):
		return "yes"
	case meets(s.iso, s.isoPeak):
		return fmt.Sprintf("held under the 1F1B chain's peak: %.3fx, %s (%s)", math.Floor(s.iso*1000)/1000, core.FormatBytes(s.isoPeak), s.isoWhat)
	case s.alt > 0:
		return fmt.Sprintf("by another plan of the same search: %.3fx, %s (%s)", math.Floor(s.alt*1000)/1000, core.FormatBytes(s.altPeak), s.altWhat)
	case meets(s.disjoint, s.peakDisjoint):
		return "with disjoint stages"
	case s.vsAll < goal:
		return fmt.Sprintf("no: %.3fx", math.Floor(s.vsAll*1000)/1000) // never rounded up to the goal
	case s.peak1F1B == 0:
		return "no 1F1B chain plan to compare peaks with"
	}
	return fmt.Sprintf("no: %s vs %s", core.FormatBytes(s.peakGP), core.FormatBytes(s.peak1F1B))
}

func main() {
	preset := flag.String("preset", "pcie-a100", "simulated cluster preset")
	m := flag.Int("m", 16, "micro-batches per iteration (the fixed-m table; 0: searched by every scheduler, at the devices' own memory)")
	samples := flag.Int("samples", 8192, "samples (rows) per iteration")
	measure := flag.Bool("measure", true, "also measure on 2 real logical CPU devices")
	replicas := flag.Int("measure-replicas", 0, "with -measure: cap every stage at this many devices (Scheduler.MaxReplicas; 1 forces pipeline stages where the schedulers would choose data parallelism on 2 devices); 0: no cap")
	simulate := flag.Int("simulate", 0, "candidate plans each scheduler simulates to choose among (0: the scheduler's default, 8)")
	devList := flag.String("devices", "4,8,16,32", "simulated device counts")
	ports := flag.Bool("ports", true, "model each GPU's ports as the preset gives them (sim.Link.PortGBps: transfers through a port share its bandwidth); false: a link of its own per ordered device pair, one transfer at a time (the model before the seventh session)")
	demandFirst := flag.Bool("demand-first", false, "through ports, serve first the transfers a task already waits for (sim.Cluster.DemandFirst: a runtime that copies in chunks, demanded values ahead of prefetches); false: the transfers through a port share it evenly")
	plotDir := flag.String("plot", "", "also draw the summaries into this folder (PNG): GraphPipe over the best chain against devices, with the compute bound and the 1.3x goal, and the largest device's peak memory of GraphPipe and the 1F1B chain")
	gpipeOrder := flag.Bool("gpipe-order", false, "GraphPipe (and graphpipe-disjoint) also weigh GPipe's order, every micro-batch in flight (Scheduler.GPipeOrder, the scheduler option gpipe=on); false: the generalised 1F1B alone, the scheduler's default")
	slack := flag.Float64("slack", 0, "every scheduler (in the simulated tables and the measured run) takes the lightest simulated plan within this fraction of its fastest (Scheduler.Slack, option slack=F); 0: the fastest; refused with -search and -sweep, which would ignore it")
	capFrac := flag.Float64("capfrac", 0.75, "memory-capped table: the model's training state fills this fraction of each device's memory, at most 4 (above 1: it does not fit one device; 0: no capped table)")
	search := flag.Bool("search", false, "print only the search-time table instead: PipeDream's chain DP, Piper's downset DP and GraphPipe's series-parallel DP timed on one core on uno of 2-5 and 8 branches, the two DLRMs and the 1,000-op uno, with the plan each picks (at -m micro-batches; minutes)")
	searchDevs := flag.String("search-devices", "4,8,16,32", "with -search: simulated device counts")
	searchLimit := flag.Duration("search-limit", time.Minute, "with -search: stop a search after this long (reported as stopped)")
	piper := flag.Bool("piper", false, "also plan the 1F1B chain with Piper's downset DP (1f1b-piper, option dp=piper): every chain of convex stages, counted among the best chains; slow (uno-4: seconds per micro-batch count), and refused on uno-8 (too many downsets)")
	searchOnly := flag.String("search-models", "", "with -search: only the models whose names are in this comma-separated list (as the table names them: uno-4, dlrm-8, …); empty: all")
	gnn := flag.Bool("gnn", false, "print only the multi-branch GNN table instead: mbgnn over -gnn-data at -gnn-branches towers, on -gnn-devices devices of each -gnn-caps memory, every scheduler searching m (minutes)")
	gnnData := flag.String("gnn-data", "synthetic:sbm,nodes=65536,feat=512,classes=16,avgdeg=10,train=512,val=0,test=0", "with -gnn: the dataset (a --data spec); every training node a target of the full-graph iteration")
	gnnBranches := flag.String("gnn-branches", "4,8", "with -gnn: mbgnn's tower counts")
	gnnDevices := flag.String("gnn-devices", "4,8,16", "with -gnn: simulated device counts")
	gnnCaps := flag.String("gnn-caps", "4GiB,2GiB,1GiB,512MiB", "with -gnn: per-device memory caps")
	gnnHidden := flag.Int("gnn-hidden", 256, "with -gnn: mbgnn's width")
	sweep := flag.Int("sweep", 0, "print only the swept tables instead: every scheduler's plan at the devices' memory beside its fastest at up to this many memory caps below it (a search and a simulation each; minutes), and the goal judged on the swept plans (with -plot: their plots); 0: off")
	flag.Parse()
	if *samples < 1 || *samples > maxSamples {
		check(fmt.Errorf("-samples %d: want a sample count from 1 to %d", *samples, maxSamples))
	}
	if *gnn {
		// The GNN table has its own data, devices and caps, and searches
		// m under the preset's own links: refuse what it would ignore.
		var ignored []string
		flag.Visit(func(f *flag.Flag) {
			if !strings.HasPrefix(f.Name, "gnn") && f.Name != "preset" {
				ignored = append(ignored, "-"+f.Name)
			}
		})
		if len(ignored) > 0 {
			check(fmt.Errorf("-gnn takes -preset and the -gnn-* flags only; %s would be ignored", strings.Join(ignored, ", ")))
		}
		branches, err := parseDevices(*gnnBranches, "-gnn-branches")
		check(err)
		for _, b := range branches {
			if b > maxTowers {
				check(fmt.Errorf("-gnn-branches %q: at most %d towers (mbgnn's limit)", *gnnBranches, maxTowers))
			}
		}
		devs, err := parseDevices(*gnnDevices, "-gnn-devices")
		check(err)
		var caps []int64
		for _, f := range strings.Split(*gnnCaps, ",") {
			n, err := core.ParseBytes(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				check(fmt.Errorf("-gnn-caps %q: want positive sizes separated by commas, e.g. 2GiB,1GiB", *gnnCaps))
			}
			caps = append(caps, n)
		}
		if *gnnHidden < 1 {
			check(fmt.Errorf("-gnn-hidden %d: want a positive width", *gnnHidden))
		}
		check(gnnTable(os.Stdout, gnnConfig{data: *gnnData, branches: branches, hidden: *gnnHidden, devices: devs, caps: caps, preset: *preset}))
		return
	}
	if *m > *samples {
		check(fmt.Errorf("-m %d: more micro-batches than the %d samples (-samples): want at most one micro-batch per sample", *m, *samples))
	}
	if *search {
		if *sweep != 0 {
			check(fmt.Errorf("-search and -sweep each print only their own tables: pass one"))
		}
		if *slack != 0 {
			check(fmt.Errorf("-search times the partitioners' DPs, before any plan is chosen; -slack would be ignored"))
		}
		devs, err := parseDevices(*searchDevs, "-search-devices")
		check(err)
		if *m < 1 || *searchLimit <= 0 {
			check(fmt.Errorf("-search needs -m of at least 1 and a positive -search-limit"))
		}
		models := searchModels
		if *searchOnly != "" {
			models = nil
			for _, md := range searchModels {
				for _, name := range strings.Split(*searchOnly, ",") {
					if n := strings.TrimSpace(name); n == md.String() || n == fmt.Sprintf("%s-%d", md.name, md.branches) {
						models = append(models, md)
					}
				}
			}
			if len(models) == 0 {
				check(fmt.Errorf("-search-models %q: no such model in the search table", *searchOnly))
			}
		}
		check(searchTable(os.Stdout, searchConfig{models: models, devices: devs, preset: *preset, samples: *samples, m: *m, limit: *searchLimit, reps: 3}))
		return
	}
	if *m < 0 {
		check(fmt.Errorf("-m %d: want a positive micro-batch count, or 0 to have every scheduler search it", *m))
	}
	if _, err := sim.Preset(*preset, 1); err != nil {
		check(fmt.Errorf("-preset: %w", err)) // before the tables' header
	}
	if *replicas < 0 {
		check(fmt.Errorf("-measure-replicas %d: want 0 (no cap) or a positive device count", *replicas))
	}
	if *replicas > 0 && !*measure {
		check(fmt.Errorf("-measure-replicas caps the measured run's stages: it needs -measure"))
	}
	devices, err := parseDevices(*devList, "-devices")
	check(err)
	if *demandFirst && !*ports {
		check(fmt.Errorf("-demand-first orders the transfers through ports; with -ports=false there are none, so it would be ignored"))
	}
	if !(*slack >= 0 && *slack < 1) {
		check(fmt.Errorf("-slack %v: want a fraction in [0, 1)", *slack))
	}
	if !(*capFrac == 0 || *capFrac >= minCapFrac && *capFrac <= 4) {
		check(fmt.Errorf("-capfrac %v: want a ratio in [%v, 4], or 0 for no capped table", *capFrac, minCapFrac))
	}
	if *sweep != 0 {
		if *sweep < 2 || *sweep > 64 {
			check(fmt.Errorf("-sweep %d: want 2 to 64 caps per cell, or 0 for no swept tables", *sweep))
		}
		var ignored []string
		flag.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "piper", "measure", "measure-replicas", "slack":
				ignored = append(ignored, "-"+f.Name)
			}
		})
		if len(ignored) > 0 {
			check(fmt.Errorf("-sweep prints only the swept tables; %s would be ignored", strings.Join(ignored, ", ")))
		}
	}
	if *plotDir != "" {
		// Before minutes of simulation, not after.
		if err := os.MkdirAll(*plotDir, 0o755); err != nil {
			check(fmt.Errorf("-plot: %w", err))
		}
		check(atomicfile.Check(filepath.Join(*plotDir, "graphpipe-speedup.png")))
	}
	c := config{models: benchModels, devices: devices, preset: *preset, ports: *ports, demandFirst: *demandFirst, samples: *samples, m: *m, simulate: *simulate, capFrac: *capFrac, gpipeOrder: *gpipeOrder, piper: *piper, slack: *slack}
	if *sweep != 0 {
		check(sweptMain(os.Stdout, os.Stderr, c, *sweep, *plotDir))
		return
	}
	fixed, capped, err := simulated(os.Stdout, c)
	check(err)
	if *plotDir != "" {
		files, err := writePlots(*plotDir, c, fixed, capped)
		check(err)
		for _, f := range files {
			fmt.Fprintln(os.Stderr, "graphpipebench: wrote", f)
		}
	}
	if *measure {
		measured(*m, *replicas, *slack)
	}
}

// samplesBatch is an iteration of n samples with no edges between
// them (the MLP models read only their features) and the batch of all
// of them.
func samplesBatch(n int) (*core.Graph, []int32) {
	g, _ := core.Undirected(n, nil, nil)
	batch := make([]int32, n)
	for i := range batch {
		batch[i] = int32(i)
	}
	return g, batch
}

// parseDevices reads a comma-separated list of device counts.
func parseDevices(list, flagName string) ([]int, error) {
	var devices []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxDevices {
			return nil, fmt.Errorf("%s %q: want integers from 1 to %d separated by commas", flagName, list, maxDevices)
		}
		if slices.Contains(devices, n) {
			return nil, fmt.Errorf("%s %q: %d is listed twice (each count is a row of its own)", flagName, list, n)
		}
		devices = append(devices, n)
	}
	return devices, nil
}

// Bounds on the flags: beyond them a run takes hours or overflows.
const (
	maxSamples = 1 << 24 // rows per iteration
	maxDevices = 1024    // simulated devices (the issue asks up to 64)
	maxTowers  = 64      // mbgnn's towers, as gnnkit plan allows
	minCapFrac = 0.01    // a cap of 100 times the training state
)

// benchModels are the benchmark's models: CANDLE-Uno-like with 4 and 8
// branches over 4096 inputs, a DLRM-like model with 8 small tables
// (1,000 × 1024) and wide MLPs, and GraphPipe's DLRM (the authors'
// profiler defaults: 4 tables of 10⁶ × 64, bottom MLP 4-64-64, top MLP
// 64-64-2), whose dense Adam steps outweigh its compute.
var benchModels = []model{
	{"uno", 4, core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}, ""},
	{"uno", 8, core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 8}, ""},
	{"dlrm", 8, core.ModelConfig{InDim: 512, Hidden: 1024, Classes: 2, Layers: 3, Branches: 8}, ""},
	{"dlrm", 4, core.ModelConfig{InDim: 4, Hidden: 64, Classes: 2, Layers: 2, Branches: 4, TableRows: 1_000_000}, "dlrm-4 (10⁶×64)"},
}

// config is what the simulated tables run.
type config struct {
	models  []model
	devices []int
	preset  string
	ports   bool
	// demandFirst: through ports, demanded transfers first
	// (sim.Cluster.DemandFirst).
	demandFirst bool
	samples     int
	m           int // micro-batches of the fixed-m table
	simulate    int
	capFrac     float64 // 0: no memory-capped table
	// gpipeOrder has GraphPipe weigh GPipe's order too
	// (Scheduler.GPipeOrder, option gpipe=on).
	gpipeOrder bool
	// piper adds the 1F1B chain from Piper's downset DP (dp=piper) as a
	// fifth scheduler, one of the best chain's (refused where the op
	// graph has too many downsets).
	piper bool
	// slack: every scheduler's Scheduler.Slack (0: the fastest plan).
	slack float64
}

// cluster is c's preset on n devices, its links as c says (ports,
// demanded transfers first).
func (c config) cluster(n int) (*sim.Cluster, error) {
	cl, err := sim.Preset(c.preset, n)
	if err != nil {
		return nil, err
	}
	if !c.ports {
		cl.Link.PortGBps, cl.InterNode.PortGBps = 0, 0
	}
	cl.DemandFirst = c.demandFirst
	return cl, nil
}

// simulated prints the fixed-m table and, with capFrac > 0, the
// memory-capped one, each with its summary, and returns the summaries.
func simulated(out io.Writer, c config) (fixed, capped []summary, err error) {
	links := "ports shared by the transfers through them"
	if !c.ports {
		links = "a link per device pair"
	} else if c.demandFirst {
		links = "ports serving first the transfers a task waits for"
	}
	day := time.Now().UTC().Format(time.DateOnly)
	if c.slack > 0 {
		day = fmt.Sprintf("every scheduler taking the lightest simulated plan within %s of its fastest (slack); %s", strconv.FormatFloat(100*c.slack, 'g', 4, 64)+"%", day)
	}
	chains := "1F1B or GPipe"
	if c.piper {
		chains = "1F1B, GPipe or Piper's 1F1B"
	}
	if c.m > 0 {
		fmt.Fprintf(out, "simulated: preset %s (%s), %d samples per iteration in %d micro-batches, roofline op costs; %s\n\n", c.preset, links, c.samples, c.m, day)
	} else {
		fmt.Fprintf(out, "simulated: preset %s (%s), %d samples per iteration, m searched by every scheduler (1, 2, 4, … 64), the devices' own memory, roofline op costs; %s\n\n", c.preset, links, c.samples, day)
	}
	fixed, err = table(out, c, c.m, 0)
	if err != nil {
		return nil, nil, err
	}
	if c.m > 0 {
		printSummary(out, "GraphPipe's throughput over the chain baselines (simulated, fixed m):", fixed, false, chains)
	} else {
		printSummary(out, "GraphPipe's throughput over the chain baselines (simulated, m searched):", fixed, true, chains)
	}
	if c.capFrac > 0 {
		fmt.Fprintf(out, "\nsimulated, memory-capped: preset %s (%s), %d samples per iteration, m searched by every scheduler (1, 2, 4, … 64), roofline op costs, per-device memory cap = the model's training state (parameters, gradients and Adam's state of the whole model, what a home-step plan's home holds) / %.2f; %s\n\n",
			c.preset, links, c.samples, c.capFrac, day)
		capped, err = table(out, c, 0, c.capFrac)
		if err != nil {
			return nil, nil, err
		}
		printSummary(out, "GraphPipe's throughput over the chain baselines (simulated, memory-capped, m searched):", capped, true, chains)
	}
	return fixed, capped, reproduce(out, c)
}

// capLimit is the memory-capped table's per-device memory: the model's
// training state (what a home-step plan's home holds) / capFrac.
func capLimit(cm *sim.CostModel, capFrac float64) int64 {
	return int64(float64(cm.Resident(true, false, cm.ParamBytes())) / capFrac)
}

// planCommand is the gnnkit plan command line that plans and simulates
// model md as the tables do, on the same workload (samples rows of
// md.cfg.InDim features with no edges, every row a training target: a
// stochastic block model with no edges and all its nodes in the
// training split), preset and options, leaving out --devices and
// --scheduler. mem > 0 caps every device's memory at mem bytes and has
// the scheduler search m (the memory-capped table); else m is c.m.
// ok is false where the command line cannot express the configuration
// (an odd sample count: the split takes the same count of each of the
// two classes; ports off or demanded transfers first: only a cluster
// file can say that).
func planCommand(md model, c config, mem int64) (cmd string, ok bool) {
	if c.samples%2 != 0 || !c.ports || c.demandFirst || md.cfg.Classes != 2 {
		return "", false
	}
	args := []string{"gnnkit plan", "--model " + md.name, fmt.Sprintf("--branches %d", md.cfg.Branches),
		fmt.Sprintf("--hidden %d", md.cfg.Hidden), fmt.Sprintf("--layers %d", md.cfg.Layers)}
	if md.cfg.TableRows > 0 {
		args = append(args, fmt.Sprintf("--table-rows %d", md.cfg.TableRows))
	}
	args = append(args, fmt.Sprintf("--data synthetic:sbm,nodes=%d,feat=%d,classes=2,avgdeg=0,train=%d,val=0,test=0", c.samples, md.cfg.InDim, c.samples/2),
		"--preset "+c.preset)
	if mem > 0 {
		args = append(args, fmt.Sprintf("--device-mem %d", mem))
	} else if c.m > 0 {
		args = append(args, fmt.Sprintf("--sched-opt m=%d", c.m))
	}
	if c.simulate != 0 {
		args = append(args, fmt.Sprintf("--sched-opt simulate=%d", c.simulate))
	}
	if c.slack > 0 {
		args = append(args, "--sched-opt slack="+strconv.FormatFloat(c.slack, 'g', -1, 64))
	}
	return strings.Join(append(args, "--simulate"), " "), true
}

// reproduce prints, per model, the gnnkit plan command that gives any
// row of the simulated tables (planCommand), with what to add for each
// scheduler.
func reproduce(out io.Writer, c config) error {
	fmt.Fprintf(out, "\nany row from the command line: add --devices N and --scheduler graphpipe, 1f1b or gpipe")
	if c.gpipeOrder {
		fmt.Fprintf(out, " (graphpipe: with --sched-opt gpipe=on)")
	}
	fmt.Fprintf(out, "; graphpipe-disjoint is graphpipe with --sched-opt shared=off")
	if c.piper {
		fmt.Fprintf(out, ", 1f1b-piper 1f1b with --sched-opt dp=piper")
	}
	fmt.Fprintln(out, ":")
	for _, md := range c.models {
		cmd, ok := planCommand(md, c, 0)
		if !ok {
			fmt.Fprintf(out, "  %s: not from the command line (it needs an even -samples, -ports, no -demand-first and two classes; a cluster file (--cluster) can say the rest)\n", md)
			continue
		}
		fmt.Fprintf(out, "  %s: %s\n", md, cmd)
		if c.capFrac <= 0 {
			continue
		}
		mod, err := core.BuildModel(md.name, md.cfg)
		if err != nil {
			return err
		}
		cl, err := sim.Preset(c.preset, 1)
		if err != nil {
			return err
		}
		g, batch := samplesBatch(c.samples)
		w := core.NewWorkload(mod, g, md.cfg.InDim, batch, cl.Infos(), 1)
		prof, err := sim.Roofline(w, cl.Devices[0])
		if err != nil {
			return err
		}
		cm, err := sim.NewCostModel(w, prof, cl)
		if err != nil {
			return err
		}
		capped, _ := planCommand(md, c, capLimit(cm, c.capFrac))
		fmt.Fprintf(out, "    memory-capped: %s\n", capped)
	}
	return nil
}

// table simulates every model on every device count under the three
// schedulers with m micro-batches (0: each scheduler searches m) and
// prints one row per plan. capFrac > 0 caps every device's memory at the
// model's training state (what a home-step plan's home holds) / capFrac.
func table(out io.Writer, c config, m int, capFrac float64) ([]summary, error) {
	models, devices, samples, simulate := c.models, c.devices, c.samples, c.simulate
	fmt.Fprintln(out, "| model | devices | memory cap | scheduler | order | m | used | stages | depth | predicted ms | iteration ms | vs chain 1F1B | vs best chain | max peak memory per device |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	var sums []summary
	for _, md := range models {
		mod, err := core.BuildModel(md.name, md.cfg)
		if err != nil {
			return nil, err
		}
		g, batch := samplesBatch(samples)
		for _, n := range devices {
			cl, err := c.cluster(n)
			if err != nil {
				return nil, err
			}
			w := core.NewWorkload(mod, g, md.cfg.InDim, batch, cl.Infos(), 1)
			prof, err := sim.Roofline(w, cl.Devices[0])
			if err != nil {
				return nil, err
			}
			// The compute bound (sim.WorkBound): no plan's
			// iteration is shorter. Every plan here steps each parameter
			// whole on one device (its owner), so the steps count too: all
			// of them spread evenly, and the largest on its own.
			cm, err := sim.NewCostModel(w, prof, cl)
			if err != nil {
				return nil, err
			}
			// At m micro-batches every plan runs each op on the same
			// ones (BuildPlan's contiguous shares); one is the whole batch.
			boundAt := func(m int) (time.Duration, error) {
				return sim.WorkBound(w, prof, cl, graphpipe.MicroUnits(w, m), true)
			}
			bound, err := boundAt(1)
			if err != nil {
				return nil, err
			}
			var boundM time.Duration
			if m > 0 {
				if boundM, err = boundAt(m); err != nil {
					return nil, err
				}
			}
			capStr := "device's"
			if capFrac > 0 {
				limit := capLimit(cm, capFrac)
				for i := range cl.Devices {
					cl.Devices[i].MemBytes = limit
				}
				w = core.NewWorkload(mod, g, md.cfg.InDim, batch, cl.Infos(), 1)
				capStr = core.FormatBytes(limit)
			}
			// Every scheduler plans with the cluster and profile the
			// simulator then replays its plan on: one cost model.
			scheds := []*graphpipe.Scheduler{
				{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: m, Cluster: cl, Profile: prof, Simulate: simulate, GPipeOrder: c.gpipeOrder, Slack: c.slack},
				{Kind: graphpipe.OneFOneB, MicroBatches: m, Cluster: cl, Profile: prof, Simulate: simulate, Slack: c.slack},
				{Kind: graphpipe.GPipe, MicroBatches: m, Cluster: cl, Profile: prof, Simulate: simulate, Slack: c.slack},
				{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: m, Cluster: cl, Profile: prof, Simulate: simulate, Disjoint: true, GPipeOrder: c.gpipeOrder, Slack: c.slack},
			}
			if c.piper {
				scheds = append(scheds, &graphpipe.Scheduler{Kind: graphpipe.OneFOneB, MicroBatches: m, Cluster: cl, Profile: prof, Simulate: simulate, ChainDP: graphpipe.ChainPiper, Slack: c.slack})
			}
			name := func(s *graphpipe.Scheduler) string {
				if s.Disjoint {
					return "graphpipe-disjoint"
				}
				if s.ChainDP == graphpipe.ChainPiper {
					return s.Name() + "-piper"
				}
				return s.Name()
			}
			type row struct {
				name          string
				order         string
				m, used       int
				stages, depth float64
				pred          float64
				iter          time.Duration
				peak          int64
				busy          float64 // the busiest device's compute share of the iteration
				over          bool
				err           error              // no plan
				alts          []core.Alternative // the search's Pareto front (Plan.Alternatives)
			}
			var rows []row
			chosen := make([]int, len(scheds))
			for i, s := range scheds {
				p, err := s.Schedule(context.Background(), w)
				if err != nil {
					rows = append(rows, row{name: name(s), err: err})
					continue
				}
				if err := p.Validate(w); err != nil {
					return nil, fmt.Errorf("%s on %s, %d devices: invalid plan: %w", name(s), md, n, err)
				}
				res, err := sim.Simulate(p, w, prof, cl)
				if err != nil {
					return nil, err
				}
				var peak int64
				for _, v := range res.PeakMem {
					peak = max(peak, v)
				}
				var busy time.Duration
				for _, v := range res.Busy {
					busy = max(busy, v)
				}
				order := "1f1b"
				if p.Metrics["gpipe_order"] == 1 || p.Metrics["fallback_gpipe"] == 1 || s.Kind == graphpipe.GPipe {
					order = "gpipe"
				}
				chosen[i] = int(p.Metrics["micro_batches"])
				rows = append(rows, row{name(s), order, chosen[i], len(p.Devices()), p.Metrics["stages"], p.Metrics["depth"], p.Metrics["predicted_iteration_ms"], res.Iteration, peak, float64(busy) / float64(res.Iteration), len(res.OverCap) > 0, nil, p.Alternatives})
			}
			var chain1, bestChain time.Duration
			var peak1 int64
			cell := len(sums) // this cell's summary, once graphpipe's row adds it
			for _, r := range rows {
				if r.err != nil {
					continue
				}
				if r.name == "1f1b" {
					chain1, peak1 = r.iter, r.peak
				}
				if (r.name == "1f1b" || r.name == "gpipe" || r.name == "1f1b-piper") && (bestChain == 0 || r.iter < bestChain) {
					bestChain = r.iter
				}
			}
			ratio := func(base, x time.Duration) string {
				if base == 0 {
					return "-"
				}
				return fmt.Sprintf("%.2fx", float64(base)/float64(x))
			}
			for _, r := range rows {
				if r.err != nil {
					why := r.err.Error()
					if errors.Is(r.err, graphpipe.ErrTooManyDownsets) {
						why = "refused: too many downsets for Piper's DP"
					}
					fmt.Fprintf(out, "| %s | %d | %s | %s | - | - | - | - | - | - | - | - | - | %s |\n", md, n, capStr, r.name, why)
					continue
				}
				peak := core.FormatBytes(r.peak)
				if r.over {
					peak += " (over cap)"
				}
				fmt.Fprintf(out, "| %s | %d | %s | %s | %s | %d | %d | %.0f | %.0f | %.2f | %.2f | %s | %s | %s |\n", md, n, capStr, r.name, r.order, r.m, r.used, r.stages, r.depth,
					r.pred, float64(r.iter)/1e6, ratio(chain1, r.iter), ratio(bestChain, r.iter), peak)
				if r.name == "graphpipe-disjoint" && len(sums) > cell && bestChain > 0 {
					sums[len(sums)-1].disjoint = float64(bestChain) / float64(r.iter)
					sums[len(sums)-1].peakDisjoint = r.peak
				}
				if r.name == "graphpipe" {
					sm := summary{name: md.String(), devices: n, ms: [3]int(chosen[:3]),
						busy: r.busy, peakGP: r.peak, peak1F1B: peak1}
					if chain1 > 0 {
						sm.vs1f1b = float64(chain1) / float64(r.iter)
					}
					if bestChain > 0 {
						// The fastest other plan of the same search that
						// is goal× the best chain and lighter than the
						// 1F1B chain, if any.
						for _, a := range r.alts {
							if v := float64(bestChain) / 1e6 / a.IterationMs; !a.Chosen && v >= goal && peak1 > 0 && a.PeakBytes < peak1 && v > sm.alt {
								sm.alt, sm.altPeak, sm.altWhat = v, a.PeakBytes, a.Description
							}
						}
						sm.vsAll = float64(bestChain) / float64(r.iter)
						if peak1 > 0 {
							iso, isoPeak, isoWhat, err := heldUnder(mod, g, md.cfg.InDim, batch, *scheds[0], peak1-1)
							if err != nil {
								return nil, err
							}
							sm.isoWhat = isoWhat
							if iso > 0 {
								sm.iso, sm.isoPeak = float64(bestChain)/float64(iso), isoPeak
							}
						}
						sm.headroom = float64(bestChain) / float64(bound)
						if m > 0 {
							sm.headroomM = float64(bestChain) / float64(boundM)
						} else if r.m > 0 {
							b, err := boundAt(r.m)
							if err != nil {
								return nil, err
							}
							sm.headroomGP = float64(bestChain) / float64(b)
						}
					}
					sums = append(sums, sm)
				}
			}
		}
	}
	return sums, nil
}

func printSummary(out io.Writer, title string, sums []summary, withM bool, chains string) {
	fmt.Fprintf(out, "\n%s\n\n", title)
	head, rule := fmt.Sprintf(" GraphPipe with disjoint stages vs best chain | GraphPipe held under the 1F1B chain's peak vs best chain | GraphPipe's busiest device computing | ≥ %.1fx the best chain and lighter than the 1F1B chain |", goal), "---|---|---|---|"
	if withM {
		fmt.Fprintln(out, "| model | devices | vs chain 1F1B | vs best chain ("+chains+") | most any plan could gain over the best chain | m: graphpipe / 1f1b / gpipe | most any plan at GraphPipe's m could gain |"+head)
		fmt.Fprintln(out, "|---|---|---|---|---|---|---|"+rule)
	} else {
		fmt.Fprintln(out, "| model | devices | vs chain 1F1B | vs best chain ("+chains+") | most any plan could gain over the best chain | most any plan at this m could gain |"+head)
		fmt.Fprintln(out, "|---|---|---|---|---|---|"+rule)
	}
	r := func(x float64) string {
		if x == 0 {
			return "- (no chain plan fits)"
		}
		return fmt.Sprintf("%.2fx", x)
	}
	mm := func(x int) string {
		if x == 0 {
			return "-"
		}
		return strconv.Itoa(x)
	}
	for _, s := range sums {
		held := "- (nothing fits)"
		if s.iso == 0 && s.isoWhat != "" {
			held = "- (" + s.isoWhat + ")"
		}
		if s.iso > 0 {
			held = fmt.Sprintf("%.2fx, %s", s.iso, core.FormatBytes(s.isoPeak))
		}
		sh := fmt.Sprintf(" %s | %s | %.0f%% | %s |", r(s.disjoint), held, 100*s.busy, s.goal())
		if withM {
			fmt.Fprintf(out, "| %s | %d | %s | %s | %s | %s / %s / %s | %s |%s\n", s.name, s.devices, r(s.vs1f1b), r(s.vsAll), r(s.headroom), mm(s.ms[0]), mm(s.ms[1]), mm(s.ms[2]), r(s.headroomGP), sh)
		} else {
			fmt.Fprintf(out, "| %s | %d | %s | %s | %s | %s |%s\n", s.name, s.devices, r(s.vs1f1b), r(s.vsAll), r(s.headroom), r(s.headroomM), sh)
		}
	}
}

// measured runs graphpipe and the chain schedules for real on 2 logical
// CPU devices (interleaved, medians). The schedulers plan with a profile
// and a cluster measured on this machine (sim.MeasureWith, sim.CPUCluster),
// and the simulator's prediction for each plan is printed beside the
// measurement. replicas > 0 caps every stage at that many devices;
// slack is every scheduler's Scheduler.Slack.
func measured(m, replicas int, slack float64) {
	ctx := context.Background()
	be, err := cpu.New(core.BackendOptions{Devices: 2, Threads: 1})
	check(err)
	defer be.Close()
	devs := be.Devices()
	infos := []core.DeviceInfo{devs[0].Info(), devs[1].Info()}
	cfg := core.ModelConfig{InDim: 256, Hidden: 256, Classes: 4, Layers: 2, Branches: 4}
	mod, err := core.BuildModel("uno", cfg)
	check(err)
	const n = 2048
	g, batch := samplesBatch(n)
	feats := make([]float32, n*cfg.InDim)
	labels := make([]int32, n)
	for i := range feats {
		feats[i] = float32((i*7919)%97) / 97
	}
	for i := range labels {
		labels[i] = int32(i % cfg.Classes)
	}
	data := engine.Data{Graph: g, Features: feats, FeatureDim: cfg.InDim, Labels: labels}
	// The machine and the model's op costs, measured (a trainer of its
	// own: profiling takes optimizer steps). On a shared VM these drift
	// by 10-20% within a minute, so the bench calibrates again before
	// every measured round and compares the median simulation with the
	// median measurement; the schedulers plan with the first.
	calibrate := func() (*sim.Cluster, *sim.Profile) {
		pt, err := engine.New(engine.Config{Model: mod, Devices: devs, Seed: 1, Data: data})
		check(err)
		defer pt.Close()
		cl, err := sim.CPUCluster(ctx, devs)
		check(err)
		// The unit sizes the schedulers may plan (m fixed: n/m; m = 0:
		// every count of the m search's ladder), and the whole batch.
		ladder := append((&graphpipe.Scheduler{MicroBatches: m}).UnitSizes(n), 0)
		prof, err := sim.MeasureWith(ctx, pt, devs[0], sim.MeasureOptions{Ladder: ladder, Reps: 5})
		check(err)
		cores, err := sim.MeasureConcurrency(ctx, pt, devs, 5)
		check(err)
		cl.HostCores = cores
		return cl, prof
	}
	cl, prof := calibrate()
	type run struct {
		name string
		tr   *engine.Trainer
		p    *core.Plan
		b    *engine.Batch
		w    *core.Workload
		sims []float64 // simulated ms, one per calibration
		ms   []float64
	}
	var runs []*run
	for _, s := range []*graphpipe.Scheduler{
		{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: m, Cluster: cl, Profile: prof, MaxReplicas: replicas, Slack: slack},
		{Kind: graphpipe.OneFOneB, MicroBatches: m, Cluster: cl, Profile: prof, MaxReplicas: replicas, Slack: slack},
		{Kind: graphpipe.GPipe, MicroBatches: m, Cluster: cl, Profile: prof, MaxReplicas: replicas, Slack: slack},
	} {
		tr, err := engine.New(engine.Config{Model: mod, Devices: devs, Seed: 1, Data: data})
		check(err)
		defer tr.Close()
		b := tr.FullBatch(batch)
		w, err := tr.Workload(b, infos)
		check(err)
		p, err := s.Schedule(ctx, w)
		check(err)
		runs = append(runs, &run{name: s.Name(), tr: tr, p: p, b: b, w: w})
	}
	var cores []float64
	for round := 0; round < 6; round++ {
		if round > 0 {
			cl, prof = calibrate()
			cores = append(cores, cl.HostCores)
		}
		for _, r := range runs {
			if round > 0 {
				res, err := sim.Simulate(r.p, r.w, prof, cl)
				check(err)
				r.sims = append(r.sims, float64(res.Iteration)/1e6)
			}
			runtime.GC()
			t0 := time.Now()
			_, err := r.tr.Run(ctx, r.p, r.b, engine.RunOptions{})
			check(err)
			if round > 0 {
				r.ms = append(r.ms, float64(time.Since(t0))/1e6)
			}
		}
	}
	capped := ""
	if replicas > 0 {
		capped = fmt.Sprintf(", stages capped at %d device(s)", replicas)
	}
	mb := fmt.Sprintf("%d micro-batches", m)
	if m == 0 {
		mb = "m searched by every scheduler"
	}
	fmt.Printf("\nmeasured: 2 logical CPU devices (1 thread each; calibrated before each of 5 measured rounds: host cores %s), uno-4 (256 in, 256 hidden, 2 layers), %d samples, %s%s, medians of 5\n\n",
		spread(cores, "%.2f"), n, mb, capped)
	fmt.Println("| scheduler | order | devices used | stages | depth | simulated ms (median, range over calibrations) | measured ms (median, range) | simulated / measured | measured vs chain 1F1B | measured vs best chain |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	med := make([]float64, len(runs))
	var chain1, bestChain float64
	for i, r := range runs {
		med[i] = median(r.ms)
		if r.name == "1f1b" {
			chain1 = med[i]
		}
		if r.name != "graphpipe" && (bestChain == 0 || med[i] < bestChain) {
			bestChain = med[i]
		}
	}
	for i, r := range runs {
		order := "1f1b"
		if r.p.Metrics["gpipe_order"] == 1 || r.p.Metrics["fallback_gpipe"] == 1 || r.name == "gpipe" {
			order = "gpipe"
		}
		fmt.Printf("| %s | %s | %d | %.0f | %.0f | %.1f (%s) | %.1f (%s) | %.2f | %.2fx | %.2fx |\n", r.name, order, len(r.p.Devices()), r.p.Metrics["stages"], r.p.Metrics["depth"],
			median(r.sims), spread(r.sims, "%.1f"), med[i], spread(r.ms, "%.1f"), median(r.sims)/med[i], chain1/med[i], bestChain/med[i])
	}
}

// median of xs (sorts a copy).
func median(xs []float64) float64 {
	c := append([]float64(nil), xs...)
	sort.Float64s(c)
	return c[len(c)/2]
}

// spread is xs' least and largest, "lo–hi" in format f.
func spread(xs []float64, f string) string {
	return fmt.Sprintf(f+"–"+f, slices.Min(xs), slices.Max(xs))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "graphpipebench:", err)
		os.Exit(1)
	}
}
