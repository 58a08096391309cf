package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fakeWorkload has 3 ops, a batch of 6 nodes and devices d0, d1.
func fakeWorkload() *Workload {
	return &Workload{
		Ops:     []OpInfo{{Index: 0, Name: "a"}, {Index: 1, Name: "b", Deps: []int{0}}, {Index: 2, Name: "c", Deps: []int{1}}},
		Batch:   []int32{0, 1, 2, 3, 4, 5},
		Devices: []DeviceInfo{{ID: "d0", MemCap: 1000}, {ID: "d1"}},
	}
}

// twoUnitPlan splits the batch over d0 (home) and d1.
func twoUnitPlan() *Plan {
	return &Plan{
		Scheduler: "test", Home: "d0",
		Units: []Unit{{ID: 0, Targets: []int32{0, 1, 2}, LossWeight: 0.5}, {ID: 1, Targets: []int32{3, 4, 5}, LossWeight: 0.5}},
		Tasks: []Task{
			{ID: 0, Kind: TaskForward, Unit: 0, Device: "d0", OpLo: 0, OpHi: 3},
			{ID: 1, Kind: TaskBackward, Unit: 0, Device: "d0", OpLo: 0, OpHi: 3, Deps: []int{0}},
			{ID: 2, Kind: TaskForward, Unit: 1, Device: "d1", OpLo: 0, OpHi: 2},
			{ID: 3, Kind: TaskForward, Unit: 1, Device: "d1", OpLo: 2, OpHi: 3, Deps: []int{2}},
			{ID: 4, Kind: TaskBackward, Unit: 1, Device: "d1", OpLo: 0, OpHi: 3, Deps: []int{3}},
			{ID: 5, Kind: TaskReduceGrads, Unit: -1, Device: "d0", From: "d1", Deps: []int{4}},
			{ID: 6, Kind: TaskStep, Unit: -1, Device: "d0", Deps: []int{1, 5}},
		},
	}
}

func TestPlanValidate(t *testing.T) {
	w := fakeWorkload()
	if err := twoUnitPlan().Validate(w); err != nil {
		t.Fatalf("valid plan rejected: %v", err)
	}
	cases := []struct {
		name   string
		mutate func(p *Plan)
		want   string
	}{
		{"lost node", func(p *Plan) { p.Units[1].Targets = []int32{3, 4} }, "in no unit"},
		{"duplicated node", func(p *Plan) { p.Units[1].Targets = []int32{3, 4, 5, 0} }, "more than one unit"},
		{"foreign node", func(p *Plan) { p.Units[1].Targets = []int32{3, 4, 5, 99} }, "not in the batch"},
		{"weights", func(p *Plan) { p.Units[0].LossWeight = 0.7 }, "sum to"},
		{"unknown device", func(p *Plan) { p.Tasks[2].Device = "gpu:7" }, "unknown device"},
		{"unknown exclusive device", func(p *Plan) { p.Exclusive = []DeviceID{"gpu:7"} }, `exclusive device "gpu:7"`},
		{"cycle", func(p *Plan) { p.Tasks[0].Deps = []int{1} }, "cycle"},
		{"stream deadlock", func(p *Plan) { p.Tasks[3].Deps = []int{4} }, "cycle"},
		{"op twice", func(p *Plan) { p.Tasks[3].OpLo = 1 }, "want once"},
		{"op missing", func(p *Plan) { p.Tasks[3].OpHi = 2; p.Tasks[3].OpLo = 1; p.Tasks[2].OpHi = 1 }, "never runs op 2"},
		{"op list and range", func(p *Plan) { p.Tasks[3].Ops = []int{2} }, "both an op list and an op range"},
		{"op list order", func(p *Plan) { p.Tasks[0].OpLo, p.Tasks[0].OpHi, p.Tasks[0].Ops = 0, 0, []int{2, 0, 1} }, "not ascending"},
		{"op range", func(p *Plan) { p.Tasks[3].OpHi = 9 }, "op range"},
		{"backward away from activations", func(p *Plan) { p.Tasks[3].Device = "d0" }, "where the activations are"},
		{"backward before forward", func(p *Plan) { p.Tasks[4].Deps = nil; p.Tasks[4].Stream = 1 }, "does not wait for forward"},
		{"missing reduction", func(p *Plan) { p.Tasks[5].Kind = TaskStep }, "optimizer steps"},
		{"step early", func(p *Plan) { p.Tasks[6].Deps = []int{1}; p.Tasks[6].Stream = 2 }, "does not wait"},
		{"dangling dep", func(p *Plan) { p.Tasks[1].Deps = []int{42} }, "does not exist"},
		{"over memory", func(p *Plan) { p.MemEstimate = map[DeviceID]int64{"d0": 5000} }, "over its cap"},
		{"negative memory estimate", func(p *Plan) { p.MemEstimate = map[DeviceID]int64{"d1": -1} }, "memory estimate for d1 is -1 bytes"},
		{"memory estimate off the devices", func(p *Plan) { p.MemEstimate = map[DeviceID]int64{"gpu:7": 100} }, `memory estimate names device "gpu:7"`},
		{"home", func(p *Plan) { p.Home = "nowhere" }, "home device"},
		{"NaN metric", func(p *Plan) { p.Metrics = map[string]float64{"stages": 2, "speedup": math.NaN()} }, `metric "speedup" is NaN`},
		{"infinite metric", func(p *Plan) { p.Metrics = map[string]float64{"iter_ms": math.Inf(1)} }, `metric "iter_ms" is +Inf`},
		{"units without tasks", func(p *Plan) {
			p.Units = append(p.Units, Unit{ID: 2}, Unit{ID: 3}, Unit{ID: 4})
		}, "5 units but only 3 forward tasks"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := twoUnitPlan()
			c.mutate(p)
			err := p.Validate(w)
			if !errors.Is(err, ErrInvalidPlan) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Validate = %v; want ErrInvalidPlan mentioning %q", err, c.want)
			}
		})
	}
}

// pipelinePlan runs unit 0's ops a, c on d0 and b on d1 (a fork and a
// join across devices), unit 1 on d1.
func pipelinePlan() *Plan {
	return &Plan{
		Scheduler: "test", Home: "d0",
		Units: []Unit{{ID: 0, Targets: []int32{0, 1, 2}, LossWeight: 0.5}, {ID: 1, Targets: []int32{3, 4, 5}, LossWeight: 0.5}},
		Tasks: []Task{
			{ID: 0, Kind: TaskForward, Unit: 0, Device: "d0", Ops: []int{0}},
			{ID: 1, Kind: TaskForward, Unit: 0, Device: "d1", Ops: []int{1}, Deps: []int{0}},
			{ID: 2, Kind: TaskForward, Unit: 0, Device: "d0", Ops: []int{2}, Deps: []int{0, 1}},
			{ID: 3, Kind: TaskBackward, Unit: 0, Device: "d0", Ops: []int{2}, Deps: []int{2}},
			{ID: 4, Kind: TaskBackward, Unit: 0, Device: "d1", Ops: []int{1}, Deps: []int{3}},
			{ID: 5, Kind: TaskBackward, Unit: 0, Device: "d0", Ops: []int{0}, Deps: []int{4}},
			{ID: 6, Kind: TaskForward, Unit: 1, Device: "d1", OpLo: 0, OpHi: 3, Stream: 1},
			{ID: 7, Kind: TaskBackward, Unit: 1, Device: "d1", OpLo: 0, OpHi: 3, Stream: 1, Deps: []int{6}},
			{ID: 8, Kind: TaskReduceGrads, Unit: -1, Device: "d0", From: "d1", Deps: []int{4, 7}},
			{ID: 9, Kind: TaskStep, Unit: -1, Device: "d0", Deps: []int{5, 8}},
		},
	}
}

func TestPipelinePlanValidate(t *testing.T) {
	w := fakeWorkload()
	w.Ops[2].Deps = []int{0, 1} // c joins a and b
	if err := pipelinePlan().Validate(w); err != nil {
		t.Fatalf("valid pipeline plan rejected: %v", err)
	}
	for _, c := range []struct {
		name   string
		mutate func(p *Plan)
		want   string
	}{
		{"join before input", func(p *Plan) { p.Tasks[2].Deps = []int{0} }, "which produces its input"},
		{"gradient not yet sent", func(p *Plan) { p.Tasks[4].Deps = []int{1}; p.Tasks[4].Stream = 3 }, "sends it the gradient"},
		{"reduction misses a device's work", func(p *Plan) { p.Tasks[8].Deps = []int{7}; p.Tasks[8].Stream = 2 }, "gradient reduction from d1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := pipelinePlan()
			c.mutate(p)
			err := p.Validate(w)
			if !errors.Is(err, ErrInvalidPlan) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Validate = %v; want ErrInvalidPlan mentioning %q", err, c.want)
			}
		})
	}
}

func TestPlanJSONRoundTrip(t *testing.T) {
	p := twoUnitPlan()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"kind":"reduce_grads"`)) {
		t.Errorf("task kinds should marshal by name: %s", b)
	}
	q, err := DecodePlan(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Validate(fakeWorkload()); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodePlan([]byte(`{"tasks":[{"kind":"teleport"}]}`)); !errors.Is(err, ErrInvalidPlan) {
		t.Errorf("unknown kind: %v", err)
	}
	if _, err := DecodePlan([]byte(`{"units":[],"surprise":1}`)); !errors.Is(err, ErrInvalidPlan) {
		t.Errorf("unknown field: %v", err)
	}
}

// FuzzDecodePlan feeds arbitrary bytes to the plan decoder and validator:
// they must return errors, never panic.
func FuzzDecodePlan(f *testing.F) {
	b, _ := json.Marshal(twoUnitPlan())
	f.Add(b)
	f.Add([]byte(`{"home":"d0","units":[{"id":0,"targets":[0,1,2,3,4,5],"loss_weight":1}],"tasks":[{"id":0,"kind":"step","unit":-1,"device":"d0","deps":[0]}]}`))
	f.Add([]byte(`{"tasks":[{"id":0,"kind":"forward","unit":5,"device":"d0","op_lo":-3,"op_hi":99}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodePlan(b)
		if err != nil {
			return
		}
		_ = p.Validate(fakeWorkload())
	})
}

func TestTraceChrome(t *testing.T) {
	tr := &Trace{PeakMem: map[DeviceID]int64{"cpu:0": 1234}, Wall: 5 * time.Millisecond, BytesMoved: 64}
	tr.Events = append(tr.Events,
		TraceEvent{Name: "fwd", Cat: "forward", Device: "cpu:0", Start: time.Millisecond, Dur: 2 * time.Millisecond, Unit: 0},
		TraceEvent{Name: "xfer", Cat: "transfer", Device: "cpu:1", Stream: 1, Start: 0, Dur: time.Millisecond, Unit: -1, Bytes: 64})
	var buf bytes.Buffer
	if err := tr.WriteChrome(&buf); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name string  `json:"name"`
			Ph   string  `json:"ph"`
			Ts   float64 `json:"ts"`
			Dur  float64 `json:"dur"`
			Pid  int     `json:"pid"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	var x, m, c int
	for _, e := range doc.TraceEvents {
		switch e.Ph {
		case "X":
			x++
			if e.Name == "fwd" && (e.Ts != 1000 || e.Dur != 2000) {
				t.Errorf("fwd event at %v for %v µs", e.Ts, e.Dur)
			}
		case "M":
			m++
		case "C":
			c++
		}
	}
	if x != 2 || m < 4 || c != 1 {
		t.Errorf("got %d spans, %d metadata, %d counters", x, m, c)
	}
	var all Trace
	all.Append(tr, time.Second)
	all.Append(tr, 2*time.Second)
	if len(all.Events) != 4 || all.Events[2].Start != 2*time.Second+time.Millisecond || all.BytesMoved != 128 {
		t.Errorf("Append: %+v", all)
	}
}

// BenchmarkValidate: a 1M-node batch in 10k units, one stream per unit
// pair of tasks plus the step (the plugin round-trip workload).
func BenchmarkValidate(b *testing.B) {
	const nodes, units = 1 << 20, 10000
	w := &Workload{Ops: []OpInfo{{Index: 0, Name: "a"}}, Devices: []DeviceInfo{{ID: "d0"}}}
	for i := 0; i < nodes; i++ {
		w.Batch = append(w.Batch, int32(i))
	}
	p := &Plan{Home: "d0"}
	var deps []int
	for u := 0; u < units; u++ {
		lo, hi := u*nodes/units, (u+1)*nodes/units
		p.Units = append(p.Units, Unit{ID: u, Targets: w.Batch[lo:hi], LossWeight: float64(hi-lo) / nodes})
		f := len(p.Tasks)
		p.Tasks = append(p.Tasks, Task{ID: f, Kind: TaskForward, Unit: u, Device: "d0", OpLo: 0, OpHi: 1},
			Task{ID: f + 1, Kind: TaskBackward, Unit: u, Device: "d0", OpLo: 0, OpHi: 1, Deps: []int{f}})
		deps = append(deps, f+1)
	}
	p.Tasks = append(p.Tasks, Task{ID: len(p.Tasks), Kind: TaskStep, Unit: -1, Device: "d0", Deps: deps})
	for b.Loop() {
		if err := p.Validate(w); err != nil {
			b.Fatal(err)
		}
	}
}

// widePlan is units units of one op on d0, each a forward and a backward
// task, then the step: 2*units+1 tasks.
func widePlan(units int) (*Workload, *Plan) {
	w := &Workload{Ops: []OpInfo{{Index: 0, Name: "a"}}, Devices: []DeviceInfo{{ID: "d0"}}}
	p := &Plan{Home: "d0"}
	var deps []int
	for u := range units {
		w.Batch = append(w.Batch, int32(u))
		p.Units = append(p.Units, Unit{ID: u, Targets: w.Batch[u : u+1], LossWeight: 1 / float64(units)})
		f := len(p.Tasks)
		p.Tasks = append(p.Tasks, Task{ID: f, Kind: TaskForward, Unit: u, Device: "d0", OpLo: 0, OpHi: 1},
			Task{ID: f + 1, Kind: TaskBackward, Unit: u, Device: "d0", OpLo: 0, OpHi: 1, Deps: []int{f}})
		deps = append(deps, f+1)
	}
	p.Tasks = append(p.Tasks, Task{ID: len(p.Tasks), Kind: TaskStep, Unit: -1, Device: "d0", Deps: deps})
	return w, p
}

// TestValidateHugePlanBounded: a plan past maxPlanTasks is refused
// naming its size and the limit, and a malformed huge plan by the cheap
// per-task checks, both without building the n*n/8-byte ancestor sets
// (2 GiB at the limit; a 160k-task plan took 3.3 GB).
func TestValidateHugePlanBounded(t *testing.T) {
	units := maxPlanTasks/2 + 1 // 2*units+1 tasks: just past the limit
	for _, c := range []struct {
		name   string
		mutate func(p *Plan)
		want   string
	}{
		{"over the limit", func(p *Plan) {}, fmt.Sprintf("plan has %d tasks, over the limit of %d", 2*units+1, maxPlanTasks)},
		{"op twice", func(p *Plan) { p.Tasks[2].Unit = 0 }, "unit 0 runs op 0 (a) forward in both task 0 and task 2, want once"},
		{"op never run", func(p *Plan) { p.Tasks[3].Unit = 0 }, "unit 1 never runs op 0 (a) backward"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, p := widePlan(units)
			c.mutate(p)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := p.Validate(w)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrInvalidPlan) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Validate = %v; want ErrInvalidPlan mentioning %q", err, c.want)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 256<<20 {
				t.Errorf("Validate allocated %d MiB refusing the plan, want well under the ancestor sets' %d MiB", got>>20, ancestorBytes(len(p.Tasks))>>20)
			}
		})
	}
}

// TestDeadlock: Plan.Deadlock finds a cycle through dependencies and
// stream order, and a dependency on no task, and passes a plan that runs.
func TestDeadlock(t *testing.T) {
	d0, d1 := DeviceID("cpu:0"), DeviceID("cpu:1")
	fwd := func(id int, d DeviceID, deps ...int) Task {
		return Task{ID: id, Kind: TaskForward, Unit: id, Device: d, OpLo: 0, OpHi: 1, Deps: deps}
	}
	for _, tc := range []struct {
		name  string
		tasks []Task
		want  string // "" for none
	}{
		{"chain", []Task{fwd(0, d0), fwd(1, d1, 0), fwd(2, d1, 1)}, ""},
		{"two streams", []Task{fwd(0, d0, 1), fwd(1, d1)}, ""},
		{"dependency cycle", []Task{fwd(0, d0, 1), fwd(1, d1, 0)}, "cycle"},
		// Task 1 waits for task 2, which its stream runs after it.
		{"stream order", []Task{fwd(0, d0), fwd(1, d1, 2), fwd(2, d1, 0)}, "cycle"},
		{"dependency on no task", []Task{fwd(0, d0, 3)}, "depends on task 3"},
		{"negative dependency", []Task{fwd(0, d0, -1)}, "depends on task -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := (&Plan{Tasks: tc.tasks}).Deadlock()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error naming %q", err, tc.want)
			}
		})
	}
}
