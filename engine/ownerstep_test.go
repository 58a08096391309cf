package engine_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/engine"
)

// TestOwnerStepMatchesHomeStep: stepping each parameter on its owner
// (core.Plan.StepOwners) trains exactly as stepping everything on home —
// same parameters bit for bit after several steps, same summed gradients
// with SkipStep, same predictions — for a two-stage pipeline (stage 2's
// parameters owned off home) and data parallelism (every parameter read
// on both devices, reduced into its owner), also when owner and home
// plans alternate (optimizer state moves between devices). The home
// device holds only the parameters and gradients its ops read and the
// optimizer state of what it owns (dropHomeCopies), until Params wants
// the rest. All of it also with the reductions' gradients prefetched
// (RunOptions.PrefetchReductions).
func TestOwnerStepMatchesHomeStep(t *testing.T) {
	ctx := context.Background()
	scheds := map[string]core.Scheduler{
		"pipeline": schedtest.Stages{K: 2, Assign: schedtest.Halves},
		"data":     schedtest.Split{K: 3},
	}
	for _, model := range []string{"gcn", "sage"} {
		for _, run := range []struct {
			sched    string
			prefetch bool
		}{{"pipeline", false}, {"data", false}, {"pipeline", true}, {"data", true}} {
			sname := run.sched
			opts := engine.RunOptions{PrefetchReductions: run.prefetch}
			t.Run(fmt.Sprintf("%s/%s/prefetch=%v", model, sname, run.prefetch), func(t *testing.T) {
				ref, rdevs, _ := setup(t, model, 0)
				own, odevs, _ := setup(t, model, 0)
				plans := func(tr *engine.Trainer, devs []core.Device) (*engine.Batch, *core.Plan, *core.Plan) {
					b, p, w := scheduled(t, tr, devs, scheds[sname])
					op := p.OwnerStep(w)
					if err := op.Validate(w); err != nil {
						t.Fatal(err)
					}
					return b, p, op
				}
				rb, rp, _ := plans(ref, rdevs)
				ob, op, oo := plans(own, odevs)
				// Alternate: owner, owner, home, owner against home only.
				for i, useOwner := range []bool{true, true, false, true} {
					want, err := ref.Run(ctx, rp, rb, engine.RunOptions{})
					if err != nil {
						t.Fatal(err)
					}
					p := op
					if useOwner {
						p = oo
					}
					got, err := own.Run(ctx, p, ob, opts)
					if err != nil {
						t.Fatal(err)
					}
					if got.Loss != want.Loss {
						t.Errorf("step %d: loss %.9g, home-step %.9g", i, got.Loss, want.Loss)
					}
					if useOwner {
						checkReduceEvents(t, got.Trace, p, ob, own, odevs, run.prefetch)
					}
				}
				if own.Step() != ref.Step() {
					t.Errorf("step count %d, want %d", own.Step(), ref.Step())
				}
				if sname == "pipeline" {
					checkOwnerMemory(t, own, odevs, rdevs, oo, false)
				}
				equalParams(t, "after 4 steps", own, ref) // Params brings home's copies back
				if sname == "pipeline" {
					checkOwnerMemory(t, own, odevs, rdevs, oo, true)
				}
				// Summed gradients with the step skipped.
				if _, err := ref.Run(ctx, rp, rb, engine.RunOptions{SkipStep: true}); err != nil {
					t.Fatal(err)
				}
				skip := opts
				skip.SkipStep = true
				if _, err := own.Run(ctx, oo, ob, skip); err != nil {
					t.Fatal(err)
				}
				// Reductions add after the device's own backward, in stream
				// order: the same sums in the same order.
				sameGrads(t, own, ref)
				// Predictions use home's copy, brought up to date.
				nodes := batch(100)
				rpred, err := ref.Predict(ctx, nodes)
				if err != nil {
					t.Fatal(err)
				}
				opred, err := own.Predict(ctx, nodes)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(rpred) != fmt.Sprint(opred) {
					t.Error("predictions differ from the home-step run's")
				}
			})
		}
	}
}

func equalParams(t *testing.T, when string, got, want *engine.Trainer) {
	t.Helper()
	sameBits(t, when+": parameter", got.Params, want.Params)
}

// sameBits checks that got's named values equal want's (a home-step
// run's) bit for bit, reporting each that differs as "what NAME".
func sameBits(t *testing.T, what string, got, want func() (map[string][]float32, error)) {
	t.Helper()
	gv, err := got()
	if err != nil {
		t.Fatal(err)
	}
	wv, err := want()
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range wv {
		if d := relL2(gv[name], v); d != 0 {
			t.Errorf("%s %s differs from the home-step run's: relative L2 %.3g", what, name, d)
		}
	}
}

func relL2(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	var num, den float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

// checkReduceEvents: every owner reduction shows in the trace as a fetch
// on its owner's stream carrying the bytes of the parameters it moves
// (those its source reads and the owner owns), then the add, which
// carries none (the bytes are counted once). Not prefetched, the fetch
// starts after the owner's own backwards reading those parameters end
// (fetched beside one, they raised the owner's peak past the plan's).
func checkReduceEvents(t *testing.T, tr *core.Trace, p *core.Plan, b *engine.Batch, own *engine.Trainer, devs []core.Device, prefetch bool) {
	t.Helper()
	w, err := own.Workload(b, infos(devs))
	if err != nil {
		t.Fatal(err)
	}
	op := w.OpParams()
	owner := p.ParamOwners(op)
	read := core.ParamReaders(p.Tasks, op)
	size := map[string]int64{}
	for _, o := range w.Ops {
		for _, r := range o.Params {
			size[r.Name] = r.Bytes
		}
	}
	for _, task := range p.Tasks {
		if task.Kind != core.TaskReduceGrads {
			continue
		}
		var want int64
		for name := range read[task.From] {
			if owner[name] == task.Device {
				want += size[name]
			}
		}
		// The units whose backward on the owner reads a moved parameter.
		reads := map[int]bool{}
		for _, bt := range p.Tasks {
			if bt.Kind != core.TaskBackward || bt.Device != task.Device {
				continue
			}
			for _, o := range bt.OpIndices() {
				for _, r := range w.Ops[o].Params {
					if owner[r.Name] == task.Device && read[task.From][r.Name] {
						reads[bt.Unit] = true
					}
				}
			}
		}
		var fetched, added int
		for _, e := range tr.Events {
			if e.Device != task.Device || e.Stream != task.Stream {
				continue
			}
			switch e.Name {
			case "fetch grads from " + string(task.From):
				fetched++
				for _, be := range tr.Events {
					if !prefetch && be.Device == task.Device && be.Cat == core.TaskBackward.String() && reads[be.Unit] && be.Start+be.Dur > e.Start {
						t.Errorf("the fetch from %s into %s started at %v, before the owner's backward %q ended (%v)", task.From, task.Device, e.Start, be.Name, be.Start+be.Dur)
					}
				}
				if e.Bytes != want {
					t.Errorf("fetch from %s into %s moved %d bytes, want %d", task.From, task.Device, e.Bytes, want)
				}
			case "reduce grads from " + string(task.From):
				added++
				if e.Bytes != 0 {
					t.Errorf("the add from %s into %s counts %d bytes again", task.From, task.Device, e.Bytes)
				}
			}
		}
		if fetched != 1 || added != 1 {
			t.Errorf("reduction %s -> %s: %d fetch and %d add events, want 1 each", task.From, task.Device, fetched, added)
		}
	}
}

// checkOwnerMemory: after an owner-stepped iteration p of the two-stage
// pipeline, the second device holds its stage's parameters, gradients and
// optimizer state (Adam: 2 tensors), and the edge weights it reads; home
// (the first device) holds, compared with the home-step run's home
// (refDevs[0]: every parameter, all gradients and all Adam state), only
// the parameters and gradients its ops read and the state of what it
// owns; once synced (Params), every parameter again.
func checkOwnerMemory(t *testing.T, tr *engine.Trainer, devs, refDevs []core.Device, p *core.Plan, synced bool) {
	t.Helper()
	w, err := tr.Workload(tr.FullBatch(batch(60)), infos(devs))
	if err != nil {
		t.Fatal(err)
	}
	op := w.OpParams()
	owner := p.ParamOwners(op)
	read := core.ParamReaders(p.Tasks, op)
	size := map[string]int64{}
	for _, o := range w.Ops {
		for _, r := range o.Params {
			size[r.Name] = r.Bytes
		}
	}
	d1 := devs[1].ID()
	var want int64
	for name := range read[d1] {
		want += 2 * size[name]
		if owner[name] == d1 {
			want += 2 * size[name]
		}
	}
	if len(read[d1]) == 0 {
		t.Fatal("the second stage reads no parameter")
	}
	want += 4 * w.Dims.Edges
	if got := devs[1].Mem().Stats().Used; got != want {
		t.Errorf("%s holds %d bytes between iterations, want %d (its stage's parameters, gradients, Adam state and edge weights)", d1, got, want)
	}
	d0 := devs[0].ID()
	var saved int64
	for name, b := range size {
		if !read[d0][name] {
			saved += b // its gradient
			if !synced {
				saved += b // and its value, until Params or Predict wants it
			}
		}
		if owner[name] != d0 {
			saved += 2 * b // its Adam state
		}
	}
	if saved == 0 {
		t.Fatal("home reads and owns every parameter")
	}
	what := "gradients, values and Adam state it neither reads nor owns"
	if synced {
		what = "gradients and Adam state it neither reads nor owns; values brought back by Params"
	}
	if got, ref := devs[0].Mem().Stats().Used, refDevs[0].Mem().Stats().Used; got != ref-saved {
		t.Errorf("home holds %d bytes between iterations, want %d (the home-step run's %d less %d of %s)",
			got, ref-saved, ref, saved, what)
	}
}

// TestOwnersChangeBetweenPlans: when successive plans give parameters
// different owners (halves, then every other op on the other device, then
// halves again) the optimizer state and the newest values follow them,
// and training equals stepping on home throughout, bit for bit.
func TestOwnersChangeBetweenPlans(t *testing.T) {
	ctx := context.Background()
	ref, rdevs, _ := setup(t, "sage", 0)
	own, odevs, _ := setup(t, "sage", 0)
	seq := []core.Scheduler{
		schedtest.Stages{K: 2, Assign: schedtest.Halves},
		schedtest.Stages{K: 2, Assign: schedtest.Alternate},
		schedtest.Stages{K: 2, Assign: func(o, n, d int) int { return d - 1 - schedtest.Halves(o, n, d) }},
		schedtest.Stages{K: 2, Assign: schedtest.Halves},
	}
	for i, s := range seq {
		run := func(tr *engine.Trainer, devs []core.Device, owners bool) float64 {
			b := tr.FullBatch(batch(60))
			w, err := tr.Workload(b, infos(devs))
			if err != nil {
				t.Fatal(err)
			}
			p, err := s.Schedule(ctx, w)
			if err != nil {
				t.Fatal(err)
			}
			if owners {
				p = p.OwnerStep(w)
			}
			res, err := tr.Run(ctx, p, b, engine.RunOptions{})
			if err != nil {
				t.Fatalf("plan %d: %v", i, err)
			}
			return res.Loss
		}
		if got, want := run(own, odevs, true), run(ref, rdevs, false); got != want {
			t.Errorf("plan %d: loss %.9g, home-step %.9g", i, got, want)
		}
	}
	equalParams(t, "after owners moved", own, ref)
}

// TestLossSameEveryRun: the iteration's loss sums its units' losses in
// unit order, so identical runs report identical losses whatever order
// the units finished in on their devices.
func TestLossSameEveryRun(t *testing.T) {
	ctx := context.Background()
	var first float64
	for i := range 6 {
		tr, devs, _ := setup(t, "gcn", 0)
		b := tr.FullBatch(batch(60))
		w, err := tr.Workload(b, infos(devs))
		if err != nil {
			t.Fatal(err)
		}
		p, err := schedtest.Split{K: 5}.Schedule(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		res, err := tr.Run(ctx, p, b, engine.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = res.Loss
		} else if res.Loss != first {
			t.Fatalf("run %d: loss %.17g, first run %.17g", i, res.Loss, first)
		}
	}
}

// TestPrefetchWaitsForWriters: a reduction ordered after its source's
// backward only through a stream (no Deps of its own, which Validate
// accepts) still fetches the gradients only once they are final when
// reductions prefetch: the same sums as the home-step run.
func TestPrefetchWaitsForWriters(t *testing.T) {
	ctx := context.Background()
	ref, rdevs, _ := setup(t, "gcn", 0)
	own, odevs, _ := setup(t, "gcn", 0)
	rb, rp, _ := scheduled(t, ref, rdevs, schedtest.Split{K: 3})
	ob, p, w := scheduled(t, own, odevs, schedtest.Split{K: 3})
	p = p.OwnerStep(w)
	lastBwd := map[core.DeviceID]int{}
	for i, task := range p.Tasks {
		if task.Kind == core.TaskBackward {
			lastBwd[task.Device] = i
		}
	}
	moved := 0
	for i, task := range p.Tasks {
		if task.Kind != core.TaskReduceGrads {
			continue
		}
		// Order it after the source's backward through the owner's
		// compute stream only.
		b := lastBwd[task.Device]
		p.Tasks[b].Deps = append(p.Tasks[b].Deps, lastBwd[task.From])
		p.Tasks[i].Deps, p.Tasks[i].Stream = nil, p.Tasks[b].Stream
		moved++
	}
	if moved == 0 {
		t.Fatal("the owner-step plan has no reductions")
	}
	if err := p.Validate(w); err != nil {
		t.Fatalf("the rewritten plan is invalid: %v", err)
	}
	if _, err := ref.Run(ctx, rp, rb, engine.RunOptions{SkipStep: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := own.Run(ctx, p, ob, engine.RunOptions{SkipStep: true, PrefetchReductions: true}); err != nil {
		t.Fatal(err)
	}
	sameGrads(t, own, ref)
}

// scheduled is sched's plan for a full batch of 60 nodes on devs, with
// the batch and the workload.
func scheduled(t *testing.T, tr *engine.Trainer, devs []core.Device, sched core.Scheduler) (*engine.Batch, *core.Plan, *core.Workload) {
	t.Helper()
	b := tr.FullBatch(batch(60))
	w, err := tr.Workload(b, infos(devs))
	if err != nil {
		t.Fatal(err)
	}
	p, err := sched.Schedule(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	return b, p, w
}

// sameGrads checks that own's summed gradients equal ref's (a home-step
// run's) bit for bit.
func sameGrads(t *testing.T, own, ref *engine.Trainer) {
	t.Helper()
	sameBits(t, "gradient of", own.Grads, ref.Grads)
}
