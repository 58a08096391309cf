package schedtest

import (
	"context"

	"github.com/gnnkit/gnnkit/core"
)

// Split is a reference data-parallel scheduler for tests: the batch in K
// units of uneven sizes, round-robin over the workload's devices, each
// device on its own stream, gradients reduced into the first device. With
// honest loss weights it is exact.
type Split struct {
	// K is the number of units.
	K int
	// EqualWeights gives every unit weight 1/K whatever its size: the bug
	// the oracle must catch (TestOracleCatchesWrongWeights).
	EqualWeights bool
}

// Name returns "split".
func (s Split) Name() string { return "split" }

// Schedule splits the batch.
func (s Split) Schedule(ctx context.Context, w *core.Workload) (*core.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p := &core.Plan{Scheduler: "split", Home: w.Devices[0].ID}
	// Uneven units: unit u takes nodes i with i%k == u, and unit 0 also
	// takes the tail, so sizes differ.
	k := max(1, min(s.K, len(w.Batch)))
	for u := 0; u < k; u++ {
		p.Units = append(p.Units, core.Unit{ID: u})
	}
	for i, n := range w.Batch {
		u := i % k
		if i >= len(w.Batch)*3/4 {
			u = 0
		}
		p.Units[u].Targets = append(p.Units[u].Targets, n)
	}
	for u := range p.Units {
		if s.EqualWeights || len(w.Batch) == 0 {
			p.Units[u].LossWeight = 1 / float64(k)
		} else {
			p.Units[u].LossWeight = float64(len(p.Units[u].Targets)) / float64(len(w.Batch))
		}
	}
	n := len(w.Ops)
	lastBwd := map[core.DeviceID][]int{}
	for u := range p.Units {
		d := w.Devices[u%len(w.Devices)].ID
		stream := u % len(w.Devices)
		f := len(p.Tasks)
		p.Tasks = append(p.Tasks,
			core.Task{ID: f, Kind: core.TaskForward, Unit: u, Device: d, Stream: stream, OpLo: 0, OpHi: n},
			core.Task{ID: f + 1, Kind: core.TaskBackward, Unit: u, Device: d, Stream: stream, OpLo: 0, OpHi: n, Deps: []int{f}})
		lastBwd[d] = append(lastBwd[d], f+1)
	}
	var stepDeps []int
	for _, dev := range w.Devices {
		b := lastBwd[dev.ID]
		if len(b) == 0 {
			continue
		}
		if dev.ID == p.Home {
			stepDeps = append(stepDeps, b...)
			continue
		}
		id := len(p.Tasks)
		p.Tasks = append(p.Tasks, core.Task{ID: id, Kind: core.TaskReduceGrads, Unit: -1, Device: p.Home, Stream: 7, From: dev.ID, Deps: b})
		stepDeps = append(stepDeps, id)
	}
	p.Tasks = append(p.Tasks, core.Task{ID: len(p.Tasks), Kind: core.TaskStep, Unit: -1, Device: p.Home, Stream: 7, Deps: stepDeps})
	return p, nil
}

// Stages is a reference pipeline scheduler for tests: op o of every unit
// runs on device Assign(o) (so a unit's forward and backward cross
// devices, forks and joins included); units are K full-graph
// micro-batches, listed unit by unit, or GPipe-style with GPipe set.
type Stages struct {
	// K is the number of units (micro-batches).
	K int
	// Assign gives op o of nOps its device index among nDev.
	Assign func(o, nOps, nDev int) int
	// GPipe runs every unit forward before any backward; otherwise each
	// unit runs forward then backward before the next.
	GPipe bool
}

// Name returns "stages".
func (s Stages) Name() string { return "stages" }

// Schedule pipelines the units.
func (s Stages) Schedule(ctx context.Context, w *core.Workload) (*core.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	nOps, nDev := len(w.Ops), len(w.Devices)
	dev := make([]int, nOps)
	for o := range dev {
		dev[o] = s.Assign(o, nOps, nDev)
	}
	// Stages: maximal runs of consecutive ops on one device.
	var stageOps [][]int
	stageOf := make([]int, nOps)
	for o := 0; o < nOps; o++ {
		if o == 0 || dev[o] != dev[o-1] {
			stageOps = append(stageOps, nil)
		}
		stageOf[o] = len(stageOps) - 1
		stageOps[len(stageOps)-1] = append(stageOps[len(stageOps)-1], o)
	}
	p := &core.Plan{Scheduler: "stages", Home: w.Devices[0].ID}
	k := max(1, min(s.K, len(w.Batch)))
	for u := 0; u < k; u++ {
		lo, hi := u*len(w.Batch)/k, (u+1)*len(w.Batch)/k
		p.Units = append(p.Units, core.Unit{ID: u, Targets: append([]int32(nil), w.Batch[lo:hi]...),
			LossWeight: float64(hi-lo) / float64(len(w.Batch))})
	}
	add := func(t core.Task) int {
		t.ID = len(p.Tasks)
		p.Tasks = append(p.Tasks, t)
		return t.ID
	}
	bwdOn := map[core.DeviceID][]int{}
	fwd := make([][]int, len(p.Units))
	forward := func(u int) {
		fwd[u] = make([]int, len(stageOps))
		for st, ops := range stageOps {
			var deps []int
			for _, o := range ops {
				for _, d := range w.Ops[o].Deps {
					if sd := stageOf[d]; sd != st {
						deps = append(deps, fwd[u][sd])
					}
				}
			}
			fwd[u][st] = add(core.Task{Kind: core.TaskForward, Unit: u, Device: w.Devices[dev[ops[0]]].ID, Ops: ops, Deps: deps})
		}
	}
	backward := func(u int) {
		bwd := make([]int, len(stageOps))
		for st := len(stageOps) - 1; st >= 0; st-- {
			deps := []int{fwd[u][len(stageOps)-1], fwd[u][st]}
			for c := 0; c < nOps; c++ {
				for _, d := range w.Ops[c].Deps {
					if stageOf[d] == st && stageOf[c] != st {
						deps = append(deps, bwd[stageOf[c]])
					}
				}
			}
			id := add(core.Task{Kind: core.TaskBackward, Unit: u, Device: w.Devices[dev[stageOps[st][0]]].ID, Ops: stageOps[st], Deps: deps})
			bwd[st] = id
			bwdOn[p.Tasks[id].Device] = append(bwdOn[p.Tasks[id].Device], id)
		}
	}
	if s.GPipe {
		for u := range p.Units {
			forward(u)
		}
		for u := range p.Units {
			backward(u)
		}
	} else {
		for u := range p.Units {
			forward(u)
			backward(u)
		}
	}
	var stepDeps []int
	for _, d := range w.Devices {
		b := bwdOn[d.ID]
		if len(b) == 0 {
			continue
		}
		if d.ID == p.Home {
			stepDeps = append(stepDeps, b...)
			continue
		}
		stepDeps = append(stepDeps, add(core.Task{Kind: core.TaskReduceGrads, Unit: -1, Device: p.Home, Stream: 9, From: d.ID, Deps: b}))
	}
	add(core.Task{Kind: core.TaskStep, Unit: -1, Device: p.Home, Stream: 9, Deps: stepDeps})
	return p, nil
}

// Halves puts the first half of the ops on device 0 and the rest on the
// last device (a chain split).
func Halves(o, nOps, nDev int) int { return min(nDev-1, o*nDev/nOps) }

// Alternate puts op o on device o mod nDev: every edge crosses devices.
func Alternate(o, _, nDev int) int { return o % nDev }

// Owners wraps a scheduler to step each parameter on its owner: its plan
// rewritten by core.Plan.OwnerStep.
type Owners struct{ S core.Scheduler }

// Name returns the wrapped scheduler's name with "+owners".
func (o Owners) Name() string { return o.S.Name() + "+owners" }

// Schedule plans with the wrapped scheduler and rewrites the flush.
func (o Owners) Schedule(ctx context.Context, w *core.Workload) (*core.Plan, error) {
	p, err := o.S.Schedule(ctx, w)
	if err != nil {
		return nil, err
	}
	return p.OwnerStep(w), nil
}
