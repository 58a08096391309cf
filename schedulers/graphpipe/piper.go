package graphpipe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gnnkit/gnnkit/core"
)

// ErrTooManyDownsets reports an op graph whose downsets are too many for
// the Piper-style chain DP (ChainDP = ChainPiper), which runs over every
// pair of nested downsets.
var ErrTooManyDownsets = errors.New("too many downsets for the Piper-style DP")

// ChainDP names the chain baselines' partitioner.
type ChainDP int

const (
	// ChainPipeDream is PipeDream's DP over one topological order: every
	// stage a contiguous range of it (the default).
	ChainPipeDream ChainDP = iota
	// ChainPiper is Piper's DP over downsets (Tarnawski et al., NeurIPS
	// 2021): every stage the difference of two nested downsets of the op
	// DAG, any convex set of ops, so every chain partition is searched
	// (PipeDream's ranges among them). It costs the number of pairs of
	// nested downsets, which grows as the product of the branches'
	// lengths: GraphPipe's argument for its series-parallel DP.
	ChainPiper
)

func (k ChainDP) String() string {
	switch k {
	case ChainPipeDream:
		return "pipedream"
	case ChainPiper:
		return "piper"
	}
	return fmt.Sprintf("ChainDP(%d)", int(k))
}

// Limits of the Piper-style DP: the downsets it enumerates, and the
// cells of its tables (downsets × (devices+1) × replica caps).
var (
	maxDownsets  = 200_000 // a variable, so that tests can lower it
	maxPiperCell = 1 << 24 // 32 bytes each: 512 MiB
	// maxPiperPairs bounds the time: each nested pair of downsets is a
	// stage the DP prices (about 1 µs each here: uno-4's 9.6 million
	// take 10-27 s; uno-5's 5·10⁸ would take about 10 minutes per call,
	// and the search calls it per micro-batch count tried).
	maxPiperPairs = 50_000_000
)

// countPairs counts the pairs of nested downsets (J ⊊ I), stopping once
// past limit: what Piper's DP prices, counted about 20 times faster.
func countPairs(ctx context.Context, w *core.Workload, ds *downsets, limit int) (int, error) {
	cur := make([]uint64, ds.words)
	pairs := 0
	for J := 1; J < len(ds.sets) && pairs <= limit; J++ {
		if J%1024 == 0 && ctx.Err() != nil {
			return pairs, ctx.Err()
		}
		copy(cur, ds.sets[J])
		supersets(w, cur, func(_ []uint64, grown bool) bool {
			if grown {
				pairs++
			}
			return pairs <= limit
		})
	}
	return pairs, nil
}

// supersets calls leaf for every downset of w's ops that contains cur (a
// downset), each once, with cur holding it and grown false for cur
// itself: each op after cur's, in index order, is left out or, when its
// inputs are all in, taken. leaf returns false to end the walk. cur is
// as it was on return. (piperWorker.walk is the same walk, carrying the
// added ops, their hash and compute for Piper's DP.)
func supersets(w *core.Workload, cur []uint64, leaf func(cur []uint64, grown bool) bool) {
	n := len(w.Ops)
	stop := false
	var rec func(o int, grown bool)
	rec = func(o int, grown bool) {
		if stop {
			return
		}
		for o < n && cur[o/64]&(1<<(o%64)) != 0 {
			o++
		}
		if o == n {
			stop = !leaf(cur, grown)
			return
		}
		rec(o+1, grown) // without o
		for _, q := range w.Ops[o].Deps {
			if cur[q/64]&(1<<(q%64)) == 0 {
				return // o's inputs are not all in: o cannot be
			}
		}
		cur[o/64] |= 1 << (o % 64)
		rec(o+1, true)
		cur[o/64] &^= 1 << (o % 64)
	}
	rec(0, false)
}

// popcount is the number of ops in the set s.
func popcount(s []uint64) int {
	k := 0
	for _, x := range s {
		k += bits.OnesCount64(x)
	}
	return k
}

// Downsets returns the number of downsets of w's op graph (sets of ops
// closed under their inputs): the states of the Piper-style chain DP
// (ChainPiper), whose work grows with the pairs of nested ones. Past the
// DP's limit it returns ErrTooManyDownsets.
func Downsets(ctx context.Context, w *core.Workload) (int, error) {
	ds, err := enumerateDownsets(ctx, w)
	if err != nil {
		return 0, err
	}
	return len(ds.sets), nil
}

// downsets are the op DAG's downsets (sets of ops closed under Deps),
// numbered so that a downset's strict supersets come before it (by size,
// largest first): id 0 is every op, the last is the empty set.
type downsets struct {
	n, words int
	sets     [][]uint64 // each downset's ops as a bitset
	zob      []uint64   // a random key per op; a set's hash is the xor of its ops' keys
	index    map[uint64][]int32
}

// enumerateDownsets lists w's downsets, or fails with ErrTooManyDownsets
// when there are more than maxDownsets. Ops are in topological (index)
// order: each op's Deps come before it.
func enumerateDownsets(ctx context.Context, w *core.Workload) (*downsets, error) {
	n := len(w.Ops)
	ds := &downsets{n: n, words: (n + 63) / 64, zob: make([]uint64, n), index: map[uint64][]int32{}}
	rng := rand.New(rand.NewPCG(1, 2))
	for o := range ds.zob {
		ds.zob[o] = rng.Uint64()
	}
	var err error
	supersets(w, make([]uint64, ds.words), func(cur []uint64, _ bool) bool {
		if len(ds.sets) >= maxDownsets {
			err = fmt.Errorf("%w: the %d-op graph has more than %d", ErrTooManyDownsets, n, maxDownsets)
			return false
		}
		if len(ds.sets)%4096 == 0 && ctx.Err() != nil {
			err = ctx.Err()
			return false
		}
		ds.sets = append(ds.sets, append([]uint64(nil), cur...))
		return true
	})
	if err != nil {
		return nil, err
	}
	// Largest first (a stable counting sort by size).
	bySize := make([][][]uint64, n+1)
	for _, s := range ds.sets {
		k := popcount(s)
		bySize[k] = append(bySize[k], s)
	}
	ds.sets = ds.sets[:0]
	for k := n; k >= 0; k-- {
		ds.sets = append(ds.sets, bySize[k]...)
	}
	for id, s := range ds.sets {
		h := ds.hash(s)
		ds.index[h] = append(ds.index[h], int32(id))
	}
	return ds, nil
}

// downsetCache keeps the last op graph's downsets and nested-pair
// count. The search runs Piper's DP once per micro-batch count and pass
// on one workload, and both depend on its op graph alone (uno-4: 0.7 s
// to count the pairs, beside a 7 s DP). Keyed by the graph itself
// (opGraphKey), so a different workload misses; the downsets are only
// read once built, so concurrent searches may share them.
var downsetCache struct {
	sync.Mutex
	key        string
	ds         *downsets
	maxSets    int // maxDownsets they were enumerated under
	pairs      int // the nested pairs counted, or -1
	pairsLimit int // the limit they were counted under
}

// opGraphKey is w's op graph: its op count and every op's Deps.
func opGraphKey(w *core.Workload) string {
	b := binary.AppendUvarint(nil, uint64(len(w.Ops)))
	for _, op := range w.Ops {
		b = binary.AppendUvarint(b, uint64(len(op.Deps)))
		for _, q := range op.Deps {
			b = binary.AppendUvarint(b, uint64(q))
		}
	}
	return string(b)
}

// cachedDownsets is enumerateDownsets(ctx, w), from downsetCache when it
// holds w's op graph enumerated under the same limit.
func cachedDownsets(ctx context.Context, w *core.Workload) (*downsets, error) {
	key := opGraphKey(w)
	dc := &downsetCache
	dc.Lock()
	if dc.ds != nil && dc.key == key && dc.maxSets == maxDownsets {
		ds := dc.ds
		dc.Unlock()
		return ds, nil
	}
	limit := maxDownsets
	dc.Unlock()
	ds, err := enumerateDownsets(ctx, w)
	if err != nil {
		return nil, err
	}
	dc.Lock()
	dc.key, dc.ds, dc.maxSets, dc.pairs = key, ds, limit, -1
	dc.Unlock()
	return ds, nil
}

// cachedPairs is countPairs(ctx, w, ds, limit), from downsetCache when
// ds is its downsets and they were counted under the same limit.
func cachedPairs(ctx context.Context, w *core.Workload, ds *downsets, limit int) (int, error) {
	dc := &downsetCache
	dc.Lock()
	if dc.ds == ds && dc.pairs >= 0 && dc.pairsLimit == limit {
		pairs := dc.pairs
		dc.Unlock()
		return pairs, nil
	}
	dc.Unlock()
	pairs, err := countPairs(ctx, w, ds, limit)
	if err != nil {
		return 0, err
	}
	dc.Lock()
	if dc.ds == ds {
		dc.pairs, dc.pairsLimit = pairs, limit
	}
	dc.Unlock()
	return pairs, nil
}

func (ds *downsets) hash(s []uint64) uint64 {
	var h uint64
	for wi, x := range s {
		for x != 0 {
			b := bits.TrailingZeros64(x)
			h ^= ds.zob[wi*64+b]
			x &= x - 1
		}
	}
	return h
}

// lookup returns the id of the downset s whose hash is h.
func (ds *downsets) lookup(s []uint64, h uint64) int {
	for _, id := range ds.index[h] {
		if equalBits(ds.sets[id], s) {
			return int(id)
		}
	}
	return -1
}

func equalBits(a, b []uint64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// piperCell is the Piper DP's answer for the ops outside a downset on at
// most u devices, as chainCell: its first stage is the downset next
// minus this one, on d devices, and the rest is next's answer on at most
// rest devices (the budget it was weighed at: a larger budget's answer
// may use more devices, and more in flight on this stage).
type piperCell struct {
	t                  float64
	stages, devs, rest int32
	next, d            int32
}

// piperTables runs Piper's DP over w's downsets once for every replica
// cap: best[c][J][u] is the ops outside downset J on at most u of D
// devices, stages of at most caps[c] replicas each, minimising the
// slowest stage's time per micro-batch over its replicas (costs.repRate)
// while every replica fits with the micro-batches kind keeps in flight
// on it, as chainDP.table does over a topological order (ties to fewer
// stages). Each pair of nested downsets is priced once (costs.stat) for
// all caps; a stage's compute alone (costs.time) over its replicas is a
// lower bound on its rate that skips most of the device counts.
func piperTables(ctx context.Context, w *core.Workload, c *costs, D int, caps []int, kind Kind, progress func(done, total int64)) (*downsets, [][][]piperCell, error) {
	ds, err := cachedDownsets(ctx, w)
	if err != nil {
		return nil, nil, err
	}
	N := len(ds.sets)
	if per := (D + 1) * len(caps); N > maxPiperCell/per {
		return nil, nil, fmt.Errorf("%w: %d downsets on %d devices at %d replica caps need %d table cells (at most %d)", ErrTooManyDownsets, N, D, len(caps), N*per, maxPiperCell)
	}
	pairs, err := cachedPairs(ctx, w, ds, maxPiperPairs)
	if err != nil {
		return nil, nil, err
	}
	if pairs > maxPiperPairs {
		return nil, nil, fmt.Errorf("%w: the %d downsets hold more than %d nested pairs, each a stage the DP prices (minutes per micro-batch count)", ErrTooManyDownsets, N, maxPiperPairs)
	}
	pr := &piperProgress{report: progress, total: int64(pairs)}
	pr.add(0)
	inf := math.Inf(1)
	best := make([][][]piperCell, len(caps))
	for ci := range caps {
		flat := make([]piperCell, N*(D+1))
		best[ci] = make([][]piperCell, N)
		for J := range N {
			best[ci][J] = flat[J*(D+1) : (J+1)*(D+1)]
			for u := range best[ci][J] {
				best[ci][J][u] = piperCell{t: inf, next: -1}
			}
		}
		for u := range D + 1 {
			best[ci][0][u] = piperCell{t: 0, next: -1} // id 0: every op placed
		}
	}
	// The states of one size are independent (their supersets are
	// larger, solved before them): each size's are shared out over
	// workers, each with its own buffers and stage pricer (costs.stat
	// writes scratch). A state's answer is the same whichever worker
	// solves it.
	workers := piperWorkers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if N < piperMinDownsets {
		workers = 1
	}
	ws := make([]*piperWorker, workers)
	for i := range ws {
		pc := c
		if i > 0 {
			pc = c.scratchCopy()
		}
		ws[i] = newPiperWorker(ctx, w, ds, pc, kind, D, caps, best, pr)
	}
	for lo := 1; lo < N; {
		hi := lo + 1
		for hi < N && ds.size(hi) == ds.size(lo) {
			hi++
		}
		if workers == 1 || hi-lo < piperMinStates {
			for J := lo; J < hi; J++ {
				if err := ws[0].solve(J); err != nil {
					return nil, nil, err
				}
			}
		} else {
			var next atomic.Int64
			next.Store(int64(lo))
			errs := make([]error, workers)
			var wg sync.WaitGroup
			for i, wk := range ws {
				wg.Go(func() {
					for {
						J := int(next.Add(1) - 1)
						if J >= hi {
							return
						}
						if err := wk.solve(J); err != nil {
							errs[i] = err
							next.Store(int64(hi))
							return
						}
					}
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				if e := ctx.Err(); e != nil {
					return nil, nil, e
				}
				return nil, nil, err
			}
		}
		lo = hi
	}
	for _, wk := range ws {
		pr.add(int64(wk.leaves % piperProgressEvery))
	}
	return ds, best, nil
}

// piperProgressEvery is how many priced pairs a worker counts between
// reports (Scheduler.Progress).
const piperProgressEvery = 8192

// piperProgress reports the pairs Piper's DP has priced, of its total,
// from every worker, one report at a time and never backwards (nil
// report: none).
type piperProgress struct {
	report func(done, total int64)
	total  int64
	mu     sync.Mutex
	done   int64
}

func (p *piperProgress) add(n int64) {
	if p.report == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = min(p.done+n, p.total)
	p.report(p.done, p.total)
}

// piperWorkers is how many goroutines piperTables runs (0: GOMAXPROCS),
// on graphs of at least piperMinDownsets downsets, for sizes of at least
// piperMinStates states (below, the goroutines cost more than they
// save); variables, so that tests can compare one with several.
var (
	piperWorkers     = 0
	piperMinDownsets = 2048
	piperMinStates   = 64
)

// size is the number of ops in downset id.
func (ds *downsets) size(id int) int { return popcount(ds.sets[id]) }

// piperWorker solves states of Piper's DP: its own buffers, and a stage
// pricer of its own.
type piperWorker struct {
	ctx    context.Context
	w      *core.Workload
	ds     *downsets
	c      *costs
	kind   Kind
	D      int
	caps   []int
	best   [][][]piperCell
	cur    []uint64
	stage  []int
	cand   [][]piperCell
	pm     [][]float64
	leaves int
	err    error
	pr     *piperProgress
}

func newPiperWorker(ctx context.Context, w *core.Workload, ds *downsets, c *costs, kind Kind, D int, caps []int, best [][][]piperCell, pr *piperProgress) *piperWorker {
	wk := &piperWorker{ctx: ctx, w: w, ds: ds, c: c, kind: kind, D: D, caps: caps, best: best, pr: pr,
		cur: make([]uint64, ds.words), stage: make([]int, 0, ds.n), cand: make([][]piperCell, len(caps)), pm: make([][]float64, len(caps))}
	for ci := range caps {
		wk.cand[ci] = make([]piperCell, D+1)
		wk.pm[ci] = make([]float64, D+1)
	}
	return wk
}

// solve fills best[·][J] from the states of J's strict supersets: a
// depth-first walk over them, each weighed as J's first stage (piperPair),
// then the "at most u devices" merge.
func (wk *piperWorker) solve(J int) error {
	ds, inf := wk.ds, math.Inf(1)
	copy(wk.cur, ds.sets[J])
	for ci := range wk.caps {
		for u := range wk.cand[ci] {
			wk.cand[ci][u] = piperCell{t: inf, next: -1}
			wk.pm[ci][u] = inf
		}
	}
	wk.err = nil
	wk.walk(0, ds.hash(wk.cur), 0)
	if wk.err != nil {
		return wk.err
	}
	for ci := range wk.caps {
		row := wk.best[ci][J]
		for u := 1; u <= wk.D; u++ {
			v, prev := wk.cand[ci][u], row[u-1]
			if v.t < prev.t*(1-eps) || (v.t <= prev.t*(1+eps) && v.stages < prev.stages) || math.IsInf(prev.t, 1) && !math.IsInf(v.t, 1) {
				row[u] = v
			} else {
				row[u] = prev
			}
		}
	}
	return nil
}

// walk extends the current set by the ops from o on (each op in or out,
// in only when its inputs are), h its hash and T the added ops' compute.
func (wk *piperWorker) walk(o int, h uint64, T float64) {
	if wk.err != nil {
		return
	}
	cur, n := wk.cur, wk.ds.n
	for o < n && cur[o/64]&(1<<(o%64)) != 0 {
		o++
	}
	if o == n {
		if len(wk.stage) == 0 {
			return
		}
		wk.leaves++
		if wk.leaves%piperProgressEvery == 0 {
			if wk.ctx.Err() != nil {
				wk.err = wk.ctx.Err()
				return
			}
			wk.pr.add(piperProgressEvery)
		}
		I := wk.ds.lookup(cur, h)
		if I < 0 {
			wk.err = fmt.Errorf("piper: internal error: a downset's superset is not a downset")
			return
		}
		piperPair(wk.c, wk.kind, wk.D, wk.caps, wk.best, wk.cand, wk.pm, I, wk.stage, T)
		return
	}
	wk.walk(o+1, h, T) // without o
	for _, q := range wk.w.Ops[o].Deps {
		if cur[q/64]&(1<<(q%64)) == 0 {
			return
		}
	}
	cur[o/64] |= 1 << (o % 64)
	wk.stage = append(wk.stage, o)
	wk.walk(o+1, h^wk.ds.zob[o], T+wk.c.time[o])
	wk.stage = wk.stage[:len(wk.stage)-1]
	cur[o/64] &^= 1 << (o % 64)
}

// piperPair weighs stage (the ops of downset I outside the current one,
// whose compute sums to T) as the first stage of the rest, at every
// replica cap, replica count and device count. cand[c][u] is the best
// first stage found so far at exactly u devices, pm[c][u] the least time
// over cand[c][:u+1] (non-increasing in u): a stage that cannot reach it
// at u cannot win "at most u devices" there (piperTables' merge).
func piperPair(c *costs, kind Kind, D int, caps []int, best [][][]piperCell, cand [][]piperCell, pm [][]float64, I int, stage []int, T float64) {
	var st stageStat
	priced := false
	for ci, r := range caps {
		next, cc, pmc := best[ci][I], cand[ci], pm[ci]
		for d := 1; d <= min(r, D); d++ {
			lb := T / float64(d)
			if lb > pmc[d]*(1+eps) {
				continue // pm is non-increasing: no u >= d takes it
			}
			rate := -1.0
			for u := d; u <= D; u++ {
				lim := pmc[u] * (1 + eps)
				if lb > lim {
					break // and more so at every larger u
				}
				rest := next[u-d]
				if rest.t > lim {
					continue // also when rest.t is +Inf
				}
				if rate < 0 {
					if !priced {
						st, priced = c.stat(stage), true
					}
					rate = c.repRate(st, d)
				}
				v := piperCell{t: max(rest.t, rate), stages: rest.stages + 1, devs: rest.devs + int32(d), rest: int32(u - d), next: int32(I), d: int32(d)}
				cu := cc[u]
				if !(v.t < cu.t*(1-eps) || (v.t <= cu.t*(1+eps) && v.stages < cu.stages)) || v.t > lim {
					continue
				}
				if !c.fits(st, kind, int(rest.devs)+d, d) {
					continue
				}
				cc[u] = v
				for x := u; x <= D && v.t < pmc[x]; x++ {
					pmc[x] = v.t
				}
			}
		}
	}
}

// piperFrom reads the partition of best[empty][u] off a Piper table, as
// chainFrom does (spend: each rest at the whole budget left).
func piperFrom(ds *downsets, best [][]piperCell, u int, devs []core.DeviceID, spend bool) (Partition, bool) {
	J := len(ds.sets) - 1 // the empty downset
	if math.IsInf(best[J][u].t, 1) {
		return Partition{}, false
	}
	part := Partition{StageOf: make([]int, ds.n), Chain: true}
	used := 0
	for s, r := 0, u; J != 0; s++ {
		cl := best[J][r]
		I := int(cl.next)
		for wi := range ds.words {
			x := ds.sets[I][wi] &^ ds.sets[J][wi]
			for x != 0 {
				b := bits.TrailingZeros64(x)
				part.StageOf[wi*64+b] = s
				x &= x - 1
			}
		}
		part.Devices = append(part.Devices, devs[used:used+int(cl.d)])
		used += int(cl.d)
		J, r = I, int(cl.rest)
		if spend {
			r = u - used
		}
	}
	return part, true
}
