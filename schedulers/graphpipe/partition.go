package graphpipe

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/gnnkit/gnnkit/core"
)

// Costs are the per-op quantities the partitioners weigh, for the whole
// mini-batch: time on one device, activation bytes kept for backward and
// parameter bytes.
type Costs struct {
	Time    []float64 // seconds
	Act     []float64 // bytes
	Weights []float64 // bytes
}

// Default device figures when a DeviceInfo does not state measured ones.
const (
	defaultGFLOPS = 50.0
	defaultGBps   = 20.0
	linkGBps      = 10.0
)

// EstimateCosts prices every op with a roofline over its Cost on dev.
func EstimateCosts(w *core.Workload, dev core.DeviceInfo) Costs {
	gf, bw := dev.GFLOPS, dev.MemGBps
	if gf <= 0 {
		gf = defaultGFLOPS
	}
	if bw <= 0 {
		bw = defaultGBps
	}
	c := Costs{Time: make([]float64, len(w.Ops)), Act: make([]float64, len(w.Ops)), Weights: make([]float64, len(w.Ops))}
	for i, op := range w.Ops {
		c.Time[i] = math.Max(float64(op.Cost.FLOPs)/(gf*1e9), float64(op.Cost.BytesMoved)/(bw*1e9)) + 2e-6
		c.Act[i] = float64(op.Cost.ActivationBytes)
		c.Weights[i] = float64(op.Cost.WeightBytes)
	}
	return c
}

// ChainPartition is the PipeDream-style baseline: the ops in topological
// (index) order cut into contiguous stages, each stage on one or more
// devices (data parallelism inside the stage, as PipeDream replicates
// stages), minimising the slowest stage's time per micro-batch (compute
// over its replicas plus their gradient all-reduce) while every stage
// fits memCap (weights, gradients and Adam state, plus its in-flight
// micro-batches' activations: a chain stage with s stages after it keeps
// s+1); ties go to fewer stages. The stages form a chain.
func ChainPartition(w *core.Workload, c Costs, devs []core.DeviceID, m int, memCap int64) (Partition, error) {
	n, D := len(w.Ops), len(devs)
	if n == 0 || D == 0 {
		return Partition{}, fmt.Errorf("graphpipe: nothing to partition (%d ops, %d devices)", n, D)
	}
	m = max(1, m)
	pre, wpre, apre := make([]float64, n+1), make([]float64, n+1), make([]float64, n+1)
	for i := range c.Time {
		pre[i+1], wpre[i+1], apre[i+1] = pre[i]+c.Time[i], wpre[i]+c.Weights[i], apre[i]+c.Act[i]
	}
	inf := math.Inf(1)
	stage := func(i, j, d, k int) float64 {
		if memCap > 0 && 4*(wpre[j]-wpre[i])+float64(k)*(apre[j]-apre[i])/float64(m*d) > float64(memCap) {
			return inf
		}
		t := (pre[j] - pre[i]) / float64(d)
		if d > 1 {
			t += replicaComm(wpre[j]-wpre[i], d, m)
		}
		return t
	}
	type cell struct {
		t      float64
		stages int
		j, d   int // first stage: ops [i, j) on d devices
	}
	// best[i][u]: ops[i:] on exactly u devices.
	best := make([][]cell, n+1)
	for i := range best {
		best[i] = make([]cell, D+1)
		for u := range best[i] {
			best[i][u] = cell{t: inf}
		}
	}
	best[n][0] = cell{t: 0}
	for i := n - 1; i >= 0; i-- {
		for u := 1; u <= D; u++ {
			for j := i + 1; j <= n; j++ {
				for d := 1; d <= u; d++ {
					rest := best[j][u-d]
					if math.IsInf(rest.t, 1) {
						continue
					}
					v := cell{t: math.Max(rest.t, stage(i, j, d, rest.stages+1)), stages: rest.stages + 1, j: j, d: d}
					cur := best[i][u]
					if v.t < cur.t*(1-1e-9) || (v.t <= cur.t*(1+1e-9) && v.stages < cur.stages) {
						best[i][u] = v
					}
				}
			}
		}
	}
	bu := 0
	for u := 1; u <= D; u++ {
		if bu == 0 || best[0][u].t < best[0][bu].t*(1-1e-9) {
			bu = u
		}
	}
	if math.IsInf(best[0][bu].t, 1) {
		return Partition{}, fmt.Errorf("%w: no chain of stages fits %d devices of %s", ErrNoFit, D, core.FormatBytes(memCap))
	}
	part := Partition{StageOf: make([]int, n), Chain: true}
	next := 0
	for i, u, s := 0, bu, 0; i < n; s++ {
		cl := best[i][u]
		for o := i; o < cl.j; o++ {
			part.StageOf[o] = s
		}
		part.Devices = append(part.Devices, devs[next:next+cl.d])
		next += cl.d
		i, u = cl.j, u-cl.d
	}
	return part, nil
}

// spNode is a node of the series-parallel decomposition of the op DAG.
type spNode struct {
	kind     int // leaf, series, parallel
	ops      []int
	children []*spNode
}

const (
	spLeaf = iota
	spSeries
	spParallel
)

// Decompose returns the series-parallel tree of the op DAG and the ops of
// regions it could not decompose (coarsened into single leaves).
func Decompose(w *core.Workload) (*spNode, [][]int) {
	succ := make([][]int, len(w.Ops))
	for o, op := range w.Ops {
		for _, d := range op.Deps {
			succ[d] = append(succ[d], o)
		}
	}
	var coarse [][]int
	all := make([]int, len(w.Ops))
	for i := range all {
		all[i] = i
	}
	return decompose(w, succ, all, &coarse), coarse
}

func decompose(w *core.Workload, succ [][]int, ops []int, coarse *[][]int) *spNode {
	if len(ops) == 1 {
		return &spNode{kind: spLeaf, ops: ops}
	}
	pos := make(map[int]int, len(ops))
	for i, o := range ops {
		pos[o] = i
	}
	// Series cuts: op i separates when nothing before it reaches past it
	// and no op after it starts a branch of its own (a region source).
	srcAfter := make([]bool, len(ops)+1)
	for i := len(ops) - 1; i >= 0; i-- {
		src := true
		for _, d := range w.Ops[ops[i]].Deps {
			if _, ok := pos[d]; ok {
				src = false
			}
		}
		srcAfter[i] = srcAfter[i+1] || src
	}
	reach := -1
	var pieces [][]int
	start := 0
	for i, o := range ops {
		if reach <= i && i < len(ops)-1 && !srcAfter[i+1] {
			if i > start {
				pieces = append(pieces, ops[start:i])
			}
			pieces = append(pieces, []int{o})
			start = i + 1
		}
		for _, s := range succ[o] {
			if p, ok := pos[s]; ok && p > reach {
				reach = p
			}
		}
	}
	if start < len(ops) {
		pieces = append(pieces, ops[start:])
	}
	if len(pieces) > 1 {
		n := &spNode{kind: spSeries, ops: ops}
		for _, p := range pieces {
			n.children = append(n.children, decompose(w, succ, p, coarse))
		}
		return n
	}
	// Parallel: the weakly connected components, after peeling a unique
	// sink (it joins them).
	body, tail := ops, []int(nil)
	sinks := 0
	for _, o := range ops {
		in := false
		for _, s := range succ[o] {
			if _, ok := pos[s]; ok {
				in = true
			}
		}
		if !in {
			sinks++
		}
	}
	if sinks == 1 && len(ops) > 2 {
		body, tail = ops[:len(ops)-1], ops[len(ops)-1:]
	}
	comps := components(w, succ, body)
	if len(comps) > 1 {
		par := &spNode{kind: spParallel, ops: body}
		for _, c := range comps {
			par.children = append(par.children, decompose(w, succ, c, coarse))
		}
		if tail == nil {
			return par
		}
		return &spNode{kind: spSeries, ops: ops, children: []*spNode{par, {kind: spLeaf, ops: tail}}}
	}
	*coarse = append(*coarse, ops)
	return &spNode{kind: spLeaf, ops: ops}
}

func components(w *core.Workload, succ [][]int, ops []int) [][]int {
	in := make(map[int]int, len(ops))
	for i, o := range ops {
		in[o] = i
	}
	parent := make([]int, len(ops))
	for i := range parent {
		parent[i] = i
	}
	find := func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	for i, o := range ops {
		for _, s := range succ[o] {
			if j, ok := in[s]; ok {
				parent[find(i)] = find(j)
			}
		}
	}
	groups := map[int][]int{}
	var roots []int
	for i, o := range ops {
		r := find(i)
		if _, ok := groups[r]; !ok {
			roots = append(roots, r)
		}
		groups[r] = append(groups[r], o)
	}
	out := make([][]int, 0, len(roots))
	for _, r := range roots {
		out = append(out, groups[r])
	}
	return out
}

// stagePlan is a DP answer: stages (op sets with device counts).
type stagePlan struct {
	inflight int
	stages   []stageSpec
}

type stageSpec struct {
	ops  []int
	devs int
}

type dp struct {
	c      Costs
	D      int
	memCap float64
	m      int
	tau    float64
	memo   map[dpKey]stagePlan
}

type dpKey struct {
	node *spNode
	i    int // series suffix start (0 for other nodes)
	d, k int
}

var infeasible = stagePlan{inflight: math.MaxInt32}

// base prices ops as one stage on the fewest devices meeting tau and
// memory with k stages downstream.
func (p *dp) base(ops []int, d, k int) stagePlan {
	var t, a, wgt float64
	for _, o := range ops {
		t, a, wgt = t+p.c.Time[o], a+p.c.Act[o], wgt+p.c.Weights[o]
	}
	first := 1
	if p.tau > 0 && !math.IsInf(p.tau, 1) {
		first = max(1, int(math.Ceil(t/p.tau*(1-1e-9))))
	}
	for n := first; n <= d; n++ {
		comm := 0.0
		if n > 1 {
			comm = replicaComm(wgt, n, p.m)
		}
		if t/float64(n)+comm > p.tau*(1+1e-9) {
			continue
		}
		if p.memCap > 0 && 4*wgt+float64(k+1)*a/float64(p.m*n) > p.memCap {
			continue
		}
		return stagePlan{inflight: k + 1, stages: []stageSpec{{ops: ops, devs: n}}}
	}
	return infeasible
}

func better(a, b stagePlan) bool {
	if a.inflight != b.inflight {
		return a.inflight < b.inflight
	}
	return devices(a) < devices(b)
}

func devices(s stagePlan) int {
	n := 0
	for _, st := range s.stages {
		n += st.devs
	}
	return n
}

func join(up, down stagePlan) stagePlan {
	return stagePlan{inflight: up.inflight, stages: append(append([]stageSpec(nil), up.stages...), down.stages...)}
}

// solve is F(H, d, k): the fewest in-flight micro-batches at H's entry.
func (p *dp) solve(n *spNode, d, k int) stagePlan {
	if d <= 0 {
		return infeasible
	}
	key := dpKey{n, 0, d, k}
	if v, ok := p.memo[key]; ok {
		return v
	}
	best := p.base(n.ops, d, k)
	switch n.kind {
	case spSeries:
		if v := p.series(n, 0, d, k); better(v, best) {
			best = v
		}
	case spParallel:
		// Knapsack over the children: every child gets >= 1 device.
		cur := map[int]stagePlan{0: {inflight: 0}}
		for _, c := range n.children {
			next := map[int]stagePlan{}
			for used, acc := range cur {
				for dc := 1; used+dc <= d; dc++ {
					v := p.solve(c, dc, k)
					if v.inflight == infeasible.inflight {
						continue
					}
					cand := stagePlan{inflight: max(acc.inflight, v.inflight), stages: append(append([]stageSpec(nil), acc.stages...), v.stages...)}
					if old, ok := next[used+dc]; !ok || better(cand, old) {
						next[used+dc] = cand
					}
				}
			}
			cur = next
		}
		for _, v := range cur {
			if len(v.stages) > 0 && better(v, best) {
				best = v
			}
		}
	}
	p.memo[key] = best
	return best
}

// series is F over the children i.. of a series node: the first stage is
// a child solved on its own structure, or children i..j merged as one.
func (p *dp) series(n *spNode, i, d, k int) stagePlan {
	if i == len(n.children) {
		return stagePlan{inflight: k}
	}
	key := dpKey{n, i + 1, d, k}
	if v, ok := p.memo[key]; ok {
		return v
	}
	best := infeasible
	var merged []int
	var mergedTime float64
	for j := i; j < len(n.children); j++ {
		merged = append(merged, n.children[j].ops...)
		for _, o := range n.children[j].ops {
			mergedTime += p.c.Time[o]
		}
		if j > i && mergedTime > p.tau*float64(d)*(1+1e-9) {
			break // more children only make the merged stage slower
		}
		last := j+1 == len(n.children)
		// The downstream part's in-flight count falls as it gets more
		// devices, so the largest share that leaves this stage feasible
		// is the best; scan downwards and stop at the first fit.
		hiD2, loD2 := d-1, 1
		if last {
			hiD2, loD2 = 0, 0
		}
		for d2 := hiD2; d2 >= loD2; d2-- {
			down := stagePlan{inflight: k}
			if !last {
				down = p.series(n, j+1, d2, k)
			}
			if down.inflight == infeasible.inflight {
				break // fewer devices downstream cannot help
			}
			var up stagePlan
			if j == i {
				up = p.solve(n.children[i], d-d2, down.inflight)
			} else {
				up = p.base(merged, d-d2, down.inflight)
			}
			if up.inflight == infeasible.inflight {
				continue
			}
			if cand := join(up, down); better(cand, best) {
				best = cand
			}
			break
		}
	}
	p.memo[key] = best
	return best
}

// ErrNoFit reports a model that no partition fits on the devices.
var ErrNoFit = errors.New("graphpipe: model does not fit")

// minMemory binary-searches the smallest per-device memory under which
// some partition exists (stage times unconstrained).
func minMemory(root *spNode, c Costs, D, m int) int64 {
	lo, hi := 1.0, 1.0
	for ; hi < 1<<50; hi *= 2 {
		p := &dp{c: c, D: D, memCap: hi, m: max(1, m), tau: math.Inf(1), memo: map[dpKey]stagePlan{}}
		if p.solve(root, D, 0).inflight != infeasible.inflight {
			break
		}
		lo = hi
	}
	for it := 0; it < 50 && hi-lo > hi*1e-3; it++ {
		mid := (lo + hi) / 2
		p := &dp{c: c, D: D, memCap: mid, m: max(1, m), tau: math.Inf(1), memo: map[dpKey]stagePlan{}}
		if p.solve(root, D, 0).inflight != infeasible.inflight {
			hi = mid
		} else {
			lo = mid
		}
	}
	return int64(hi)
}

// GraphPartition is GraphPipe's partitioner: a binary search on the
// per-micro-batch stage time target, each step a DP over the
// series-parallel tree that minimises the in-flight micro-batches (the
// pipeline depth). It returns the partition and the coarsened non-SP
// regions.
func GraphPartition(w *core.Workload, c Costs, devs []core.DeviceID, m int, memCap int64) (Partition, [][]int, error) {
	root, coarse := Decompose(w)
	D := len(devs)
	var total float64
	for _, t := range c.Time {
		total += t
	}
	lo, hi := total/float64(D), total
	var best stagePlan
	found := false
	for it := 0; it < 40 && (hi-lo) > 5e-3*hi; it++ {
		mid := (lo + hi) / 2
		p := &dp{c: c, D: D, memCap: float64(memCap), m: max(1, m), tau: mid, memo: map[dpKey]stagePlan{}}
		if v := p.solve(root, D, 0); v.inflight != infeasible.inflight {
			best, found, hi = v, true, mid
		} else {
			lo = mid
		}
	}
	if !found {
		p := &dp{c: c, D: D, memCap: float64(memCap), m: max(1, m), tau: math.Inf(1), memo: map[dpKey]stagePlan{}}
		if best = p.solve(root, D, 0); best.inflight == infeasible.inflight {
			return Partition{}, coarse, fmt.Errorf("%w: no partition of the model fits %d devices of %s; the smallest per-device memory that fits is about %s (raise the devices' memory or add devices)",
				ErrNoFit, D, core.FormatBytes(memCap), core.FormatBytes(minMemory(root, c, D, m)))
		}
	}
	part := Partition{StageOf: make([]int, len(w.Ops))}
	next := 0
	for s, st := range best.stages {
		sort.Ints(st.ops)
		for _, o := range st.ops {
			part.StageOf[o] = s
		}
		part.Devices = append(part.Devices, devs[next:next+st.devs])
		next += st.devs
	}
	return part, coarse, nil
}

// replicaComm is the per-micro-batch share of synchronising a stage's
// weights w over d replicas the way the executor does it: each replica's
// gradients reduced into the home device and the new weights sent back,
// one replica after another on the home device (2·(d-1)·w bytes), spread
// over the m micro-batches of the iteration.
func replicaComm(w float64, d, m int) float64 {
	if d <= 1 {
		return 0
	}
	return 2 * w * float64(d-1) / (linkGBps * 1e9) / float64(max(1, m))
}
