package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// Activation reuse (cache-and-accumulate, docs/design.md §2): a plan with
// Reuse runs its subgraph units in three phases on its home device.
//
//	A  producers compute the boundary rows of the shared nodes, chunk by
//	   chunk, into a device cache;
//	B  per unit: a producer computes the boundary rows of the unit's
//	   private nodes; a head runs the ops after the boundary over the
//	   targets' 1-hop field with rows from the cache and the producer,
//	   takes the loss and backpropagates; private rows' gradient goes on
//	   into the producer, shared rows' into the cache's accumulator;
//	C  the shared producers backpropagate once from the accumulated
//	   gradient (kept from A, or recomputed).
//
// Every boundary row is the target row of exactly one producer, seeded
// with the whole loss's gradient for it, so the parameter gradients are
// those of the plan without reuse.

// reuseLayout is a reuse plan worked out over one batch: the op split,
// the views of every producer and head, and the row maps between them.
type reuseLayout struct {
	boundary         string
	prodOps, headOps []core.Op
	shared           []int32 // batch-local ids, sorted
	chunks           []reuseChunk
	parts            []reusePart
}

// reuseChunk produces the boundary rows of some shared nodes.
type reuseChunk struct {
	unit      core.Unit
	in        *unitInputs
	cacheRows []int32 // cache row of target i of the chunk
}

// reusePart is one unit of the plan under reuse.
type reusePart struct {
	unit core.Unit
	head *unitInputs
	// headShared[i] is a head row whose node is shared, cached at
	// cacheRows[i]; headPriv[i] a private one, the producer's row i.
	headShared, cacheRows []int32
	headPriv, prodRows    []int32
	prod                  *unitInputs // nil when every row is shared
	prodUnit              core.Unit
}

// splitAtBoundary returns the ops that compute the boundary value
// (its ancestors, itself included) and the ops after it, checking that the
// latter read nothing the former compute but the boundary.
func (t *Trainer) splitAtBoundary(boundary string) (prod, head []core.Op, err error) {
	p, ok := t.producer[boundary]
	if !ok {
		return nil, nil, fmt.Errorf("engine: reuse boundary %q is not a value an op of model %s produces", boundary, t.model.Name)
	}
	deps := t.model.OpDeps()
	anc := make([]bool, len(t.model.Ops))
	anc[p] = true
	for o := p; o >= 0; o-- {
		if anc[o] {
			for _, d := range deps[o] {
				anc[d] = true
			}
		}
	}
	for o, op := range t.model.Ops {
		if anc[o] {
			prod = append(prod, op)
			continue
		}
		head = append(head, op)
		for _, v := range op.Inputs() {
			if q, ok := t.producer[v]; ok && anc[q] && v != boundary {
				return nil, nil, fmt.Errorf("engine: model %s cannot reuse activations at %q: op %s after it reads %q from before it",
					t.model.Name, boundary, op.Name(), v)
			}
		}
	}
	return prod, head, nil
}

// reuseLayoutFor works out (once per batch and plan) how plan's Reuse
// runs over batch b.
func (t *Trainer) reuseLayoutFor(b *Batch, plan *core.Plan) (*reuseLayout, error) {
	t.viewMu.Lock()
	lay, ok := b.reuse[plan]
	t.viewMu.Unlock()
	if ok {
		return lay, nil
	}
	lay, err := t.buildReuseLayout(b, plan)
	if err != nil {
		return nil, err
	}
	t.viewMu.Lock()
	if b.reuse == nil {
		b.reuse = map[*core.Plan]*reuseLayout{}
	}
	b.reuse[plan] = lay
	t.viewMu.Unlock()
	return lay, nil
}

func (t *Trainer) buildReuseLayout(b *Batch, plan *core.Plan) (*reuseLayout, error) {
	L := t.model.Config.Layers
	if L < 2 || len(t.model.Graphs) == 0 {
		return nil, fmt.Errorf("engine: activation reuse needs a message-passing model of two or more layers; %s has %d", t.model.Name, L)
	}
	lay := &reuseLayout{boundary: plan.Reuse.Boundary}
	var err error
	if lay.prodOps, lay.headOps, err = t.splitAtBoundary(lay.boundary); err != nil {
		return nil, err
	}
	headReadsX := false
	for _, op := range lay.headOps {
		for _, v := range op.Inputs() {
			headReadsX = headReadsX || slices.Contains(t.model.Inputs, v)
		}
	}
	// F_k and the shared nodes.
	n := b.Graph.NumDst
	uses := make([]int32, n)
	heads := make([]*unitInputs, len(plan.Units))
	for k, u := range plan.Units {
		if len(u.Targets) == 0 {
			continue
		}
		in, err := t.buildViewHops(b, u, 1, 0)
		if err != nil {
			return nil, err
		}
		in.noFeatures = !headReadsX
		heads[k] = in
		for _, v := range in.rows {
			uses[v]++
		}
	}
	cacheRow := make([]int32, n)
	for v := range cacheRow {
		cacheRow[v] = -1
		if uses[v] >= 2 {
			cacheRow[v] = int32(len(lay.shared))
			lay.shared = append(lay.shared, int32(v))
		}
	}
	covered := 0
	for j, c := range plan.Reuse.Chunks {
		ch := reuseChunk{unit: core.Unit{ID: -1 - j, Targets: c, Subgraph: true}}
		for _, v := range c {
			if v < 0 || int(v) >= n || cacheRow[v] < 0 {
				return nil, fmt.Errorf("engine: reuse chunk %d lists node %d, which is not shared by two units", j, v)
			}
			ch.cacheRows = append(ch.cacheRows, cacheRow[v])
		}
		covered += len(c)
		if len(c) > 0 {
			if ch.in, err = t.buildViewHops(b, ch.unit, L-1, 1); err != nil {
				return nil, err
			}
		}
		lay.chunks = append(lay.chunks, ch)
	}
	if covered != len(lay.shared) {
		return nil, fmt.Errorf("engine: the plan's reuse chunks cover %d nodes, but %d nodes are shared by two or more units", covered, len(lay.shared))
	}
	for k, u := range plan.Units {
		p := reusePart{unit: u, head: heads[k]}
		if p.head != nil {
			var priv []int32
			for i, v := range p.head.rows {
				if r := cacheRow[v]; r >= 0 {
					p.headShared, p.cacheRows = append(p.headShared, int32(i)), append(p.cacheRows, r)
				} else {
					p.headPriv, p.prodRows = append(p.headPriv, int32(i)), append(p.prodRows, int32(len(priv)))
					priv = append(priv, v)
				}
			}
			if len(priv) > 0 {
				p.prodUnit = core.Unit{ID: u.ID, Targets: priv, Subgraph: true}
				if p.prod, err = t.buildViewHops(b, p.prodUnit, L-1, 1); err != nil {
					return nil, err
				}
			}
		}
		lay.parts = append(lay.parts, p)
	}
	return lay, nil
}

// moveRows adds rows src[from[i]] into dst[to[i]] through a temporary.
func moveRows(env *core.Env, src *core.Tensor, from []int32, dst *core.Tensor, to []int32) error {
	if len(from) == 0 {
		return nil
	}
	tmp, err := env.Alloc(len(from), src.Cols())
	if err != nil {
		return err
	}
	defer env.Free(tmp)
	if err := env.K.Gather(src, from, tmp); err != nil {
		return err
	}
	return env.K.ScatterAdd(tmp, to, dst)
}

// iota32 returns 0..n-1.
func iota32(n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(i)
	}
	return s
}

// runReuse runs one iteration of a reuse plan on replica r (a real device,
// or the meta device when estimating) and returns the summed loss. rec,
// when not nil, is told of each phase as it ends.
func (t *Trainer) runReuse(ctx context.Context, r *replica, b *Batch, lay *reuseLayout, keep bool,
	rec func(name, cat string, unit int, t0 time.Time)) (float64, error) {
	note := func(name, cat string, unit int, t0 time.Time) {
		if rec != nil {
			rec(name, cat, unit, t0)
		}
	}
	var loss float64
	B := lay.boundary
	var cache, acc *core.Tensor
	defer func() {
		if cache != nil {
			r.dev.Free(cache)
			r.dev.Free(acc)
		}
	}()
	// The cache needs the boundary's width: take it from the first
	// producer to run.
	ensureCache := func(x *core.Tensor) error {
		if cache != nil || len(lay.shared) == 0 {
			return nil
		}
		var err error
		if cache, err = r.dev.Alloc(len(lay.shared), x.Cols()); err != nil {
			return fmt.Errorf("engine: reuse cache of %d shared rows: %w", len(lay.shared), err)
		}
		if acc, err = r.dev.Alloc(len(lay.shared), x.Cols()); err != nil {
			return fmt.Errorf("engine: reuse gradient accumulator of %d shared rows: %w", len(lay.shared), err)
		}
		return nil
	}
	produce := func(u core.Unit, in *unitInputs) (*core.Env, *core.Tensor, error) {
		env, err := t.unitEnvFrom(r, b, u, in, true, false)
		if err != nil {
			return nil, nil, err
		}
		if err := forward(ctx, lay.prodOps, env); err != nil {
			env.Release()
			return nil, nil, err
		}
		x, err := env.Value(B)
		if err != nil {
			env.Release()
			return nil, nil, err
		}
		return env, x, nil
	}
	// seedBack backpropagates a producer from the gradient rows of its
	// targets: rows from[i] of src go to target row to[i].
	seedBack := func(env *core.Env, x, src *core.Tensor, from, to []int32) error {
		seed, err := env.Alloc(x.Shape...)
		if err != nil {
			return err
		}
		if err := moveRows(env, src, from, seed, to); err != nil {
			return err
		}
		env.SetGrad(B, seed)
		return backward(ctx, lay.prodOps, env)
	}

	// A: shared rows into the cache.
	kept := make([]*core.Env, len(lay.chunks))
	defer func() {
		for _, e := range kept {
			if e != nil {
				e.Release()
			}
		}
	}()
	for j, ch := range lay.chunks {
		if ch.in == nil {
			continue
		}
		t0 := time.Now()
		env, x, err := produce(ch.unit, ch.in)
		if err != nil {
			return 0, fmt.Errorf("engine: reuse chunk %d: %w", j, err)
		}
		err = ensureCache(x)
		if err == nil {
			err = moveRows(env, x, iota32(len(ch.cacheRows)), cache, ch.cacheRows)
		}
		if err != nil {
			env.Release()
			return 0, err
		}
		if keep {
			kept[j] = env
		} else {
			env.Release()
		}
		note(fmt.Sprintf("fwd shared c%d", j), core.TaskForward.String(), -1, t0)
	}

	// B: the units.
	for _, p := range lay.parts {
		if p.head == nil {
			continue
		}
		t0 := time.Now()
		var penv *core.Env
		var px *core.Tensor
		if p.prod != nil {
			var err error
			if penv, px, err = produce(p.prodUnit, p.prod); err != nil {
				return 0, fmt.Errorf("engine: unit %d: %w", p.unit.ID, err)
			}
		}
		err := func() error {
			henv, err := t.unitEnvFrom(r, b, p.unit, p.head, true, false)
			if err != nil {
				return err
			}
			defer henv.Release()
			width := 0
			if px != nil {
				width = px.Cols()
			} else if cache != nil {
				width = cache.Cols()
			}
			bh, err := henv.Alloc(len(p.head.rows), width)
			if err != nil {
				return err
			}
			if err := moveRows(henv, cache, p.cacheRows, bh, p.headShared); err != nil {
				return err
			}
			if err := moveRows(henv, px, p.prodRows, bh, p.headPriv); err != nil {
				return err
			}
			henv.SetValue(B, bh)
			if err := forward(ctx, lay.headOps, henv); err != nil {
				return err
			}
			loss += henv.Loss
			if err := backward(ctx, lay.headOps, henv); err != nil {
				return err
			}
			g := henv.Grad(B)
			if g == nil {
				return nil // nothing after the boundary depends on parameters
			}
			if err := moveRows(henv, g, p.headShared, acc, p.cacheRows); err != nil {
				return err
			}
			if penv != nil {
				return seedBack(penv, px, g, p.headPriv, p.prodRows)
			}
			return nil
		}()
		if penv != nil {
			penv.Release()
		}
		if err != nil {
			return 0, fmt.Errorf("engine: unit %d: %w", p.unit.ID, err)
		}
		note(fmt.Sprintf("fwd+bwd u%d", p.unit.ID), core.TaskForward.String(), p.unit.ID, t0)
	}

	// C: shared rows backward, once, from the accumulated gradient.
	for j, ch := range lay.chunks {
		if ch.in == nil {
			continue
		}
		t0 := time.Now()
		env, x := kept[j], (*core.Tensor)(nil)
		kept[j] = nil
		var err error
		if env != nil {
			x, err = env.Value(B)
		} else {
			env, x, err = produce(ch.unit, ch.in)
		}
		if err == nil {
			err = seedBack(env, x, acc, ch.cacheRows, iota32(len(ch.cacheRows)))
		}
		if env != nil {
			env.Release()
		}
		if err != nil {
			return 0, fmt.Errorf("engine: reuse chunk %d backward: %w", j, err)
		}
		note(fmt.Sprintf("bwd shared c%d", j), core.TaskBackward.String(), -1, t0)
	}
	return loss, nil
}

// runReusePlan is Run for a plan with Reuse (after the common set-up).
func (t *Trainer) runReusePlan(ctx context.Context, plan *core.Plan, b *Batch, opts RunOptions, used map[core.DeviceID]map[string]bool, t0 time.Time) (*Result, error) {
	if opts.Groups != nil {
		return nil, fmt.Errorf("engine: activation reuse does not apply to group units")
	}
	r := t.reps[plan.Home]
	lay, err := t.reuseLayoutFor(b, plan)
	if err != nil {
		return nil, err
	}
	trace := &core.Trace{PeakMem: map[core.DeviceID]int64{}}
	rec := func(name, cat string, unit int, s time.Time) {
		trace.Events = append(trace.Events, core.TraceEvent{Name: name, Cat: cat, Device: plan.Home, Unit: unit,
			Start: s.Sub(t0), Dur: time.Since(s)})
	}
	loss, err := t.runReuse(ctx, r, b, lay, plan.Reuse.Keep, rec)
	if err != nil {
		_ = t.zeroGrads(r)
		return nil, err
	}
	if !opts.SkipStep {
		s := time.Now()
		if err := t.applyStep(); err != nil {
			return nil, err
		}
		rec("optimizer step", "step", -1, s)
		if _, err := t.broadcast(used); err != nil {
			return nil, fmt.Errorf("engine: refreshing parameter replicas: %w", err)
		}
	}
	if err := t.endIteration(plan.Devices(), trace, t0); err != nil {
		return nil, err
	}
	return &Result{Loss: loss, Trace: trace}, nil
}

// EstimatePlan predicts the peak memory of running plan on its home
// device dev, resident bytes included. It replays plans with Reuse phase
// by phase on a meta device; other plans are estimated unit by unit
// (Estimate), which assumes one stream.
func (t *Trainer) EstimatePlan(b *Batch, plan *core.Plan, dev core.DeviceInfo) (int64, error) {
	if plan.Reuse == nil {
		resident, peak, err := t.Estimate(b, plan.Units, dev)
		return resident + peak, err
	}
	if err := t.prepare(b); err != nil {
		return 0, err
	}
	lay, err := t.buildReuseLayout(b, plan)
	if err != nil {
		return 0, err
	}
	md, r, err := t.metaReplica(dev.ID)
	if err != nil {
		return 0, err
	}
	if _, err := t.runReuse(context.Background(), r, b, lay, plan.Reuse.Keep, nil); err != nil {
		return 0, fmt.Errorf("engine: estimate: %w", err)
	}
	return md.mem.Stats().Peak + t.optimizerStateBytes(), nil
}
