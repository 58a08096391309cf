package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// fetched is a prefetched owner reduction's gradients on the owner.
type fetched struct {
	staged []staged
	err    error
}

// startPrefetch starts, for every owner reduction that prefetches
// (prefetches), a goroutine on wg that waits for the reduction's Deps and
// for the source's backward tasks writing those gradients (a valid plan
// may order them before the reduction through a stream only), fetches
// the gradients onto the owner and hands them to the reduction's turn on
// its stream (ownerReduce), which adds them in order. (Owner-step plans
// with workers run as home-step plans: no reduction here is remote.)
func (ex *execution) startPrefetch(ctx context.Context, wg *sync.WaitGroup) {
	if ex.owners == nil {
		return
	}
	for i, task := range ex.plan.Tasks {
		if task.Kind != core.TaskReduceGrads || !ex.prefetches(task) {
			continue
		}
		names := core.MovedParams(task, ex.used, ex.owners)
		wait := append(slices.Clone(task.Deps), ex.bwdIndex[task.From].Reading(names)...)
		ch := make(chan fetched, 1)
		ex.fetched[i] = ch
		wg.Go(func() {
			for _, d := range wait {
				select {
				case <-ex.done[d]:
				case <-ctx.Done():
					return // the run failed; the reduction will not run
				}
			}
			t0 := time.Now()
			st, n, err := ex.t.fetchGrads(task.From, task.Device, names)
			if err == nil {
				ex.record(core.TraceEvent{Name: "fetch grads from " + string(task.From), Cat: "transfer", Device: task.Device,
					Stream: task.Stream, Unit: -1, Bytes: n}, t0)
			}
			ch <- fetched{st, err}
		})
	}
}

// indexBackward fills bwdOn and, under owner steps, bwdIndex.
func (ex *execution) indexBackward() {
	ex.bwdOn = map[core.DeviceID][]int{}
	for i, t := range ex.plan.Tasks {
		if t.Kind == core.TaskBackward && (ex.remote == nil || !ex.remote.remote[i]) {
			ex.bwdOn[t.Device] = append(ex.bwdOn[t.Device], i)
		}
	}
	if ex.owners == nil {
		return
	}
	opPar := func(o int) []string { return ex.t.opPar[o] }
	ex.bwdIndex = map[core.DeviceID]core.ReaderIndex{}
	for d, bwd := range ex.bwdOn {
		ex.bwdIndex[d] = core.IndexReaders(ex.plan.Tasks, bwd, opPar)
	}
}

// prefetches reports whether owner reduction task fetches ahead of its
// turn: always between two devices with memory of their own (copy
// engines move the bytes while both compute), on host devices only with
// RunOptions.PrefetchReductions.
func (ex *execution) prefetches(task core.Task) bool {
	return ex.opts.PrefetchReductions || !ex.t.hostMemory(task.From) && !ex.t.hostMemory(task.Device)
}

// dropPrefetched frees prefetched gradients no reduction took (the run
// failed before their turn).
func (ex *execution) dropPrefetched() {
	for i, ch := range ex.fetched {
		if ch == nil {
			continue
		}
		select {
		case f := <-ch:
			ex.t.freeStaged(ex.plan.Tasks[i].Device, f.staged)
		default:
		}
	}
}

// hostMemory reports whether device id's tensors live in host memory
// (the CPU backend): copies to and from it take a host core.
func (t *Trainer) hostMemory(id core.DeviceID) bool {
	r := t.reps[id]
	if r == nil {
		return true
	}
	for _, p := range t.model.Params {
		if g := r.grads[p.Name]; g != nil {
			return g.F32() != nil
		}
	}
	return true
}
