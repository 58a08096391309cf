package graphpipe

import (
	"context"
	"fmt"
	"math"
	"runtime"
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
	from string // "dag", "chain", "chain as dag"
	pred prediction
	plan *core.Plan
	res  *sim.Result
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
	return string(b)
}

// pools are the candidate partitions the search weighs, by family: the
// chain DP's answer on at most u devices for every u and replica cap
// (the chain baselines' whole search) under the scheduler's kind; for
// GraphPipe, all under its generalised 1F1B: the chain family (exactly
// what the 1F1B baseline weighs and simulates, so GraphPipe never does
// worse than it) and the DAG family: the DAG DP's answers at every
// replica cap and target it tried, and the chain answers as stage DAGs
// (a chain is a degenerate DAG).
func (s *Scheduler) pools(ctx context.Context, w *core.Workload, c *costs, devs []core.DeviceID) ([][]*candidate, error) {
	D := len(devs)
	n := len(w.Ops)
	caps := replicaCaps(D, s.MaxReplicas)
	kind := s.Kind
	if s.Graph {
		kind = OneFOneB
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The chain tables (read-only on c) run side by side with each other
	// and with the DAG search; the candidates are then taken in a fixed
	// order, so the answer does not depend on the interleaving.
	x := newChainDP(c)
	tables := make([][][]chainCell, len(caps))
	var graphs [][]stagePlan
	var wg sync.WaitGroup
	for i, r := range caps {
		wg.Go(func() { tables[i] = x.table(D, r, kind) })
	}
	if s.Graph {
		root, _ := Decompose(w)
		t, sh := newSPTree(root, c), newShared(c)
		graphs = make([][]stagePlan, len(caps))
		wg.Go(func() {
			hint := math.Inf(1)
			for i, r := range caps {
				if ctx.Err() != nil {
					return
				}
				graphs[i], hint = graphSearch(t, c, D, r, sh, hint)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	add := func(pool *[]*candidate, p Partition, from string) {
		key := signature(p, kind)
		if seen[key] {
			return
		}
		seen[key] = true
		*pool = append(*pool, &candidate{part: p, kind: kind, from: from, pred: c.estimate(p, kind)})
	}
	var chain, dag []*candidate
	for _, best := range tables {
		for u := 1; u <= D; u++ {
			p, ok := chainFrom(best, n, u, devs)
			if !ok {
				continue
			}
			add(&chain, p, "chain")
			if s.Graph {
				q := p
				q.Chain = false
				add(&dag, q, "chain as dag")
			}
		}
	}
	if !s.Graph {
		return [][]*candidate{chain}, nil
	}
	for _, g := range graphs {
		for _, sp := range g {
			add(&dag, partitionOf(n, sp, devs), "dag")
		}
	}
	return [][]*candidate{dag, chain}, nil
}

// search picks the plan: every candidate estimated, the best few of each
// family simulated with the executor's semantics (sim.Simulate on the
// same cluster and profile), the fastest that fits kept. It reports the
// estimate and the simulation in the plan's metrics.
func (s *Scheduler) search(ctx context.Context, w *core.Workload, cm *sim.CostModel, c *costs, devs []core.DeviceID) (*core.Plan, error) {
	pools, err := s.pools(ctx, w, c, devs)
	if err != nil {
		return nil, err
	}
	k := s.Simulate
	if k == 0 {
		k = 8
	}
	var best *candidate
	total, simulated, fitting := 0, 0, 0
	for _, pool := range pools {
		total += len(pool)
		var fit []*candidate
		for _, cd := range pool {
			if cd.pred.fits {
				fit = append(fit, cd)
			}
		}
		fitting += len(fit)
		sort.SliceStable(fit, func(i, j int) bool { return fit[i].pred.iter < fit[j].pred.iter })
		n := len(fit)
		if k > 0 {
			n = min(n, k)
		} else {
			n = min(n, 1)
		}
		top := fit[:n]
		for _, cd := range top {
			if cd.plan, err = s.build(w, cd); err != nil {
				return nil, err
			}
		}
		if k > 0 {
			// Simulations are independent: run them side by side.
			var wg sync.WaitGroup
			sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
			for _, cd := range top {
				wg.Go(func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					if ctx.Err() != nil {
						return
					}
					if res, err := sim.SimulateModel(cd.plan, cm.Clone(), sim.Options{}); err == nil {
						cd.res = res // a plan the simulator rejects (deadlock) is not a candidate
					}
				})
			}
			wg.Wait()
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
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
			simulated++
			if best == nil || best.res == nil || better2(cd, best) {
				best = cd
			}
		}
	}
	if fitting == 0 {
		return nil, noFit(w, c, len(devs))
	}
	if best == nil {
		return nil, fmt.Errorf("%s: the simulator rejected every candidate plan", s.Name())
	}
	p := best.plan
	p.Metrics["candidates"] = float64(total)
	p.Metrics["simulated_candidates"] = float64(simulated)
	p.Metrics["predicted_iteration_ms"] = best.pred.iter * 1e3
	p.Metrics["predicted_flush_ms"] = best.pred.tail * 1e3
	p.Metrics["predicted_peak_bytes"] = best.pred.peak
	if best.res != nil {
		p.Metrics["simulated_iteration_ms"] = float64(best.res.Iteration) / 1e6
	}
	if best.from == "dag" {
		p.Metrics["dag_partition"] = 1
	}
	if best.kind == GPipe {
		p.Metrics["gpipe_order"] = 1
	}
	return p, nil
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

// build schedules a candidate. A 1F1B order that Plan.Validate finds
// deadlocked (possible with replicated stages: micro-batches dealt
// round-robin can leave a cycle between a replica's queue and its
// neighbours') is replaced by GPipe's, which cannot deadlock.
func (s *Scheduler) build(w *core.Workload, cd *candidate) (*core.Plan, error) {
	p, err := BuildPlan(w, cd.part, s.micro(), cd.kind, s.Name())
	if err != nil {
		return nil, err
	}
	if cd.kind == OneFOneB {
		if verr := p.Validate(w); verr != nil && strings.Contains(verr.Error(), "deadlock") {
			if p, err = BuildPlan(w, cd.part, s.micro(), GPipe, s.Name()); err != nil {
				return nil, err
			}
			p.Metrics["fallback_gpipe"] = 1
		}
	}
	return p, nil
}
