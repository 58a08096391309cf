package graphpipe

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// GraphPipe's DP over the series-parallel tree (papers.md §3.4).
//
// F(H, k, R) is the best plan of subgraph H with every stage within the
// time-per-micro-batch target tau and the devices' memory, k in flight
// downstream, and the ops R (a "tail": ops just downstream of H's sinks,
// usually joins and what follows them) fused into H's sink-side stage (R
// empty: none). Plans compare by their entry in-flight count, then by
// their devices. In-flight counts are weighted by replicas (Warmup): a
// stage on n devices adds n, so the entry count is k plus the devices on
// the heaviest path to the sink, the pipeline's fill latency in units of
// tau. Then fewer devices never cost depth (a series' count is k plus its
// devices; a parallel node's the largest of its children's, each at its
// fewest), so F needs no device budget: the target is feasible on D
// devices when F(root, 0, ∅) uses at most D, which the binary search on
// tau tests (papers.md's F(H, d, k) with d folded in).
//
//   - base: H ∪ R as one stage on the fewest devices n (at most the
//     replica cap) that meet tau and memory: k+n.
//   - series H = c_1 … c_n: its last stage is children c_l..c_n merged
//     with R (one base stage), or child c_l solved on its own structure
//     with c_{l+1}..c_n ∪ R fused into its sink stage; the children
//     before it are the series prefix F(c_1..c_{l−1}, k') with k' the
//     last stage's entry count. The prefix is the same recurrence with R
//     empty, so tails never multiply the prefix's states.
//   - parallel H = c_1 ∥ … ∥ c_n, R empty: the children side by side
//     (entry: the largest count; devices: the sum); with R: one child c_i
//     takes R into its sink stage (F(c_i, k, R)) and the others feed that
//     stage (F(c_j, k+1), as if it had one replica: the estimate and the
//     simulator check the real count).
//
// Fused tails are what lets light joins and a trunk ride on one branch's
// last stage instead of taking a device of their own (4 branches and a
// trunk on 4 devices: depth 2, no idle device); a stage of a branch's ops
// plus the join ops is convex, so the stage graph stays a DAG.

// planNode is a stage list as a concatenation tree (joins in O(1)).
type planNode struct {
	spec *stageSpec
	a, b *planNode
}

// stagePlan is a DP answer: its entry in-flight count, devices and stages.
type stagePlan struct {
	inflight int
	devs     int
	// slack is how much more downstream in-flight every stage of the
	// plan can take and still fit memory.
	slack int
	tree  *planNode
	// pend describes a one-stage plan whose tree is not built yet (most
	// priced stages lose; building them would only feed the collector).
	pend pendStage
}

type pendStage struct {
	n        *spNode
	l, j, tl int
}

func (s stagePlan) empty() bool { return s.tree == nil && s.pend.n == nil }

// stageSpec is one stage: its ops (as slices to concatenate) on devs devices.
type stageSpec struct {
	parts [][]int
	devs  int
}

var infeasible = stagePlan{inflight: math.MaxInt32}

const unlimited = math.MaxInt32

// noStages is the plan of no stages with k in flight downstream.
func noStages(k int) stagePlan { return stagePlan{inflight: k, slack: unlimited} }

func (s stagePlan) ok() bool { return s.inflight != infeasible.inflight }

func better(a, b stagePlan) bool {
	if a.inflight != b.inflight {
		return a.inflight < b.inflight
	}
	return a.devs < b.devs
}

// mat builds a pending plan's tree.
func (p *dp) mat(v stagePlan) stagePlan {
	if v.tree == nil && v.pend.n != nil {
		v.tree = &planNode{spec: &stageSpec{parts: p.run(v.pend.n, v.pend.l, v.pend.j, v.pend.tl).parts, devs: v.devs}}
		v.pend = pendStage{}
	}
	return v
}

// join puts up's stages before down's; the entry count is up's.
func (p *dp) join(up, down stagePlan) stagePlan {
	r := stagePlan{inflight: up.inflight, devs: up.devs + down.devs, slack: min(up.slack, down.slack)}
	switch {
	case up.empty():
		r.tree, r.pend = down.tree, down.pend
	case down.empty():
		r.tree, r.pend = up.tree, up.pend
	default:
		r.tree = &planNode{a: p.mat(up).tree, b: p.mat(down).tree}
	}
	return r
}

// side puts two independent plans side by side (entry: the larger).
func (p *dp) side(a, b stagePlan) stagePlan {
	j := p.join(a, b)
	j.inflight = max(a.inflight, b.inflight)
	return j
}

func (s stagePlan) stages() []stageSpec {
	var out []stageSpec
	var walk func(n *planNode)
	walk = func(n *planNode) {
		if n == nil {
			return
		}
		if n.spec != nil {
			out = append(out, *n.spec)
			return
		}
		walk(n.a)
		walk(n.b)
	}
	walk(s.tree)
	return out
}

// spTree is the decomposition numbered for the DP, with each series
// node's children's op offsets (a series node's children are contiguous
// runs of its ops) and time prefix sums.
type spTree struct {
	root  *spNode
	nodes []*spNode
	off   [][]int     // series node: child l's ops are ops[off[l]:off[l+1]]
	ctime [][]float64 // series node: time of children [0, l)
	time  []float64   // node's ops' time per micro-batch
	// inner numbers the series and parallel nodes (the memoised ones).
	inner  []int
	nInner int
}

func newSPTree(root *spNode, c *costs) *spTree {
	t := &spTree{root: root}
	var walk func(n *spNode)
	walk = func(n *spNode) {
		n.id = len(t.nodes)
		t.nodes = append(t.nodes, n)
		for _, ch := range n.children {
			walk(ch)
		}
	}
	walk(root)
	t.off = make([][]int, len(t.nodes))
	t.ctime = make([][]float64, len(t.nodes))
	t.time = make([]float64, len(t.nodes))
	t.inner = make([]int, len(t.nodes))
	for _, n := range t.nodes {
		t.inner[n.id] = -1
		if n.kind != spLeaf {
			t.inner[n.id] = t.nInner
			t.nInner++
		}
		for _, o := range n.ops {
			t.time[n.id] += c.time[o]
		}
		if n.kind != spSeries {
			continue
		}
		off, ct := []int{0}, []float64{0}
		for _, ch := range n.children {
			off = append(off, off[len(off)-1]+len(ch.ops))
			ct = append(ct, ct[len(ct)-1]+t.time[ch.id])
		}
		contiguous := off[len(off)-1] == len(n.ops)
		for l, ch := range n.children {
			for i, o := range ch.ops {
				contiguous = contiguous && n.ops[off[l]+i] == o
			}
		}
		if !contiguous {
			// Not expected from decompose; keep the children's own order.
			var ops []int
			for _, ch := range n.children {
				ops = append(ops, ch.ops...)
			}
			n.ops = ops
		}
		t.off[n.id], t.ctime[n.id] = off, ct
	}
	return t
}

// tail is a fused op set: a run of a series node's children plus an
// outer tail.
type tail struct {
	parts [][]int
	time  float64
}

type tailKey struct{ node, l, j, outer int }

// slot is a memo entry.
type slot struct {
	done bool
	v    stagePlan
}

// dp is GraphPipe's F at one time-per-micro-batch target tau. Stage
// prices and tails are shared across targets and caps (sh).
type dp struct {
	c      *costs
	t      *spTree
	D      int
	maxRep int // replicas per stage at most
	tau    float64
	sh     *dpShared
	memo   [][]slot      // [tail][inner node*(kmax+1)+k]: solve
	smemo  [][][]slot    // [tail][node][j*(kmax+1)+k]: seriesWith
	free   [][]frontCell // parallel's tables, for the next call to take
	// leastWarmup checks a stage's memory with one micro-batch in flight
	// per replica, as a 1F1B warm-up capped at 1 keeps, whatever is in
	// flight downstream (chainDP.leastWarmup's counterpart: the no-fit
	// fallback's, cappedDAG).
	leastWarmup bool
}

// recycle gives p the memo tables (cleared) and parallel's free tables of
// an earlier DP over the same tree and dpShared (graphSearch's steps of
// the binary search): without it every step allocated them anew, a
// third of the search's garbage on a 1,000-op DAG.
func (p *dp) recycle(old *dp) {
	for _, m := range old.memo {
		clear(m)
	}
	for _, mm := range old.smemo {
		for _, m := range mm {
			clear(m)
		}
	}
	p.memo, p.smemo, p.free = old.memo, old.smemo, old.free
}

// frontCell is one entry of parallel's table: ok, a plan was found.
type frontCell struct {
	ok   bool
	plan stagePlan
}

// cells is a cleared table of n cells, taken from p.free where one is
// large enough (parallel nests through solve, so its tables are taken
// and given back last in, first out).
func (p *dp) cells(n int) []frontCell {
	if k := len(p.free) - 1; k >= 0 && cap(p.free[k]) >= n {
		b := p.free[k][:n]
		p.free = p.free[:k]
		clear(b)
		return b
	}
	return make([]frontCell, n)
}

type dpShared struct {
	tails  []tail
	tailID map[tailKey]int
	nstat  [][]*runInfo   // [tail][node]: the node's ops and the tail as one stage
	rstat  [][][]*runInfo // [tail][node][l*(children+1)+j]: a run of children and the tail
	// kmax: F(H, k) = F(H, kmax) + k − kmax for k > kmax. In-flight
	// counts saturate at m (a replica never holds more than its
	// micro-batches), so kmax = m; when even m in-flight micro-batches of
	// every op fit a device, memory never binds and kmax = 0.
	kmax int
}

func newShared(c *costs) *dpShared {
	sh := &dpShared{tails: []tail{{}}, tailID: map[tailKey]int{}, kmax: c.m}
	if c.memoryFree() {
		sh.kmax = 0
	}
	return sh
}

// shift adds s to a plan's in-flight counts.
func shift(v stagePlan, s int) stagePlan {
	if v.ok() {
		v.inflight += s
		if v.slack != unlimited {
			v.slack -= s
		}
	}
	return v
}

func (c *costs) newDP(t *spTree, D, maxRep int, tau float64, sh *dpShared) *dp {
	return &dp{c: c, t: t, D: D, maxRep: max(1, min(D, maxRep)), tau: tau, sh: sh}
}

// solveSlot and seriesSlot are the memo entries of solve and seriesWith.
func (p *dp) solveSlot(n *spNode, k, tl int) *slot {
	for len(p.memo) <= tl {
		p.memo = append(p.memo, nil)
	}
	if p.memo[tl] == nil {
		p.memo[tl] = make([]slot, p.t.nInner*(p.sh.kmax+1))
	}
	return &p.memo[tl][p.t.inner[n.id]*(p.sh.kmax+1)+k]
}

func (p *dp) seriesSlot(n *spNode, j, k, tl int) *slot {
	for len(p.smemo) <= tl {
		p.smemo = append(p.smemo, nil)
	}
	if p.smemo[tl] == nil {
		p.smemo[tl] = make([][]slot, len(p.t.nodes))
	}
	m := p.smemo[tl]
	if tl != 0 {
		// With a tail only the whole series is asked for (prefixes carry
		// none).
		if m[n.id] == nil {
			m[n.id] = make([]slot, p.sh.kmax+1)
		}
		return &m[n.id][k]
	}
	if m[n.id] == nil {
		m[n.id] = make([]slot, (len(n.children)+1)*(p.sh.kmax+1))
	}
	return &m[n.id][j*(p.sh.kmax+1)+k]
}

// tailOf interns the tail: children [l, j) of series node n, plus outer.
func (p *dp) tailOf(n *spNode, l, j, outer int) int {
	if l >= j {
		return outer
	}
	k := tailKey{n.id, l, j, outer}
	if id, ok := p.sh.tailID[k]; ok {
		return id
	}
	off := p.t.off[n.id]
	o := p.sh.tails[outer]
	tl := tail{parts: append([][]int{n.ops[off[l]:off[j]]}, o.parts...), time: p.t.ctime[n.id][j] - p.t.ctime[n.id][l] + o.time}
	id := len(p.sh.tails)
	p.sh.tails = append(p.sh.tails, tl)
	p.sh.tailID[k] = id
	return id
}

// parts is the op set of node n (l < 0) or of its children [l, j), with
// the tail.
func (p *dp) parts(n *spNode, l, j, tl int) [][]int {
	var out [][]int
	switch {
	case l < 0:
		out = [][]int{n.ops}
	case n.kind == spParallel:
		for _, c := range n.children[l:j] {
			out = append(out, c.ops)
		}
	default:
		off := p.t.off[n.id]
		out = [][]int{n.ops[off[l]:off[j]]}
	}
	return append(out, p.sh.tails[tl].parts...)
}

// runInfo is one op set of the DP priced as one stage: its stage
// statistics and its parts (read-only: the stages built from it share
// them).
type runInfo struct {
	st    stageStat
	parts [][]int
}

// run is the op set parts(n, l, j, tl), priced as one stage once per
// search (a wide parallel node's runs of children are priced and built
// into stages many times over).
func (p *dp) run(n *spNode, l, j, tl int) *runInfo {
	sh := p.sh
	for len(sh.nstat) <= tl {
		sh.nstat = append(sh.nstat, make([]*runInfo, len(p.t.nodes)))
		sh.rstat = append(sh.rstat, make([][]*runInfo, len(p.t.nodes)))
	}
	var cell **runInfo
	if l < 0 {
		cell = &sh.nstat[tl][n.id]
	} else {
		r := sh.rstat[tl]
		w := len(n.children) + 1
		if r[n.id] == nil {
			r[n.id] = make([]*runInfo, w*w)
		}
		cell = &r[n.id][l*w+j]
	}
	if *cell == nil {
		parts := p.parts(n, l, j, tl)
		var ops []int
		for _, x := range parts {
			ops = append(ops, x...)
		}
		*cell = &runInfo{st: p.c.stat(ops), parts: parts}
	}
	return *cell
}

// stat prices the op set of parts(n, l, j, tl) as one stage.
func (p *dp) stat(n *spNode, l, j, tl int) stageStat { return p.run(n, l, j, tl).st }

// base prices the op set of parts(n, l, j, tl) as one stage on the
// fewest devices (at most the replica cap) meeting tau and memory with k
// in flight downstream.
func (p *dp) base(n *spNode, l, j, tl, k int) stagePlan {
	st := p.stat(n, l, j, tl)
	if p.leastWarmup {
		// Its memory does not depend on what is in flight downstream.
		d := p.c.minReplicas(st, p.tau, 0)
		if d > p.maxRep {
			return infeasible
		}
		return stagePlan{inflight: k + d, devs: d, slack: unlimited, pend: pendStage{n, l, j, tl}}
	}
	d := p.c.minReplicas(st, p.tau, k)
	if d > p.maxRep {
		return infeasible
	}
	return stagePlan{inflight: k + d, devs: d, slack: p.c.slack(st, k+d, d), pend: pendStage{n, l, j, tl}}
}

// solve is F(n, k, tail).
func (p *dp) solve(n *spNode, k, tl int) stagePlan {
	if k > p.sh.kmax {
		return shift(p.solve(n, p.sh.kmax, tl), k-p.sh.kmax)
	}
	if k > 0 {
		v := p.solve(n, 0, tl)
		if !v.ok() || v.slack >= k {
			return shift(v, k)
		}
	}
	if n.kind == spLeaf {
		if p.t.time[n.id]+p.sh.tails[tl].time > p.tau*float64(p.maxRep)*(1+eps) {
			return infeasible
		}
		return p.base(n, -1, -1, tl, k)
	}
	if sl := p.solveSlot(n, k, tl); sl.done {
		return sl.v
	}
	best := infeasible
	if p.t.time[n.id]+p.sh.tails[tl].time <= p.tau*float64(p.maxRep)*(1+eps) {
		best = p.base(n, -1, -1, tl, k)
	}
	switch n.kind {
	case spSeries:
		if v := p.seriesWith(n, len(n.children), k, tl); better(v, best) {
			best = v
		}
	case spParallel:
		if v := p.parallel(n, k, tl); better(v, best) {
			best = v
		}
	}
	sl := p.solveSlot(n, k, tl) // after the recursion: the memo may have grown
	sl.done, sl.v = true, best
	return best
}

// seriesWith is F over children [0, j) of series node n with the tail
// fused into the range's last stage (tl = 0: the plain series prefix).
func (p *dp) seriesWith(n *spNode, j, k, tl int) stagePlan {
	if j == 0 {
		if tl != 0 {
			return infeasible
		}
		return noStages(k)
	}
	if k > p.sh.kmax {
		return shift(p.seriesWith(n, j, p.sh.kmax, tl), k-p.sh.kmax)
	}
	if k > 0 {
		// The answer at k = 0 shifted by k, when all its stages still fit,
		// is the answer at k (more in flight downstream never helps).
		v := p.seriesWith(n, j, 0, tl)
		if !v.ok() || v.slack >= k {
			return shift(v, k)
		}
	}
	if sl := p.seriesSlot(n, j, k, tl); sl.done {
		return sl.v
	}
	best := infeasible
	ct := p.t.ctime[n.id]
	tt := p.sh.tails[tl]
	capT := p.tau * float64(p.maxRep) * (1 + eps)
	// No plan of the run beats k + ceil(its time / tau) in flight (a
	// series' count is k plus its devices, each stage needing at least
	// its time over tau), nor uses fewer devices than that count less k:
	// a candidate at the bound ends the search. Longest last stages
	// first: with replicas allowed they usually reach it at once.
	lb := k + int(math.Ceil((ct[j]+tt.time+p.c.setupF+p.c.setupB)/p.tau*(1-eps)))
	for l := 0; l < j; l++ {
		ch := n.children[l]
		merged := ct[j] - ct[l] + tt.time
		// (a) children [l, j) and the tail as one stage.
		if merged <= capT {
			last := p.base(n, l, j, tl, k)
			if last.ok() {
				if rest := p.seriesWith(n, l, last.inflight, 0); rest.ok() {
					if better(stagePlan{inflight: rest.inflight, devs: rest.devs + last.devs}, best) {
						best = p.join(rest, last)
					}
				}
			}
		}
		// (b) child l on its own structure, children (l, j) and the tail
		// fused into its sink stage.
		if ch.kind != spLeaf && merged-p.t.time[ch.id] <= capT {
			if v := p.solve(ch, k, p.tailOf(n, l+1, j, tl)); v.ok() {
				if rest := p.seriesWith(n, l, v.inflight, 0); rest.ok() {
					if better(stagePlan{inflight: rest.inflight, devs: rest.devs + v.devs}, best) {
						best = p.join(rest, v)
					}
				}
			}
		}
		if best.inflight <= lb && best.devs <= lb-k {
			break
		}
	}
	sl := p.seriesSlot(n, j, k, tl)
	sl.done, sl.v = true, best
	return best
}

// parallel is F of parallel node n's children side by side with k in
// flight downstream and the tail fused into one of them (the others then
// feed it, k+1 downstream). Children may also share a stage: a run of
// consecutive children merged into one base stage (8 branches on 4
// devices: two per stage), with or without the tail. The children are
// combined left to right keeping, for every bound w on the entry count,
// the plan with the fewest devices (the entry count of a parallel node is
// the largest of its parts', so a part with a higher count but fewer
// devices can be the better choice: a plain running minimum would lose
// it).
func (p *dp) parallel(n *spNode, k, tl int) stagePlan {
	C := len(n.children)
	kf := k // the non-holders' downstream count
	if tl != 0 {
		kf = k + 1
	}
	W := kf + p.D + 1 // entry counts above this use more than D devices
	type cell = frontCell
	// front[i][h][w]: children [0, i), the tail held (h = 1) or not, entry
	// count at most w: the fewest devices.
	front := make([][2][]cell, C+1)
	buf := p.cells(2 * (C + 1) * (W + 1))
	defer func() { p.free = append(p.free, buf) }()
	for i := range front {
		front[i][0] = buf[2*i*(W+1) : (2*i+1)*(W+1)]
		front[i][1] = buf[(2*i+1)*(W+1) : (2*i+2)*(W+1)]
	}
	for w := 0; w <= W; w++ {
		front[0][0][w] = cell{true, noStages(0)}
	}
	capT := p.tau * float64(p.maxRep) * (1 + eps)
	add := func(i, h, j, h2 int, v stagePlan) {
		if !v.ok() || v.inflight > W {
			return
		}
		v = p.mat(v)
		var last *cell // the previous bound's prefix and what it made
		var made stagePlan
		from, to := front[i][h], front[j][h2]
		for w := v.inflight; w <= W; w++ {
			pre := &from[w]
			if !pre.ok {
				continue
			}
			devs := pre.plan.devs + v.devs
			if devs > p.D {
				continue
			}
			cur := &to[w]
			if cur.ok && cur.plan.devs <= devs {
				continue
			}
			if last == nil || last.plan.tree != pre.plan.tree || last.plan.devs != pre.plan.devs || last.plan.inflight != pre.plan.inflight {
				last = pre
				if pre.plan.empty() {
					made = v
				} else {
					made = p.side(pre.plan, v)
				}
			}
			*cur = cell{true, made}
		}
	}
	runs := make([]stagePlan, C+1) // the runs [i, j) as one stage, for both h
	for i := 0; i < C; i++ {
		for h := 0; h <= 1; h++ {
			if h == 1 && tl == 0 {
				continue
			}
			// A child on its own structure.
			add(i, h, i+1, h, p.solve(n.children[i], kf, 0))
			if h == 0 && tl != 0 {
				add(i, 0, i+1, 1, p.solve(n.children[i], k, tl))
			}
			// A run of children [i, j) as one stage.
			var run float64
			for j := i + 1; j <= C; j++ {
				run += p.t.time[n.children[j-1].id]
				if run > capT {
					break
				}
				if j >= i+2 && !(i == 0 && j == C) { // the whole node is solve's base
					if h == 0 {
						runs[j] = p.base(n, i, j, 0, kf)
					}
					add(i, h, j, h, runs[j])
				}
				if h == 0 && tl != 0 && j >= i+2 && run+p.sh.tails[tl].time <= capT {
					add(i, 0, j, 1, p.base(n, i, j, tl, k))
				}
			}
		}
	}
	h := 0
	if tl != 0 {
		h = 1
	}
	for w := 0; w <= W; w++ {
		if c := front[C][h][w]; c.ok {
			return c.plan // no plan has a smaller count (it would be at w−1)
		}
	}
	return infeasible
}

// minMemory binary-searches the smallest per-device memory under which
// some partition exists (stage times unconstrained), with its full
// warm-up or a capped one (cappedDAG).
func minMemory(ctx context.Context, root *spNode, c *costs, D, maxRep int) int64 {
	t := newSPTree(root, c)
	full := bisectMemory(ctx, c, func() bool {
		p := c.newDP(t, D, maxRep, math.Inf(1), newShared(c))
		v := p.solve(t.root, 0, 0)
		// The DP's answer, as the search accepts it: its estimate fits
		// (which also counts gradients held across skip edges).
		return v.ok() && v.devs <= D && c.estimate(partitionOf(len(c.w.Ops), p.mat(v), c.devs), OneFOneB).fits
	})
	// Capped warm-ups need no more: bisect below the full warm-up's
	// figure (a few probes, not a second search from one byte).
	return min(full, bisectBelow(ctx, c, full, func() bool { return cappedDAG(t, c, D, maxRep, true) != nil }))
}

// cappedDAG is the DAG DP's answer (stage times unconstrained) with each
// stage's memory checked at one micro-batch in flight per replica
// (dp.leastWarmup), at the largest warm-up cap under which it fits c.memCap
// by the estimate (fittingWarmup); nil if there is none, or if it fits
// with its full warm-up (the DP's own check finds that) unless probe (the
// figure's bisection, which counts that too, so that its answer does
// not fall as the memory grows).
func cappedDAG(t *spTree, c *costs, D, maxRep int, probe bool) *Partition {
	p := c.newDP(t, D, maxRep, math.Inf(1), newShared(c))
	p.leastWarmup = true
	v := p.solve(t.root, 0, 0)
	if !v.ok() || v.devs > D {
		return nil
	}
	part := partitionOf(len(c.w.Ops), p.mat(v), c.devs)
	if c.estimate(part, OneFOneB).fits {
		if probe {
			return &part
		}
		return nil
	}
	cd := fittingWarmup(c.w, c, &candidate{part: part, kind: OneFOneB, m: c.m})
	if cd == nil {
		return nil
	}
	return &cd.part
}

// bisectMemory returns (to 0.1%) the smallest c.memCap under which fits
// reports true, restoring c.memCap after; math.MaxInt64 when none up to
// maxDeviceMemory does.
func bisectMemory(ctx context.Context, c *costs, fits func() bool) int64 {
	ok, restore := capProbe(c, fits)
	defer restore()
	lo, hi := 1.0, 1.0
	for ; !ok(hi); hi *= 2 {
		if hi >= maxDeviceMemory || ctx.Err() != nil {
			return math.MaxInt64
		}
		lo = hi
	}
	return narrow(ctx, ok, lo, hi)
}

// bisectBelow is bisectMemory for a fits that holds at hi (or hi is
// math.MaxInt64: none does): it steps down from hi, halving while fits
// holds, then bisects to 0.1%. A second figure below a first one costs
// a few probes instead of a search from one byte up.
func bisectBelow(ctx context.Context, c *costs, hi int64, fits func() bool) int64 {
	if hi >= maxDeviceMemory || hi <= 1 {
		return hi
	}
	ok, restore := capProbe(c, fits)
	defer restore()
	h := float64(hi)
	lo := h / 2
	for ok(lo) {
		if h = lo; lo < 1 || ctx.Err() != nil {
			return int64(h)
		}
		lo /= 2
	}
	return narrow(ctx, ok, lo, h)
}

// capProbe is fits asked with c.memCap set to its argument; restore puts
// c.memCap back.
func capProbe(c *costs, fits func() bool) (ok func(float64) bool, restore func()) {
	saved := c.memCap
	return func(cap float64) bool {
		c.memCap = cap
		return fits()
	}, func() { c.memCap = saved }
}

// narrow bisects between lo, where ok fails, and hi, where it holds, to
// 0.1% of hi (at most 50 steps, or until ctx is done), and returns hi.
func narrow(ctx context.Context, ok func(float64) bool, lo, hi float64) int64 {
	for it := 0; it < 50 && hi-lo > hi*1e-3 && ctx.Err() == nil; it++ {
		if mid := (lo + hi) / 2; ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return int64(hi)
}

// graphSearch is GraphPipe's partitioner at one replication cap: a binary
// search on the time-per-micro-batch target tau, each step the DP over
// the series-parallel tree minimising the in-flight micro-batches (the
// pipeline depth). It returns the answer at the smallest feasible tau
// first, then the answers at the larger targets tried (shallower
// pipelines on fewer devices), which the search weighs as candidates.
// Once ctx is done it stops between steps and returns nothing.
func graphSearch(ctx context.Context, t *spTree, c *costs, D, maxRep int, sh *dpShared, hint float64) ([]stagePlan, float64) {
	var total float64
	for _, x := range c.time {
		total += x
	}
	scratch := &dp{} // the tables one step hands the next
	solve := func(tau float64) (stagePlan, bool) {
		p := c.newDP(t, D, maxRep, tau, sh)
		p.recycle(scratch)
		v := p.solve(t.root, 0, 0)
		scratch.memo, scratch.smemo, scratch.free = p.memo, p.smemo, p.free
		if !v.ok() || v.devs > D {
			return v, false
		}
		return p.mat(v), true
	}
	lo, hi := total/float64(D), total+c.setupF+c.setupB
	if hint > lo && hint < hi {
		hi = hint // a larger replica cap never needs a larger target
	}
	var found []stagePlan
	var best stagePlan
	ok := false
	for it := 0; it < 40 && (hi-lo) > 1e-2*hi; it++ {
		if ctx.Err() != nil {
			return nil, math.Inf(1) // the search discards it on ctx.Err()
		}
		mid := (lo + hi) / 2
		if v, fit := solve(mid); fit {
			best, ok, hi = v, true, mid
			found = append(found, v)
		} else {
			lo = mid
		}
	}
	if !ok {
		if v, fit := solve(hi); fit && hi < total+c.setupF+c.setupB {
			best, ok = v, true
			found = append(found, v)
		} else if v, fit := solve(math.Inf(1)); fit {
			return []stagePlan{v}, math.Inf(1)
		} else {
			return nil, math.Inf(1)
		}
	}
	// Shallower answers at targets above the smallest feasible one (up
	// to 3x: beyond that the slower rate costs more than any depth saves
	// with a handful of micro-batches).
	for tau := hi * 1.3; tau < min(total*1.01, hi*3); tau *= 1.3 {
		v, fit := solve(tau)
		if !fit {
			continue
		}
		found = append(found, v)
		if v.inflight <= 1 {
			break
		}
	}
	return append([]stagePlan{best}, found...), hi
}

// partitionOf turns a DP answer into a partition over devs.
func partitionOf(n int, sp stagePlan, devs []core.DeviceID) Partition {
	part := Partition{StageOf: make([]int, n)}
	next := 0
	for s, st := range sp.stages() {
		var ops []int
		for _, x := range st.parts {
			ops = append(ops, x...)
		}
		sort.Ints(ops)
		for _, o := range ops {
			part.StageOf[o] = s
		}
		part.Devices = append(part.Devices, devs[next:next+st.devs])
		next += st.devs
	}
	return part
}

// minChainMemory binary-searches the smallest per-device memory under
// which some chain partition fits with kind's micro-batches in flight
// (GPipe: all of them; 1F1B: its warm-up, or a capped one:
// cappedChains).
func minChainMemory(ctx context.Context, c *costs, D, maxRep int, kind Kind) int64 {
	x := newChainDP(c)
	x.ctx = ctx
	full := bisectMemory(ctx, c, func() bool {
		best := x.table(D, maxRep, kind)
		for u := 1; u <= D; u++ {
			for _, part := range chainReadOuts(best, len(c.w.Ops), u, c.devs) {
				if c.estimate(part, kind).fits {
					return true
				}
			}
		}
		return false
	})
	if kind != OneFOneB {
		return full
	}
	// Capped warm-ups need no more: bisect below the full warm-up's
	// figure (a few probes, not a second search from one byte).
	return min(full, bisectBelow(ctx, c, full, func() bool { return len(cappedChains(ctx, c, D, maxRep, true)) > 0 }))
}

// cappedChains are the 1F1B chains that fit c.memCap by the estimate only
// with a capped warm-up: the chain DP's answers with each stage's memory
// checked at one micro-batch in flight per replica (chainDP.leastWarmup),
// each at the largest warm-up cap under which it fits (fittingWarmup).
// The DP's own check counts the full warm-up, so where nothing fits it,
// these can: uno-4 (the benchmark's) on 32 A100s under 200 MiB, where the
// full warm-up needs 256 MiB and a chain capped at warm-up 1 needs 180.
// probe (the figure's bisection) stops at the first one found, and
// counts an answer that fits with its full warm-up too, so that what it
// reports does not fall as the memory grows.
func cappedChains(ctx context.Context, c *costs, D, maxRep int, probe bool) []Partition {
	x := newChainDP(c)
	x.ctx, x.leastWarmup = ctx, true
	best := x.table(D, maxRep, OneFOneB)
	var out []Partition
	seen := map[string]bool{}
	for u := 1; u <= D; u++ {
		for _, part := range chainReadOuts(best, len(c.w.Ops), u, c.devs) {
			if pr := c.estimate(part, OneFOneB); pr.fits {
				if probe {
					return []Partition{part}
				}
				continue // the DP's own check finds it
			}
			cd := fittingWarmup(c.w, c, &candidate{part: part, kind: OneFOneB, m: c.m})
			if cd == nil || seen[signature(cd.part, OneFOneB)] {
				continue
			}
			seen[signature(cd.part, OneFOneB)] = true
			out = append(out, cd.part)
			if probe {
				return out
			}
		}
	}
	return out
}

// frugalPartitions are the partitions the no-fit bisection finds (with
// stage times unconstrained, at the smallest memory under which one fits
// by the estimate), with at most maxRep replicas per stage: the chain
// DP's under kind (wantChain) and the DAG DP's (wantDAG). The DPs' memory
// checks are not the estimate's (looser for replicated stages), so where
// their answers at the devices' memory all fail the estimate's check,
// their answers at less memory can pass it: the search weighs these when
// nothing of their family fits. Only answers that fit the devices' memory
// by the estimate are returned; c.memCap is restored.
func frugalPartitions(ctx context.Context, w *core.Workload, c *costs, D, maxRep int, kind Kind, wantChain, wantDAG bool) (chain, dag []Partition) {
	if c.memCap <= 0 {
		return nil, nil
	}
	saved := c.memCap
	defer func() { c.memCap = saved }()
	// fits is the estimate's check against the devices' memory.
	fits := func(p Partition, k Kind) bool {
		c.memCap = saved
		return c.estimate(p, k).fits
	}
	if wantChain {
		if need := float64(minChainMemory(ctx, c, D, maxRep, kind)); need <= saved {
			c.memCap = need
			best := newChainDP(c).table(D, maxRep, kind)
			for u := 1; u <= D; u++ {
				for _, part := range chainReadOuts(best, len(c.w.Ops), u, c.devs) {
					if fits(part, kind) {
						chain = append(chain, part)
					}
				}
			}
			if kind == OneFOneB {
				// And the chains that fit only with a capped warm-up, at
				// the devices' memory (the least memory may have been
				// theirs).
				c.memCap = saved
				chain = append(chain, cappedChains(ctx, c, D, maxRep, false)...)
			}
		}
	}
	if wantDAG {
		root, _ := Decompose(w)
		c.memCap = saved
		if need := float64(minMemory(ctx, root, c, D, maxRep)); need <= saved {
			c.memCap = need
			t := newSPTree(root, c)
			p := c.newDP(t, D, maxRep, math.Inf(1), newShared(c))
			if v := p.solve(t.root, 0, 0); v.ok() && v.devs <= D {
				if part := partitionOf(len(c.w.Ops), p.mat(v), c.devs); fits(part, OneFOneB) {
					dag = append(dag, part)
				}
			}
			c.memCap = saved
			if part := cappedDAG(t, c, D, maxRep, false); part != nil {
				dag = append(dag, *part)
			}
		}
	}
	return chain, dag
}

// noFit is scheduler name's error for a model no partition fits, with the smallest
// per-device memory that would fit the partitions the scheduler searches:
// a chain scheduler's the chain DP's (under GPipe, which keeps every
// micro-batch in flight, with GPipe's memory); GraphPipe's (graph) under
// 1F1B the smaller of the DAG DP's and the chain DP's (it searches both
// families, and the DAG DP's memory check is the looser one for
// replicated stages), the least over the micro-batch counts tried (cs).
func noFit(ctx context.Context, w *core.Workload, cs []*costs, D, maxRep int, kind Kind, graph bool, name string) error {
	var need int64 = -1
	var under string
	var m int
	for _, c := range cs {
		n, u := needMemory(ctx, w, c, D, maxRep, kind, graph)
		if need < 0 || n < need {
			need, under, m = n, u, c.m
		}
	}
	e := &NoFitError{Scheduler: name, Devices: D, DeviceMem: int64(cs[0].memCap)}
	if need > maxDeviceMemory {
		e.msg = fmt.Sprintf("%s: %v: no partition of the model fits %d devices of %s, nor of %s, the most the simulator models (add devices)",
			name, ErrNoFit, D, core.FormatBytes(int64(cs[0].memCap)), core.FormatBytes(maxDeviceMemory))
		return e
	}
	e.Need, e.M = need, m
	at := ""
	if len(cs) > 1 {
		at = fmt.Sprintf(" at m = %d", m)
	}
	uneven := ""
	if cs[0].memUneven {
		uneven = fmt.Sprintf("; the partitioners hold every device to the smallest one's memory, %s's: give the devices equal memory or leave %s out", cs[0].memDev, cs[0].memDev)
	}
	e.msg = fmt.Sprintf("%s: %v: no partition of the model fits %d devices of %s; the smallest per-device memory that fits%s%s is about %s (raise the devices' memory or add devices%s)",
		name, ErrNoFit, D, core.FormatBytes(int64(cs[0].memCap)), under, at, core.FormatBytes(core.RoundUpShownBytes(need)), uneven)
	return e
}

// maxDeviceMemory is the most memory a device may have (a cluster file's
// limit, 1 PiB): the no-fit search looks no higher.
const maxDeviceMemory = sim.MaxMemBytes

// needMemory is the smallest per-device memory a plan of kind fits in
// at c's micro-batch count, and under which schedule (for the message).
func needMemory(ctx context.Context, w *core.Workload, c *costs, D, maxRep int, kind Kind, graph bool) (int64, string) {
	switch {
	case kind == GPipe:
		return minChainMemory(ctx, c, D, maxRep, GPipe), " under GPipe (every micro-batch in flight)"
	case graph:
		root, _ := Decompose(w)
		return min(minMemory(ctx, root, c, D, maxRep), minChainMemory(ctx, c, D, maxRep, kind)), ""
	default:
		return minChainMemory(ctx, c, D, maxRep, kind), " as a chain of stages"
	}
}
