package sim_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// ownerWorkload is a chain of three ops over one row whose ops name
// their parameters: op0 reads a and the shared s, op1 reads b, op2
// reads s and c (s is read on two devices of ownerPlan).
func ownerWorkload(named bool) *core.Workload {
	w := chain(3, devIDs(4)...)
	params := [][]core.ParamRef{
		{{Name: "a", Bytes: 100}, {Name: "s", Bytes: 1000}},
		{{Name: "b", Bytes: 200}},
		{{Name: "s", Bytes: 1000}, {Name: "c", Bytes: 300}},
	}
	w.ParamBytes = 1600
	for o := range w.Ops {
		for _, r := range params[o] {
			w.Ops[o].Cost.WeightBytes += r.Bytes
		}
		if named {
			w.Ops[o].Params = params[o]
		}
	}
	return w
}

// ownerPlan runs ownerWorkload's ops as three stages, GPipe order, two
// units: op0 on cpu:0, op1 replicated on cpu:1 (unit 0) and cpu:2 (unit
// 1), op2 on cpu:3 (home). Owners, by the first forward task reading
// each parameter: a and s on cpu:0, b on cpu:1, c on cpu:3. So cpu:2
// reduces b into cpu:1, cpu:3 reduces s into cpu:0, and cpu:0, cpu:1 and
// cpu:3 step.
func ownerPlan() *core.Plan {
	d := devIDs(4)
	fwd := func(id, u, op int, dev core.DeviceID, deps ...int) core.Task {
		return core.Task{ID: id, Kind: core.TaskForward, Unit: u, Device: dev, Ops: []int{op}, Deps: deps}
	}
	bwd := func(id, u, op int, dev core.DeviceID, deps ...int) core.Task {
		t := fwd(id, u, op, dev, deps...)
		t.Kind = core.TaskBackward
		return t
	}
	return &core.Plan{Scheduler: "owners", Home: d[3], StepOwners: true,
		Units: []core.Unit{{ID: 0, Targets: []int32{0}, LossWeight: 0.5}, {ID: 1, LossWeight: 0.5}},
		Tasks: []core.Task{
			fwd(0, 0, 0, d[0]), fwd(1, 1, 0, d[0]),
			fwd(2, 0, 1, d[1], 0), fwd(3, 1, 1, d[2], 1),
			fwd(4, 0, 2, d[3], 2), fwd(5, 1, 2, d[3], 3),
			bwd(6, 0, 2, d[3], 4), bwd(7, 1, 2, d[3], 5),
			bwd(8, 0, 1, d[1], 2, 6), bwd(9, 1, 1, d[2], 3, 7),
			bwd(10, 0, 0, d[0], 0, 8), bwd(11, 1, 0, d[0], 1, 9),
			{ID: 12, Kind: core.TaskReduceGrads, Unit: -1, Device: d[1], Stream: 1, From: d[2], Deps: []int{9}},
			{ID: 13, Kind: core.TaskReduceGrads, Unit: -1, Device: d[0], Stream: 1, From: d[3], Deps: []int{6, 7}},
			{ID: 14, Kind: core.TaskStep, Unit: -1, Device: d[0], Stream: 1, Deps: []int{10, 11, 13}},
			{ID: 15, Kind: core.TaskStep, Unit: -1, Device: d[1], Stream: 1, Deps: []int{8, 12}},
			{ID: 16, Kind: core.TaskStep, Unit: -1, Device: d[3], Stream: 1, Deps: []int{6, 7}},
		}}
}

// TestOwnerSteps: a StepOwners plan reduces into each owner only the
// gradients of the parameters it owns (cpu:2 sends b to cpu:1, cpu:3
// sends the shared s to cpu:0), each owner steps its own bytes and sends
// them to the other readers, and each device holds what the executor
// keeps: home every parameter, the gradients of what it reads and the
// optimizer state of what it owns; the others their parameters and
// gradients and the state of what they own.
func TestOwnerSteps(t *testing.T) {
	w := ownerWorkload(true)
	p := ownerPlan()
	if err := p.Validate(w); err != nil {
		t.Fatal(err)
	}
	d := devIDs(4)
	const gbps = 1 // 1 byte per ns
	for _, sync := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync=%v", sync), func(t *testing.T) {
			cl := sim.CPU(4, sim.DeviceModel{GFLOPS: 1, MemGBps: gbps}, sim.Link{GBps: gbps})
			cl.SyncTransfers = sync
			prof := flat(w, time.Millisecond, time.Millisecond, 0, 0)
			cm, err := sim.NewCostModel(w, prof, cl)
			if err != nil {
				t.Fatal(err)
			}
			r, err := sim.Simulate(p, w, prof, cl)
			if err != nil {
				t.Fatal(err)
			}
			type ev struct {
				kind string
				dev  core.DeviceID
			}
			got := map[ev]core.TraceEvent{}
			for _, e := range r.Trace.Events {
				if e.Cat == "reduce_grads" || e.Cat == "step" || e.Name == "broadcast params" || e.Name == "reduce grads" {
					k := ev{e.Cat + "/" + e.Name, e.Device}
					if _, dup := got[k]; dup {
						t.Errorf("two %s events on %s", k.kind, k.dev)
					}
					got[k] = e
				}
			}
			link := func(a, b core.DeviceID) core.DeviceID { return core.DeviceID("link " + string(a) + "->" + string(b)) }
			// The reductions: their bytes and the sums (4 × bytes at
			// memory bandwidth), with synchronous copies the copy too.
			for _, c := range []struct {
				from, into core.DeviceID
				nb         int64
			}{{d[2], d[1], 200}, {d[3], d[0], 1000}} {
				e, ok := got[ev{"reduce_grads/reduce grads from " + string(c.from), c.into}]
				if !ok {
					t.Errorf("no reduction from %s into %s", c.from, c.into)
					continue
				}
				want := cm.ReduceSum(c.into, c.nb)
				if sync {
					want += cm.Transfer(c.from, c.into, c.nb)
				} else if x, ok := got[ev{"transfer/reduce grads", link(c.from, c.into)}]; !ok || x.Bytes != c.nb || x.Dur != cm.Transfer(c.from, c.into, c.nb) {
					t.Errorf("reduction %s -> %s: link event %+v (found %v), want %d bytes", c.from, c.into, x, ok, c.nb)
				}
				if e.Bytes != c.nb || e.Dur != want {
					t.Errorf("reduction %s -> %s: %d bytes in %v, want %d in %v", c.from, c.into, e.Bytes, e.Dur, c.nb, want)
				}
			}
			// The steps: one per owner, over its own bytes.
			steps := 0
			for _, e := range r.Trace.Events {
				if e.Cat == "step" {
					steps++
				}
			}
			if steps != 3 {
				t.Errorf("%d steps, want 3 (cpu:0, cpu:1, cpu:3)", steps)
			}
			ends := map[core.DeviceID]time.Duration{}
			for dev, own := range map[core.DeviceID]int64{d[0]: 1100, d[1]: 200, d[3]: 300} {
				e, ok := got[ev{"step/optimizer step", dev}]
				if !ok {
					t.Errorf("no step on %s", dev)
					continue
				}
				if want := cm.StepBytes(dev, own); e.Dur != want || want != time.Duration(8*own/gbps) {
					t.Errorf("step on %s took %v, want %v (Adam's traffic over the %d bytes it owns)", dev, e.Dur, want, own)
				}
				ends[dev] = e.Start + e.Dur
			}
			if got[ev{"step/optimizer step", d[0]}].Start < got[ev{"reduce_grads/reduce grads from " + string(d[3]), d[0]}].Start+got[ev{"reduce_grads/reduce grads from " + string(d[3]), d[0]}].Dur {
				t.Error("cpu:0 stepped before the reduction from cpu:3 was in")
			}
			// The broadcasts: cpu:0 sends s to cpu:3, cpu:1 sends b to
			// cpu:2; cpu:3 owns c, which no other device reads.
			var last time.Duration
			for _, c := range []struct {
				from, to core.DeviceID
				nb       int64
			}{{d[0], d[3], 1000}, {d[1], d[2], 200}} {
				x := cm.Transfer(c.from, c.to, c.nb)
				var e core.TraceEvent
				var ok bool
				if sync {
					e, ok = got[ev{"transfer/broadcast params", c.from}]
				} else {
					e, ok = got[ev{"transfer/broadcast params", link(c.from, c.to)}]
				}
				if !ok || e.Bytes != c.nb || e.Dur != x || e.Start != ends[c.from] {
					t.Errorf("broadcast %s -> %s: %+v (found %v), want %d bytes in %v from %v", c.from, c.to, e, ok, c.nb, x, ends[c.from])
				}
				last = max(last, ends[c.from]+x)
			}
			if r.Iteration != last {
				t.Errorf("iteration %v, want the last broadcast's end %v", r.Iteration, last)
			}
			if want := int64(2 * (1000 + 200)); r.BytesMoved != want {
				t.Errorf("moved %d bytes, want %d (reductions and broadcasts of the owned parameters)", r.BytesMoved, want)
			}
			// Resident: home (cpu:3) reads s, c (1300) and keeps only them
			// and their gradients (2600) + Adam's state of c (600); cpu:0
			// reads and owns a, s (1100): 2·1100 + 2·1100; cpu:1 reads and
			// owns b; cpu:2 reads b and owns nothing.
			want := map[core.DeviceID]int64{d[0]: 4400, d[1]: 800, d[2]: 400, d[3]: 3200}
			for dev, b := range want {
				if r.Resident[dev] != b {
					t.Errorf("resident on %s: %d, want %d", dev, r.Resident[dev], b)
				}
			}
			if r.Resident[d[3]] != cm.ResidentOwned(false, 1300, 300) || r.Resident[d[0]] != cm.ResidentOwned(false, 1100, 1100) {
				t.Error("resident memory is not CostModel.ResidentOwned's")
			}
			// The reduced gradients are a transient on the owner.
			if r.PeakMem[d[0]] != 4400+1000 || r.PeakMem[d[1]] != 800+200 {
				t.Errorf("peaks %v, want the resident bytes plus the reduced gradients on the owners", r.PeakMem)
			}
		})
	}
}

// TestHomeStepUnchanged: a home-step plan simulates the same whether or
// not the workload names its ops' parameters (only StepOwners plans read
// them): every device's parameters reduced into home and sent back, the
// whole model stepped, home holding every gradient and all the state.
func TestHomeStepUnchanged(t *testing.T) {
	home := ownerPlan().HomeStep()
	if home.StepOwners {
		t.Fatal("HomeStep kept StepOwners")
	}
	d := devIDs(4)
	for _, sync := range []bool{false, true} {
		cl := sim.CPU(4, sim.DeviceModel{GFLOPS: 1, MemGBps: 1}, sim.Link{GBps: 1, Latency: time.Microsecond})
		cl.SyncTransfers = sync
		var res [2]*sim.Result
		for i, named := range []bool{false, true} {
			w := ownerWorkload(named)
			if err := home.Validate(w); err != nil {
				t.Fatal(err)
			}
			r, err := sim.Simulate(home, w, flat(w, time.Millisecond, 2*time.Millisecond, 10, 100), cl)
			if err != nil {
				t.Fatal(err)
			}
			res[i] = r
		}
		a, b := res[0], res[1]
		if a.Iteration != b.Iteration || a.BytesMoved != b.BytesMoved || fmt.Sprint(a.PeakMem) != fmt.Sprint(b.PeakMem) || fmt.Sprint(a.Resident) != fmt.Sprint(b.Resident) {
			t.Errorf("sync=%v: naming the parameters changed a home-step plan's simulation: %v %d %v vs %v %d %v",
				sync, a.Iteration, a.BytesMoved, a.PeakMem, b.Iteration, b.BytesMoved, b.PeakMem)
		}
		// Home (cpu:3): parameters, gradients and Adam's state of all
		// 1600 bytes; elsewhere parameters and gradients of what the
		// device's ops read (Cost.WeightBytes).
		want := map[core.DeviceID]int64{d[3]: 4 * 1600, d[0]: 2 * 1100, d[1]: 2 * 200, d[2]: 2 * 200}
		for dev, n := range want {
			if b.Resident[dev] != n {
				t.Errorf("sync=%v: resident on %s %d, want %d", sync, dev, b.Resident[dev], n)
			}
		}
		// Activations (100 bytes per value and gradient, 2 units over 2
		// stage edges each) + every device's parameters into home and back.
		if want := int64(2*2*2*100 + 2*(1100+200+200)); b.BytesMoved != want {
			t.Errorf("sync=%v: moved %d bytes, want %d", sync, b.BytesMoved, want)
		}
	}
}

// TestOwnerStepsNeedNamedParams: a StepOwners plan over a workload that
// names no op's parameters is an error, not a guess.
// TestOwnerReduceAddsAfterOwner: cpu:3's gradients of s travel to cpu:0
// once cpu:3 is done with them, but cpu:0 adds them in only after its
// own backward tasks reading s (10 and 11), holding them meanwhile; a
// plan where one of those waits for the reduction deadlocks, and the
// error says what the reduction waits for.
func TestOwnerReduceAddsAfterOwner(t *testing.T) {
	w := ownerWorkload(true)
	d := devIDs(4)
	cl := sim.CPU(4, sim.DeviceModel{GFLOPS: 1, MemGBps: 1}, sim.Link{GBps: 1})
	cl.SyncTransfers = false // copy engines: the transfer runs beside compute
	prof := flat(w, time.Millisecond, time.Millisecond, 0, 0)
	r, err := sim.Simulate(ownerPlan(), w, prof, cl)
	if err != nil {
		t.Fatal(err)
	}
	var xfer, add, lastBwd core.TraceEvent
	for _, e := range r.Trace.Events {
		switch {
		case e.Name == "reduce grads" && e.Device == core.DeviceID("link "+string(d[3])+"->"+string(d[0])):
			xfer = e
		case e.Name == "reduce grads from "+string(d[3]):
			add = e
		case e.Cat == "backward" && e.Device == d[0] && e.Start+e.Dur > lastBwd.Start+lastBwd.Dur:
			lastBwd = e
		}
	}
	if xfer.Dur == 0 || add.Dur == 0 || lastBwd.Dur == 0 {
		t.Fatalf("missing events: transfer %+v, add %+v, cpu:0's last backward %+v", xfer, add, lastBwd)
	}
	if xfer.Start >= lastBwd.Start+lastBwd.Dur {
		t.Errorf("the gradients left cpu:3 at %v, after cpu:0's backward ended (%v): they should travel meanwhile", xfer.Start, lastBwd.Start+lastBwd.Dur)
	}
	if add.Start < lastBwd.Start+lastBwd.Dur {
		t.Errorf("cpu:0 added cpu:3's gradients at %v, before its own backward reading them ended (%v)", add.Start, lastBwd.Start+lastBwd.Dur)
	}
	// cpu:0's backward of op 0 for unit 0 waiting for the reduction.
	p := ownerPlan()
	p.Tasks[10].Deps = append(p.Tasks[10].Deps, 13)
	_, err = sim.Simulate(p, w, prof, cl)
	if !errors.Is(err, sim.ErrDeadlock) || !strings.Contains(err.Error(), "waits to add them after its owner's backward task(s) 10") {
		t.Errorf("got %v, want a deadlock naming the backward task the reduction waits for", err)
	}
}

func TestOwnerStepsNeedNamedParams(t *testing.T) {
	w := ownerWorkload(false)
	_, err := sim.Simulate(ownerPlan(), w, flat(w, time.Millisecond, time.Millisecond, 0, 0), free(4))
	if err == nil || !strings.Contains(err.Error(), "names no op's parameters") {
		t.Errorf("got %v, want an error about the unnamed parameters", err)
	}
}

// TestStepBytes: the optimizer step over part of the model costs that
// part of a measured step, or Adam's traffic over those bytes; the
// optimizer state of owned bytes is the model's in proportion.
func TestStepBytes(t *testing.T) {
	w := ownerWorkload(true)
	prof := flat(w, time.Millisecond, time.Millisecond, 0, 0)
	cl := sim.CPU(1, sim.DeviceModel{GFLOPS: 1, MemGBps: 2}, sim.Link{})
	cm, err := sim.NewCostModel(w, prof, cl)
	if err != nil {
		t.Fatal(err)
	}
	d := core.DeviceID("cpu:0")
	if got, want := cm.StepBytes(d, 400), time.Duration(8*400/2); got != want {
		t.Errorf("modelled step over 400 bytes: %v, want %v", got, want)
	}
	if cm.Step(d) != cm.StepBytes(d, 1600) {
		t.Errorf("Step %v != StepBytes(whole model) %v", cm.Step(d), cm.StepBytes(d, 1600))
	}
	prof.Step = 8 * time.Millisecond
	prof.ParamBytes, prof.OptStateBytes = 1600, 3200
	if cm, err = sim.NewCostModel(w, prof, cl); err != nil {
		t.Fatal(err)
	}
	if got := cm.StepBytes(d, 400); got != 2*time.Millisecond {
		t.Errorf("measured step over a quarter of the model: %v, want 2ms", got)
	}
	if cm.Step(d) != 8*time.Millisecond {
		t.Errorf("measured step %v, want 8ms", cm.Step(d))
	}
	if got := cm.OptStateBytes(400); got != 800 {
		t.Errorf("optimizer state of 400 bytes: %d, want 800", got)
	}
	if got := cm.ResidentOwned(false, 500, 400); got != 2*500+800 {
		t.Errorf("home resident %d, want the parameters it reads, their gradients and the state it owns", got)
	}
	if got := cm.ResidentOwned(false, 500, 0); got != 1000 {
		t.Errorf("resident of a non-owner %d, want its parameters and gradients", got)
	}
	if got := cm.ParamBytesRead([]int{0, 2}); got != 1400 {
		t.Errorf("ops 0 and 2 read %d parameter bytes, want 1400 (s once)", got)
	}
}

// TestPrefetchWaitsForWriters: with copy engines a reduction's gradients
// leave their source only once the source's backward tasks writing them
// are done, also when the plan orders the reduction after them through a
// stream only (no Deps of its own): ownerPlan's reduction of b from cpu:2
// into cpu:1 (task 12) moved onto cpu:1's compute stream behind task 8,
// which waits for cpu:2's backward (task 9).
func TestPrefetchWaitsForWriters(t *testing.T) {
	w := ownerWorkload(true)
	d := devIDs(4)
	cl := sim.CPU(4, sim.DeviceModel{GFLOPS: 1, MemGBps: 1}, sim.Link{GBps: 1})
	cl.SyncTransfers = false
	p := ownerPlan()
	p.Tasks[8].Deps = append(p.Tasks[8].Deps, 9)
	p.Tasks[12].Deps, p.Tasks[12].Stream = nil, 0
	if err := p.Validate(w); err != nil {
		t.Fatalf("the rewritten plan is invalid: %v", err)
	}
	r, err := sim.Simulate(p, w, flat(w, time.Millisecond, time.Millisecond, 0, 0), cl)
	if err != nil {
		t.Fatal(err)
	}
	var xfer, writer core.TraceEvent
	for _, e := range r.Trace.Events {
		switch {
		case e.Name == "reduce grads" && e.Device == core.DeviceID("link "+string(d[2])+"->"+string(d[1])):
			xfer = e
		case e.Cat == "backward" && e.Device == d[2]:
			writer = e
		}
	}
	if xfer.Dur == 0 || writer.Dur == 0 {
		t.Fatalf("missing events: transfer %+v, cpu:2's backward %+v", xfer, writer)
	}
	if xfer.Start < writer.Start+writer.Dur {
		t.Errorf("b's gradients left cpu:2 at %v, before its backward writing them ended (%v)", xfer.Start, writer.Start+writer.Dur)
	}
}
