package engine

import (
	"fmt"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// Owner-stepped plans (core.Plan.StepOwners): each parameter is stepped on
// its owner, which then sends the new value to the plan's other readers;
// home's copy is brought up to date only when something needs it
// (syncHome). See docs/design-log.md, "Owner-stepped optimizer".

// usesRemote reports whether the plan puts work on a worker's device.
func (t *Trainer) usesRemote(p *core.Plan) bool {
	if t.remote == nil {
		return false
	}
	for _, id := range p.Devices() {
		if t.isRemote(id) {
			return true
		}
	}
	return false
}

// homeStep returns p rewritten to step on home, cached for the last plan
// (a worker's slices are cut per plan).
func (t *Trainer) homeStep(p *core.Plan) *core.Plan {
	if t.homeStepFrom != p {
		t.homeStepFrom, t.homeStepTo = p, p.HomeStep()
	}
	return t.homeStepTo
}

// refreshHome brings the named parameters of home's copy up to date from
// the replicas an owner-stepped plan left their newest values on.
func (t *Trainer) refreshHome(names map[string]bool) (int64, error) {
	from := map[core.DeviceID]map[string]bool{}
	for p := range names {
		if d, ok := t.newest[p]; ok {
			addTo(from, d, p)
		}
	}
	moved, err := t.copyFrom(t.reps[t.home], from)
	if err != nil {
		// Some were not copied: every one stays recorded as newer
		// elsewhere (a copied one is then merely copied again).
		return moved, err
	}
	for _, ps := range from {
		for p := range ps {
			delete(t.newest, p)
		}
	}
	return moved, nil
}

// dropHomeCopies frees home's copies of the parameters an owner-stepped
// plan neither reads on home (reads) nor steps there (owners), once
// another replica holds their current value: that replica (the owner
// when it does) becomes where the value lives (newest) until syncHome
// brings it back (Params, Predict, home-step plans). Without it home
// would keep the whole model, which is what a pipeline exists to spread.
// (Home's gradient accumulators of them are gone already: setHomeGrads.)
func (t *Trainer) dropHomeCopies(reads map[string]bool, owners map[string]core.DeviceID) {
	home := t.reps[t.home]
	ids := sortedIDs(t.reps)
	for _, p := range t.model.Params {
		name := p.Name
		if reads[name] || owners[name] == t.home || home.params[name] == nil {
			continue
		}
		src := core.DeviceID("")
		if d, ok := t.newest[name]; ok {
			src = d
		} else {
			for _, id := range append([]core.DeviceID{owners[name]}, ids...) {
				r := t.reps[id]
				if id == t.home || r == nil || r.params[name] == nil {
					continue
				}
				if v, ok := r.ver[name]; ok && v == t.step {
					src = id
					break
				}
			}
		}
		if src == "" {
			continue // no current copy elsewhere: home keeps it
		}
		home.dev.Free(home.params[name])
		delete(home.params, name)
		delete(home.ver, name)
		if t.newest == nil {
			t.newest = map[string]core.DeviceID{}
		}
		t.newest[name] = src
	}
}

// homeParam is home's tensor of parameter p, allocated again when an
// owner-stepped plan dropped it (dropHomeCopies).
func (t *Trainer) homeParam(p core.ParamSpec) (*core.Tensor, error) {
	home := t.reps[t.home]
	if pt := home.params[p.Name]; pt != nil {
		return pt, nil
	}
	pt, err := home.dev.Alloc(p.Shape...)
	if err != nil {
		return nil, fmt.Errorf("engine: bringing parameter %s back to home %s: %w", p.Name, t.home, err)
	}
	home.params[p.Name] = pt
	return pt, nil
}

// copyFrom copies into dst, from each source device, the parameters
// listed for it, in device order, and returns the bytes moved.
func (t *Trainer) copyFrom(dst *replica, from map[core.DeviceID]map[string]bool) (int64, error) {
	var moved int64
	for _, src := range sortedIDs(from) {
		n, err := t.copyParamsBytes(t.reps[src], dst, from[src])
		moved += n
		if err != nil {
			return moved, fmt.Errorf("engine: copying parameters from %s to %s: %w", src, dst.dev.ID(), err)
		}
	}
	return moved, nil
}

func addTo(m map[core.DeviceID]map[string]bool, d core.DeviceID, p string) {
	if m[d] == nil {
		m[d] = map[string]bool{}
	}
	m[d][p] = true
}

// ownerStep runs a StepOwners plan's Step task: the optimizer on the
// parameters the task's device owns (or those it names), then their new values to the other
// devices whose ops read them. With SkipStep it only records where the
// summed gradients are (Grads reads them there).
func (ex *execution) ownerStep(task core.Task, t0 time.Time) error {
	t := ex.t
	owned := map[string]bool{}
	if len(task.Params) > 0 { // one of the device's step groups
		for _, p := range task.Params {
			owned[p] = true
		}
	} else {
		for p, d := range ex.owners {
			if d == task.Device {
				owned[p] = true
			}
		}
	}
	if ex.opts.SkipStep {
		t.stateMu.Lock()
		if t.gradAt == nil {
			t.gradAt = map[string]core.DeviceID{}
		}
		for p := range owned {
			if task.Device != t.home {
				t.gradAt[p] = task.Device
			}
		}
		t.stateMu.Unlock()
		ex.record(core.TraceEvent{Name: "optimizer step (skipped)", Cat: "step", Device: task.Device, Stream: task.Stream, Unit: -1}, t0)
		return nil
	}
	r := t.reps[task.Device]
	if err := t.stepOwned(r, owned, ex.stepNo); err != nil {
		return err
	}
	if err := ex.opDone(task.Device); err != nil {
		return err
	}
	t.stateMu.Lock()
	for p := range owned {
		if task.Device == t.home {
			delete(t.newest, p)
		} else {
			t.newest[p] = task.Device
			if r.ver == nil {
				r.ver = map[string]int{}
			}
			r.ver[p] = ex.stepNo
		}
	}
	t.stateMu.Unlock()
	ex.record(core.TraceEvent{Name: "optimizer step", Cat: "step", Device: task.Device, Stream: task.Stream, Unit: -1}, t0)
	t1 := time.Now()
	var moved int64
	for _, id := range sortedIDs(ex.used) {
		if id == task.Device {
			continue
		}
		names := map[string]bool{}
		for p := range ex.used[id] {
			if owned[p] {
				names[p] = true
			}
		}
		if len(names) == 0 {
			continue
		}
		n, err := t.copyParams(r, t.reps[id], names, ex.stepNo)
		moved += n
		if err != nil {
			return err
		}
		if id == t.home {
			t.stateMu.Lock()
			for p := range names {
				delete(t.newest, p)
			}
			t.stateMu.Unlock()
		}
	}
	if moved > 0 {
		ex.record(core.TraceEvent{Name: "broadcast params", Cat: "transfer", Device: task.Device, Stream: task.Stream, Unit: -1, Bytes: moved}, t1)
	}
	return nil
}
