package graphpipe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// candidate is one partition the search weighs.
type candidate struct {
	part Partition
	kind Kind
	// from: where it came from, which the metrics and the benchmark read
	// (substrings): "dag", "chain", "chain as dag", "chain (piper)",
	// "chain (piper) as dag", "chain, least memory" or "dag, least
	// memory", then maybe ", widened", then maybe ", shared trunk" (the
	// trunk on every device the plan uses) or ", shared trunk on first
	// replicas".
	from string
	// pass: the DPs' pass that found it (pools). Plans from the added
	// passes (stepsPass, flushPass) are only added: the walk over m and
	// the fallbacks see only the plain pass's.
	pass dpPass
	// memCap: the per-device memory the chain DP was held to where it
	// found it (capsPass; 0 otherwise).
	memCap float64
	pred   prediction
	m      int // micro-batches per iteration
	cap    int // the replica cap the partitioner ran at
	plan   *core.Plan
	res    *sim.Result
	// groups: the plan steps each owner's parameters in readiness
	// groups (PlanOptions.StepGroups).
	groups bool
	// sinkFirst: its devices hosting several stages run the stage
	// nearer a sink first (PlanOptions.SinkFirst).
	sinkFirst bool
}

// replicaCaps are the per-stage replica caps the partitioners run at:
// 1, 2, 4, … below D, and D (each cap gives the DP another trade between
// pipeline depth and the flush that replicated stages pay).
func replicaCaps(D, limit int) []int {
	if limit <= 0 || limit > D {
		limit = D
	}
	var caps []int
	for r := 1; r < limit; r *= 2 {
		caps = append(caps, r)
	}
	return append(caps, limit)
}

// signature identifies a partition (and a schedule kind) compactly.
func signature(p Partition, kind Kind) string {
	b := make([]byte, 0, 2*len(p.StageOf)+len(p.Devices)+2)
	b = append(b, byte(kind))
	if p.Chain {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	for _, s := range p.StageOf {
		b = append(b, byte(s), byte(s>>8))
	}
	for _, d := range p.Devices {
		b = append(b, byte(len(d)), byte(len(d)>>8))
	}
	// The devices in all: a shared-trunk plan's trunk stage shares them
	// with the others, where a plan of the same stages and counts on
	// devices of their own uses more.
	n := deviceCount(p)
	b = append(b, byte(n), byte(n>>8))
	return string(append(b, byte(p.WarmupCap), byte(p.WarmupCap>>8)))
}

// topWarmup is the largest 1F1B warm-up a replica of a stage with
// successors actually starts (at most its micro-batches).
func topWarmup(part Partition, succs [][]int, m int) int {
	top := 0
	for st, x := range warmups(part.depths(succs), part.Devices) {
		if len(succs[st]) > 0 {
			d := len(part.Devices[st])
			top = max(top, min(x, (m+d-1)/d))
		}
	}
	return top
}

// fittingWarmup is a 1F1B candidate that does not fit by the estimate
// with the largest warm-up cap under which it does, or nil if none does.
// Fit is not monotone in the cap (a cap whose 1F1B order deadlocks is
// priced under GPipe, every micro-batch in flight; the flush's staging
// depends on timing), so the caps are scanned downward, not bisected.
func fittingWarmup(w *core.Workload, c *costs, cd *candidate) *candidate {
	_, succs := cd.part.StageDAG(w)
	for limit := topWarmup(cd.part, succs, cd.m) - 1; limit >= 1; limit-- {
		part := cd.part
		part.WarmupCap = limit
		if pr := c.estimate(part, cd.kind); pr.fits {
			return &candidate{part: part, kind: cd.kind, from: cd.from, pass: cd.pass, memCap: cd.memCap, pred: pr, m: cd.m, cap: cd.cap}
		}
	}
	return nil
}

// pools are the candidate partitions the search weighs, by family
// (s.families gives each one's kind): the chain DP's answer on at most u
// devices for every u and replica cap (the chain baselines' whole
// search) under the scheduler's kind; for GraphPipe the DAG family under
// its generalised 1F1B (the DAG DP's answers at every replica cap and
// target it tried, the chain answers as stage DAGs: a chain is a
// degenerate DAG, and the shared-trunk variants of both, sharedTrunk,
// unless Disjoint) and the 1F1B chain family (exactly what the 1F1B
// baseline weighs and simulates, so GraphPipe never does worse than
// it), and where s.gpipeFamily the same DAG answers in GPipe's order and
// the GPipe chain family (the GPipe baseline's).
//
// only, when not nil, restricts the replica caps to those it holds.
func (s *Scheduler) pools(ctx context.Context, w *core.Workload, c *costs, devs []core.DeviceID, only map[int]bool) ([][]*candidate, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var root *spNode
	var trunk []int
	if s.Graph {
		root, _ = Decompose(w)
		if !s.Disjoint && c.owners && !c.sync {
			// Shared-trunk variants of the DAG answers (sharedTrunk),
			// weighed like every other candidate. Not on logical CPU
			// devices, whose synchronous executor runs a device's
			// streams side by side, which the simulator's one task per
			// device does not model.
			trunk = trunkOps(root)
		}
	}
	caps := capsOf(replicaCaps(len(devs), s.MaxReplicas), only)
	// The DPs weigh stage times a second way where the optimizer steps
	// are material (costs.secondPass): with each stage's step amortised
	// over the micro-batches (costs.amortized), at the same replica caps.
	// Its candidates are marked (candidate.pass) and only added: the
	// walk over m, the caps it carries, the least-memory fallback and
	// the warm-up variants read the plain pass's first, and search
	// simulates the second pass's best beside the plain pass's, so no
	// plan it would choose without the second pass is lost. It is
	// skipped without simulation (Simulate < 0), where the estimate alone
	// would choose and may flatter the second pass's plans.
	//
	// A third pass weighs the whole flush a stage adds (costs.thirdPass:
	// on small graphs, where a stage can have replicas): its step and,
	// replicated, the reductions into its owners, amortised alike
	// (costs.flushAmortized). The DPs minimise the slowest stage, which
	// says nothing of the flush a replicated stage of large parameters
	// leaves after the last backward; the chains this pass proposes
	// replicate such stages less. Added and simulated the same way.
	second := s.Simulate >= 0 && c.secondPass()
	flush := s.Simulate >= 0 && c.thirdPass()
	run := func(kind Kind, root *spNode, chain, pchain, dag *[]*candidate) error {
		seen, pseen := map[string]bool{}, map[string]bool{}
		if err := s.runDPs(ctx, w, c, c, devs, root, trunk, kind, caps, plainPass, seen, pseen, chain, pchain, dag); err != nil {
			return err
		}
		if second {
			if err := s.runDPs(ctx, w, c, c.amortized(), devs, root, trunk, kind, caps, stepsPass, seen, pseen, chain, pchain, dag); err != nil {
				return err
			}
		}
		if flush {
			return s.runDPs(ctx, w, c, c.flushAmortized(), devs, root, trunk, kind, caps, flushPass, seen, pseen, chain, pchain, dag)
		}
		return nil
	}
	piper := s.ChainDP == ChainPiper
	if !s.Graph {
		// The chain baselines' one family: PipeDream's chains, or with
		// dp=piper Piper's.
		var pool []*candidate
		var err error
		if piper {
			err = run(s.Kind, nil, nil, &pool, nil)
		} else {
			err = run(s.Kind, nil, &pool, nil, nil)
		}
		if err != nil {
			return nil, err
		}
		return [][]*candidate{pool}, nil
	}
	// GraphPipe: its DAG family, each chain baseline's family, and with
	// dp=piper the Piper baseline's family, so that each chain family is
	// exactly its baseline's search and the best of each is simulated.
	var chain, pchain, dag []*candidate
	pc := func(p *[]*candidate) *[]*candidate {
		if piper {
			return p
		}
		return nil
	}
	if err := run(OneFOneB, root, &chain, pc(&pchain), &dag); err != nil {
		return nil, err
	}
	out := [][]*candidate{dag, chain}
	if piper {
		out = append(out, pchain)
	}
	if s.gpipeFamily() {
		// The DAG answers again in GPipe's order (the DAG DP's memory
		// check is 1F1B's: its answers are the same either way), and the
		// GPipe chain baselines' searches.
		gdag := make([]*candidate, 0, len(dag))
		for _, cd := range dag {
			gdag = append(gdag, &candidate{part: cd.part, kind: GPipe, from: cd.from, cap: cd.cap, pass: cd.pass, memCap: cd.memCap})
		}
		estimateAll(ctx, gdag, func(*candidate) *costs { return c })
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var gchain, gpchain []*candidate
		if err := run(GPipe, nil, &gchain, pc(&gpchain), nil); err != nil {
			return nil, err
		}
		out = append(out, gdag, gchain)
		if piper {
			out = append(out, gpchain)
		}
	}
	return out, nil
}

// family is one of the search's pools (Scheduler.pools): the schedule
// its candidates run under, whether they are the DAG DP's, and whether
// they are Piper's chains (dp=piper).
type family struct {
	kind  Kind
	dag   bool
	piper bool
}

// families are the pools the search weighs, in pools' order: the chain
// baselines' one chain family under their kind (PipeDream's, or with
// dp=piper Piper's); GraphPipe's DAG and chain families under its
// generalised 1F1B (with dp=piper a Piper chain family after
// PipeDream's), then, where gpipeFamily, the same DAG answers and the
// GPipe chain baselines' in GPipe's order.
func (s *Scheduler) families() []family {
	piper := s.ChainDP == ChainPiper
	if !s.Graph {
		return []family{{kind: s.Kind, piper: piper}}
	}
	f := []family{{kind: OneFOneB, dag: true}, {kind: OneFOneB}}
	if piper {
		f = append(f, family{kind: OneFOneB, piper: true})
	}
	if s.gpipeFamily() {
		f = append(f, family{kind: GPipe, dag: true}, family{kind: GPipe})
		if piper {
			f = append(f, family{kind: GPipe, piper: true})
		}
	}
	return f
}

// gpipeFamily reports whether GraphPipe also weighs GPipe's order
// (Scheduler.GPipeOrder): its DAG answers in that order and the GPipe
// chain baseline's whole search, two more families. On the 1,000-op DAG
// over 64 devices the GPipe chain's search alone takes 1.3 s.
func (s *Scheduler) gpipeFamily() bool {
	return s.Graph && s.GPipeOrder
}

// capsOf is the replica caps of caps that only holds (nil: all).
func capsOf(caps []int, only map[int]bool) []int {
	if only == nil {
		return caps
	}
	var keep []int
	for _, r := range caps {
		if only[r] {
			keep = append(keep, r)
		}
	}
	return keep
}

// runDPs runs the DPs under kind with cv's stage times at the replica
// caps, and adds their answers to the pools, each estimated with c and
// marked second as given: with chain, PipeDream's chain DP (its answers
// into chain, each signature once over seen); with pchain, Piper's
// (into pchain, each once over pseen, so that the pool is the Piper
// baseline's whole search); with root, the DAG DP over root's
// series-parallel tree. The DAG pool (dag, over seen) takes, in a fixed
// order, the chain answers read as stage DAGs (PipeDream's, then
// Piper's), the DAG answers, then the shared-trunk variants of this
// run's DAG candidates.
func (s *Scheduler) runDPs(ctx context.Context, w *core.Workload, c, cv *costs, devs []core.DeviceID, root *spNode, trunk []int, kind Kind, caps []int, pass dpPass, seen, pseen map[string]bool, chain, pchain, dag *[]*candidate) (err error) {
	D, n := len(devs), len(w.Ops)
	// Piper's tables first, on their own: they price stages with
	// cv.stat, which the DAG search below uses too.
	// Their read-outs are kept on c as the chain tables' are (below),
	// looked up only when every cap's is kept: a call for fewer caps
	// would judge the tables' size (ErrTooManyDownsets) on fewer.
	var preads [][]Partition // by cap: each budget's, both read-outs (piperFrom)
	if pchain != nil {
		keys := make([]readKey, len(caps))
		for i, r := range caps {
			keys[i] = readKey{pass: pass, cap: r, kind: kind, memCap: cv.memCap, piper: true}
		}
		if preads = c.keptReads(keys); preads == nil {
			pds, ptables, err := piperTables(ctx, w, cv, D, caps, kind, s.Progress)
			if errors.Is(err, ErrTooManyDownsets) {
				instead := "dp=pipedream (the default chain DP) or graphpipe (its series-parallel DP)"
				if root != nil {
					instead = "dp=pipedream (the default: graphpipe's chains from PipeDream's DP only)"
				}
				return fmt.Errorf("%s (dp=piper): %w; Piper's DP runs over every pair of nested downsets, whose number grows as the product of the branches' lengths: use %s", s.Name(), err, instead)
			}
			if err != nil {
				return err
			}
			preads = make([][]Partition, len(caps))
			for i := range caps {
				for u := 1; u <= D; u++ {
					for _, spend := range []bool{true, false} {
						if p, ok := piperFrom(pds, ptables[i], u, devs, spend); ok {
							preads[i] = append(preads[i], p)
						}
					}
				}
			}
			c.keepReads(keys, preads)
		}
	}
	// The chain tables (read-only on cv) run side by side with each
	// other and with the DAG search; the candidates are then taken in a
	// fixed order, so the answer does not depend on the interleaving.
	// A table's read-outs are kept on c (costs.chainReads): a chain
	// baseline's walk after GraphPipe's (chainWalks) finds them there.
	var reads [][]Partition // by cap: each budget's, both read-outs (chainReadOuts)
	var graphs [][]stagePlan
	var wg sync.WaitGroup
	if root != nil {
		// The DAG search, one cap after another (each starts from the
		// last one's target), is the longest of these: it runs first,
		// and the chain tables take the other cores.
		t, sh := newSPTree(root, cv), newShared(cv)
		graphs = make([][]stagePlan, len(caps))
		wg.Go(func() {
			hint := math.Inf(1)
			for i, r := range caps {
				if ctx.Err() != nil {
					return
				}
				graphs[i], hint = graphSearch(ctx, t, cv, D, r, sh, hint)
			}
		})
	}
	if chain != nil {
		x := sync.OnceValue(func() *chainDP { // read-only once built
			d := newChainDP(cv)
			d.ctx = ctx
			return d
		})
		reads = make([][]Partition, len(caps))
		slots := runtime.GOMAXPROCS(0)
		if root != nil {
			slots--
		}
		sem := make(chan struct{}, max(1, slots))
		readOuts := func(table [][]chainCell) []Partition {
			var out []Partition
			for u := 1; u <= D; u++ {
				out = append(out, chainReadOuts(table, n, u, devs)...)
			}
			return out
		}
		key := func(r int) readKey { return readKey{pass: pass, cap: r, kind: kind, memCap: cv.memCap} }
		// The largest cap's table first: the others copy its budgets up
		// to their own cap (chainDP.tableFrom), then run side by side.
		top := 0
		for i, r := range caps {
			if r > caps[top] {
				top = i
			}
		}
		wg.Go(func() {
			var seed [][]chainCell // nil where the memo answers
			sem <- struct{}{}
			reads[top] = c.chainReads(key(caps[top]), func() []Partition {
				seed = x().table(D, caps[top], kind)
				return readOuts(seed)
			})
			<-sem
			for i, r := range caps {
				if i == top {
					continue
				}
				wg.Go(func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					reads[i] = c.chainReads(key(r), func() []Partition { return readOuts(x().tableFrom(D, r, kind, seed)) })
				})
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	// The candidates first, in a fixed order; then their estimates, side
	// by side (estimateAll).
	var added []*candidate
	defer func() {
		if err == nil {
			estimateAll(ctx, added, func(*candidate) *costs { return c })
			err = ctx.Err()
		}
	}()
	adder := func(seen map[string]bool) func(pool *[]*candidate, p Partition, from string, r int) {
		return func(pool *[]*candidate, p Partition, from string, r int) {
			key := signature(p, kind)
			if seen[key] {
				return
			}
			seen[key] = true
			cd := &candidate{part: p, kind: kind, from: from, cap: r, pass: pass}
			if pass == capsPass {
				cd.memCap = cv.memCap
			}
			*pool = append(*pool, cd)
			added = append(added, cd)
		}
	}
	add, padd := adder(seen), adder(pseen)
	from := 0 // this run's DAG candidates start here
	if dag != nil {
		from = len(*dag)
	}
	asDAG := func(p Partition, from string, i int) {
		if root != nil {
			q := p
			q.Chain = false
			add(dag, q, from, caps[i])
		}
	}
	for i, parts := range reads {
		for _, p := range parts {
			add(chain, p, "chain", caps[i])
			asDAG(p, "chain as dag", i)
		}
	}
	for i, parts := range preads {
		for _, p := range parts {
			padd(pchain, p, "chain (piper)", caps[i])
			asDAG(p, "chain (piper) as dag", i)
		}
	}
	if root == nil {
		return nil
	}
	for i, g := range graphs {
		for _, sp := range g {
			add(dag, partitionOf(n, sp, devs), "dag", caps[i])
		}
	}
	for _, cd := range append([]*candidate(nil), (*dag)[from:]...) {
		if len(trunk) == 0 {
			break
		}
		ps, ends := s.sharedVariants(cd.part, trunk)
		for i, p := range ps {
			add(dag, p, "dag, "+ends[i], cd.cap)
		}
	}
	return nil
}

// sharedVariants are q's shared-trunk variants (sharedTrunk, then
// sharedTrunkFirsts) that keep the trunk within MaxReplicas, each with
// the ending of its label ("shared trunk", "shared trunk on first
// replicas").
func (s *Scheduler) sharedVariants(q Partition, trunk []int) (ps []Partition, ends []string) {
	if st, ok := sharedTrunk(q, trunk); ok && s.trunkWithin(st) {
		ps, ends = append(ps, st), append(ends, "shared trunk")
	}
	if st, ok := sharedTrunkFirsts(q, trunk); ok && s.trunkWithin(st) {
		ps, ends = append(ps, st), append(ends, "shared trunk on first replicas")
	}
	return ps, ends
}

// DefaultMemCaps is Scheduler.MemCaps's default: the memory caps the
// chain DP also runs under. 16 find most of what a sweep of whole
// searches finds (the 1F1B chain on uno-4 over 16 A100s: 44.20 ms, the
// 64-cap sweep before the ladder 43.45; on uno-8 over 16: 80.77, the
// sweeps 81.74–84.17) for 3% more time on the benchmark and up to 50%
// more on a search with m searched over 64 devices. More caps are not
// better: the pass simulates its best estimates, and more answers crowd
// them with the estimate's error (32 caps: 84.17 ms on uno-8 over 16).
const DefaultMemCaps = 16

// ladderCaps is how many memory caps the chain DP also runs under for
// c (Scheduler.MemCaps): none without simulation (the estimate alone
// would choose among more proposals of its own error), on one device,
// or above smallOps ops (the 1,000-op search's time bound).
func (s *Scheduler) ladderCaps(c *costs) int {
	n := s.MemCaps
	if n == 0 {
		n = DefaultMemCaps
	}
	if n < 0 || s.Simulate < 0 || len(c.devs) < 2 || len(c.time) > smallOps {
		return 0
	}
	return n
}

// ladderWithin: the ladder (Scheduler.ladder) runs at the micro-batch
// counts whose plain score is within this fraction of the best count's.
// The estimate can be further off between counts than within one: at
// 10% the 1F1B chain on uno-4 over 8 A100s (1.4 GiB) lost the ladder's
// 65.30 ms chain at m = 16, estimated 14% behind m = 8.
const ladderWithin = 0.25

// ladder runs PipeDream's chain DP again under a ladder of memory caps
// (memLadder, ladderCaps of them) for each chain family, at the counts
// the walk over m weighed where the family's plain score (plainScore)
// is within ladderWithin of its best count's (at a fixed m, the one),
// and adds its answers to the family's pool as capsPass candidates.
// Held to less memory the DP answers other chains (a stage that no
// longer fits moves a boundary), and some of them, widened, simulate
// faster than anything the plain DP proposes. After the walk, so that
// the walk weighs the plain pass alone, as it always did; per family,
// so that GraphPipe's chain families, the chain baselines' walks
// (chainWalks), get exactly the baselines' ladder.
func (s *Scheduler) ladder(ctx context.Context, w *core.Workload, devs []core.DeviceID, evals []*mEval) error {
	caps := replicaCaps(len(devs), s.MaxReplicas)
	for f, fam := range s.families() {
		if fam.dag || fam.piper {
			continue
		}
		best := math.Inf(1)
		for _, e := range evals {
			best = min(best, plainScore(e.pools[f]))
		}
		for _, e := range evals {
			n := s.ladderCaps(e.c)
			if n == 0 || !(plainScore(e.pools[f]) <= best*(1+ladderWithin)) {
				continue
			}
			pool := e.pools[f]
			seen := make(map[string]bool, len(pool))
			for _, cd := range pool {
				seen[signature(cd.part, cd.kind)] = true
			}
			from := len(pool)
			for _, mc := range memLadder(e.pools[f], e.c.memCap, n) {
				if err := s.runDPs(ctx, w, e.c, e.c.capped(mc), devs, nil, nil, fam.kind, caps, capsPass, seen, nil, &pool, nil, nil); err != nil {
					return err
				}
			}
			for _, cd := range pool[from:] {
				cd.m = e.m
			}
			e.pools[f] = pool
		}
	}
	return nil
}

// plainScore is the best estimated iteration among pool's plain-pass
// candidates that fit (+Inf: none), mEval.score for one family.
func plainScore(pool []*candidate) float64 {
	sc := math.Inf(1)
	for _, cd := range pool {
		if cd.pred.fits && cd.pass == plainPass {
			sc = min(sc, cd.pred.iter)
		}
	}
	return sc
}

// memLadder is n per-device memory caps spaced geometrically from the
// least estimated peak of pool's plain-pass candidates up to (not
// including) the largest of those that fit memCap (0: unlimited); none
// where they do not differ.
func memLadder(pool []*candidate, memCap float64, n int) []float64 {
	lo, hi := math.Inf(1), 0.0
	for _, cd := range pool {
		if cd.pass != plainPass {
			continue
		}
		lo = min(lo, cd.pred.peak)
		if cd.pred.fits {
			hi = max(hi, cd.pred.peak)
		}
	}
	if !(lo < hi) {
		return nil
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = lo * math.Pow(hi/lo, float64(i)/float64(n))
	}
	return out
}

// dpPass is one of the DPs' runs over the same candidates' costs
// (pools): plain; the optimizer steps amortised (costs.amortized); the
// whole flush amortised (costs.flushAmortized); the chain DP under a
// ladder of memory caps (costs.capped, memLadder).
type dpPass uint8

const (
	plainPass dpPass = iota
	stepsPass
	flushPass
	capsPass
	numPasses // how many there are
)

// When the DPs' second pass runs (costs.secondPass): the optimizer
// steps are at least stepMaterial of the ops' forward and backward time
// per iteration (costs.stepShare), and either the model has at most
// smallOps ops or the steps reshape the op times by at least
// shiftMaterial (costs.stepShift). The pass doubles the DPs' time; on a
// large op graph whose steps follow its compute (the 1,000-op uno over
// 256 samples: steps 5% of the op time, shift 0.002) it found no better
// plan and took the search from 3.4 to 6.9 s.
//
// smallOps is also where widened starts to leave alone the plans that
// keep nearly every device busy (widenIdle), and above which the search
// weighs no trunk on first replicas (sharedTrunkFirsts); it is also the
// most ops the DPs' third pass runs on (costs.thirdPass).
var (
	stepMaterial  = 0.02 // variables, so that tests can move them
	shiftMaterial = 0.05
	smallOps      = 256
	weighFlush    = true // the DPs' third pass (costs.thirdPass); tests turn it off
)

// widenTop: the search widens (widened) the widenTop × k best estimated
// candidates of each DP pass, family and micro-batch count (k: Simulate,
// 8 by default; candidates with the trunk on every device, from ending in
// "shared trunk", are skipped and not counted; those with it on first
// replicas are widened). A variable, so that tests can turn it off.
var widenTop = 3

// maxSearchM caps the micro-batch counts the m search tries (at most
// this many, and at most one sample per micro-batch).
const maxSearchM = 64

// mLadder is the micro-batch counts the m search may try for a batch of
// samples targets: 1, 2, 4, … up to min(samples, maxSearchM).
func mLadder(samples int) []int {
	top := max(1, min(samples, maxSearchM))
	var ms []int
	for m := 1; m <= top; m *= 2 {
		ms = append(ms, m)
	}
	return ms
}

// UnitSizes lists the unit sizes, in targets, of the micro-batches s may
// plan for a batch of samples targets, largest first: the largest unit
// (⌈samples/m⌉) of each micro-batch count it may try (MicroBatches, or
// every count of the m search's ladder). A profile measured at these
// sizes (sim.MeasureWith's ladder) spans the units of every candidate it
// weighs in full-graph training; a sampled mini-batch's units compute
// receptive fields in the sampled graph, which the profile's points
// (fields in the whole graph) price by interpolation.
func (s *Scheduler) UnitSizes(samples int) []int {
	if samples <= 0 {
		return nil
	}
	ms := mLadder(samples)
	if s.MicroBatches > 0 {
		ms = []int{min(s.MicroBatches, samples)}
	}
	var out []int
	for _, m := range ms {
		if n := (samples + m - 1) / m; len(out) == 0 || out[len(out)-1] != n {
			out = append(out, n)
		}
	}
	return out
}

// fittingLadder is mLadder without the counts whose largest unit (of
// BuildPlan's contiguous shares) is as large as a size the profile's
// measurement found does not fit the device (Profile.OverCapTargets):
// the profile has no costs there, and the extrapolated memory is too
// low (`train --device-mem 24MiB` on Cora chose m = 1 and ran out of
// memory). At least the largest count stays.
func (s *Scheduler) fittingLadder(samples int) []int {
	ladder := mLadder(samples)
	if s.Profile == nil || len(s.Profile.OverCapTargets) == 0 {
		return ladder
	}
	over := slices.Min(s.Profile.OverCapTargets)
	var out []int
	for _, m := range ladder {
		if (samples+m-1)/m < over {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		out = ladder[len(ladder)-1:]
	}
	return out
}

// mStart is where the m search starts on the ladder: the largest count
// not above 16, the fixed-m benchmarks' setting.
func mStart(ladder []int) int {
	i := 0
	for j, m := range ladder {
		if m <= 16 {
			i = j
		}
	}
	return i
}

// mEval is one micro-batch count's candidates: the pools the
// partitioners produce with the costs at that count.
type mEval struct {
	m     int
	c     *costs
	pools [][]*candidate
	score float64 // the best estimated iteration among the plain pass's fitting candidates (+Inf: none fits)
}

// evalM prices the ops for m micro-batches and runs the partitioners.
func (s *Scheduler) evalM(ctx context.Context, w *core.Workload, cm *sim.CostModel, devs []core.DeviceID, m int, only map[int]bool) (*mEval, error) {
	c := s.memo.costsAt(cm, w, devs, m, s.Step, float64(s.planOptions().BucketBytes))
	pools, err := s.pools(ctx, w, c, devs, only)
	if err != nil {
		return nil, err
	}
	// A family none of whose candidates fits by the estimate also weighs
	// the partitioners' answers at less memory (frugalPartitions), which
	// may fit where their answers at the devices' memory do not. Per
	// family, so each chain family stays its baseline's whole search.
	fams := s.families()
	if len(fams) != len(pools) {
		return nil, fmt.Errorf("%s: %d candidate pools for %d families", s.Name(), len(pools), len(fams))
	}
	// The chain families first, then the DAG family (as the fallback
	// always ran): their signatures never meet a chain's. The DAG DP's
	// least memory is 1F1B's: GPipe's DAG family has no fallback.
	var order []int
	for _, dag := range []bool{false, true} {
		for f, fam := range fams {
			if fam.dag == dag && (!fam.dag || fam.kind == OneFOneB) && !anyFits(pools[f:f+1]) {
				order = append(order, f)
			}
		}
	}
	var seen map[string]*candidate
	if len(order) > 0 {
		seen = map[string]*candidate{}
		for _, pool := range pools {
			for _, cd := range pool {
				seen[signature(cd.part, cd.kind)] = cd
			}
		}
	}
	r := s.maxReplicas(len(devs))
	for _, f := range order {
		fam := fams[f]
		chain, dag := frugalPartitions(ctx, w, c, len(devs), r, fam.kind, !fam.dag, fam.dag)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		parts, from := chain, "chain, least memory"
		if fam.dag {
			parts, from = dag, "dag, least memory"
		}
		for _, p := range parts {
			key := signature(p, fam.kind)
			if cd, ok := seen[key]; ok {
				cd.pass = plainPass // the plain search finds it here too
				continue
			}
			cd := &candidate{part: p, kind: fam.kind, from: from, cap: r, pred: c.estimate(p, fam.kind)}
			seen[key] = cd
			pools[f] = append(pools[f], cd)
		}
	}
	e := &mEval{m: c.m, c: c, pools: pools, score: math.Inf(1)}
	for _, pool := range pools {
		for _, cd := range pool {
			cd.m = c.m
		}
		e.score = min(e.score, plainScore(pool))
	}
	return e, nil
}

// widenedBest widens (widened: the devices a plan leaves idle spent on
// replicas) the widenTop × k best estimated candidates of each DP pass
// (passes: the pass's fitting candidates, best estimate first) and
// micro-batch count, and gives each widened DAG plan a shared-trunk
// variant; it returns, per pass, the best k widened plans and the best k
// shared-trunk ones whose estimate would enter the pass's k best, with
// how many plans it estimated and how many of those fit. Candidates with
// the trunk on every device they use are not widened (a device added
// would need the trunk too): their DAG answers are. Those with the trunk
// on their branch stages' first replicas are: a new replica runs its
// branch alone.
func (s *Scheduler) widenedBest(ctx context.Context, pool []*candidate, passes [][]*candidate, k int, costsAt map[int]*costs, devs []core.DeviceID, trunk []int, branches [][]int) (best []*candidate, tried, fitting int) {
	// The pool is merged over the micro-batch counts, and a signature
	// does not say the count.
	type key struct {
		sig string
		m   int
	}
	// Each pass's widened plans are weighed against the signatures of
	// its own and the earlier passes' candidates (and the plans widened
	// so far), not a later pass's: a later pass only adds, so it must
	// not take a widened plan's place with a candidate of the same
	// signature that it then does not simulate.
	seen := map[key]bool{}
	for pass, xs := range passes {
		for _, cd := range pool {
			if int(cd.pass) == pass {
				seen[key{signature(cd.part, cd.kind), cd.m}] = true
			}
		}
		if len(xs) == 0 {
			continue
		}
		bar := xs[min(len(xs), k)-1].pred.iter // the k-th best estimate
		// The plans to weigh first, in order; then their estimates, side
		// by side (estimateAll).
		var vs []*candidate
		var shared []int // vs[i]'s kind: 0 widened, 1 its shared-trunk variant, 2 split
		try := func(cd *candidate, q Partition, from string, sh int) {
			kq := key{signature(q, cd.kind), cd.m}
			if seen[kq] {
				return
			}
			seen[kq] = true
			tried++
			vs = append(vs, &candidate{part: q, kind: cd.kind, from: from, pass: cd.pass, memCap: cd.memCap, m: cd.m, cap: cd.cap})
			shared = append(shared, sh)
		}
		perM := map[int]int{} // sources widened per micro-batch count
		for _, cd := range xs {
			// The trunk on every device: not widened (the trunk on first
			// replicas, "… shared trunk on first replicas", is).
			if strings.HasSuffix(cd.from, "shared trunk") || perM[cd.m] >= widenTop*k {
				continue
			}
			perM[cd.m]++
			c, kind := costsAt[cd.m], cd.kind
			fits := func(q Partition) bool { return c.estimate(q, kind).fits }
			qs := widened(cd.part, c, devs, s.maxReplicas(len(devs)), nil)
			if cd.pred.fits && slices.ContainsFunc(qs, func(q Partition) bool { return !fits(q) }) {
				// Memory binds: widen within it too (widened's fits). A
				// step the blind widening takes can break the cap and a
				// later one mend it, so neither sequence holds the
				// other's plans.
				qs = append(qs, widened(cd.part, c, devs, s.maxReplicas(len(devs)), fits)...)
			}
			// And where the estimate says each step helps most.
			qs = append(qs, widenedByEstimate(cd.part, c, devs, s.maxReplicas(len(devs)), kind)...)
			for _, q := range qs {
				try(cd, q, cd.from+", widened", 0)
				if q.Chain {
					continue
				}
				ps, ends := s.sharedVariants(q, trunk)
				for i, st := range ps {
					try(cd, st, "dag, widened, "+ends[i], 1) // as runDPs labels shared-trunk variants
				}
			}
			// The source and its widened plans with their stages of
			// whole branches split (splitBranches): over their replicas
			// and the devices the plan leaves idle, the trunk then
			// shared; and their shared-trunk variants split over their
			// own replicas (the trunk in a stage of branches keeps it
			// from splitting; a device added to such a plan would not
			// run the trunk). uno-8 (hidden 16) on 8 A100s: two branches
			// a stage on 5 devices became a branch a device.
			if len(branches) == 0 || cd.part.Chain {
				continue
			}
			for i, q := range append([]Partition{cd.part}, qs...) {
				from := cd.from
				if i > 0 {
					from += ", widened"
				}
				if r, ok := splitBranches(q, branches, c.time, spareDevices(q, devs)); ok {
					try(cd, r, from+", split", 2)
					ps, ends := s.sharedVariants(r, trunk)
					for j, st := range ps {
						try(cd, st, "dag, split, "+ends[j], 2)
					}
				}
				ps, ends := s.sharedVariants(q, trunk)
				for j, st := range ps {
					if r, ok := splitBranches(st, branches, c.time, nil); ok {
						try(cd, r, "dag, "+ends[j]+", split", 2)
					}
				}
			}
		}
		estimateAll(ctx, vs, func(v *candidate) *costs { return costsAt[v.m] })
		if ctx.Err() != nil {
			return nil, tried, fitting // the caller returns ctx's error
		}
		var wide [3][]*candidate // widened plans, their shared-trunk variants, split plans
		for i, v := range vs {
			if !v.pred.fits {
				continue
			}
			fitting++
			if len(xs) < k || v.pred.iter < bar {
				wide[shared[i]] = append(wide[shared[i]], v)
			}
		}
		for _, ws := range wide {
			sort.SliceStable(ws, func(i, j int) bool { return ws[i].pred.iter < ws[j].pred.iter })
			best = append(best, ws[:min(len(ws), k)]...)
		}
	}
	return best, tried, fitting
}

// trunkWithin reports whether shared-trunk partition p keeps its trunk
// within MaxReplicas: the trunk runs on every device p uses.
func (s *Scheduler) trunkWithin(p Partition) bool {
	return s.MaxReplicas <= 0 || deviceCount(p) <= s.MaxReplicas
}

// maxReplicas is the most replicas a stage may have on D devices
// (Scheduler.MaxReplicas, at most D; 0: D), the largest replica cap.
func (s *Scheduler) maxReplicas(D int) int {
	caps := replicaCaps(D, s.MaxReplicas)
	return caps[len(caps)-1]
}

// anyFits reports whether some candidate of the DPs' plain pass fits the
// devices' memory by its estimate.
func anyFits(pools [][]*candidate) bool {
	for _, pool := range pools {
		for _, cd := range pool {
			if cd.pred.fits && cd.pass == plainPass {
				return true
			}
		}
	}
	return false
}

// capsPerFamily is how many of each family's best-estimated fitting
// candidates at the walk's first count lend their replica caps to the
// other counts the walk tries.
const capsPerFamily = 3

// bestCaps is the capsPerFamily distinct replica caps of each family's
// best-estimated fitting candidates in pools from the DPs' plain pass
// (several of the best often share one cap); nil (every cap) when
// nothing fits.
func bestCaps(pools [][]*candidate) map[int]bool {
	var only map[int]bool
	for _, pool := range pools {
		var fit []*candidate
		for _, cd := range pool {
			if cd.pred.fits && cd.pass == plainPass {
				fit = append(fit, cd)
			}
		}
		sort.SliceStable(fit, func(i, j int) bool { return fit[i].pred.iter < fit[j].pred.iter })
		mine := map[int]bool{}
		for _, cd := range fit {
			if len(mine) == capsPerFamily {
				break
			}
			mine[cd.cap] = true
			if only == nil {
				only = map[int]bool{}
			}
			only[cd.cap] = true
		}
	}
	return only
}

// searchM chooses the micro-batch counts whose candidates the search
// weighs. With MicroBatches set, that count alone. Otherwise a walk on
// the ladder 1, 2, 4, … (mLadder), the same for every scheduler: start
// at mStart and its two neighbours, then keep stepping from the best
// count towards the better neighbour while the best estimated iteration
// among the DPs' plain pass's fitting candidates (mEval.score) improves.
// A neighbour where nothing fits is stepped over to the next count on
// that side, so the walk crosses such counts (under 1F1B more
// micro-batches hold less, but a graph model's units overlap, their
// neighbourhoods, and under GPipe, which keeps them all, fewer can hold
// less): from a count where nothing fits it thus reaches the nearest
// that fits on each side, and where nothing fits anywhere it has tried
// every count. Every count it evaluated contributes its candidates. The partitioners
// run at every replica cap at the first count only; the other counts run
// them at the caps of each family's best few fitting candidates there
// (bestCaps; every cap if none fits). Both bound the search (usually 3-4
// counts, at most the ladder's 7, and most of them at one to a few caps)
// where an exhaustive sweep would run every cap at every count.
func (s *Scheduler) searchM(ctx context.Context, w *core.Workload, cm *sim.CostModel, devs []core.DeviceID) ([]*mEval, error) {
	if s.MicroBatches > 0 {
		e, err := s.evalM(ctx, w, cm, devs, s.MicroBatches, nil)
		if err != nil {
			return nil, err
		}
		return []*mEval{e}, nil
	}
	ladder := s.fittingLadder(len(w.Batch))
	evals := make([]*mEval, len(ladder))
	var only map[int]bool // the replica caps the walk's other counts run at
	get := func(i int) (float64, error) {
		if evals[i] == nil {
			e, err := s.evalM(ctx, w, cm, devs, ladder[i], only)
			if err != nil {
				return 0, err
			}
			evals[i] = e
		}
		return evals[i].score, nil
	}
	cur := mStart(ladder)
	sc, err := get(cur)
	if err != nil {
		return nil, err
	}
	only = bestCaps(evals[cur].pools)
	walk := func() error {
		for {
			next, nsc := -1, sc
			for _, d := range []int{-1, 1} {
				// The nearest count on this side where something fits: a
				// graph model's memory need not shrink with more, smaller
				// micro-batches (their neighbourhoods overlap), so a count
				// where nothing fits can lie between two where plans do.
				for j := cur + d; j >= 0 && j < len(ladder); j += d {
					x, err := get(j)
					if err != nil {
						return err
					}
					if x < nsc {
						next, nsc = j, x
					}
					if !math.IsInf(x, 1) {
						break
					}
				}
			}
			if next < 0 {
				return nil
			}
			cur, sc = next, evals[next].score
		}
	}
	if err := walk(); err != nil {
		return nil, err
	}
	// The walk stops where neither neighbour improves. On a small graph
	// the fewest micro-batches are weighed too, and the walk goes on from
	// there where they are better: a latency-bound model's best count is
	// often 1, past a worse 2 (mbgnn, hidden 16, on 4 H100s stopped at
	// m = 4, 0.5208 ms, where m = 1 plans 0.4028).
	if len(w.Ops) <= smallOps && evals[0] == nil {
		x, err := get(0)
		if err != nil {
			return nil, err
		}
		if x < sc {
			cur, sc = 0, x
			if err := walk(); err != nil {
				return nil, err
			}
		}
	}
	var out []*mEval
	for _, e := range evals {
		if e != nil {
			out = append(out, e)
		}
	}
	return out, nil
}

// chainWalks makes each of GraphPipe's chain families, with m searched,
// exactly its baseline's whole search: the baseline's own walk over the
// counts (its objective, its replica caps), whose candidates at every
// count it tried replace those GraphPipe's walk found for the family.
// Counts only the baseline tried join evals, GraphPipe's other families
// holding nothing there; evals come back in ladder order, as searchM
// gives them. Each family's candidates are then simulated and refined
// alike and the fastest kept, so GraphPipe is never slower than a chain
// baseline in the simulator. (At a fixed m both searches run the same
// count at every cap: nothing to do.)
func (s *Scheduler) chainWalks(ctx context.Context, w *core.Workload, cm *sim.CostModel, devs []core.DeviceID, evals []*mEval) ([]*mEval, error) {
	fams := s.families()
	byM := map[int]*mEval{}
	for _, e := range evals {
		byM[e.m] = e
	}
	for f, fam := range fams {
		if fam.dag {
			continue
		}
		b := s.baseline(fam)
		bev, err := b.searchM(ctx, w, cm, devs)
		if err != nil {
			return nil, err
		}
		for _, e := range evals {
			e.pools[f] = nil
		}
		for _, be := range bev {
			e := byM[be.m]
			if e == nil {
				e = &mEval{m: be.m, c: be.c, pools: make([][]*candidate, len(fams)), score: math.Inf(1)}
				byM[be.m] = e
				evals = append(evals, e)
			}
			e.pools[f] = be.pools[0]
		}
	}
	sort.SliceStable(evals, func(i, j int) bool { return evals[i].m < evals[j].m })
	return evals, nil
}

// baseline is the chain scheduler whose whole search GraphPipe's chain
// family fam is: s's settings under fam's schedule and chain DP.
func (s *Scheduler) baseline(fam family) *Scheduler {
	b := *s
	b.Graph, b.Kind, b.GPipeOrder, b.Disjoint = false, fam.kind, false, false
	b.ChainDP = ChainPipeDream
	if fam.piper {
		b.ChainDP = ChainPiper
	}
	return &b
}

// search picks the plan: every candidate at every micro-batch count
// searchM tried estimated, per family the best few by estimate (and the
// best of each count) simulated with the executor's semantics
// (sim.Simulate on the same cluster and profile), the fastest that fits
// kept. It reports the estimate and the simulation in the plan's metrics.
func (s *Scheduler) search(ctx context.Context, w *core.Workload, cm *sim.CostModel, devs []core.DeviceID) (*core.Plan, error) {
	evals, err := s.searchM(ctx, w, cm, devs)
	if err != nil {
		return nil, err
	}
	if s.Graph && s.MicroBatches <= 0 {
		if evals, err = s.chainWalks(ctx, w, cm, devs, evals); err != nil {
			return nil, err
		}
	}
	if err := s.ladder(ctx, w, devs, evals); err != nil {
		return nil, err
	}
	// The families' pools, merged over the counts.
	pools := make([][]*candidate, len(evals[0].pools))
	for _, e := range evals {
		for f, pool := range e.pools {
			pools[f] = append(pools[f], pool...)
		}
	}
	// A 1F1B candidate over memory may fit with a shorter warm-up: each
	// family also weighs those variants (trimWarmup then shortens the
	// chosen plan's further while that costs no time).
	costsAt := map[int]*costs{}
	for _, e := range evals {
		costsAt[e.m] = e.c
	}
	if !s.KeepWarmup {
		for f, pool := range pools {
			// Each 1F1B candidate over memory's variant, side by side
			// (fittingWarmup on scratch copies of the costs).
			var over []*candidate
			for _, cd := range pool {
				if cd.kind == OneFOneB && !cd.pred.fits {
					over = append(over, cd)
				}
			}
			found := make([]*candidate, len(over))
			_ = forEach(len(over), func(i int) error {
				found[i] = fittingWarmup(w, costsAt[over[i].m].scratchCopy(), over[i])
				return nil
			})
			variant := map[*candidate]*candidate{}
			for i, cd := range over {
				variant[cd] = found[i]
			}
			// Each pass's candidates in turn, against the signatures of
			// its own and the earlier passes' (as without the later
			// passes) and the variants added so far.
			seen := map[string]bool{}
			for pass := plainPass; pass < numPasses; pass++ {
				for _, cd := range pool {
					if cd.pass == pass {
						seen[signature(cd.part, cd.kind)] = true
					}
				}
				for _, cd := range pool {
					if cd.pass != pass || cd.kind != OneFOneB || cd.pred.fits {
						continue
					}
					if v := variant[cd]; v != nil && !seen[signature(v.part, v.kind)] {
						seen[signature(v.part, v.kind)] = true
						pools[f] = append(pools[f], v)
					}
				}
			}
		}
	}
	k := s.Simulate
	if k == 0 {
		k = 8
	}
	// The trunk of the widened DAG answers' shared-trunk variants, as
	// pools has it.
	var trunk []int
	var branches [][]int // of small graphs, for splitBranches
	if s.Graph {
		root, _ := Decompose(w)
		if c := costsAt[evals[0].m]; !s.Disjoint && c.owners && !c.sync {
			trunk = trunkOps(root)
		}
		if len(w.Ops) <= smallOps {
			branches = branchOps(root)
		}
	}
	// Each family weighed on a goroutine of its own (weigh: its best
	// candidates built, simulated and refined), then taken in order;
	// their builds and simulations take turns in one per core in all.
	tops := make([][]*candidate, len(pools))
	tried, fits := make([]int, len(pools)), make([]int, len(pools))
	sem := cores()
	err = forEachIn(make(chan struct{}, len(pools)), len(pools), func(f int) error {
		// Its own scratch copies of the costs: widened prices stages.
		own := map[int]*costs{}
		for m, c := range costsAt {
			own[m] = c.scratchCopy()
		}
		var err error
		tops[f], tried[f], fits[f], err = s.weigh(ctx, w, cm, pools[f], evals, k, own, devs, trunk, branches, sem)
		return err
	})
	if err != nil {
		return nil, err
	}
	var best *candidate
	var sims []*candidate // every simulated candidate (metrics, the plan's alternatives)
	total, fitting := 0, 0
	for f, top := range tops {
		total += tried[f]
		fitting += fits[f]
		for _, cd := range top {
			if k < 0 {
				if best == nil || cd.pred.iter < best.pred.iter {
					best = cd
				}
				continue
			}
			if cd.res == nil {
				continue
			}
			sims = append(sims, cd)
			if best == nil || best.res == nil || better2(cd, best) {
				best = cd
			}
		}
	}
	if fitting == 0 {
		cs := make([]*costs, len(evals))
		for i, e := range evals {
			cs[i] = e.c
		}
		err := noFit(ctx, w, cs, len(devs), s.maxReplicas(len(devs)), s.Kind, s.Graph, s.Name())
		if ctx.Err() != nil {
			return nil, ctx.Err() // the figure's bisection stopped short
		}
		if s.ChainDP == ChainPiper {
			// The figure bisects PipeDream's chains (and GraphPipe's DAG
			// DP; Piper's DP at every step of a bisection would cost it
			// seconds each): Piper's chains hold them, so it fits, and
			// perhaps less does.
			err = fmt.Errorf("%w; with dp=piper that figure is an upper bound: Piper's chains, which include PipeDream's it was found among, may fit in less", err)
		}
		if s.MicroBatches == 0 {
			if fit := s.fittingLadder(len(w.Batch)); len(fit) < len(mLadder(len(w.Batch))) {
				err = fmt.Errorf("%w; that leaves out m < %d, whose units did not fit the %s the profile was taken under, so it has no costs for them (a profile taken with more memory would weigh them)",
					err, fit[0], core.FormatBytes(s.Profile.Device.MemCap))
			}
		}
		return nil, err
	}
	if best == nil {
		return nil, fmt.Errorf("%s: the simulator rejected every candidate plan", s.Name())
	}
	if best.res != nil && len(best.res.OverCap) > 0 {
		// Every plan that fits by the estimate runs over a device's
		// memory in the simulation (the estimate can be a little under
		// it): none fits. The least any of them needs, by both.
		return nil, overCap(sims, len(devs), costsAt[best.m].memCap, s.Name())
	}
	fastest := best
	if s.Slack > 0 && k > 0 {
		best = lightestWithin(sims, best, s.Slack)
	}
	p := best.plan
	if best != fastest {
		p.Metrics["slack_chosen"] = 1
		p.Metrics["fastest_iteration_ms"] = float64(fastest.res.Iteration) / 1e6
		p.Metrics["fastest_peak_bytes"] = float64(peakOf(fastest.res))
	}
	p.Metrics["candidates"] = float64(total)
	if s.MicroBatches > len(w.Batch) {
		// More micro-batches asked for than the batch has targets: one each.
		p.Metrics["micro_batches_asked"] = float64(s.MicroBatches)
	}
	p.Metrics["simulated_candidates"] = float64(len(sims))
	p.Metrics["micro_batch_counts_tried"] = float64(len(evals))
	best.pred.setMetrics(p)
	if best.res != nil {
		p.Metrics["simulated_iteration_ms"] = float64(best.res.Iteration) / 1e6
	}
	if strings.HasPrefix(best.from, "dag") {
		p.Metrics["dag_partition"] = 1
	}
	if strings.Contains(best.from, "shared trunk") {
		p.Metrics["shared_trunk"] = 1
	}
	if best.kind == GPipe {
		p.Metrics["gpipe_order"] = 1
	}
	if best.part.WarmupCap > 0 {
		p.Metrics["warmup_cap"] = float64(best.part.WarmupCap)
	}
	if best.pass == stepsPass || best.pass == flushPass {
		p.Metrics["steps_weighed"] = 1 // found by one of the DPs' steps passes
	}
	if best.pass == capsPass {
		p.Metrics["dp_mem_cap_bytes"] = best.memCap // the chain DP's cap that found it
	}
	if best.pass == flushPass {
		p.Metrics["flush_weighed"] = 1 // found by the DPs' third pass
	}
	if strings.Contains(best.from, "widened") {
		p.Metrics["widened"] = 1 // a DP plan with its idle devices spent
	}
	if strings.Contains(best.from, "(piper)") {
		p.Metrics["piper_chain"] = 1 // a chain from Piper's DP (dp=piper), or its reading as a stage DAG
	}
	if best.groups {
		p.Metrics["step_groups"] = 1 // owners step in readiness groups
	}
	if best.sinkFirst {
		p.Metrics["sink_first"] = 1 // shared devices run the stage nearer a sink first
	}
	p.Alternatives = paretoFront(sims, best, fastest)
	s.chosen = best
	return p, nil
}

// lightestWithin is Scheduler.Slack's choice: of sims that fit, those
// whose iteration is within (1+slack) of fastest's (the fastest that
// fits), the one with the lowest largest-device peak; ties in the peak
// go to the faster (better2). fastest itself when it does not fit.
func lightestWithin(sims []*candidate, fastest *candidate, slack float64) *candidate {
	if fastest.res == nil || len(fastest.res.OverCap) > 0 {
		return fastest
	}
	limit := float64(fastest.res.Iteration) * (1 + slack)
	best := fastest
	for _, cd := range sims {
		if len(cd.res.OverCap) > 0 || float64(cd.res.Iteration) > limit {
			continue
		}
		if pc, pb := peakOf(cd.res), peakOf(best.res); pc < pb || pc == pb && better2(cd, best) {
			best = cd
		}
	}
	return best
}

// weigh is the search's work on one family's pool: its best candidates
// by estimate (k of each DP pass's, the best of each micro-batch count
// in evals, and the widened plans of each pass's best) built and, with
// k > 0, simulated, trimmed (trimWarmup) and grouped (groupedBest); it
// returns them with how many candidates the family had and how many of
// those fit by the estimate. costsAt are the costs at each count, its
// own (widened prices stages on them); its builds and simulations take
// turns in sem, which the other families share.
func (s *Scheduler) weigh(ctx context.Context, w *core.Workload, cm *sim.CostModel, pool []*candidate, evals []*mEval, k int, costsAt map[int]*costs, devs []core.DeviceID, trunk []int, branches [][]int, sem chan struct{}) ([]*candidate, int, int, error) {
	total := len(pool)
	// The fitting candidates by the DPs' pass that found them, each
	// pass's best estimate first.
	byPass := make([][]*candidate, numPasses)
	fitting := 0
	for _, cd := range pool {
		if cd.pred.fits {
			byPass[cd.pass] = append(byPass[cd.pass], cd)
			fitting++
		}
	}
	for _, xs := range byPass {
		sort.SliceStable(xs, func(i, j int) bool { return xs[i].pred.iter < xs[j].pred.iter })
	}
	fit := byPass[plainPass]
	n := min(len(fit), max(k, 1)) // nothing simulated (k ≤ 0): the best estimate alone
	top := fit[:n:n]
	if k > 0 && len(evals) > 1 {
		// The best-estimated candidate of every count too, so the
		// simulator, not the estimate alone, weighs the counts.
		in := map[*candidate]bool{}
		for _, cd := range top {
			in[cd] = true
		}
		for _, e := range evals {
			for _, cd := range fit {
				if cd.m == e.m {
					if !in[cd] {
						in[cd] = true
						top = append(top, cd)
					}
					break
				}
			}
		}
	}
	// Each added pass's best as many again, beside (not instead of)
	// the plain pass's: the search weighs everything it weighed
	// without them, so its plan is never slower (without simulation,
	// k ≤ 0, pools ran no added pass).
	for _, xs := range byPass[stepsPass:] {
		top = append(top, xs[:min(len(xs), max(k, 0))]...)
	}
	// And the widened plans of each pass's best, beside the others
	// again.
	if k > 0 {
		more, tried, fits := s.widenedBest(ctx, pool, byPass, k, costsAt, devs, trunk, branches)
		if err := ctx.Err(); err != nil {
			return nil, 0, 0, err
		}
		top = append(top, more...)
		total += tried
		fitting += fits
	}
	// Builds and simulations are independent: each candidate's on
	// a goroutine of its own.
	err := forEachIn(sem, len(top), func(i int) error {
		cd := top[i]
		var err error
		if cd.plan, err = s.build(w, cd); err != nil || k <= 0 || ctx.Err() != nil {
			return err
		}
		if res, err := sim.SimulateModel(cd.plan, cm.Clone(), sim.Options{}); err == nil {
			cd.res = res // a plan the simulator rejects (deadlock) is not a candidate
		}
		if len(w.Ops) > smallOps {
			return nil // the grouped variants of the fastest are weighed (groupedBest)
		}
		return s.weighSinkFirst(w, cm, cd)
	})
	if err != nil {
		return nil, 0, 0, err
	}
	var untrimmed []*candidate // top before trimWarmup
	if k > 0 {
		if err := ctx.Err(); err != nil {
			return nil, 0, 0, err
		}
		untrimmed = slices.Clone(top)
		if !s.KeepWarmup {
			// Each candidate's trim on its own goroutine, estimating
			// on a scratch copy of the costs.
			err := forEachIn(sem, len(top), func(i int) error {
				cd := top[i]
				if cd.res == nil || cd.kind != OneFOneB || cd.plan.Metrics["fallback_gpipe"] != 0 {
					return nil
				}
				var err error
				top[i], err = s.trimWarmup(ctx, w, cm, costsAt[cd.m].scratchCopy().estimate, cd)
				return err
			})
			if err != nil {
				return nil, 0, 0, err
			}
		}
	}
	if k > 0 && !s.NoStepGroups {
		// Grouped, a candidate's full warm-up may beat its trim.
		grouped, err := s.groupedBest(ctx, w, cm, top, untrimmed, sem)
		if err != nil {
			return nil, 0, 0, err
		}
		top = append(top, grouped...)
	}
	return top, total, fitting, nil
}

// weighSinkFirst simulates cd, if a device of its hosts several stages,
// in the other order there (PlanOptions.SinkFirst on or off), and keeps
// that one if it simulates better (better2). Neither order wins
// everywhere: the trunk shared with uno-4's branch stages on 4 A100s
// (capped, m = 4) is 0.9% faster first, as its gradients reach the
// other branches sooner; on 32 (m = 16), beside branch stages that feed
// the rest of their branch, it is 2% slower.
func (s *Scheduler) weighSinkFirst(w *core.Workload, cm *sim.CostModel, cd *candidate) error {
	if s.NoSinkFirst || cd.plan == nil || sharedDevices(cd.part) == nil {
		return nil
	}
	v := *cd
	v.sinkFirst = !cd.sinkFirst
	var err error
	if v.plan, err = s.build(w, &v); err != nil {
		return err
	}
	res, err := sim.SimulateModel(v.plan, cm.Clone(), sim.Options{})
	if err != nil {
		return nil
	}
	v.res = res
	if cd.res == nil || better2(&v, cd) {
		*cd = v
	}
	return nil
}

// isSplit reports whether cd is a plan with stages of whole branches
// split over their replicas (splitBranches).
func isSplit(cd *candidate) bool { return strings.Contains(cd.from, "split") }

// groupTop is how many of a family's fastest simulated plans the search
// also simulates with their owners' steps in readiness groups (each
// with its untrimmed original too: at most twice as many).
const groupTop = 2

// groupedBest returns the step-grouped variants (PlanOptions.StepGroups)
// of the fastest groupTop simulated candidates in top that fit (and as
// many more of the split ones, isSplit), and of
// each one's untrimmed original (untrimmed[i]: top[i] before trimWarmup)
// where that differs and fits, those with an owner whose parameters
// are ready apart, each simulated. Grouping changes only when
// parameters are stepped and refreshed, so it is weighed on the
// simulator alone: an early refresh hides behind the
// owner's remaining backward work (a shared trunk's owner hosting a
// branch), or contends with reductions still travelling through the
// same ports (a data-parallel stage's buckets) and loses.
func (s *Scheduler) groupedBest(ctx context.Context, w *core.Workload, cm *sim.CostModel, top, untrimmed []*candidate, sem chan struct{}) ([]*candidate, error) {
	fits := func(cd *candidate) bool { return cd.res != nil && len(cd.res.OverCap) == 0 && cd.plan.StepOwners }
	var best []int // indices into top
	for i, cd := range top {
		if fits(cd) {
			best = append(best, i)
		}
	}
	sort.SliceStable(best, func(a, b int) bool { return better2(top[best[a]], top[best[b]]) })
	// The fastest groupTop of the plans split over their branches
	// (splitBranches) and of the others, each, and of each DP pass's:
	// split plans weighed beside the others do not take the others'
	// turns, nor an added pass's plans the plain pass's.
	var chosen []int
	for _, split := range []bool{false, true} {
		for pass := plainPass; pass < numPasses; pass++ {
			n := 0
			for _, i := range best {
				if n < groupTop && isSplit(top[i]) == split && top[i].pass == pass {
					chosen, n = append(chosen, i), n+1
				}
			}
		}
	}
	var done []*candidate
	for _, i := range chosen {
		done = append(done, top[i])
		// And its full warm-up, where trimWarmup shortened it: grouped,
		// that may be the faster.
		if i < len(untrimmed) && untrimmed[i] != top[i] && fits(untrimmed[i]) {
			done = append(done, untrimmed[i])
		}
	}
	// Each one built and, where grouping changes its steps, simulated, on
	// a goroutine of its own.
	gs := make([]*candidate, len(done))
	err := forEachIn(sem, len(done), func(i int) error {
		g := *done[i]
		g.groups, g.res = true, nil
		plan, err := s.build(w, &g)
		if err != nil || steps(plan) == steps(done[i].plan) || ctx.Err() != nil {
			return err // none: every owner's parameters are ready together
		}
		g.plan = plan
		if res, err := sim.SimulateModel(g.plan, cm.Clone(), sim.Options{}); err == nil {
			g.res = res
		}
		gs[i] = &g
		return s.weighSinkFirst(w, cm, &g)
	})
	if err != nil {
		return nil, err
	}
	var out []*candidate
	for _, g := range gs {
		if g != nil {
			out = append(out, g)
		}
	}
	return out, ctx.Err()
}

// steps counts a plan's Step tasks.
func steps(p *core.Plan) int {
	n := 0
	for _, t := range p.Tasks {
		if t.Kind == core.TaskStep {
			n++
		}
	}
	return n
}

// paretoFront returns the chosen candidate, then the other simulated
// candidates that fit and are lighter than every faster one (and than
// the chosen), fastest first. The chosen is the fastest that fits
// within better2's tolerance (ties: fewer devices), so it leads even
// where a plan as fast but lighter follows it; or, where Slack chose a
// lighter plan than fastest, that plan, then the faster ones it passed
// over (each lighter than every faster one), then the lighter ones.
func paretoFront(sims []*candidate, best, fastest *candidate) []core.Alternative {
	if best == nil || best.res == nil || len(best.res.OverCap) > 0 {
		return nil
	}
	var rest []*candidate
	for _, cd := range sims {
		if cd != best && len(cd.res.OverCap) == 0 {
			rest = append(rest, cd)
		}
	}
	sort.SliceStable(rest, func(i, j int) bool {
		a, b := rest[i].res.Iteration, rest[j].res.Iteration
		if a != b {
			return a < b
		}
		return peakOf(rest[i].res) < peakOf(rest[j].res)
	})
	alt := func(cd *candidate) core.Alternative {
		// A search keeps a plan only if both the estimate (the pools'
		// fit check, every timing's worst case) and the simulation (one
		// timing) fit it, so it needs the larger of the two peaks.
		pk := peakOf(cd.res)
		return core.Alternative{Description: describe(cd), IterationMs: float64(cd.res.Iteration) / 1e6, PeakBytes: pk,
			NeedBytes: max(pk, int64(math.Ceil(cd.pred.peak))), Chosen: cd == best}
	}
	out := []core.Alternative{alt(best)}
	// With Scheduler.Slack, the faster plans passed over for best: each
	// lighter than every faster one (all heavier than best).
	// fastest among them even where its iteration ties best's (better2
	// ties by fewer devices, not by the lighter).
	passed := func(cd *candidate) bool {
		return best != fastest && (cd == fastest || cd.res.Iteration < best.res.Iteration)
	}
	lightest := int64(math.MaxInt64)
	for _, cd := range rest {
		if pk := peakOf(cd.res); passed(cd) && pk < lightest {
			lightest = pk
			out = append(out, alt(cd))
		}
	}
	lightest = peakOf(best.res)
	for _, cd := range rest {
		if passed(cd) {
			continue
		}
		if pk := peakOf(cd.res); pk < lightest {
			lightest = pk
			out = append(out, alt(cd))
		}
	}
	return out
}

// describe names a candidate: its family, stages, depth, micro-batches,
// 1F1B warm-up cap, whether the DPs' second pass (the optimizer steps
// weighed) found it, and whether its owners step in readiness groups.
func describe(cd *candidate) string {
	m := cd.plan.Metrics
	s := fmt.Sprintf("%s, %d stages, depth %d, m %d, %d devices", cd.from, int(m["stages"]), int(m["depth"]), cd.m, len(cd.plan.Devices()))
	if cd.kind == GPipe || m["fallback_gpipe"] == 1 {
		s += ", gpipe order"
	}
	if cd.part.WarmupCap > 0 {
		s += fmt.Sprintf(", warm-up %d", cd.part.WarmupCap)
	}
	switch cd.pass {
	case flushPass:
		s += ", flush weighed"
	case stepsPass:
		s += ", steps weighed"
	case capsPass:
		s += ", DP held to " + core.FormatBytes(int64(cd.memCap))
	}
	if cd.groups {
		s += ", step groups"
	}
	if cd.sinkFirst {
		s += ", sink first"
	}
	return s
}

// trimWarmup lowers a simulated 1F1B candidate's warm-up cap
// (Partition.WarmupCap) one forward at a time from its largest
// effective warm-up, while the simulated iteration is no longer than
// the untrimmed one's, and returns the fastest variant (ties, within
// 1e-9: the least peak memory). The device-weighted warm-up keeps as
// many micro-batches in flight as the devices downstream could take; a
// stage before a trunk replicated over every device counts all of them,
// though each takes only its share, so the cap often costs no time and
// saves memory (uno-8 on 16 A100s: 736 → 521 MiB, and 0.4% faster; with
// the trunk on the branch stages' first replicas 628 → 577 MiB, 0.1%
// faster, though grouped the full warm-up is faster still).
// Stops at the first variant that is slower, deadlocks or goes over a
// device's memory; when best itself is over memory, weighs every shorter
// warm-up (better2: one that fits wins).
func (s *Scheduler) trimWarmup(ctx context.Context, w *core.Workload, cm *sim.CostModel, estimate func(Partition, Kind) prediction, best *candidate) (*candidate, error) {
	_, succs := best.part.StageDAG(w)
	top := topWarmup(best.part, succs, best.m)
	base := float64(best.res.Iteration)
	over := len(best.res.OverCap) > 0
	out := best
	for limit := top - 1; limit >= 1; limit-- {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v := *best // its order too (sinkFirst): only the warm-up changes
		cd := &v
		cd.pred, cd.plan, cd.res = prediction{}, nil, nil
		cd.part.WarmupCap = limit
		cd.pred = estimate(cd.part, cd.kind)
		plan, err := s.build(w, cd)
		if err != nil {
			return nil, err
		}
		if plan.Metrics["fallback_gpipe"] != 0 {
			if over {
				continue // a shorter warm-up may not deadlock, and fit
			}
			break // the capped 1F1B order deadlocks
		}
		res, err := sim.SimulateModel(plan, cm.Clone(), sim.Options{})
		if err != nil {
			break
		}
		if !over && (len(res.OverCap) > 0 || float64(res.Iteration) > base*(1+1e-9)) {
			break
		}
		// Over memory, every shorter warm-up is weighed: one may fit.
		cd.plan, cd.res = plan, res
		it, ot := float64(res.Iteration), float64(out.res.Iteration)
		if better2(cd, out) || (len(res.OverCap) == 0 && len(out.res.OverCap) == 0 && it <= ot*(1+1e-9) && peakOf(res) < peakOf(out.res)) {
			out = cd
		}
	}
	return out, nil
}

// better2: fits beats over capacity, then the shorter simulated
// iteration, then fewer devices.
func better2(a, b *candidate) bool {
	af, bf := len(a.res.OverCap) == 0, len(b.res.OverCap) == 0
	if af != bf {
		return af
	}
	if !af {
		return peakOf(a.res) < peakOf(b.res)
	}
	ai, bi := float64(a.res.Iteration), float64(b.res.Iteration)
	if math.Abs(ai-bi) > 1e-9*bi {
		return ai < bi
	}
	return len(a.res.PeakMem) < len(b.res.PeakMem)
}

func peakOf(r *sim.Result) int64 {
	var m int64
	for _, v := range r.PeakMem {
		m = max(m, v)
	}
	return m
}

// build schedules a candidate. A 1F1B order that deadlocks (Plan.
// Deadlock: possible with replicated stages, where micro-batches dealt
// round-robin can leave a cycle between a replica's queue and its
// neighbours') is replaced by GPipe's, which cannot. The rest of
// Validate is left to the plan chosen (the engine and gnnkit plan
// validate it): on a 1,000-op model validating every candidate built
// took a quarter of the search's builds.
func (s *Scheduler) build(w *core.Workload, cd *candidate) (*core.Plan, error) {
	opts := s.planOptions()
	opts.StepGroups, opts.SinkFirst = cd.groups, cd.sinkFirst
	p, err := BuildPlanOpts(w, cd.part, cd.m, cd.kind, opts, s.Name())
	if err != nil {
		return nil, err
	}
	if cd.kind == OneFOneB {
		if p.Deadlock() != nil {
			if p, err = BuildPlanOpts(w, cd.part, cd.m, GPipe, opts, s.Name()); err != nil {
				return nil, err
			}
			p.Metrics["fallback_gpipe"] = 1
		}
	}
	return p, nil
}

// overCap is the no-fit error of a search whose every simulated plan runs
// over a device's memory in the simulation though the estimate fitted
// them: Need is the least any of them needs by both (NeedBytes'
// figure), at its micro-batch count.
func overCap(sims []*candidate, D int, memCap float64, name string) error {
	e := &NoFitError{Scheduler: name, Devices: D, DeviceMem: int64(memCap)}
	for _, cd := range sims {
		if n := max(peakOf(cd.res), int64(math.Ceil(cd.pred.peak))); e.Need == 0 || n < e.Need {
			e.Need, e.M = n, cd.m
		}
	}
	e.msg = fmt.Sprintf("%s: %v: every plan the search found for %d devices of %s runs over a device's memory in the simulation (the estimate, a little under it, had them fit); the lightest needs about %s at m = %d (raise the devices' memory or add devices)",
		name, ErrNoFit, D, core.FormatBytes(e.DeviceMem), core.FormatBytes(core.RoundUpShownBytes(e.Need)), e.M)
	return e
}
