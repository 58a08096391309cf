package blad

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gnnkit/gnnkit/core"
)

var (
	_ core.SchedulerWithFeedback = (*Scheduler)(nil)
	_ core.Scheduler             = (*ESDG)(nil)
)

func init() {
	core.RegisterScheduler("blad", func(opts map[string]string) (core.Scheduler, error) {
		s := New()
		for k, v := range opts {
			switch k {
			case "streams":
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > 2 {
					return nil, fmt.Errorf("blad: streams=%q: want 1 or 2", v)
				}
				s.Streams = n
			case "adapt":
				s.NoAdapt = v == "false" || v == "0"
			default:
				return nil, fmt.Errorf("blad: unknown option %q (known: streams, adapt)", k)
			}
		}
		return s, nil
	})
	core.RegisterScheduler("esdg", func(opts map[string]string) (core.Scheduler, error) {
		if len(opts) > 0 {
			return nil, fmt.Errorf("esdg: takes no options")
		}
		return &ESDG{}, nil
	})
}

// GroupCost describes group i of a workload (its batch id i): a stable
// key (e.g. its target snapshot) under which measurements are kept across
// iterations, the estimated work of its graph ops and of its dense ops
// (any unit, e.g. FLOP-like counts), and its sample count (loss terms).
type GroupCost struct {
	Key          int
	Graph, Dense float64
	Samples      int
}

// GroupSetter is implemented by schedulers that take per-group costs.
type GroupSetter interface {
	SetGroups([]GroupCost)
}

// Scheduler is BLAD. Its zero value is not ready; use New.
type Scheduler struct {
	// Streams per device: 2 (default) overlaps the graph phase of one
	// group with the dense phase of another; 1 runs groups in turn.
	Streams int
	// NoAdapt turns off re-placement from measurements.
	NoAdapt bool

	groups   []GroupCost
	measured map[int]float64 // seconds per group key
	scale    float64         // seconds per unit of estimated cost
	last     *core.Plan
}

// New returns BLAD with two streams per device and adaptation on.
func New() *Scheduler { return &Scheduler{Streams: 2, measured: map[int]float64{}} }

// Name returns "blad".
func (s *Scheduler) Name() string { return "blad" }

// SetGroups gives the costs of the next workloads' groups (by batch id).
func (s *Scheduler) SetGroups(g []GroupCost) { s.groups = slices.Clone(g) }

// costs returns the cost used for placement of each group and its
// graph share.
func (s *Scheduler) costs(n int) (cost, ratio []float64, gc []GroupCost) {
	gc = s.groups
	if len(gc) != n {
		gc = make([]GroupCost, n)
		for i := range gc {
			gc[i] = GroupCost{Key: i, Graph: 0.5, Dense: 0.5, Samples: 1}
		}
	}
	cost, ratio = make([]float64, n), make([]float64, n)
	for i, g := range gc {
		est := g.Graph + g.Dense
		cost[i] = est
		if m, ok := s.measured[g.Key]; ok && !s.NoAdapt {
			cost[i] = m
		} else if s.scale > 0 && !s.NoAdapt {
			cost[i] = est * s.scale
		}
		if est > 0 {
			ratio[i] = g.Graph / est
		}
	}
	return cost, ratio, gc
}

// Schedule places the workload's groups.
func (s *Scheduler) Schedule(ctx context.Context, w *core.Workload) (*core.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.measured == nil {
		s.measured = map[int]float64{}
	}
	if len(w.Devices) == 0 || len(w.Batch) == 0 || len(w.Ops) == 0 {
		return nil, fmt.Errorf("blad: the workload needs devices, groups and ops")
	}
	n := len(w.Batch)
	cost, ratio, gc := s.costs(n)
	devs := deviceIDs(w)
	if s.last != nil {
		// Keep the home device: the master parameters live there.
		if i := slices.Index(devs, s.last.Home); i > 0 {
			devs[0], devs[i] = devs[i], devs[0]
		}
	}
	per := LPT(cost, len(devs))
	for d := range per {
		per[d] = pairOrder(per[d], ratio)
	}
	p, err := emit("blad", w, devs, per, gc, s.Streams >= 2)
	if err != nil {
		return nil, err
	}
	loads := make([]float64, len(devs))
	for d, gs := range per {
		for _, g := range gs {
			loads[d] += cost[g]
		}
	}
	p.Metrics["predicted_imbalance"] = Imbalance(loads)
	s.last = p
	return p, nil
}

// Observe records each group's measured time (forward and backward task
// spans) from the trace, refits the estimate scale, and returns a new
// plan when the measurements move a group to another device.
func (s *Scheduler) Observe(ctx context.Context, w *core.Workload, t *core.Trace) (*core.Plan, error) {
	if s.NoAdapt || s.last == nil || t == nil {
		return nil, nil
	}
	n := len(w.Batch)
	_, _, gc := s.costs(n)
	dur := make([]float64, len(s.last.Units))
	for _, e := range t.Events {
		if (e.Cat == core.TaskForward.String() || e.Cat == core.TaskBackward.String()) && e.Unit >= 0 && e.Unit < len(dur) {
			dur[e.Unit] += e.Dur.Seconds()
		}
	}
	var sumM, sumE float64
	for u, unit := range s.last.Units {
		if len(unit.Targets) != 1 || int(unit.Targets[0]) >= n || dur[u] == 0 {
			continue
		}
		g := gc[unit.Targets[0]]
		if old, ok := s.measured[g.Key]; ok {
			s.measured[g.Key] = 0.5*old + 0.5*dur[u]
		} else {
			s.measured[g.Key] = dur[u]
		}
		sumM += dur[u]
		sumE += g.Graph + g.Dense
	}
	if sumE > 0 {
		s.scale = sumM / sumE
	}
	prev := placement(s.last)
	home := s.last.Home
	p, err := s.Schedule(ctx, w)
	if err != nil {
		return nil, err
	}
	if p.Home != home {
		return nil, fmt.Errorf("blad: re-placement moved the home device from %s to %s", home, p.Home)
	}
	if maps := placement(p); equalPlacement(prev, maps) {
		s.last = p
		return nil, nil
	}
	return p, nil
}

// ESDG is the equal-count snapshot-group partition (ESDG-style): group i
// of n on device floor(i*D/n), in order, one stream per device.
type ESDG struct{ groups []GroupCost }

// Name returns "esdg".
func (*ESDG) Name() string { return "esdg" }

// SetGroups takes the groups' sample counts (for loss weights); the
// placement ignores the costs.
func (e *ESDG) SetGroups(g []GroupCost) { e.groups = slices.Clone(g) }

// Schedule places the groups.
func (e *ESDG) Schedule(ctx context.Context, w *core.Workload) (*core.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(w.Devices) == 0 || len(w.Batch) == 0 || len(w.Ops) == 0 {
		return nil, fmt.Errorf("esdg: the workload needs devices, groups and ops")
	}
	n := len(w.Batch)
	devs := deviceIDs(w)
	per := make([][]int, len(devs))
	for i := 0; i < n; i++ {
		d := i * len(devs) / n
		per[d] = append(per[d], i)
	}
	gc := e.groups
	if len(gc) != n {
		gc = nil
	}
	return emit("esdg", w, devs, per, gc, false)
}

func deviceIDs(w *core.Workload) []core.DeviceID {
	out := make([]core.DeviceID, len(w.Devices))
	for i, d := range w.Devices {
		out[i] = d.ID
	}
	return out
}

// LPT assigns items (by cost) to k bins: longest first onto the least
// loaded bin (ties: lower index). Each bin's items are in ascending
// order of index.
func LPT(cost []float64, k int) [][]int {
	ord := make([]int, len(cost))
	for i := range ord {
		ord[i] = i
	}
	sort.SliceStable(ord, func(a, b int) bool { return cost[ord[a]] > cost[ord[b]] })
	load := make([]float64, k)
	out := make([][]int, k)
	for _, i := range ord {
		best := 0
		for d := 1; d < k; d++ {
			if load[d] < load[best] {
				best = d
			}
		}
		load[best] += cost[i]
		out[best] = append(out[best], i)
	}
	for d := range out {
		slices.Sort(out[d])
	}
	return out
}

// pairOrder orders a device's groups so graph-heavy and dense-heavy ones
// alternate: sorted by graph share, then taken from both ends.
func pairOrder(gs []int, ratio []float64) []int {
	s := slices.Clone(gs)
	sort.SliceStable(s, func(a, b int) bool { return ratio[s[a]] > ratio[s[b]] })
	out := make([]int, 0, len(s))
	for lo, hi := 0, len(s)-1; lo <= hi; lo, hi = lo+1, hi-1 {
		out = append(out, s[lo])
		if hi != lo {
			out = append(out, s[hi])
		}
	}
	return out
}

// Imbalance is max/mean - 1 of the loads (0 for none).
func Imbalance(loads []float64) float64 {
	if len(loads) == 0 {
		return 0
	}
	var sum, mx float64
	for _, l := range loads {
		sum += l
		mx = math.Max(mx, l)
	}
	if sum == 0 {
		return 0
	}
	return mx/(sum/float64(len(loads))) - 1
}

// Hoisted returns the topology manager's split of a model's ops: the
// first graph ops (graph ops with no graph op upstream) and everything
// they depend on, ascending; the rest is the dense phase. Loss ops are
// never hoisted.
func Hoisted(ops []core.OpInfo) (hoist, rest []int) {
	n := len(ops)
	graphUp := make([]bool, n) // a graph op is upstream (exclusive)
	for i, op := range ops {
		for _, d := range op.Deps {
			if graphUp[d] || ops[d].Kind == core.KindGraph {
				graphUp[i] = true
			}
		}
	}
	in := make([]bool, n)
	var mark func(i int)
	mark = func(i int) {
		if in[i] {
			return
		}
		in[i] = true
		for _, d := range ops[i].Deps {
			mark(d)
		}
	}
	for i, op := range ops {
		if op.Kind == core.KindGraph && !graphUp[i] {
			mark(i)
		}
	}
	for i, op := range ops {
		if in[i] && op.Kind != core.KindLoss {
			hoist = append(hoist, i)
		} else {
			rest = append(rest, i)
		}
	}
	// The hoisted set must be closed under dependencies (a loss op in it
	// would break that; none is a dependency of a graph op in practice).
	for _, i := range hoist {
		for _, d := range ops[i].Deps {
			if !in[d] || ops[d].Kind == core.KindLoss {
				return nil, allOps(n)
			}
		}
	}
	return hoist, rest
}

func allOps(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// emit builds the plan: per[d] lists device d's groups in run order.
func emit(name string, w *core.Workload, devs []core.DeviceID, per [][]int, gc []GroupCost, twoStreams bool) (*core.Plan, error) {
	n := len(w.Batch)
	p := &core.Plan{Scheduler: name, Home: devs[0], Metrics: map[string]float64{}}
	total := 0.0
	for i := 0; i < n; i++ {
		total += samples(gc, i)
	}
	for i := 0; i < n; i++ {
		p.Units = append(p.Units, core.Unit{ID: i, Targets: []int32{w.Batch[i]}, LossWeight: samples(gc, i) / total})
	}
	hoist, rest := Hoisted(w.Ops)
	split := twoStreams && len(hoist) > 0 && len(rest) > 0
	add := func(t core.Task) int {
		t.ID = len(p.Tasks)
		p.Tasks = append(p.Tasks, t)
		return t.ID
	}
	all := allOps(len(w.Ops))
	var stepDeps []int
	placed := 0
	for d, dev := range devs {
		var bwd []int
		gs := per[d]
		placed += len(gs)
		if !split {
			for _, g := range gs {
				f := add(core.Task{Kind: core.TaskForward, Unit: g, Device: dev, Ops: all})
				bwd = append(bwd, add(core.Task{Kind: core.TaskBackward, Unit: g, Device: dev, Ops: all, Deps: []int{f}}))
			}
		} else {
			// Stream 0: Fg_1, Fg_2, Bg_1, Fg_3, Bg_2, ...; stream 1: Fr_i, Br_i.
			br := make([]int, len(gs))
			fg := make([]int, len(gs))
			emitBg := func(k int) {
				bwd = append(bwd, add(core.Task{Kind: core.TaskBackward, Unit: gs[k], Device: dev, Stream: 0, Ops: hoist, Deps: []int{br[k]}}))
			}
			emitF := func(k int) {
				fg[k] = add(core.Task{Kind: core.TaskForward, Unit: gs[k], Device: dev, Stream: 0, Ops: hoist})
				fr := add(core.Task{Kind: core.TaskForward, Unit: gs[k], Device: dev, Stream: 1, Ops: rest, Deps: []int{fg[k]}})
				br[k] = add(core.Task{Kind: core.TaskBackward, Unit: gs[k], Device: dev, Stream: 1, Ops: rest, Deps: []int{fr}})
			}
			for k := range gs {
				emitF(k)
				if k > 0 {
					emitBg(k - 1)
				}
			}
			if len(gs) > 0 {
				emitBg(len(gs) - 1)
			}
		}
		if d == 0 {
			stepDeps = append(stepDeps, bwd...)
		} else if len(bwd) > 0 {
			stepDeps = append(stepDeps, add(core.Task{Kind: core.TaskReduceGrads, Unit: -1, Device: devs[0], Stream: 2, From: dev, Deps: bwd}))
		}
	}
	if placed != n {
		return nil, fmt.Errorf("%s: placed %d of %d groups", name, placed, n)
	}
	add(core.Task{Kind: core.TaskStep, Unit: -1, Device: devs[0], Stream: 2, Deps: stepDeps})
	p.Metrics["groups"] = float64(n)
	p.Metrics["streams"] = map[bool]float64{true: 2, false: 1}[split]
	p.Metrics["hoisted_ops"] = float64(len(hoist))
	return p, nil
}

func samples(gc []GroupCost, i int) float64 {
	if gc == nil || gc[i].Samples <= 0 {
		return 1
	}
	return float64(gc[i].Samples)
}

// placement maps group id -> device of a plan's forward tasks.
func placement(p *core.Plan) map[int32]core.DeviceID {
	out := map[int32]core.DeviceID{}
	for _, t := range p.Tasks {
		if t.Kind == core.TaskForward {
			out[p.Units[t.Unit].Targets[0]] = t.Device
		}
	}
	return out
}

func equalPlacement(a, b map[int32]core.DeviceID) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// GroupsOnce checks that the plan runs every group of the workload
// exactly once (forward and backward of every op): the multiset check.
func GroupsOnce(p *core.Plan, w *core.Workload) error {
	count := map[int32]int{}
	for _, u := range p.Units {
		if len(u.Targets) != 1 {
			return fmt.Errorf("blad: unit %d names %d groups, want 1", u.ID, len(u.Targets))
		}
		count[u.Targets[0]]++
	}
	var bad []string
	for _, g := range w.Batch {
		if count[g] != 1 {
			bad = append(bad, fmt.Sprintf("group %d runs %d times", g, count[g]))
		}
		delete(count, g)
	}
	for g := range count {
		bad = append(bad, fmt.Sprintf("unknown group %d", g))
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("blad: %s", strings.Join(bad, "; "))
	}
	return p.Validate(w)
}
