package graphpipe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sort"

	"github.com/gnnkit/gnnkit/core"
)

// ErrNoFit reports a model that no partition fits on the devices. The
// error wrapping it (a *NoFitError) starts with the scheduler's name
// (graphpipe, 1f1b or gpipe) and names the smallest per-device memory
// that would fit.
var ErrNoFit = errors.New("model does not fit")

// NoFitError is what a search returns when no partition of the model fits
// the devices' memory: errors.Is(err, ErrNoFit) holds, and errors.As gives
// the figures its message names, for a caller to act on (size a cluster,
// retry with more memory) without reading the text.
type NoFitError struct {
	Scheduler string // graphpipe, 1f1b or gpipe
	Devices   int
	// DeviceMem is the memory every device was held to: the smallest
	// device's (the partitioners hold all devices to it).
	DeviceMem int64
	// Need is the smallest per-device memory under which a partition fits
	// by the search's estimate (found to 0.1%; the message rounds it up),
	// 0 when none does up to the most the simulator models (add devices).
	Need int64
	// M is the micro-batch count Need is at (the count, of those the
	// search tried, that needs least; 0 with Need 0).
	M   int
	msg string
}

func (e *NoFitError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("%s: %v on %d devices of %s", e.Scheduler, ErrNoFit, e.Devices, core.FormatBytes(e.DeviceMem))
	}
	return e.msg
}

// Unwrap makes errors.Is(err, ErrNoFit) hold.
func (e *NoFitError) Unwrap() error { return ErrNoFit }

const eps = 1e-9

// chainCell is the chain DP's answer for ops[i:] on at most u devices.
type chainCell struct {
	t      float64 // the slowest stage's time per micro-batch (its time over its replicas)
	stages int
	devs   int // devices used
	j, d   int // first stage: ops [i, j) on d devices
	// rest is the budget the rest (ops [j:]) was weighed at: the cell
	// for a larger budget may use more devices, and put more in flight
	// on this stage than its memory check counted.
	rest int
}

// chainDP prices contiguous op ranges for PipeDream's DP (table).
type chainDP struct {
	c *costs
	// ctx, when set, stops tableFrom between rows once it is done (the
	// table is then partial; the search discards it on ctx.Err()).
	ctx context.Context
	// leastWarmup checks a stage's memory with one micro-batch in flight
	// per replica, as a 1F1B warm-up capped at 1 keeps (Partition.
	// WarmupCap), instead of the devices downstream: the table then holds
	// the chains that fit only with a capped warm-up, whose candidates
	// fittingWarmup makes (the no-fit fallback, frugalPartitions).
	leastWarmup                 bool
	n                           int
	pre, fpre, bpre, hpre, tpre []float64
	apre                        []float64 // prefix sums of costs.step under costs.amortize
	// With costs.walk: live[k] is the gradient bytes the ops >= k leave
	// when walked from the last (a one-device backward's), and vmax the
	// range maximum of temp[o] + live[o+1] (a sparse table), so that a
	// range's walk is max(received, vmax(i, j) − live[j] + received).
	live []float64
	vmax [][]float64
	// featPre[k] and wPre[g][k] count the ops before k that read the
	// features and graph g's edge weights (costs.inputPart of a range).
	featPre []int
	wPre    [][]int
	ppre    []float64   // with owners: parameter bytes (a parameter several ops of a range read counted for each: an upper bound)
	pmax    [][]float64 // with owners: the largest parameter each op reads, as a sparse table
}

func newChainDP(c *costs) *chainDP {
	n := len(c.w.Ops)
	x := &chainDP{c: c, n: n, pre: make([]float64, n+1), fpre: make([]float64, n+1), bpre: make([]float64, n+1),
		hpre: make([]float64, n+1), tpre: make([]float64, n+1), ppre: make([]float64, n+1), apre: make([]float64, n+1)}
	for o := range n {
		if c.owners {
			x.ppre[o+1] = x.ppre[o] + c.pbyte[o]
		}
		x.pre[o+1] = x.pre[o] + c.time[o]
		if c.amortize {
			x.apre[o+1] = x.apre[o] + c.step[o]
		}
		x.fpre[o+1] = x.fpre[o] + c.fwd[o]
		x.bpre[o+1] = x.bpre[o] + c.bwd[o]
		x.hpre[o+1] = x.hpre[o] + c.held[o]
		x.tpre[o+1] = x.tpre[o] + c.temp[o]
	}
	if c.readFeat != nil {
		x.featPre = make([]int, n+1)
		ng := 0
		for _, gs := range c.readW {
			for _, g := range gs {
				ng = max(ng, g+1)
			}
		}
		x.wPre = make([][]int, ng)
		for g := range x.wPre {
			x.wPre[g] = make([]int, n+1)
		}
		for o := range n {
			x.featPre[o+1] = x.featPre[o]
			if c.readFeat[o] {
				x.featPre[o+1]++
			}
			for g := range x.wPre {
				x.wPre[g][o+1] = x.wPre[g][o]
			}
			for _, g := range c.readW[o] {
				x.wPre[g][o+1]++
			}
		}
	}
	if c.owners && n > 0 {
		v := make([]float64, n)
		for o := range n {
			for _, q := range c.opPar[o] {
				v[o] = max(v[o], c.parBytes[q])
			}
		}
		x.pmax = sparseMax(v)
	}
	if c.walk {
		x.live = make([]float64, n+1)
		for o := n - 1; o >= 0; o-- {
			x.live[o] = x.live[o+1] + c.gIn[o] - c.gOut[o]
		}
		v := make([]float64, n)
		for o := range n {
			v[o] = c.temp[o] + x.live[o+1]
		}
		x.vmax = sparseMax(v)
	}
	return x
}

// sparseMax is v's sparse table for range maxima: level k holds the
// maximum of each run of 2^k values.
func sparseMax(v []float64) [][]float64 {
	t := [][]float64{v}
	for w := 1; 2*w <= len(v); w *= 2 {
		prev, next := t[len(t)-1], make([]float64, len(v)-2*w+1)
		for o := range next {
			next[o] = max(prev[o], prev[o+w])
		}
		t = append(t, next)
	}
	return t
}

// tableMax is the maximum of the values [i, j) of sparse table t (i < j).
func tableMax(t [][]float64, i, j int) float64 {
	k := bits.Len(uint(j-i)) - 1
	return max(t[k][i], t[k][j-(1<<k)])
}

// rangeMax is the maximum of temp[o] + live[o+1] over o in [i, j).
func (x *chainDP) rangeMax(i, j int) float64 { return tableMax(x.vmax, i, j) }

// chainRows hold, for the stages starting at op i, in[j]: the bytes a
// stage of ops [i, j) reads from earlier ops, and gin[j]: the bytes of
// gradients it receives (its outputs read past j). The table fills them
// for i = n−1 down to 0, one row at a time.
type chainRows struct {
	i       int
	in, gin []float64
	seen    []int
}

func (x *chainDP) rows() *chainRows {
	r := &chainRows{i: x.n, in: make([]float64, x.n+1), gin: make([]float64, x.n+1), seen: make([]int, x.n)}
	for o := range r.seen {
		r.seen[o] = -1
	}
	return r
}

// advance moves the rows to stages starting at op i (= r.i − 1).
func (x *chainDP) advance(r *chainRows, i int) {
	c := x.c
	r.i = i
	// gin: row i+1's plus op i's output for the stages that end before
	// its last consumer, where its gradient is needed (costs.stat's rule).
	if c.needGrad[i] {
		for j := i + 1; j <= min(x.n, c.maxCons[i]); j++ {
			r.gin[j] += c.out[i]
		}
	}
	r.in[i] = 0
	for j := i + 1; j <= x.n; j++ {
		v := r.in[j-1]
		for _, q := range c.w.Ops[j-1].Deps {
			if q < i && r.seen[q] != i {
				r.seen[q] = i
				v += c.out[q]
			}
		}
		r.in[j] = v
	}
}

func (x *chainDP) stat(r *chainRows, j int) stageStat {
	i := r.i
	s := stageStat{f: x.fpre[j] - x.fpre[i], b: x.bpre[j] - x.bpre[i], held: x.hpre[j] - x.hpre[i], trans: x.tpre[j] - x.tpre[i],
		in: r.in[j], gin: r.gin[j], home: j == x.n, pw: x.ppre[j] - x.ppre[i], amort: x.apre[j] - x.apre[i]}
	s.pmax = x.rangePmax(i, j)
	if x.c.walk {
		s.trans = max(s.gin, x.rangeMax(i, j)-x.live[j]+s.gin)
	}
	s.inPart = 1
	if x.featPre != nil {
		s.inPart = 0
		if x.featPre[j] > x.featPre[i] {
			s.inPart += x.c.featShare
		}
		for g := range x.wPre {
			if x.wPre[g][j] > x.wPre[g][i] {
				s.inPart += x.c.wShare
			}
		}
	}
	x.c.finish(&s)
	return s
}

// rangePmax is the largest parameter ops [i, j) read (with owners; 0
// without).
func (x *chainDP) rangePmax(i, j int) float64 {
	if x.pmax == nil || i >= j {
		return 0
	}
	return tableMax(x.pmax, i, j)
}

// table is PipeDream's DP over the topological (index) order: ops cut
// into contiguous stages, each on one or more devices (at most maxRep;
// data parallelism inside the stage, micro-batches dealt to the
// replicas), minimising the slowest stage's time per micro-batch over its
// replicas while every replica fits the devices' memory with the
// micro-batches the schedule kind keeps in flight on it (Warmup: a 1F1B
// chain stage with s unreplicated stages after it keeps s+1); ties go to
// fewer stages, then fewer devices. best[i][u] is ops[i:] on at most u
// devices. Stage times are the simulator's (costs.finish on the ops'
// prefix sums); lower bounds on both sides of a cut prune the split
// points without changing the answer.
func (x *chainDP) table(D, maxRep int, kind Kind) [][]chainCell {
	return x.tableFrom(D, maxRep, kind, nil)
}

// tableFrom is table, with the budgets u ≤ maxRep copied from seed, a
// table of the same costs, D and kind at a replica cap of at least
// maxRep (nil: none): at those budgets no stage can have more than
// maxRep replicas anyway, so every cap from maxRep up fills them alike,
// cell for cell.
func (x *chainDP) tableFrom(D, maxRep int, kind Kind, seed [][]chainCell) [][]chainCell {
	n, pre, c := x.n, x.pre, x.c
	inf := math.Inf(1)
	best := make([][]chainCell, n+1)
	for i := range best {
		best[i] = make([]chainCell, D+1)
		for u := range best[i] {
			best[i][u] = chainCell{t: inf}
		}
	}
	for u := 0; u <= D; u++ {
		best[n][u] = chainCell{t: 0}
	}
	from := 1 // the first budget computed here
	if seed != nil {
		from = min(maxRep, D) + 1
		for i := range n {
			copy(best[i][:from], seed[i][:from])
		}
	}
	if from > D {
		return best
	}
	rows := x.rows()
	fits := x.fitsMemo(rows, D, maxRep, kind)
	for i := n - 1; i >= 0; i-- {
		if x.ctx != nil && x.ctx.Err() != nil {
			return best
		}
		x.advance(rows, i)
		for u := from; u <= D; u++ {
			cur := best[i][u-1] // at most u devices: u-1 will do
			for d := 1; d <= min(u, maxRep); d++ {
				r := u - d
				j0 := i + 1
				if r > 0 && !math.IsInf(cur.t, 1) {
					// The rest needs at least (pre[n]-pre[j])/r: skip the
					// cuts where that alone is no better.
					lim := cur.t * (1 + eps) * float64(r)
					j0 = max(j0, sort.Search(n+1, func(j int) bool { return pre[n]-pre[j] <= lim }))
				}
				if r == 0 {
					j0 = n // no devices left: this stage takes the rest
				}
				for j := j0; j <= n; j++ {
					if (pre[j]-pre[i])/float64(d) > cur.t*(1+eps) {
						break // the stage alone is slower, and grows with j
					}
					rest := best[j][r]
					if math.IsInf(rest.t, 1) || rest.t > cur.t*(1+eps) {
						continue
					}
					// The stage's rate first (cheap); its memory only when the
					// cut would win.
					var rate float64
					switch {
					case c.sync:
						rate = c.repRate(x.stat(rows, j), d)
					case c.amortize:
						// repRate on the prefix sums: the step part by the
						// most bytes one replica owns.
						rate = c.repRate(stageStat{f: x.pre[j] - x.pre[i] - (x.apre[j] - x.apre[i]) + c.setupF + c.setupB,
							amort: x.apre[j] - x.apre[i], pw: x.ppre[j] - x.ppre[i], pmax: x.rangePmax(i, j)}, d)
					default:
						rate = (x.pre[j] - x.pre[i] + c.setupF + c.setupB) / float64(d)
					}
					v := chainCell{t: max(rest.t, rate), stages: rest.stages + 1, devs: rest.devs + d, j: j, d: d, rest: r}
					if !(v.t < cur.t*(1-eps) || (v.t <= cur.t*(1+eps) && v.stages < cur.stages)) {
						continue
					}
					W := rest.devs + d
					if x.leastWarmup && kind == OneFOneB {
						W = d
					}
					if !fits(j, d, W) {
						continue
					}
					cur = v
				}
			}
			best[i][u] = cur
		}
	}
	return best
}

// fitsMemo is c.fits for the stage [rows.i, j) on d replicas with W in
// flight, remembered for the current row: the table asks it again and
// again for one stage (every budget u, every rest), and since fitting
// is monotone in W (more in flight hold more) the largest W known to
// fit and the smallest known not to answer most. Without room for the
// memo (more than 2^22 stages × replica counts), each call computes.
func (x *chainDP) fitsMemo(rows *chainRows, D, maxRep int, kind Kind) func(j, d, W int) bool {
	c := x.c
	compute := func(j, d, W int) bool { return c.fits(x.stat(rows, j), kind, W, d) }
	if c.memCap <= 0 {
		return func(int, int, int) bool { return true }
	}
	stride := maxRep + 1
	if (x.n+1)*stride > 1<<22 {
		return compute
	}
	// row is rows.i+1 when fit and fail are the row's (0: none known).
	type known struct{ row, fit, fail int32 }
	memo := make([]known, (x.n+1)*stride)
	return func(j, d, W int) bool {
		e := &memo[j*stride+d]
		if row := int32(rows.i + 1); e.row != row {
			// First asked this row: try the most the table asks, all
			// D devices' in flight, which usually fits too.
			*e = known{row: row}
			if W < D {
				if compute(j, d, D) {
					e.fit = int32(D)
					return true
				}
				e.fail = int32(D)
			}
		}
		switch {
		case e.fit > 0 && int32(W) <= e.fit:
			return true
		case e.fail > 0 && int32(W) >= e.fail:
			return false
		}
		ok := compute(j, d, W)
		if ok {
			e.fit = max(e.fit, int32(W))
		} else if e.fail == 0 || int32(W) < e.fail {
			e.fail = int32(W)
		}
		return ok
	}
}

// chainFrom reads the partition of best[0][u] off the table: the one
// the DP weighed (each rest at the budget its cell was weighed at,
// chainCell.rest), or with spend each rest at the whole budget left,
// whose answer may use more devices (more stages) and is at least as
// fast in the DP's objective, but whose earlier stages' memory was
// checked with fewer in flight: a second candidate, which the estimate
// and the simulator weigh like any other.
func chainFrom(best [][]chainCell, n, u int, devs []core.DeviceID, spend bool) (Partition, bool) {
	if math.IsInf(best[0][u].t, 1) {
		return Partition{}, false
	}
	part := Partition{StageOf: make([]int, n), Chain: true}
	next := 0
	for i, r, s := 0, u, 0; i < n; s++ {
		cl := best[i][r]
		for o := i; o < cl.j; o++ {
			part.StageOf[o] = s
		}
		part.Devices = append(part.Devices, devs[next:next+cl.d])
		next += cl.d
		i, r = cl.j, cl.rest
		if spend {
			r = u - next
		}
	}
	return part, true
}

// chainReadOuts are both partitions chainFrom reads for budget u (each
// rest at the whole budget left, then the one the DP weighed; none where
// nothing fits), the order the search weighs them in.
func chainReadOuts(best [][]chainCell, n, u int, devs []core.DeviceID) []Partition {
	var out []Partition
	for _, spend := range []bool{true, false} {
		if p, ok := chainFrom(best, n, u, devs, spend); ok {
			out = append(out, p)
		}
	}
	return out
}

// spNode is a node of the series-parallel decomposition of the op DAG.
type spNode struct {
	kind     int // leaf, series, parallel
	ops      []int
	children []*spNode
	id       int // index in the tree (numbered by the search)
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
			c := decompose(w, succ, p, coarse)
			if c.kind == spSeries {
				n.children = append(n.children, c.children...) // a series of a series is one series
			} else {
				n.children = append(n.children, c)
			}
		}
		return n
	}
	// Parallel: the weakly connected components, after peeling a unique
	// sink (it joins them).
	body, tail := ops, []int(nil)
	if sinks := sinksOf(succ, body); len(sinks) == 1 && len(ops) > 2 {
		body, tail = without(body, sinks), sinks
	}
	comps := components(w, succ, body)
	// Branches summed by a chain of binary joins (add(add(a, b), c) …)
	// nest one parallel node per join; peeling the joins (sinks that
	// combine two or more values of the region, repeatedly) exposes all
	// the branches side by side, the joins following in series.
	if b, t := peelJoins(w, succ, ops, body, tail); len(t) > len(tail) {
		if c := components(w, succ, b); len(c) > len(comps) {
			body, tail, comps = b, t, c
		}
	}
	if len(comps) > 1 {
		par := &spNode{kind: spParallel, ops: body}
		for _, c := range comps {
			par.children = append(par.children, decompose(w, succ, c, coarse))
		}
		if tail == nil {
			return par
		}
		n := &spNode{kind: spSeries, ops: ops, children: []*spNode{par}}
		sort.Ints(tail)
		for _, o := range tail {
			n.children = append(n.children, &spNode{kind: spLeaf, ops: []int{o}})
		}
		return n
	}
	*coarse = append(*coarse, ops)
	return &spNode{kind: spLeaf, ops: ops}
}

// sinksOf returns the ops of the set with no successor in it.
func sinksOf(succ [][]int, ops []int) []int {
	in := make(map[int]bool, len(ops))
	for _, o := range ops {
		in[o] = true
	}
	var out []int
	for _, o := range ops {
		sink := true
		for _, s := range succ[o] {
			if in[s] {
				sink = false
				break
			}
		}
		if sink {
			out = append(out, o)
		}
	}
	return out
}

func without(ops, drop []int) []int {
	d := make(map[int]bool, len(drop))
	for _, o := range drop {
		d[o] = true
	}
	var out []int
	for _, o := range ops {
		if !d[o] {
			out = append(out, o)
		}
	}
	return out
}

// peelJoins moves, repeatedly, the sinks of body that read two or more
// ops of the region into the tail.
func peelJoins(w *core.Workload, succ [][]int, region, body, tail []int) ([]int, []int) {
	in := make(map[int]bool, len(region))
	for _, o := range region {
		in[o] = true
	}
	for len(body) > 2 {
		var joins []int
		for _, o := range sinksOf(succ, body) {
			n := 0
			for _, d := range w.Ops[o].Deps {
				if in[d] {
					n++
				}
			}
			if n >= 2 {
				joins = append(joins, o)
			}
		}
		if len(joins) == 0 || len(joins) >= len(body) {
			break
		}
		body, tail = without(body, joins), append(append([]int(nil), tail...), joins...)
	}
	return body, tail
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
