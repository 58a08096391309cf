package blad

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gnnkit/gnnkit/core"
)

// VertexPartition is not registered (core.RegisterScheduler): it only
// schedules vertex-partitioned models, which train-dynamic and
// engine/dyntrain build (Config.VertexParts); the registry's schedulers
// must plan any model.
var _ core.Scheduler = (*VertexPartition)(nil)

// VertexPartition is the vertex-partition baseline (AliGraph, DGL,
// PyTorch Geometric Temporal style): every group runs on every device,
// device k computing part k of the group's nodes in every snapshot, and
// the parts exchange halo rows. It schedules a vertex-partitioned model
// (models/dynamic.TGCNVertex, with one part per device): the ops whose
// names start with "p<k>." are part k's and run on device k; the others
// (gathering the pair logits, the loss) run on the home device. Part k's
// ops split into two forward tasks: those that read nothing of another
// part (its rows' GCN and GRU, the rows it sends), then those that do (the
// pair scores over received rows); the executor moves the exchanged rows
// and, in backward, their gradients. A device works on one group at a
// time, except that it starts the next group's local part while it waits
// for the others' halo gradients (one group of look-ahead).
type VertexPartition struct{ groups []GroupCost }

// NewVertexPartition returns the baseline.
func NewVertexPartition() *VertexPartition { return &VertexPartition{} }

// Name returns "vertexpart".
func (*VertexPartition) Name() string { return "vertexpart" }

// SetGroups takes the groups' sample counts (for loss weights).
func (v *VertexPartition) SetGroups(g []GroupCost) { v.groups = slices.Clone(g) }

// partOf returns the part of each op (-1: the home device's) and the
// part count.
func partOf(ops []core.OpInfo) ([]int, int) {
	part := make([]int, len(ops))
	parts := 0
	for i, op := range ops {
		part[i] = -1
		if rest, ok := strings.CutPrefix(op.Name, "p"); ok {
			if k, _, ok := strings.Cut(rest, "."); ok {
				if n, err := strconv.Atoi(k); err == nil && n >= 0 {
					part[i] = n
					parts = max(parts, n+1)
				}
			}
		}
	}
	return part, parts
}

// Schedule places every group on every device, part k on device k.
func (v *VertexPartition) Schedule(ctx context.Context, w *core.Workload) (*core.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(w.Devices) == 0 || len(w.Batch) == 0 || len(w.Ops) == 0 {
		return nil, fmt.Errorf("vertexpart: the workload needs devices, groups and ops")
	}
	part, parts := partOf(w.Ops)
	devs := deviceIDs(w)
	if parts != len(devs) {
		return nil, fmt.Errorf("vertexpart: model %s has %d parts (ops named p<k>.…) for %d devices; build it with one part per device", w.ModelName, parts, len(devs))
	}
	// local[k]: part k's ops that read nothing of another part; remote[k]:
	// the rest of part k's; home: the unpartitioned ops.
	tainted := make([]bool, len(w.Ops))
	local, remote := make([][]int, parts), make([][]int, parts)
	var home []int
	for i, op := range w.Ops {
		for _, d := range op.Deps {
			if tainted[d] || part[d] != part[i] {
				tainted[i] = true
			}
		}
		switch {
		case part[i] < 0:
			home = append(home, i)
		case tainted[i]:
			remote[part[i]] = append(remote[part[i]], i)
		default:
			local[part[i]] = append(local[part[i]], i)
		}
	}
	n := len(w.Batch)
	gc := groupsOf(w, v.groups, n)
	p := &core.Plan{Scheduler: "vertexpart", Home: devs[0], Metrics: map[string]float64{"parts": float64(parts), "groups": float64(n)}}
	total := 0.0
	for i := 0; i < n; i++ {
		total += samples(gc, i)
	}
	for i := 0; i < n; i++ {
		p.Units = append(p.Units, core.Unit{ID: i, Targets: []int32{w.Batch[i]}, LossWeight: samples(gc, i) / total})
	}
	// Task ids fixed up front: per group, A_k, B_k (forward local and
	// remote of part k), C (home forward), and their backwards.
	type ids struct{ a, b, ab, bb []int }
	per := make([]ids, n)
	cF, cB := make([]int, n), make([]int, n)
	next := 0
	id := func() int { next++; return next - 1 }
	for g := range n {
		per[g] = ids{make([]int, parts), make([]int, parts), make([]int, parts), make([]int, parts)}
		for k := range parts {
			per[g].a[k], per[g].b[k] = id(), id()
		}
		cF[g], cB[g] = id(), id()
		for k := range parts {
			per[g].bb[k], per[g].ab[k] = id(), id()
		}
	}
	tasks := make([]core.Task, next)
	for g := range n {
		all := func(x []int) []int { return slices.Clone(x) }
		for k, dev := range devs {
			tasks[per[g].a[k]] = core.Task{Kind: core.TaskForward, Unit: g, Device: dev, Ops: local[k]}
			tasks[per[g].b[k]] = core.Task{Kind: core.TaskForward, Unit: g, Device: dev, Ops: remote[k], Deps: append(all(per[g].a), per[g].a[k])}
			tasks[per[g].bb[k]] = core.Task{Kind: core.TaskBackward, Unit: g, Device: dev, Ops: remote[k], Deps: []int{cB[g], per[g].b[k]}}
			tasks[per[g].ab[k]] = core.Task{Kind: core.TaskBackward, Unit: g, Device: dev, Ops: local[k], Deps: append(all(per[g].bb), per[g].a[k])}
		}
		tasks[cF[g]] = core.Task{Kind: core.TaskForward, Unit: g, Device: devs[0], Ops: home, Deps: all(per[g].b)}
		tasks[cB[g]] = core.Task{Kind: core.TaskBackward, Unit: g, Device: devs[0], Ops: home, Deps: []int{cF[g]}}
	}
	// Stream order per device (plan order): A(0); then per group B(g)
	// [C(g), C'(g) on home], A(g+1), B'(g), A'(g).
	var order []int
	for k := range parts {
		order = append(order, per[0].a[k])
	}
	for g := range n {
		for k := range parts {
			order = append(order, per[g].b[k])
			if k == 0 {
				order = append(order, cF[g], cB[g])
			}
			if g+1 < n {
				order = append(order, per[g+1].a[k])
			}
			order = append(order, per[g].bb[k], per[g].ab[k])
		}
	}
	// Drop tasks without ops (one part has nothing remote; a model
	// without home ops), their dependents inheriting their deps, and
	// renumber the rest into plan order (ids = positions).
	var resolve func(d int, out []int) []int
	resolve = func(d int, out []int) []int {
		if len(tasks[d].Ops) > 0 {
			return append(out, d)
		}
		for _, e := range tasks[d].Deps {
			out = resolve(e, out)
		}
		return out
	}
	pos := make([]int, next)
	kept := 0
	for _, t := range order {
		if len(tasks[t].Ops) > 0 {
			pos[t] = kept
			kept++
		}
	}
	for _, t := range order {
		x := tasks[t]
		if len(x.Ops) == 0 {
			continue
		}
		x.ID = pos[t]
		var deps []int
		for _, d := range x.Deps {
			for _, e := range resolve(d, nil) {
				if !slices.Contains(deps, pos[e]) {
					deps = append(deps, pos[e])
				}
			}
		}
		x.Deps = deps
		p.Tasks = append(p.Tasks, x)
	}
	// Gradients: every other device's into home, then one step.
	var stepDeps []int
	for k, dev := range devs {
		var bwd []int
		for g := range n {
			b := []int{per[g].ab[k], per[g].bb[k]}
			if k == 0 {
				b = append(b, cB[g])
			}
			for _, t := range b {
				if len(tasks[t].Ops) > 0 {
					bwd = append(bwd, pos[t])
				}
			}
		}
		if k == 0 {
			stepDeps = append(stepDeps, bwd...)
			continue
		}
		id := len(p.Tasks)
		p.Tasks = append(p.Tasks, core.Task{ID: id, Kind: core.TaskReduceGrads, Unit: -1, Device: devs[0], Stream: 1, From: dev, Deps: bwd})
		stepDeps = append(stepDeps, id)
	}
	p.Tasks = append(p.Tasks, core.Task{ID: len(p.Tasks), Kind: core.TaskStep, Unit: -1, Device: devs[0], Stream: 1, Deps: stepDeps})
	return p, nil
}
