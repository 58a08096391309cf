package graphpipe

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// searchMemo is what one search's walks over the micro-batch counts share
// (Scheduler.memo, set on the copy of the Scheduler that runs a search;
// baseline's copies keep it): the costs at each count, on which the
// estimates and the chain DP's read-outs are kept (costMemo). With m
// searched, GraphPipe's walk and then each chain baseline's own walk
// (chainWalks) visit the same counts, often at the same replica caps:
// the baseline's walk stays its own (its objective, its caps, its
// order), and what GraphPipe's already made there is looked up.
type searchMemo struct {
	mu    sync.Mutex
	costs map[costsKey]*costs
}

// costsKey is what newCosts and evalM build a costs from, besides the
// workload, cost model and devices every walk of one search shares.
type costsKey struct {
	m      int
	step   StepMode
	bucket float64
}

// costsAt is the costs evalM prices count m at: built once per search
// (with memo nil, every call builds its own and keeps nothing).
func (memo *searchMemo) costsAt(cm *sim.CostModel, w *core.Workload, devs []core.DeviceID, m int, step StepMode, bucket float64) *costs {
	build := func() *costs {
		c := newCosts(cm, w, devs, m, step)
		c.bucket = bucket
		return c
	}
	if memo == nil {
		return build()
	}
	key := costsKey{m, step, bucket}
	memo.mu.Lock()
	defer memo.mu.Unlock()
	if c, ok := memo.costs[key]; ok {
		return c
	}
	c := build()
	c.memo = &costMemo{preds: map[predKey]prediction{}, reads: map[readKey][]Partition{}}
	if memo.costs == nil {
		memo.costs = map[costsKey]*costs{}
	}
	memo.costs[key] = c
	return c
}

// costMemo keeps, for one costs (and its scratch copies), the estimates
// made (costs.estimate) and the chain DP's read-outs (runDPs). Both are
// pure functions of the costs and their key, so a lookup gives what
// computing again would.
type costMemo struct {
	mu    sync.Mutex
	preds map[predKey]prediction
	reads map[readKey][]Partition
	hits  atomic.Int64 // lookups answered (tests read it)
}

// predKey is an estimate's arguments: the partition (partKey, devices
// included), the schedule, and the memory the fit was judged against
// (the no-fit bisection and frugalPartitions move costs.memCap).
type predKey struct {
	part   [sha256.Size]byte
	kind   Kind
	memCap float64
}

// readKey names one chain table of runDPs at one costs: the DPs' pass
// (dpPass), the replica cap, the schedule (its
// memory check), the memory it was checked against, and whether it is
// Piper's (over downsets) or PipeDream's (over a topological order).
type readKey struct {
	pass   dpPass
	cap    int
	kind   Kind
	memCap float64
	piper  bool
}

// partKey identifies a partition exactly (up to SHA-256): every op's
// stage, each stage's devices by name, the chain flag and the warm-up
// cap, each length-prefixed (signature, which the search dedups by,
// keeps only the devices' counts).
func partKey(p Partition) [sha256.Size]byte {
	b := binary.AppendUvarint(make([]byte, 0, 3*len(p.StageOf)+8*len(p.Devices)+16), uint64(len(p.StageOf)))
	for _, s := range p.StageOf {
		b = binary.AppendUvarint(b, uint64(s))
	}
	b = binary.AppendUvarint(b, uint64(len(p.Devices)))
	for _, ds := range p.Devices {
		b = binary.AppendUvarint(b, uint64(len(ds)))
		for _, d := range ds {
			b = binary.AppendUvarint(b, uint64(len(d)))
			b = append(b, string(d)...)
		}
	}
	chain := uint64(0)
	if p.Chain {
		chain = 1
	}
	b = binary.AppendUvarint(b, chain)
	b = binary.AppendUvarint(b, uint64(p.WarmupCap))
	return sha256.Sum256(b)
}

// estimate is c's prediction of part under kind (price), kept in c.memo
// where c has one.
func (c *costs) estimate(part Partition, kind Kind) prediction {
	if c.memo == nil {
		return c.price(part, kind)
	}
	return keep(c.memo, c.memo.preds, predKey{partKey(part), kind, c.memCap}, func() prediction { return c.price(part, kind) })
}

// chainReads are the partitions runDPs reads off the chain table at key
// (read computes them: the table and chainFrom's read-outs), kept in
// c.memo where c has one.
func (c *costs) chainReads(key readKey, read func() []Partition) []Partition {
	if c.memo == nil {
		return read()
	}
	return keep(c.memo, c.memo.reads, key, read)
}

// keep is m[key] (a lookup answered), or compute's answer, then kept
// there; m is one of memo's maps. compute runs outside the lock: two
// callers may compute one key at once, and keep the same answer.
func keep[K comparable, V any](memo *costMemo, m map[K]V, key K, compute func() V) V {
	memo.mu.Lock()
	v, ok := m[key]
	memo.mu.Unlock()
	if ok {
		memo.hits.Add(1)
		return v
	}
	v = compute()
	memo.mu.Lock()
	m[key] = v
	memo.mu.Unlock()
	return v
}

// keptReads are the read-outs kept in c.memo at keys, in order, or nil
// unless every one is.
func (c *costs) keptReads(keys []readKey) [][]Partition {
	if c.memo == nil {
		return nil
	}
	c.memo.mu.Lock()
	defer c.memo.mu.Unlock()
	out := make([][]Partition, len(keys))
	for i, k := range keys {
		parts, ok := c.memo.reads[k]
		if !ok {
			return nil
		}
		out[i] = parts
	}
	c.memo.hits.Add(1)
	return out
}

// keepReads keeps reads[i] at keys[i] in c.memo, where c has one.
func (c *costs) keepReads(keys []readKey, reads [][]Partition) {
	if c.memo == nil {
		return
	}
	c.memo.mu.Lock()
	defer c.memo.mu.Unlock()
	for i, k := range keys {
		c.memo.reads[k] = reads[i]
	}
}

// estimateAll sets every candidate's pred to its estimate at costsOf(it),
// side by side: a worker per core, each pricing on scratch copies of its
// own (costs.stat writes the costs' marks; everything else the estimate
// reads is read-only). Each prediction is a pure function of the costs
// and the candidate, so the order the workers take them in changes
// nothing. Once ctx is done it prices no more (an estimate over hundreds
// of devices takes milliseconds, a search's thousands of them a minute:
// an interrupted search should not wait for them), and the caller
// returns ctx's error rather than read the predictions.
func estimateAll(ctx context.Context, cds []*candidate, costsOf func(*candidate) *costs) {
	workers := min(len(cds), runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for _, cd := range cds {
			if ctx.Err() != nil {
				return
			}
			cd.pred = costsOf(cd).estimate(cd.part, cd.kind)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			scratch := map[*costs]*costs{}
			for {
				i := int(next.Add(1)) - 1
				if i >= len(cds) || ctx.Err() != nil {
					return
				}
				cd := cds[i]
				c := costsOf(cd)
				sc, ok := scratch[c]
				if !ok {
					sc = c.scratchCopy()
					scratch[c] = sc
				}
				cd.pred = sc.estimate(cd.part, cd.kind)
			}
		})
	}
	wg.Wait()
}

// forEach runs f(0), …, f(n−1) side by side, at most one per core, and
// returns the error of the lowest index that failed (as a loop stopping
// at its first error would, though every f runs).
func forEach(n int, f func(i int) error) error {
	return forEachIn(cores(), n, f)
}

// cores is a limit of one task per core, for forEachIn.
func cores() chan struct{} { return make(chan struct{}, max(1, runtime.GOMAXPROCS(0))) }

// forEachIn is forEach with the tasks taking turns in sem with whatever
// else holds it (the search's families share one: their simulations,
// each with a copy of the cost model, run at most one per core in all).
func forEachIn(sem chan struct{}, n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = f(i)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
