package sim_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// chain is a hand-built workload: a chain of nOps ops over one row.
func chain(nOps int, devs ...core.DeviceID) *core.Workload {
	w := &core.Workload{ModelName: "chain", Dims: core.Dims{Nodes: 1}, Batch: []int32{0}}
	for o := range nOps {
		op := core.OpInfo{Index: o, Name: fmt.Sprintf("op%d", o), Kind: core.KindDense}
		if o > 0 {
			op.Deps = []int{o - 1}
		}
		w.Ops = append(w.Ops, op)
	}
	for _, d := range devs {
		w.Devices = append(w.Devices, core.DeviceInfo{ID: d})
	}
	return w
}

// flat profiles every op of w at fixed times whatever the size, with mem
// bytes held per unit and out bytes of output.
func flat(w *core.Workload, fwd, bwd time.Duration, mem, out int64) *sim.Profile {
	p := &sim.Profile{Model: w.ModelName}
	for _, op := range w.Ops {
		p.Ops = append(p.Ops, sim.OpProfile{Name: op.Name, Preds: op.Deps, Points: []sim.Point{
			{Rows: 1, Fwd: fwd, Bwd: bwd, Mem: mem, OutBytes: out},
			{Rows: 2, Fwd: fwd, Bwd: bwd, Mem: mem, OutBytes: out}}})
	}
	return p
}

func devIDs(n int) []core.DeviceID {
	out := make([]core.DeviceID, n)
	for i := range out {
		out[i] = core.DeviceID(fmt.Sprintf("cpu:%d", i))
	}
	return out
}

// pipeline builds a P-stage plan of m one-row micro-batches, op s on
// device s, in GPipe order (all forwards, then all backwards) or 1F1B
// order (stage s warms up with P-s forwards, then alternates).
func pipeline(w *core.Workload, m int, oneF1B bool) *core.Plan {
	P := len(w.Ops)
	devs := devIDs(P)
	p := &core.Plan{Scheduler: "pipe", Home: devs[0]}
	// The batch is one node: unit 0 holds it, the others are empty.
	for u := range m {
		p.Units = append(p.Units, core.Unit{ID: u, LossWeight: 1 / float64(m)})
	}
	p.Units[0].Targets = []int32{0}
	// Task ids are fixed up front so deps can point forward.
	F := func(u, s int) int { return u*P + s }
	B := func(u, s int) int { return m*P + u*P + s }
	tasks := make([]core.Task, 2*m*P)
	for u := range m {
		for s := range P {
			f := core.Task{ID: F(u, s), Kind: core.TaskForward, Unit: u, Device: devs[s], Ops: []int{s}}
			if s > 0 {
				f.Deps = []int{F(u, s-1)}
			}
			b := core.Task{ID: B(u, s), Kind: core.TaskBackward, Unit: u, Device: devs[s], Ops: []int{s}, Deps: []int{F(u, s)}}
			if s < P-1 {
				b.Deps = append(b.Deps, B(u, s+1))
			}
			tasks[F(u, s)], tasks[B(u, s)] = f, b
		}
	}
	// Each device's order is a chain of explicit deps (every task on its
	// own stream, so plan order adds nothing).
	order := make([][]int, P)
	for s := range P {
		if !oneF1B {
			for u := range m {
				order[s] = append(order[s], F(u, s))
			}
			for u := range m {
				order[s] = append(order[s], B(u, s))
			}
			continue
		}
		warm := min(P-s, m)
		for u := range warm {
			order[s] = append(order[s], F(u, s))
		}
		next := warm
		for u := range m {
			order[s] = append(order[s], B(u, s))
			if next < m {
				order[s] = append(order[s], F(next, s))
				next++
			}
		}
	}
	for s := range P {
		for k := 1; k < len(order[s]); k++ {
			t := &tasks[order[s][k]]
			t.Deps = append(t.Deps, order[s][k-1])
		}
	}
	for i := range tasks {
		tasks[i].Stream = i
	}
	p.Tasks = tasks
	var stepDeps []int
	for s := range P {
		last := order[s][len(order[s])-1]
		if s == 0 {
			stepDeps = append(stepDeps, last)
			continue
		}
		id := len(p.Tasks)
		p.Tasks = append(p.Tasks, core.Task{ID: id, Kind: core.TaskReduceGrads, Unit: -1, Device: devs[0], Stream: 1000, From: devs[s], Deps: []int{last}})
		stepDeps = append(stepDeps, id)
	}
	p.Tasks = append(p.Tasks, core.Task{ID: len(p.Tasks), Kind: core.TaskStep, Unit: -1, Device: devs[0], Stream: 1000, Deps: stepDeps})
	return p
}

// free is a cluster where moving data costs nothing.
func free(n int) *sim.Cluster {
	return sim.CPU(n, sim.DeviceModel{GFLOPS: 1, MemGBps: 1}, sim.Link{})
}

func TestPipelineTiming(t *testing.T) {
	const tf, tb = 3 * time.Millisecond, 5 * time.Millisecond
	for _, c := range []struct {
		name   string
		depth  int
		m      int
		oneF1B bool
	}{
		{"gpipe/depth=2/m=1", 2, 1, false},
		{"gpipe/depth=2/m=4", 2, 4, false},
		{"gpipe/depth=2/m=8", 2, 8, false},
		{"gpipe/depth=4/m=6", 4, 6, false},
		{"1f1b/depth=2/m=4", 2, 4, true},
		{"1f1b/depth=3/m=5", 3, 5, true},
		{"1f1b/depth=4/m=8", 4, 8, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := chain(c.depth, devIDs(c.depth)...)
			p := pipeline(w, c.m, c.oneF1B)
			if err := p.Validate(w); err != nil {
				t.Fatal(err)
			}
			r, err := sim.Simulate(p, w, flat(w, tf, tb, 0, 0), free(c.depth))
			if err != nil {
				t.Fatal(err)
			}
			want := time.Duration(c.m+c.depth-1) * (tf + tb)
			if r.Iteration != want {
				t.Errorf("iteration %v, want (m+depth-1)·T = %v", r.Iteration, want)
			}
			bubble := float64(c.depth-1) / float64(c.m+c.depth-1)
			if math.Abs(r.Bubble-bubble) > 1e-9 {
				t.Errorf("bubble %.6f, want (depth-1)/(m+depth-1) = %.6f", r.Bubble, bubble)
			}
			for _, d := range devIDs(c.depth) {
				if r.Busy[d] != time.Duration(c.m)*(tf+tb) {
					t.Errorf("%s busy %v, want m·T = %v", d, r.Busy[d], time.Duration(c.m)*(tf+tb))
				}
			}
		})
	}
}

// TestInFlight checks the in-flight counts: GPipe holds every micro-batch
// on every stage, 1F1B holds k_s = depth − s on stage s (GraphPipe's
// longest path to a sink), and a lower limit is reported, or deadlocks
// when units must wait for a slot.
func TestInFlight(t *testing.T) {
	const depth, m = 3, 6
	w := chain(depth, devIDs(depth)...)
	ks := func(dev core.DeviceID, ops []int) int { return depth - ops[0] }
	for _, c := range []struct {
		name    string
		oneF1B  bool
		limit   func(core.DeviceID, []int) int
		block   bool
		want    []int // max in flight per stage
		wantErr error
	}{
		{name: "gpipe", want: []int{m, m, m}},
		{name: "1f1b", oneF1B: true, want: []int{3, 2, 1}},
		{name: "1f1b/k_s", oneF1B: true, limit: ks, want: []int{3, 2, 1}},
		{name: "1f1b/block/k_s", oneF1B: true, limit: ks, block: true, want: []int{3, 2, 1}},
		{name: "gpipe/k_s", limit: ks, want: []int{m, m, m}, wantErr: sim.ErrInFlight},
		{name: "gpipe/block/k_s", limit: ks, block: true, wantErr: sim.ErrDeadlock},
		{name: "1f1b/block/1", oneF1B: true, limit: func(core.DeviceID, []int) int { return 1 }, block: true, wantErr: sim.ErrDeadlock},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := pipeline(w, m, c.oneF1B)
			r, err := sim.SimulateWith(p, w, flat(w, time.Millisecond, 2*time.Millisecond, 100, 0), free(depth),
				sim.Options{InFlightLimit: c.limit, BlockOnLimit: c.block})
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("error %v, want %v", err, c.wantErr)
			}
			if c.want == nil {
				return
			}
			if len(r.Stages) != depth {
				t.Fatalf("%d stages, want %d", len(r.Stages), depth)
			}
			for s, st := range r.Stages {
				if st.MaxInFlight != c.want[s] || st.Units != m || st.Device != devIDs(depth)[s] {
					t.Errorf("stage %d: %+v, want %d in flight of %d units", s, st, c.want[s], m)
				}
				// Peak: one unit's 100 bytes per unit in flight.
				if got := r.PeakMem[st.Device]; got != int64(100*c.want[s]) {
					t.Errorf("stage %d: peak %d bytes, want %d", s, got, 100*c.want[s])
				}
			}
		})
	}
}

func TestDeadlockNamesTasks(t *testing.T) {
	w := chain(2, "cpu:0")
	base := func() *core.Plan {
		return &core.Plan{Home: "cpu:0", Units: []core.Unit{{ID: 0, Targets: []int32{0}, LossWeight: 1}},
			Tasks: []core.Task{
				{ID: 0, Kind: core.TaskForward, Unit: 0, Device: "cpu:0", OpLo: 0, OpHi: 2},
				{ID: 1, Kind: core.TaskBackward, Unit: 0, Device: "cpu:0", OpLo: 0, OpHi: 2, Deps: []int{0}},
				{ID: 2, Kind: core.TaskStep, Unit: -1, Device: "cpu:0", Deps: []int{1}},
			}}
	}
	for _, c := range []struct {
		name  string
		edit  func(p *core.Plan)
		names []string
	}{
		{"dep cycle", func(p *core.Plan) { p.Tasks[0].Deps = []int{1} }, []string{"task 0", "task 1", "task 2"}},
		{"stream order", func(p *core.Plan) {
			// The step first on the stream, waiting for the backward behind it.
			p.Tasks[0], p.Tasks[2] = p.Tasks[2], p.Tasks[0]
			p.Tasks[0].ID, p.Tasks[2].ID = 0, 2
			p.Tasks[0].Deps, p.Tasks[1].Deps = []int{1}, []int{2}
		}, []string{"task 0 (step", "waits for task(s) 1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := base()
			c.edit(p)
			_, err := sim.Simulate(p, w, flat(w, time.Millisecond, time.Millisecond, 0, 0), free(1))
			if !errors.Is(err, sim.ErrDeadlock) {
				t.Fatalf("error %v, want a deadlock", err)
			}
			for _, n := range c.names {
				if !strings.Contains(err.Error(), n) {
					t.Errorf("error %q does not name %q", err, n)
				}
			}
		})
	}
}

func TestMissingDependency(t *testing.T) {
	w := chain(2, "cpu:0", "cpu:1")
	p := pipeline(w, 1, false)
	p.Tasks[1].Deps = nil // stage 1's forward no longer waits for stage 0's
	// Stage 0 takes long, so stage 1 would start before its input exists.
	_, err := sim.Simulate(p, w, flat(w, time.Millisecond, time.Millisecond, 0, 0), free(2))
	if err == nil || !strings.Contains(err.Error(), "lacks a dependency") {
		t.Fatalf("error %v, want a missing dependency", err)
	}
}

// TestTransfers checks the copies of a value crossing devices and of its
// gradient coming back, synchronous (the CPU executor) and prefetched on
// a copy engine (GPU runtimes), with exact times.
func TestTransfers(t *testing.T) {
	const (
		tf, tb = 2 * time.Millisecond, 3 * time.Millisecond
		out    = 1_000_000 // bytes: 1 ms at 1 GB/s
		lat    = 10 * time.Microsecond
	)
	w := chain(2, devIDs(2)...)
	link := sim.Link{GBps: 1, Latency: lat}
	xfer := time.Millisecond + lat
	for _, c := range []struct {
		name string
		sync bool
		m    int
		want time.Duration
	}{
		// One unit: F0, copy, F1, B1, copy back, B0; the zero-byte
		// gradient reduction pays the latency (these ops read no
		// parameters, so the step broadcasts nothing).
		{"sync/m=1", true, 1, tf + xfer + tf + tb + lat + xfer + tb},
		// Prefetched copies are the same on the critical path for one unit.
		{"prefetch/m=1", false, 1, tf + xfer + tf + tb + xfer + tb},
		// Two units, GPipe: stage 1's copy of unit 1 overlaps its compute
		// of unit 0 only when prefetched.
		{"prefetch/m=2", false, 2, tf + xfer + tf + tf + tb + tb + xfer + tb},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := sim.CPU(2, sim.DeviceModel{MemGBps: 1}, link)
			cl.SyncTransfers = c.sync
			p := pipeline(w, c.m, false)
			r, err := sim.Simulate(p, w, flat(w, tf, tb, 0, out), cl)
			if err != nil {
				t.Fatal(err)
			}
			if r.Iteration != c.want {
				t.Errorf("iteration %v, want %v", r.Iteration, c.want)
			}
			if want := int64(2 * c.m * out); r.BytesMoved != want {
				t.Errorf("moved %d bytes, want %d", r.BytesMoved, want)
			}
			var buf bytes.Buffer
			if err := r.Trace.WriteChrome(&buf); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(buf.String(), "transfer") {
				t.Error("the trace shows no transfer")
			}
		})
	}
}

// TestHostCores: two devices computing at once on one shared core take
// twice as long.
func TestHostCores(t *testing.T) {
	const T = 4 * time.Millisecond
	w := chain(1, devIDs(2)...)
	p := &core.Plan{Home: "cpu:0", Units: []core.Unit{{ID: 0, Targets: []int32{0}, LossWeight: 0.5}, {ID: 1, LossWeight: 0.5}},
		Tasks: []core.Task{
			{ID: 0, Kind: core.TaskForward, Unit: 0, Device: "cpu:0", OpLo: 0, OpHi: 1},
			{ID: 1, Kind: core.TaskBackward, Unit: 0, Device: "cpu:0", OpLo: 0, OpHi: 1, Deps: []int{0}},
			{ID: 2, Kind: core.TaskForward, Unit: 1, Device: "cpu:1", Stream: 1, OpLo: 0, OpHi: 1},
			{ID: 3, Kind: core.TaskBackward, Unit: 1, Device: "cpu:1", Stream: 1, OpLo: 0, OpHi: 1, Deps: []int{2}},
			{ID: 4, Kind: core.TaskReduceGrads, Unit: -1, Device: "cpu:0", Stream: 2, From: "cpu:1", Deps: []int{3}},
			{ID: 5, Kind: core.TaskStep, Unit: -1, Device: "cpu:0", Stream: 2, Deps: []int{1, 4}},
		}}
	for _, c := range []struct {
		cores float64
		want  time.Duration
	}{{0, 2 * T}, {2, 2 * T}, {1, 4 * T}, {1.5, 4 * T * 2 / 3}} {
		t.Run(fmt.Sprint(c.cores), func(t *testing.T) {
			cl := free(2)
			cl.HostCores = c.cores
			r, err := sim.Simulate(p, w, flat(w, T, T, 0, 0), cl)
			if err != nil {
				t.Fatal(err)
			}
			if d := r.Iteration - c.want; d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("iteration %v, want %v", r.Iteration, c.want)
			}
		})
	}
}

func TestSimulateErrors(t *testing.T) {
	w := chain(2, "cpu:0")
	p := pipeline(chain(1, "cpu:0"), 1, false)
	prof := flat(w, time.Millisecond, time.Millisecond, 0, 0)
	for _, c := range []struct {
		name string
		run  func() error
		want string
	}{
		{"unknown device", func() error {
			_, err := sim.Simulate(p, w, prof, sim.CPU(1, sim.DeviceModel{}, sim.Link{}))
			if err != nil {
				return err
			}
			q := pipeline(chain(2, "cpu:0", "cpu:1"), 1, false)
			_, err = sim.Simulate(q, w, prof, sim.CPU(1, sim.DeviceModel{}, sim.Link{}))
			return err
		}, "does not have"},
		{"profile lacks op", func() error {
			q := pipeline(w, 1, false)
			_, err := sim.Simulate(q, chain(3, "cpu:0", "cpu:1", "cpu:2"), prof, free(3))
			return err
		}, "no ops named"},
		{"op out of range", func() error {
			q := pipeline(w, 1, false)
			q.Tasks[0].Ops = []int{7}
			_, err := sim.Simulate(q, w, prof, free(2))
			return err
		}, "outside the model"},
		{"bad dep", func() error {
			q := pipeline(w, 1, false)
			q.Tasks[0].Deps = []int{99}
			_, err := sim.Simulate(q, w, prof, free(2))
			return err
		}, "does not exist"},
		{"profile of a larger model", func() error {
			one := chain(1, "cpu:0")
			_, err := sim.Simulate(pipeline(one, 1, false), one, prof, free(1))
			return err
		}, `the profile (model "chain") has 2 ops, the workload's model "chain" 1: its ops op1 are not the workload's: it profiles another configuration of the model`},
		{"profile of another size", func() error {
			q := *prof
			q.Ops = append([]sim.OpProfile(nil), prof.Ops...)
			q.Ops[1].WeightBytes = 4096
			v := chain(2, "cpu:0")
			v.Ops[1].Cost.WeightBytes = 8192
			_, err := sim.Simulate(p, v, &q, free(2))
			return err
		}, "op op1 reads 4.0 KiB of parameters, the workload's (model \"chain\") 8.0 KiB"},
		{"NaN speedup", func() error {
			c := free(2)
			c.Devices[1].Speedup = math.NaN()
			_, err := sim.Simulate(pipeline(w, 1, false), w, nil, c)
			return err
		}, "cpu:1: speedup NaN"},
		{"tiny speedup", func() error {
			c := free(2)
			c.Devices[0].Speedup = 1e-300
			_, err := sim.Simulate(pipeline(w, 1, false), w, prof, c)
			return err
		}, "cpu:0: speedup 1e-300"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.run()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

// TestStreamOverlap: a compute-bound and a memory-bound task on two
// streams of one device overlap by StreamOverlap; two of one kind share.
func TestStreamOverlap(t *testing.T) {
	const T = 6 * time.Millisecond
	w := &core.Workload{ModelName: "two", Dims: core.Dims{Nodes: 1}, Batch: []int32{0},
		Ops: []core.OpInfo{{Index: 0, Name: "gemm", Kind: core.KindDense}, {Index: 1, Name: "spmm", Kind: core.KindGraph}, {Index: 2, Name: "gemm2", Kind: core.KindDense}}}
	pt := []sim.Point{{Rows: 1, Fwd: T}, {Rows: 2, Fwd: T}}
	prof := &sim.Profile{Model: "two", Ops: []sim.OpProfile{{Name: "gemm", Kind: core.KindDense, Points: pt},
		{Name: "spmm", Kind: core.KindGraph, Points: pt}, {Name: "gemm2", Kind: core.KindDense, Points: pt}}}
	// Unit 0 runs op a on stream 0, unit 1 op b on stream 1 (a
	// BLAD-style split of one device's work over two streams).
	plan := func(a, b int) *core.Plan {
		return &core.Plan{Home: "cpu:0", Units: []core.Unit{{ID: 0, Targets: []int32{0}, LossWeight: 1}, {ID: 1}},
			Tasks: []core.Task{
				{ID: 0, Kind: core.TaskForward, Unit: 0, Device: "cpu:0", Stream: 0, Ops: []int{a}},
				{ID: 1, Kind: core.TaskForward, Unit: 1, Device: "cpu:0", Stream: 1, Ops: []int{b}},
				{ID: 2, Kind: core.TaskBackward, Unit: 0, Device: "cpu:0", Stream: 0, Ops: []int{a}, Deps: []int{0}},
				{ID: 3, Kind: core.TaskBackward, Unit: 1, Device: "cpu:0", Stream: 1, Ops: []int{b}, Deps: []int{1}},
				{ID: 4, Kind: core.TaskStep, Unit: -1, Device: "cpu:0", Stream: 2, Deps: []int{2, 3}},
			}}
	}
	for _, c := range []struct {
		name     string
		overlap  float64
		a, b     int
		want     time.Duration
		overlaps time.Duration
	}{
		{"exclusive", 0, 0, 1, 2 * T, 0},
		{"perfect", 1, 0, 1, T, T},
		{"half", 0.5, 0, 1, 4 * T / 3, 4 * T / 3},
		{"same kind shares", 1, 0, 2, 2 * T, 2 * T},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := free(1)
			cl.Devices[0].StreamOverlap = c.overlap
			r, err := sim.Simulate(plan(c.a, c.b), w, prof, cl)
			if err != nil {
				t.Fatal(err)
			}
			near := func(a, b time.Duration) bool { return a-b < time.Microsecond && b-a < time.Microsecond }
			if !near(r.Iteration, c.want) || !near(r.Overlap["cpu:0"], c.overlaps) || !near(r.Busy["cpu:0"], c.want) {
				t.Errorf("iteration %v, overlap %v, busy %v; want %v, %v, %v", r.Iteration, r.Overlap["cpu:0"], r.Busy["cpu:0"], c.want, c.overlaps, c.want)
			}
		})
	}
}

// TestExecutorTime: a profile's Handoff delays a task whose last
// predecessor ran on another stream (the step on its own stream after the
// backward; a pipeline's next stage), never one that follows its own
// stream; HandoffBusy replaces it where that predecessor's stream goes
// straight on with its next task; IterationOverhead adds to the
// iteration once; a profile without them simulates as before.
func TestExecutorTime(t *testing.T) {
	const tf, tb = 3 * time.Millisecond, 5 * time.Millisecond
	const h, o = 70 * time.Microsecond, 400 * time.Microsecond
	w := chain(2, "cpu:0")
	plan := func(stepStream int) *core.Plan {
		return &core.Plan{Scheduler: "seq", Home: "cpu:0", Units: []core.Unit{{ID: 0, Targets: []int32{0}, LossWeight: 1}},
			Tasks: []core.Task{
				{ID: 0, Kind: core.TaskForward, Unit: 0, Device: "cpu:0", OpLo: 0, OpHi: 2},
				{ID: 1, Kind: core.TaskBackward, Unit: 0, Device: "cpu:0", OpLo: 0, OpHi: 2, Deps: []int{0}},
				{ID: 2, Kind: core.TaskStep, Unit: -1, Device: "cpu:0", Stream: stepStream, Deps: []int{1}},
			}}
	}
	iter := func(p *core.Plan, w *core.Workload, prof *sim.Profile, c *sim.Cluster) time.Duration {
		t.Helper()
		if err := p.Validate(w); err != nil {
			t.Fatal(err)
		}
		r, err := sim.Simulate(p, w, prof, c)
		if err != nil {
			t.Fatal(err)
		}
		return r.Iteration
	}
	bare := flat(w, tf, tb, 0, 0)
	timed := flat(w, tf, tb, 0, 0)
	timed.Handoff, timed.IterationOverhead = h, o
	for _, c := range []struct {
		stream int
		extra  time.Duration
	}{{0, o}, {1, h + o}} {
		base, got := iter(plan(c.stream), w, bare, free(1)), iter(plan(c.stream), w, timed, free(1))
		if base != 2*(tf+tb) || got != base+c.extra {
			t.Errorf("step on stream %d: %v without the executor's time, %v with; want %v and %v more", c.stream, base, got, 2*(tf+tb), c.extra)
		}
	}
	// A 2-stage GPipe pipeline of one micro-batch (every task on a stream
	// of its own): forward to forward, to the second stage's backward and
	// to the first's each wait for another stream. The step follows the
	// reduction from the second stage on its own stream, which the first
	// device runs after its backward: no handoff there.
	w2 := chain(2, devIDs(2)...)
	p := pipeline(w2, 1, false)
	bare2, timed2 := flat(w2, tf, tb, 0, 0), flat(w2, tf, tb, 0, 0)
	timed2.Handoff, timed2.IterationOverhead = h, o
	if base, got := iter(p, w2, bare2, free(2)), iter(p, w2, timed2, free(2)); got != base+3*h+o {
		t.Errorf("pipeline: %v, with the executor's time %v; want %v more", base, got, 3*h+o)
	}
	// Two micro-batches in GPipe's order with each device's tasks on one
	// stream, as the executor runs a stage (3 forwards and 3 backwards on
	// the critical path bare). The first stage goes straight on with its
	// second forward after its first, and the second stage with its second
	// backward after its first, so the tasks they wake (the second stage's
	// first forward, the first stage's first backward) start HandoffBusy
	// later. With HandoffBusy that delays the reduction from the second
	// stage past the first stage's last backward, after which the step
	// waits a Handoff for it; with Handoff alone the reduction runs after
	// that backward on the step's stream, and the step follows at once.
	p = pipeline(w2, 2, false)
	for i := range p.Tasks {
		if p.Tasks[i].Kind == core.TaskForward || p.Tasks[i].Kind == core.TaskBackward {
			p.Tasks[i].Stream = 0
		}
	}
	const hb = 300 * time.Microsecond
	busy := flat(w2, tf, tb, 0, 0)
	busy.Handoff, busy.HandoffBusy, busy.IterationOverhead = h, hb, o
	base, got, idle := iter(p, w2, bare2, free(2)), iter(p, w2, busy, free(2)), iter(p, w2, timed2, free(2))
	if base != 3*tf+3*tb || got != base+2*hb+h+o || idle != base+2*h+o {
		t.Errorf("two micro-batches: %v bare, %v with busy handoffs, %v with idle ones only; want %v, %v more and %v more",
			base, got, idle, 3*tf+3*tb, 2*hb+h+o, 2*h+o)
	}
}

// TestPriorityOrdersDevice: of two tasks ready at once on one device, the
// one of higher core.Task.Priority goes first; equal, plan order decides.
func TestPriorityOrdersDevice(t *testing.T) {
	const T = 6 * time.Millisecond
	w := &core.Workload{ModelName: "two", Dims: core.Dims{Nodes: 1}, Batch: []int32{0},
		Ops: []core.OpInfo{{Index: 0, Name: "a", Kind: core.KindDense}, {Index: 1, Name: "b", Kind: core.KindDense}}}
	pt := []sim.Point{{Rows: 1, Fwd: T, Bwd: T}, {Rows: 2, Fwd: T, Bwd: T}}
	prof := &sim.Profile{Model: "two", Ops: []sim.OpProfile{{Name: "a", Kind: core.KindDense, Points: pt}, {Name: "b", Kind: core.KindDense, Points: pt}}}
	plan := func(p0, p1 int) *core.Plan {
		return &core.Plan{Home: "cpu:0", Units: []core.Unit{{ID: 0, Targets: []int32{0}, LossWeight: 1}, {ID: 1}},
			Tasks: []core.Task{
				{ID: 0, Kind: core.TaskForward, Unit: 0, Device: "cpu:0", Stream: 0, Ops: []int{0}, Priority: p0},
				{ID: 1, Kind: core.TaskForward, Unit: 1, Device: "cpu:0", Stream: 1, Ops: []int{1}, Priority: p1},
				{ID: 2, Kind: core.TaskBackward, Unit: 0, Device: "cpu:0", Stream: 0, Ops: []int{0}, Deps: []int{0}, Priority: p0},
				{ID: 3, Kind: core.TaskBackward, Unit: 1, Device: "cpu:0", Stream: 1, Ops: []int{1}, Deps: []int{1}, Priority: p1},
				{ID: 4, Kind: core.TaskStep, Unit: -1, Device: "cpu:0", Stream: 2, Deps: []int{2, 3}},
			}}
	}
	for _, c := range []struct {
		name   string
		p0, p1 int
		want   []string // the device's spans in order
	}{
		{"equal: plan order", 0, 0, []string{"fwd u0", "fwd u1", "bwd u0", "bwd u1", "optimizer step"}},
		{"unit 1 first", -1, 0, []string{"fwd u1", "bwd u1", "fwd u0", "bwd u0", "optimizer step"}},
		{"unit 0 first", 3, 2, []string{"fwd u0", "bwd u0", "fwd u1", "bwd u1", "optimizer step"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := sim.Simulate(plan(c.p0, c.p1), w, prof, free(1))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range r.Trace.Events {
				if e.Device == "cpu:0" && (e.Cat == "forward" || e.Cat == "backward" || e.Cat == "step") {
					got = append(got, strings.Join(strings.Fields(e.Name)[:2], " "))
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("order %q, want %q", got, c.want)
			}
		})
	}
}
