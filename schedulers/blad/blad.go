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
				switch v {
				case "false", "0":
					s.NoAdapt = true
				case "group":
					s.PerGroup = true
				case "true", "1", "model":
				default:
					return nil, fmt.Errorf("blad: adapt=%q: want model (default), group or false", v)
				}
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
// Workloads carry them as plain data (core.Workload.Groups), so the
// schedulers of this package also work out of process.
type GroupCost = core.GroupInfo

// groupsOf returns the workload's group descriptions when they cover its
// n groups, else those given by SetGroups when they do, else nil.
func groupsOf(w *core.Workload, set []GroupCost, n int) []GroupCost {
	switch {
	case len(w.Groups) == n:
		return w.Groups
	case len(set) == n:
		return set
	}
	return nil
}

// GroupSetter is implemented by schedulers that take per-group costs
// in process (an alternative to core.Workload.Groups, which wins).
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
	// PerGroup places by each group's own measured time (an average over
	// the iterations that ran it) on devices taken as equally fast,
	// instead of by the refitted cost model on devices of measured speed.
	// Per-group times follow every disturbance of a shared machine; the
	// model (a·Graph + b·Dense + c, fitted to all groups' times after
	// dividing out each device's measured slowness) averages it out.
	PerGroup bool
	// MinGain is the least relative reduction of the predicted makespan
	// (the most loaded device's measured cost) for which Observe re-places
	// the groups (default 0.02): measurement noise alone does not move
	// them back and forth.
	MinGain float64

	groups   []GroupCost
	measured map[int]float64 // seconds per group key
	scale    float64         // seconds per unit of estimated cost
	fit      []float64       // seconds = fit[0]·Graph + fit[1]·Dense + fit[2], when fitted
	// slow is each device's measured time per unit of cost relative to
	// the others' (mean 1): a device that shares its cores with other
	// work, or a slower one, gets less.
	slow map[core.DeviceID]float64
	last *core.Plan
}

// New returns BLAD with two streams per device and adaptation on.
func New() *Scheduler { return &Scheduler{Streams: 2, MinGain: 0.02, measured: map[int]float64{}} }

// Name returns "blad".
func (s *Scheduler) Name() string { return "blad" }

// SetGroups gives the costs of the next workloads' groups (by batch id).
func (s *Scheduler) SetGroups(g []GroupCost) { s.groups = slices.Clone(g) }

// costs returns the cost used for placement of each group and its
// graph share.
func (s *Scheduler) costs(w *core.Workload, n int) (cost, ratio []float64, gc []GroupCost) {
	gc = groupsOf(w, s.groups, n)
	if gc == nil {
		gc = make([]GroupCost, n)
		for i := range gc {
			gc[i] = GroupCost{Key: i, Graph: 0.5, Dense: 0.5, Samples: 1}
		}
	}
	cost, ratio = make([]float64, n), make([]float64, n)
	for i, g := range gc {
		est := g.Graph + g.Dense
		cost[i] = est
		m, ok := s.measured[g.Key]
		switch {
		case s.NoAdapt:
		case s.PerGroup && ok:
			cost[i] = m
		case !s.PerGroup && s.fit != nil:
			cost[i] = s.fit[0]*g.Graph + s.fit[1]*g.Dense + s.fit[2]
		case s.scale > 0:
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
	cost, ratio, gc := s.costs(w, n)
	devs := deviceIDs(w)
	if s.last != nil {
		// Keep the home device: the master parameters live there.
		if i := slices.Index(devs, s.last.Home); i > 0 {
			devs[0], devs[i] = devs[i], devs[0]
		}
	}
	slow := s.slowness(devs)
	per := LPTSpeed(cost, slow)
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
			loads[d] += cost[g] * slow[d]
		}
	}
	p.Metrics["predicted_imbalance"] = Imbalance(loads)
	s.last = p
	return p, nil
}

// Observe records each group's measured time (forward and backward task
// spans) from the trace, estimates each device's slowness, refits the
// cost model, and returns a new plan when the updated costs move a group
// to another device and cut the predicted makespan by MinGain.
func (s *Scheduler) Observe(ctx context.Context, w *core.Workload, t *core.Trace) (*core.Plan, error) {
	if s.NoAdapt || s.last == nil || t == nil {
		return nil, nil
	}
	n := len(w.Batch)
	_, _, gc := s.costs(w, n)
	dur := make([]float64, len(s.last.Units))
	dev := make([]core.DeviceID, len(s.last.Units))
	for _, e := range t.Events {
		if (e.Cat == core.TaskForward.String() || e.Cat == core.TaskBackward.String()) && e.Unit >= 0 && e.Unit < len(dur) {
			dur[e.Unit] += e.Dur.Seconds()
			dev[e.Unit] = e.Device
		}
	}
	// Device slowness: each device's measured time over what the cost
	// model (fitted to this trace, assuming equal devices, then to the
	// times divided by the devices' slowness) predicts for its groups,
	// relative to all devices'.
	if !s.PerGroup {
		if r := deviceSlowness(s.last, n, gc, dur, dev); r != nil {
			if s.slow == nil {
				s.slow = map[core.DeviceID]float64{}
			}
			for d, x := range r {
				if old, ok := s.slow[d]; ok {
					x = 0.5*old + 0.5*x
				}
				s.slow[d] = x
			}
		}
	}
	var sumM, sumE float64
	for u, unit := range s.last.Units {
		if len(unit.Targets) != 1 || int(unit.Targets[0]) >= n || dur[u] == 0 {
			continue
		}
		g := gc[unit.Targets[0]]
		// The group's time on a device of average speed.
		m := dur[u]
		if r := s.slow[dev[u]]; r > 0 {
			m /= r
		}
		if old, ok := s.measured[g.Key]; ok {
			s.measured[g.Key] = 0.5*old + 0.5*m
		} else {
			s.measured[g.Key] = m
		}
		sumM += m
		sumE += g.Graph + g.Dense
	}
	if sumE > 0 {
		s.scale = sumM / sumE
	}
	// Refit the cost model to every group measured so far.
	var xs [][3]float64
	var ys []float64
	for _, g := range gc {
		if m, ok := s.measured[g.Key]; ok {
			xs = append(xs, [3]float64{g.Graph, g.Dense, 1})
			ys = append(ys, m)
		}
	}
	s.fit = FitCost(xs, ys)
	prev := placement(s.last)
	home := s.last.Home
	last := s.last
	p, err := s.Schedule(ctx, w)
	if err != nil {
		return nil, err
	}
	if p.Home != home {
		return nil, fmt.Errorf("blad: re-placement moved the home device from %s to %s", home, p.Home)
	}
	next := placement(p)
	if equalPlacement(prev, next) {
		s.last = p
		return nil, nil
	}
	// Re-place only for a real gain under the updated costs.
	cost, _, _ := s.costs(w, n)
	makespan := func(pl map[int32]core.DeviceID) float64 {
		loads := map[core.DeviceID]float64{}
		mx := 0.0
		for g, d := range pl {
			if int(g) < len(cost) {
				r := s.slow[d]
				if r <= 0 {
					r = 1
				}
				loads[d] += cost[g] * r
				mx = math.Max(mx, loads[d])
			}
		}
		return mx
	}
	if before, after := makespan(prev), makespan(next); after > before*(1-s.MinGain) {
		s.last = last
		return nil, nil
	}
	return p, nil
}

// FitCost fits y ≈ c·x (c ≥ 0, three coefficients: seconds per unit of
// graph work, per unit of dense work, per group) by least squares over
// every subset of the coefficients (non-negative least squares, exact for
// three), and returns nil when there are fewer than 3 points or no fit
// with a positive prediction for every point.
func FitCost(xs [][3]float64, ys []float64) []float64 {
	if len(xs) < 3 {
		return nil
	}
	// Columns scaled to unit maximum, for conditioning.
	var norm [3]float64
	for _, x := range xs {
		for j := range 3 {
			norm[j] = math.Max(norm[j], math.Abs(x[j]))
		}
	}
	var best []float64
	bestRes := math.Inf(1)
	for mask := 1; mask < 8; mask++ {
		var cols []int
		for j := range 3 {
			if mask&(1<<j) != 0 && norm[j] > 0 {
				cols = append(cols, j)
			}
		}
		if len(cols) == 0 {
			continue
		}
		k := len(cols)
		// Normal equations A^T A c = A^T y, solved by Gaussian elimination.
		a := make([][]float64, k)
		for r := range a {
			a[r] = make([]float64, k+1)
		}
		for i, x := range xs {
			for r, jr := range cols {
				for c, jc := range cols {
					a[r][c] += x[jr] / norm[jr] * x[jc] / norm[jc]
				}
				a[r][k] += x[jr] / norm[jr] * ys[i]
			}
		}
		c, ok := solve(a)
		if !ok {
			continue
		}
		coef := make([]float64, 3)
		feasible := true
		for r, j := range cols {
			coef[j] = c[r] / norm[j]
			feasible = feasible && coef[j] >= 0
		}
		if !feasible {
			continue
		}
		res := 0.0
		for i, x := range xs {
			p := coef[0]*x[0] + coef[1]*x[1] + coef[2]*x[2]
			if p <= 0 {
				feasible = false
				break
			}
			res += (p - ys[i]) * (p - ys[i])
		}
		if feasible && res < bestRes {
			best, bestRes = coef, res
		}
	}
	return best
}

// solve solves the k x (k+1) augmented system in place (partial pivoting).
func solve(a [][]float64) ([]float64, bool) {
	k := len(a)
	for c := range k {
		p := c
		for r := c + 1; r < k; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		if math.Abs(a[p][c]) < 1e-12 {
			return nil, false
		}
		a[c], a[p] = a[p], a[c]
		for r := c + 1; r < k; r++ {
			f := a[r][c] / a[c][c]
			for j := c; j <= k; j++ {
				a[r][j] -= f * a[c][j]
			}
		}
	}
	x := make([]float64, k)
	for r := k - 1; r >= 0; r-- {
		v := a[r][k]
		for j := r + 1; j < k; j++ {
			v -= a[r][j] * x[j]
		}
		x[r] = v / a[r][r]
	}
	return x, true
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
	gc := groupsOf(w, e.groups, n)
	return emit("esdg", w, devs, per, gc, false)
}

func deviceIDs(w *core.Workload) []core.DeviceID {
	out := make([]core.DeviceID, len(w.Devices))
	for i, d := range w.Devices {
		out[i] = d.ID
	}
	return out
}

// deviceSlowness estimates each device's slowness from one trace: fit
// the cost model to the groups' times, take each device's time over its
// predicted time (relative to all devices'), refit to the times divided
// by that, and estimate again. Nil with fewer than two devices or when
// no model fits.
func deviceSlowness(p *core.Plan, n int, gc []GroupCost, dur []float64, dev []core.DeviceID) map[core.DeviceID]float64 {
	type obs struct {
		x [3]float64
		y float64
		d core.DeviceID
	}
	var os []obs
	devs := map[core.DeviceID]bool{}
	for u, unit := range p.Units {
		if len(unit.Targets) != 1 || int(unit.Targets[0]) >= n || dur[u] <= 0 {
			continue
		}
		g := gc[unit.Targets[0]]
		os = append(os, obs{[3]float64{g.Graph, g.Dense, 1}, dur[u], dev[u]})
		devs[dev[u]] = true
	}
	if len(devs) < 2 {
		return nil
	}
	r := map[core.DeviceID]float64{}
	for d := range devs {
		r[d] = 1
	}
	for range 2 {
		xs, ys := make([][3]float64, len(os)), make([]float64, len(os))
		for i, o := range os {
			xs[i], ys[i] = o.x, o.y/r[o.d]
		}
		fit := FitCost(xs, ys)
		if fit == nil {
			return nil
		}
		num, den := map[core.DeviceID]float64{}, map[core.DeviceID]float64{}
		var tn, td float64
		for _, o := range os {
			pr := fit[0]*o.x[0] + fit[1]*o.x[1] + fit[2]
			num[o.d] += o.y
			den[o.d] += pr
			tn += o.y
			td += pr
		}
		for d := range devs {
			if den[d] > 0 && num[d] > 0 && tn > 0 && td > 0 {
				r[d] = (num[d] / den[d]) / (tn / td)
			}
		}
	}
	return r
}

// slowness returns each device's relative slowness (1 when unknown).
func (s *Scheduler) slowness(devs []core.DeviceID) []float64 {
	out := make([]float64, len(devs))
	for i, d := range devs {
		out[i] = 1
		if r, ok := s.slow[d]; ok && r > 0 && !s.NoAdapt {
			out[i] = r
		}
	}
	return out
}

// LPT assigns items (by cost) to k bins: longest first onto the least
// loaded bin (ties: lower index). Each bin's items are in ascending
// order of index.
func LPT(cost []float64, k int) [][]int {
	slow := make([]float64, k)
	for i := range slow {
		slow[i] = 1
	}
	return LPTSpeed(cost, slow)
}

// LPTSpeed is LPT on bins of different speeds: bin d takes slow[d] per
// unit of cost, and each item (longest first) goes where it would finish
// first (ties: lower index).
func LPTSpeed(cost, slow []float64) [][]int {
	k := len(slow)
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
			if (load[d]+cost[i])*slow[d] < (load[best]+cost[i])*slow[best] {
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
