package sim_test

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

func TestInterpolation(t *testing.T) {
	ms := time.Millisecond
	two := []sim.Point{{Rows: 10, Edges: 100, Fwd: 1 * ms, Bwd: 2 * ms, Mem: 1000, OutBytes: 40},
		{Rows: 20, Edges: 400, Fwd: 3 * ms, Bwd: 4 * ms, Mem: 2000, OutBytes: 80}}
	for _, c := range []struct {
		name         string
		kind         core.OpKind
		pts          []sim.Point
		rows, edges  int64
		fwd, bwd     time.Duration
		mem, outByte int64
	}{
		{"at a point", core.KindDense, two, 10, 0, 1 * ms, 2 * ms, 1000, 40},
		{"between", core.KindDense, two, 15, 0, 2 * ms, 3 * ms, 1500, 60},
		{"above", core.KindDense, two, 30, 0, 5 * ms, 6 * ms, 3000, 120},
		{"below, a line falling faster than proportion: proportion", core.KindDense, two, 4, 0, 400 * time.Microsecond, 800 * time.Microsecond, 400, 16},
		{"below, a line with a fixed cost: the line", core.KindDense, []sim.Point{{Rows: 10, Fwd: 2 * ms, Bwd: 2 * ms}, {Rows: 20, Fwd: 3 * ms, Bwd: 3 * ms}}, 5, 0, 1500 * time.Microsecond, 1500 * time.Microsecond, 0, 0},
		{"below, a falling field: at most the first point", core.KindDense, []sim.Point{{Rows: 10, Fwd: 2 * ms, Mem: 100}, {Rows: 20, Fwd: 3 * ms, Mem: 50}}, 5, 0, 1500 * time.Microsecond, 0, 100, 0},
		{"single point scales", core.KindDense, two[:1], 25, 0, 2500 * time.Microsecond, 5 * ms, 2500, 100},
		{"graph op by edges", core.KindGraph, two, 10, 250, 2 * ms, 3 * ms, 1500, 60},
		{"graph op without edges uses rows", core.KindGraph, two, 20, 0, 3 * ms, 4 * ms, 2000, 80},
		{"dense op ignores edges", core.KindDense, two, 10, 400, 1 * ms, 2 * ms, 1000, 40},
	} {
		t.Run(c.name, func(t *testing.T) {
			op := sim.OpProfile{Name: "x", Kind: c.kind, Points: c.pts}
			got := op.At(c.rows, c.edges)
			want := sim.Cost{Fwd: c.fwd, Bwd: c.bwd, Mem: c.mem, OutBytes: c.outByte}
			if got != want {
				t.Errorf("At(%d, %d) = %+v, want %+v", c.rows, c.edges, got, want)
			}
		})
	}
}

func sampleProfile() *sim.Profile {
	ms := time.Millisecond
	return &sim.Profile{Model: "m", Device: core.DeviceInfo{ID: "cpu:0", Name: "test cpu", Threads: 1},
		ParamBytes: 400, OptStateBytes: 800, ResidentInputBytes: 1200, Step: 30 * time.Microsecond,
		Handoff: 12 * time.Microsecond, HandoffBusy: 90 * time.Microsecond, IterationOverhead: 35 * time.Microsecond,
		Setup: []sim.Point{{Rows: 8, Edges: 20, Fwd: ms / 10, Bwd: ms / 20, Mem: 256}, {Rows: 16, Edges: 50, Fwd: ms / 5, Bwd: ms / 10, Mem: 512}},
		Ops: []sim.OpProfile{
			{Name: "lin", Kind: core.KindDense, InputSize: 4, OutBytesPerRow: 16, WeightBytes: 64,
				Points: []sim.Point{{Rows: 8, Edges: 20, Fwd: ms, Bwd: 2 * ms, Mem: 128, OutBytes: 128}, {Rows: 16, Edges: 50, Fwd: 2 * ms, Bwd: 4 * ms, Mem: 256, OutBytes: 256}}},
			{Name: "agg", Kind: core.KindGraph, Preds: []int{0}, InputSize: 4, OutBytesPerRow: 16,
				Points: []sim.Point{{Rows: 8, Edges: 20, OpEdges: 12, Fwd: ms / 2, Bwd: ms, Mem: 128, OutBytes: 128}, {Rows: 16, Edges: 50, OpEdges: 50, Fwd: ms, Bwd: 2 * ms, Mem: 256, OutBytes: 256}}},
			{Name: "loss", Kind: core.KindLoss, Preds: []int{1},
				Points: []sim.Point{{Rows: 8, Edges: 20, Fwd: ms / 4, Bwd: ms / 4, OutBytes: 4}, {Rows: 16, Edges: 50, Fwd: ms / 4, Bwd: ms / 4, OutBytes: 4}}},
		}}
}

func TestProfileRoundTrip(t *testing.T) {
	p := sampleProfile()
	var buf bytes.Buffer
	if err := sim.WriteProfile(&buf, p); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"inputs"`, `"input_size"`, `"weight_size"`, `"runtime"`, `"reserved_mem"`, `"forward_ms"`, `"ladder"`, `"handoff_ms"`, `"handoff_busy_ms"`, `"iteration_overhead_ms"`} {
		if !strings.Contains(buf.String(), field) {
			t.Errorf("written profile lacks %s", field)
		}
	}
	q, err := sim.ReadProfile(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, q) {
		t.Errorf("round trip changed the profile:\n got %+v\nwant %+v", q, p)
	}
}

// TestGraphPipeRecords reads records with only GraphPipe's fields.
func TestGraphPipeRecords(t *testing.T) {
	in := `[
	  {"id": 1, "inputs": [0], "input_size": 32, "weight_size": 4096, "runtime": {"16": 3.0, "32": 6.0}, "reserved_mem": {"16": 2048, "32": 4096}},
	  {"id": 0, "inputs": [], "input_size": 8, "weight_size": 1024, "runtime": {"16": 1.5, "32": 3.0}, "reserved_mem": {"16": 1024, "32": 2048}},
	  {"id": 2, "inputs": [1, 0], "input_size": 40, "weight_size": 0, "runtime": {"16": 0.3}, "reserved_mem": {}}
	]`
	p, err := sim.ParseProfile([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Ops) != 3 || p.Ops[0].Name != "op0" || p.Ops[1].WeightBytes != 4096 {
		t.Fatalf("ops %+v", p.Ops)
	}
	pt := p.Ops[1].Points[0]
	if pt.Fwd != time.Millisecond || pt.Bwd != 2*time.Millisecond || pt.Mem != 2048 {
		t.Errorf("op 1 at 16: %+v, want runtime split 1:2 and reserved_mem", pt)
	}
	// Op 0's output is what op 1 (its single-input consumer) reads: 32
	// four-byte elements per sample.
	if p.Ops[0].OutBytesPerRow != 128 || p.Ops[0].Points[1].OutBytes != 128*32 {
		t.Errorf("op 0 output %v bytes/row, points %+v; want 128", p.Ops[0].OutBytesPerRow, p.Ops[0].Points)
	}
	if p.Ops[1].OutBytesPerRow != 80 { // half of op 2's 40 elements
		t.Errorf("op 1 output %v bytes/row, want 80", p.Ops[1].OutBytesPerRow)
	}
}

func TestMalformedProfiles(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"empty", ``, "empty"},
		{"not json", `hello`, "want a JSON object"},
		{"truncated", `{"ops": [`, "unexpected end"},
		{"no ops", `{"ops": []}`, "no ops"},
		{"bad batch key", `[{"inputs": [], "runtime": {"abc": 1}}]`, `key "abc" is not a positive batch size`},
		{"zero batch", `[{"inputs": [], "runtime": {"0": 1}}]`, "not a positive batch size"},
		{"negative time", `[{"inputs": [], "runtime": {"4": -1}}]`, "negative"},
		{"negative mem", `[{"inputs": [], "runtime": {"4": 1}, "reserved_mem": {"4": -5}}]`, "negative"},
		{"input out of range", `[{"inputs": [3], "runtime": {"4": 1}}]`, "input 3 is not another op"},
		{"self input", `[{"inputs": [0], "runtime": {"4": 1}}]`, "input 0 is not another op"},
		{"cycle", `[{"inputs": [1], "runtime": {"4": 1}}, {"inputs": [0], "runtime": {"4": 1}}]`, "cycle"},
		{"duplicate id", `[{"id": 0, "inputs": [], "runtime": {"4": 1}}, {"id": 0, "inputs": [], "runtime": {"4": 1}}]`, "two op records have id 0"},
		{"id out of range", `[{"id": 5, "inputs": [], "runtime": {"4": 1}}]`, "ids must be 0..0"},
		{"no runtime", `[{"inputs": []}]`, "no runtime"},
		{"negative runtime beside split times", `[{"inputs": [], "forward_ms": {"4": 1}, "backward_ms": {"4": 2}, "runtime": {"4": -3}}]`, "runtime: time -3 is negative"},
		{"ladder size twice", `{"ladder": [{"rows": 4, "edges": 1}, {"rows": 4, "edges": 2}], "ops": [{"inputs": [], "runtime": {"4": 1}}]}`, "ladder lists 4 rows twice"},
		{"split mismatch", `[{"inputs": [], "forward_ms": {"4": 1}, "backward_ms": {}}]`, "different batch sizes"},
		{"duplicate name", `[{"name": "a", "inputs": [], "runtime": {"4": 1}}, {"name": "a", "inputs": [], "runtime": {"4": 1}}]`, "both named"},
		{"bad kind", `[{"kind": "quantum", "inputs": [], "runtime": {"4": 1}}]`, "unknown kind"},
		{"bad time unit", `{"time_unit": "fortnights", "ops": [{"inputs": [], "runtime": {"4": 1}}]}`, "time_unit"},
		{"huge", `[{"inputs": [], "runtime": {"4": 1e300}}]`, "out of range"},
		{"repeated key", `[{"inputs": [], "runtime": {"4": 1, "04": 2}}]`, "twice"},
		{"negative handoff", `{"handoff_ms": -0.01, "ops": [{"inputs": [], "runtime": {"4": 1}}]}`, "handoff_ms"},
		{"negative busy handoff", `{"handoff_busy_ms": -1, "ops": [{"inputs": [], "runtime": {"4": 1}}]}`, "handoff_busy_ms"},
		{"huge overhead", `{"iteration_overhead_ms": 1e300, "ops": [{"inputs": [], "runtime": {"4": 1}}]}`, "iteration_overhead_ms"},
		{"handoff over a second", `{"handoff_ms": 4e12, "ops": [{"inputs": [], "runtime": {"4": 1}}]}`, "handoff"},
		{"busy handoff over a second", `{"handoff_busy_ms": 1001, "ops": [{"inputs": [], "runtime": {"4": 1}}]}`, "busy handoff"},
		{"overhead over a second", `{"iteration_overhead_ms": 2000, "ops": [{"inputs": [], "runtime": {"4": 1}}]}`, "iteration overhead"},
		{"op over a minute", `[{"inputs": [], "runtime": {"4": 4e12}}]`, "want at most 1m0s"},
		{"ops over an hour together", `[` + strings.Repeat(`{"inputs": [], "runtime": {"4": 50000}},`, 80) + `{"inputs": [], "runtime": {"4": 1}}]`, "over 1h0m0s"},
		{"memory over a PiB", `[{"inputs": [], "runtime": {"4": 1}, "reserved_mem": {"4": 4e18}}]`, "a size over 1.0 PiB"},
		{"weights over a PiB", `[{"inputs": [], "weight_size": 1e17, "runtime": {"4": 1}}]`, "a size over 1.0 PiB"},
		{"ops over 32 PiB together", `[` + strings.Repeat(`{"inputs": [], "weight_size": 1e15, "runtime": {"4": 1}},`, 40) + `{"inputs": [], "runtime": {"4": 1}}]`, "hold over 32.0 PiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := sim.ParseProfile([]byte(c.in))
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, sim.ErrBadProfile) {
				t.Errorf("error %v does not wrap ErrBadProfile", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}
}

func FuzzParseProfile(f *testing.F) {
	var buf bytes.Buffer
	if err := sim.WriteProfile(&buf, sampleProfile()); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(`[{"inputs": [], "input_size": 8, "weight_size": 1024, "runtime": {"16": 1.5}, "reserved_mem": {"16": 1024}}]`))
	f.Add([]byte(`{"time_unit": "us", "ops": [{"id": 0, "inputs": [], "forward_ms": {"1": 1}, "backward_ms": {"1": 2}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := sim.ParseProfile(b)
		if err != nil {
			if !errors.Is(err, sim.ErrBadProfile) {
				t.Fatalf("error %v does not wrap ErrBadProfile", err)
			}
			return
		}
		// What parses writes and parses back to the same profile.
		var out bytes.Buffer
		if err := sim.WriteProfile(&out, p); err != nil {
			t.Fatalf("parsed profile does not write: %v", err)
		}
		q, err := sim.ParseProfile(out.Bytes())
		if err != nil {
			t.Fatalf("written profile does not parse: %v\n%s", err, out.Bytes())
		}
		var again bytes.Buffer
		if err := sim.WriteProfile(&again, q); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), again.Bytes()) {
			t.Fatalf("write∘parse is not stable:\n%s\n%s", out.Bytes(), again.Bytes())
		}
		for _, op := range p.Ops {
			_ = op.At(3, 7)
		}
	})
}

// TestSetupForUnitKind: a subgraph unit's overhead (building its view,
// gathering its inputs) comes from the points measured with subgraph
// units, never interpolated toward a whole-graph unit's (inputs
// resident, almost free) at a similar size; profiles that do not mark
// their points use them all. The mark survives the JSON schema.
func TestSetupForUnitKind(t *testing.T) {
	p := &sim.Profile{Setup: []sim.Point{
		{Rows: 1000, Fwd: 100 * time.Microsecond, Mem: 1000},
		{Rows: 4000, Fwd: 10 * time.Microsecond, Whole: true},
	}}
	if got := p.SetupFor(3800, 0, false); got.Fwd != 380*time.Microsecond || got.Mem != 3800 {
		t.Errorf("subgraph unit of 3800 rows: %v, want 380µs and 3800 bytes (the subgraph point scaled)", got)
	}
	if got := p.SetupFor(4000, 0, true); got.Fwd != 10*time.Microsecond {
		t.Errorf("whole-graph unit: %v, want 10µs", got)
	}
	if old := p.SetupAt(3800, 0); old.Fwd >= 100*time.Microsecond {
		t.Errorf("SetupAt interpolates over every point: %v", old)
	}
	unmarked := &sim.Profile{Setup: []sim.Point{{Rows: 1000, Fwd: 100 * time.Microsecond}, {Rows: 4000, Fwd: 10 * time.Microsecond}}}
	if got, want := unmarked.SetupFor(3800, 0, false), unmarked.SetupAt(3800, 0); got != want {
		t.Errorf("unmarked profile: %v, want SetupAt's %v", got, want)
	}
	// Through the GraphPipe-schema JSON.
	p.Model = "m"
	p.Ops = []sim.OpProfile{{Name: "a", Points: []sim.Point{{Rows: 1000, Fwd: time.Microsecond, Bwd: time.Microsecond}, {Rows: 4000, Fwd: time.Microsecond, Bwd: time.Microsecond}}}}
	var buf bytes.Buffer
	if err := sim.WriteProfile(&buf, p); err != nil {
		t.Fatal(err)
	}
	q, err := sim.ReadProfile(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := q.SetupFor(3800, 0, false); got.Fwd != 380*time.Microsecond {
		t.Errorf("after the JSON round trip: %v, want 380µs", got)
	}
}

// TestAtOut: an op priced at its own output interpolates along the
// points' outputs, and falls back to the unit's size where those do not
// grow (a loss's fixed output) or the output is unknown.
func TestAtOut(t *testing.T) {
	ms := time.Millisecond
	// A 1-hop op: at 3,671 unit rows it output 1,601 rows (409,856
	// bytes), at 4,000 all 4,000 (1,024,000).
	hop := sim.OpProfile{Name: "relu0", Kind: core.KindElem, Points: []sim.Point{
		{Rows: 3671, Edges: 30639, Fwd: 1 * ms, Mem: 409856, OutBytes: 409856},
		{Rows: 4000, Edges: 32246, Fwd: 3 * ms, Mem: 1024000, OutBytes: 1024000}}}
	loss := sim.OpProfile{Name: "loss", Kind: core.KindLoss, Points: []sim.Point{
		{Rows: 3671, Fwd: 1 * ms, OutBytes: 4}, {Rows: 4000, Fwd: 2 * ms, OutBytes: 4}}}
	mid := float64(3835-3671) / (4000 - 3671) // the unit's place between the points
	for _, c := range []struct {
		name       string
		op         sim.OpProfile
		out, rows  int64
		wantOut    int64
		wantFwd    time.Duration
		wantMemMin int64
	}{
		{"at a point", hop, 409856, 3824, 409856, 1 * ms, 409856},
		{"between: 3,474 rows of 1-hop output", hop, 889344, 3824, 889344, time.Duration(float64(ms) * (1 + 2*float64(889344-409856)/float64(1024000-409856))), 889344},
		{"beyond the ladder", hop, 1638144, 4000, 1638144, 5 * ms, 1638144},
		{"fixed output: the unit's size", loss, 4, 3835, 4, ms + time.Duration(mid*float64(ms)), 0},
		{"unknown output: the unit's size", hop, 0, 3835, int64(math.Round(409856 + mid*(1024000-409856))), ms + time.Duration(mid*2*float64(ms)), 715995},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.op.AtOut(c.out, c.rows, 0)
			if got.OutBytes != c.wantOut || (got.Fwd-c.wantFwd).Abs() > time.Microsecond || got.Mem < c.wantMemMin {
				t.Errorf("AtOut(%d, %d) = out %d, fwd %v, mem %d; want out %d, fwd %v, mem >= %d", c.out, c.rows, got.OutBytes, got.Fwd, got.Mem, c.wantOut, c.wantFwd, c.wantMemMin)
			}
		})
	}
}

// TestAtOwn: a graph op whose points recorded the edges it read prices a
// unit at the edges it reads there; other ops, and graph ops without
// them, at their output (AtOut).
func TestAtOwn(t *testing.T) {
	ms := time.Millisecond
	pts := []sim.Point{{Rows: 100, Edges: 1000, OpEdges: 400, Fwd: 1 * ms, OutBytes: 800},
		{Rows: 200, Edges: 2000, OpEdges: 2000, Fwd: 5 * ms, OutBytes: 1600}}
	flat := []sim.Point{{Rows: 100, OpEdges: 400, Fwd: 1 * ms, OutBytes: 800}, {Rows: 200, OpEdges: 400, Fwd: 5 * ms, OutBytes: 1600}}
	for _, c := range []struct {
		name    string
		kind    core.OpKind
		pts     []sim.Point
		out, e  int64
		wantFwd time.Duration
	}{
		{"graph op at its edges", core.KindGraph, pts, 800, 1200, 3 * ms},
		{"graph op, edges unknown: its output", core.KindGraph, pts, 1200, -1, 3 * ms},
		{"graph op reading no edges: the edges' line (no fixed cost here)", core.KindGraph, pts, 1200, 0, 0},
		{"dense op: its output", core.KindDense, pts, 1200, 400, 3 * ms},
		{"points' edges not growing: its output", core.KindGraph, flat, 1200, 1200, 3 * ms},
	} {
		t.Run(c.name, func(t *testing.T) {
			op := sim.OpProfile{Name: "x", Kind: c.kind, Points: c.pts}
			got := op.AtOwn(c.out, c.e, 150, 1500)
			if (got.Fwd - c.wantFwd).Abs() > time.Microsecond {
				t.Errorf("AtOwn(%d, %d) forward %v, want %v", c.out, c.e, got.Fwd, c.wantFwd)
			}
			if got.OutBytes != c.out {
				t.Errorf("AtOwn(%d, %d) outputs %d bytes: sizes follow the output", c.out, c.e, got.OutBytes)
			}
		})
	}
}
