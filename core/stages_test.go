package core

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// diamond: a → b, a → c, b → d, c → d, a → d (a skip edge).
func diamondWorkload() *Workload {
	return &Workload{Ops: []OpInfo{
		{Index: 0, Name: "a"},
		{Index: 1, Name: "b", Deps: []int{0}},
		{Index: 2, Name: "c", Deps: []int{0}},
		{Index: 3, Name: "d", Deps: []int{1, 2, 0}},
	}}
}

// fwd lists forward tasks: each "device/stream/unit/ops" with ops as
// digits, e.g. "x/0/1/02" runs ops 0 and 2 of unit 1 on x stream 0.
func fwd(specs ...string) *Plan {
	p := &Plan{}
	for i, s := range specs {
		var dev string
		var stream, unit int
		var ops string
		f := strings.Split(s, "/")
		dev = f[0]
		fmt.Sscan(f[1], &stream)
		fmt.Sscan(f[2], &unit)
		ops = f[3]
		t := Task{ID: i, Kind: TaskForward, Device: DeviceID(dev), Stream: stream, Unit: unit}
		for _, c := range ops {
			t.Ops = append(t.Ops, int(c-'0'))
		}
		p.Tasks = append(p.Tasks, t)
		// A backward and a step, which StageGraph ignores.
		p.Tasks = append(p.Tasks, Task{ID: len(specs) + i, Kind: TaskBackward, Device: t.Device, Stream: stream, Unit: unit, Ops: t.Ops})
	}
	p.Tasks = append(p.Tasks, Task{ID: 2 * len(specs), Kind: TaskStep, Unit: -1, Device: "x"})
	return p
}

// withDeps adds dependencies to fwd's forward tasks: pairs (task, dep)
// of indices into its specs (spec i's forward is p.Tasks[2i], id i).
func withDeps(p *Plan, pairs ...int) *Plan {
	for i := 0; i+1 < len(pairs); i += 2 {
		p.Tasks[2*pairs[i]].Deps = append(p.Tasks[2*pairs[i]].Deps, pairs[i+1])
	}
	return p
}

func TestStageGraph(t *testing.T) {
	type st struct {
		ops      []int
		replicas string // "dev/stream dev/stream"
		units    int
		succ     []int
		depth    int
	}
	cases := []struct {
		name string
		plan *Plan
		want []st
		err  string
	}{
		{"data parallel: one stage", fwd("x/0/0/0123", "y/0/1/0123", "x/0/2/0123"),
			[]st{{[]int{0, 1, 2, 3}, "x/0 y/0", 3, nil, 1}}, ""},
		{"fork, join and a skip edge", fwd("x/0/0/0", "y/0/0/1", "z/0/0/2", "w/0/0/3", "x/0/1/0", "y/0/1/1", "z/0/1/2", "w/0/1/3"),
			[]st{{[]int{0}, "x/0", 2, []int{1, 2, 3}, 3}, {[]int{1}, "y/0", 2, []int{3}, 2}, {[]int{2}, "z/0", 2, []int{3}, 2}, {[]int{3}, "w/0", 2, nil, 1}}, ""},
		{"a replicated stage, listed by first unit", fwd("x/0/0/01", "z/0/1/23", "y/0/0/23", "x/0/1/01"),
			[]st{{[]int{0, 1}, "x/0", 2, []int{1}, 2}, {[]int{2, 3}, "y/0 z/0", 2, nil, 1}}, ""},
		{"a stage split over tasks, and two stages on one device's streams", fwd("x/0/0/0", "x/0/0/12", "x/1/0/3", "y/0/1/012", "y/1/1/3"),
			[]st{{[]int{0, 1, 2}, "x/0 y/0", 2, []int{1}, 2}, {[]int{3}, "x/1 y/1", 2, nil, 1}}, ""},
		{"different ops per unit", fwd("x/0/0/01", "y/0/0/23", "x/0/1/0", "y/0/1/123"), nil, "x stream 0 runs different ops for unit 1"},
		{"overlapping op sets", fwd("x/0/0/012", "y/0/0/3", "z/0/1/01", "w/0/1/23"), nil, "op 0 (a) runs in two different op sets"},
		{"stages in a cycle", fwd("x/0/0/03", "y/0/0/12"), nil, "cycle"},
		{"no forward tasks", &Plan{Tasks: []Task{{Kind: TaskStep, Unit: -1, Device: "x"}}}, nil, "no forward tasks"},
		{"op out of range", fwd("x/0/0/9"), nil, "runs op 9"},
		{"a wait on another unit is not an edge", withDeps(fwd("x/0/0/0", "y/0/0/123", "x/0/1/0", "y/0/1/123"), 1, 0, 2, 1, 3, 2),
			[]st{{[]int{0}, "x/0", 2, []int{1}, 2}, {[]int{1, 2, 3}, "y/0", 2, nil, 1}}, ""},
		{"a chain schedule's order is an edge", withDeps(fwd("x/0/0/0", "y/0/0/1", "z/0/0/2", "w/0/0/3"), 2, 1),
			[]st{{[]int{0}, "x/0", 1, []int{1, 2, 3}, 4}, {[]int{1}, "y/0", 1, []int{2, 3}, 3}, {[]int{2}, "z/0", 1, []int{3}, 2}, {[]int{3}, "w/0", 1, nil, 1}}, ""},
		{"empty op range", &Plan{Tasks: []Task{{Kind: TaskForward, Device: "x", OpLo: 2, OpHi: 2}}}, nil, "op range [2, 2)"},
		{"huge op range", &Plan{Tasks: []Task{{Kind: TaskForward, Device: "x", OpLo: 0, OpHi: 1 << 62}}}, nil, "op range"},
	}
	if _, err := fwd("x/0/0/0").StageGraph(nil); err == nil {
		t.Error("StageGraph(nil) did not fail")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.plan.StageGraph(diamondWorkload())
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want one containing %q (stages %+v)", err, c.err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var have []st
			for _, s := range got {
				var rs []string
				for _, r := range s.Replicas {
					rs = append(rs, fmt.Sprintf("%s/%d", r.Device, r.Stream))
				}
				have = append(have, st{s.Ops, strings.Join(rs, " "), s.Units, s.Succ, s.Depth})
			}
			if !reflect.DeepEqual(have, c.want) {
				t.Errorf("stages\n got %+v\nwant %+v", have, c.want)
			}
		})
	}
}

// fuzzPlan decodes forward tasks, 5 bytes each: device, stream, unit,
// op range (high nibble − 1 to low nibble, mod 6) and a dependency (0xff:
// none).
func fuzzPlan(b []byte) *Plan {
	p := &Plan{}
	for i := 0; i+5 <= len(b) && i < 5*16; i += 5 {
		lo, hi := int(b[i+3]>>4)%6-1, int(b[i+3]&0xf)%6
		tk := Task{ID: i / 5, Kind: TaskForward, Device: DeviceID([]string{"x", "y", "z"}[b[i]%3]), Stream: int(b[i+1] % 2),
			Unit: int(b[i+2] % 3), OpLo: lo, OpHi: hi}
		if b[i+4] != 0xff {
			tk.Deps = []int{int(b[i+4]) % 16}
		}
		p.Tasks = append(p.Tasks, tk)
	}
	return p
}

// stageSeeds are FuzzStageGraph's seeds and the stages each has.
var stageSeeds = []struct {
	b      []byte
	stages int
}{
	{[]byte{0, 0, 0, 0x11, 0xff, 1, 0, 0, 0x24, 0}, 2},                                     // a two-stage pipeline
	{[]byte{0, 0, 0, 0x14, 0xff, 1, 0, 1, 0x14, 0xff}, 1},                                  // data parallelism
	{[]byte{0, 0, 0, 0x11, 0xff, 1, 0, 0, 0x24, 0, 0, 0, 1, 0x11, 1, 1, 0, 1, 0x24, 2}, 2}, // a wait across units
}

func TestStageSeeds(t *testing.T) {
	for _, seed := range stageSeeds {
		st, err := fuzzPlan(seed.b).StageGraph(diamondWorkload())
		if err != nil || len(st) != seed.stages {
			t.Errorf("seed %v: %d stages, %v; want %d", seed.b, len(st), err, seed.stages)
		}
	}
}

// FuzzStageGraph builds plans from bytes (each task 5 bytes: device,
// stream, unit, op range, a dependency) over the diamond workload:
// StageGraph returns an error or a stage DAG whose op sets are disjoint,
// whose edges go forward in its order and follow every op edge between
// stages, and whose depths are the longest paths.
func FuzzStageGraph(f *testing.F) {
	for _, seed := range stageSeeds {
		f.Add(seed.b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		w := diamondWorkload()
		stages, err := fuzzPlan(b).StageGraph(w)
		if err != nil {
			return
		}
		at := map[int]int{}
		for i, st := range stages {
			if len(st.Ops) == 0 || len(st.Replicas) == 0 || st.Units == 0 {
				t.Fatalf("stage %d is empty: %+v", i, st)
			}
			for _, o := range st.Ops {
				if _, dup := at[o]; dup {
					t.Fatalf("op %d in two stages: %+v", o, stages)
				}
				at[o] = i
			}
			depth := 1
			for _, s := range st.Succ {
				if s <= i {
					t.Fatalf("edge %d → %d goes back: %+v", i, s, stages)
				}
				depth = max(depth, stages[s].Depth+1)
			}
			if st.Depth != depth {
				t.Fatalf("stage %d depth %d, want %d: %+v", i, st.Depth, depth, stages)
			}
		}
		for o, op := range w.Ops {
			for _, q := range op.Deps {
				a, okA := at[q]
				b, okB := at[o]
				if okA && okB && a != b && !slices.Contains(stages[a].Succ, b) {
					t.Fatalf("op edge %d → %d not a stage edge %d → %d: %+v", q, o, a, b, stages)
				}
			}
		}
	})
}
