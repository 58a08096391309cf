package sim

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// Point is one measurement of an op (or of the per-unit overhead) at one
// size: the rows the op computes (nodes of the unit's graph, or samples
// for models without a graph) and the edges of that graph.
type Point struct {
	Rows  int64 `json:"rows"`
	Edges int64 `json:"edges,omitempty"`
	// Fwd and Bwd are the forward and backward times.
	Fwd time.Duration `json:"fwd_ns"`
	Bwd time.Duration `json:"bwd_ns"`
	// Mem is the device memory the op holds from its forward until the
	// unit's backward is done (GraphPipe's reserved_mem). For the per-unit
	// overhead it is the unit's own inputs (features and edge weights).
	Mem int64 `json:"mem_bytes"`
	// OutBytes is the size of the op's outputs: what moves to a consumer
	// on another device, and its gradient back.
	OutBytes int64 `json:"out_bytes"`
	// Temp is the memory the op's backward needs for the time it runs,
	// beyond what Mem holds (gradients, temporaries). With GradIn or
	// GradOut set (profiles since 2026-11-30) it is the peak above what
	// was allocated when the op's backward started, GradIn the gradient
	// bytes its backward leaves for its inputs and GradOut those of its
	// outputs freed after it: the simulator walks a backward task's ops
	// with them, so a stage's transient is its own, not a share of the
	// whole model's. Without them Temp is the op's share of the one-device
	// backward transient and a task's transients add up.
	Temp    int64 `json:"temp_bytes,omitempty"`
	GradIn  int64 `json:"grad_in_bytes,omitempty"`
	GradOut int64 `json:"grad_out_bytes,omitempty"`
	// OpEdges, for a graph op (core.KindGraph), is the edges of the graph
	// it read at this point: its hop's block in a subgraph unit, whose
	// edges do not follow the unit's (a 1-hop block of a power-law graph
	// gathers the hubs' edges). 0: not recorded (the op's times then
	// follow its output: AtOwn).
	OpEdges int64 `json:"op_edges,omitempty"`
	// Whole marks a Setup point measured with a unit computing the whole
	// graph (its inputs resident), whose overhead is not a subgraph
	// unit's (building its view, gathering its features) of the same size.
	Whole bool `json:"whole,omitempty"`
}

// OpProfile is the profile of one op of a model.
type OpProfile struct {
	Name string      `json:"name"`
	Kind core.OpKind `json:"kind"`
	// Preds are the indices of the ops whose outputs it reads.
	Preds []int `json:"preds,omitempty"`
	// InputSize is GraphPipe's input_size: elements per row the op reads
	// from its predecessors (or the model's inputs).
	InputSize float64 `json:"input_size"`
	// OutBytesPerRow is the op's output bytes per row at the largest
	// profiled size (the per-sample activation size).
	OutBytesPerRow float64 `json:"out_bytes_per_row"`
	// WeightBytes are the bytes of the parameters it reads.
	WeightBytes int64 `json:"weight_bytes"`
	// Points are the measurements, by ascending Rows.
	Points []Point `json:"points"`
}

// Profile is the measured (or modelled) cost of every op of a model on
// one kind of device, at a ladder of sizes. The simulator interpolates it
// linearly between ladder points and extrapolates linearly beyond them.
type Profile struct {
	Model string `json:"model"`
	// Device describes where the profile was taken.
	Device core.DeviceInfo `json:"device"`
	Ops    []OpProfile     `json:"ops"`
	// ParamBytes, OptStateBytes: the model's parameters and the
	// optimizer's state (Adam: two moments). ResidentInputBytes are the
	// batch inputs (features, edge weights) a device keeps resident while
	// it runs units that compute the whole batch graph.
	ParamBytes         int64 `json:"param_bytes"`
	OptStateBytes      int64 `json:"optimizer_state_bytes"`
	ResidentInputBytes int64 `json:"resident_input_bytes"`
	// Step is the measured optimizer step (0: modelled from the
	// parameter bytes and the device's memory bandwidth).
	Step time.Duration `json:"step_ns"`
	// Handoff is the executor's latency from a task's end to the start
	// of a task that waited for it on another stream (another device's,
	// or a device's step stream): its goroutine woken as the finishing
	// stream blocks. HandoffBusy is the same when the finishing stream
	// goes straight on with its next task (a pipeline stage's next
	// micro-batch): the woken goroutine waits for an idle core to wake.
	// IterationOverhead is the executor's time per iteration outside the
	// tasks (starting the streams, ending the iteration). All measured by
	// the profiler on host devices (0: not modelled).
	Handoff           time.Duration `json:"handoff_ns,omitempty"`
	HandoffBusy       time.Duration `json:"handoff_busy_ns,omitempty"`
	IterationOverhead time.Duration `json:"iteration_overhead_ns,omitempty"`
	// Setup is the per-unit overhead outside the ops: Fwd is building the
	// unit's Env on a device (receptive field, gathering its features),
	// Bwd the bookkeeping after its backward, Mem the unit's own inputs.
	Setup []Point `json:"setup,omitempty"`
	// OverCapTargets are the unit sizes (targets) MeasureWith skipped
	// because, by the trainer's memory estimate, a unit of that size does
	// not fit the device (MeasureOptions.FitCap): a planner extrapolating
	// the ladder there would underestimate them.
	OverCapTargets []int `json:"over_cap_targets,omitempty"`
}

// maxExecutorTime bounds a profile's handoffs and iteration overhead: the
// simulator adds a handoff per edge between streams, so a huge one would
// overflow an iteration.
const maxExecutorTime = time.Second

// Bounds on a profile's figures, so that no iteration time or memory the
// simulator adds up from them overflows: an op's forward or backward at
// one size at most a minute, and all ops' together (at each op's largest
// size) an hour; a size at most 1 PiB, and all ops' 32 PiB. A measured
// profile is far inside them.
const (
	maxOpTime    = time.Minute
	maxTotalTime = time.Hour
	maxSize      = 1 << 50
	maxTotalSize = 1 << 55
)

// Op returns the profile of the op with the given name.
func (p *Profile) Op(name string) (*OpProfile, bool) {
	for i := range p.Ops {
		if p.Ops[i].Name == name {
			return &p.Ops[i], true
		}
	}
	return nil, false
}

// Validate checks that the profile is usable: ops named and distinct,
// predecessors in range and acyclic, at least one point per op, sizes
// positive and ascending, times and bytes non-negative.
func (p *Profile) Validate() error {
	if p == nil {
		return fmt.Errorf("sim: nil profile")
	}
	if len(p.Ops) == 0 {
		return fmt.Errorf("sim: profile of %q has no ops", p.Model)
	}
	seen := map[string]int{}
	for i, op := range p.Ops {
		where := fmt.Sprintf("sim: profile op %d (%q)", i, op.Name)
		if op.Name == "" {
			return fmt.Errorf("sim: profile op %d has no name", i)
		}
		if j, dup := seen[op.Name]; dup {
			return fmt.Errorf("sim: profile ops %d and %d are both named %q", j, i, op.Name)
		}
		seen[op.Name] = i
		for _, d := range op.Preds {
			if d < 0 || d >= len(p.Ops) || d == i {
				return fmt.Errorf("%s: input %d is not another op of the profile's %d", where, d, len(p.Ops))
			}
		}
		if bad(op.InputSize) || bad(op.OutBytesPerRow) || op.WeightBytes < 0 {
			return fmt.Errorf("%s: negative or non-finite size", where)
		}
		if op.WeightBytes > maxSize || op.InputSize > maxSize || op.OutBytesPerRow > maxSize {
			return fmt.Errorf("%s: a size over %s", where, core.FormatBytes(maxSize))
		}
		if len(op.Points) == 0 {
			return fmt.Errorf("%s: no measurements", where)
		}
		if err := checkPoints(op.Points); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	if len(p.Setup) > 0 {
		if err := checkPoints(p.Setup); err != nil {
			return fmt.Errorf("sim: profile setup: %w", err)
		}
	}
	if p.ParamBytes < 0 || p.OptStateBytes < 0 || p.ResidentInputBytes < 0 || p.Step < 0 {
		return fmt.Errorf("sim: profile has a negative size or step time")
	}
	if max(p.ParamBytes, p.OptStateBytes, p.ResidentInputBytes) > maxSize || p.Step > maxOpTime {
		return fmt.Errorf("sim: profile's parameter, optimizer or input bytes over %s, or its step over %v", core.FormatBytes(maxSize), maxOpTime)
	}
	// Totals over the ops, each at its largest size.
	var total time.Duration
	var bytes int64
	for _, op := range p.Ops {
		pt := op.Points[len(op.Points)-1]
		total += pt.Fwd + pt.Bwd
		bytes += op.WeightBytes + pt.Mem + pt.OutBytes + pt.Temp
		if total > maxTotalTime || bytes > maxTotalSize {
			return fmt.Errorf("sim: the profile's ops take over %v or hold over %s together (at their largest sizes): a time or size is out of range", maxTotalTime, core.FormatBytes(maxTotalSize))
		}
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{{"handoff", p.Handoff}, {"busy handoff", p.HandoffBusy}, {"iteration overhead", p.IterationOverhead}} {
		if f.d < 0 || f.d > maxExecutorTime {
			return fmt.Errorf("sim: profile's %s %v: want 0 to %v (the executor's own latency, microseconds on a CPU)", f.name, f.d, maxExecutorTime)
		}
	}
	// Acyclic inputs (a profile is a DAG of ops).
	state := make([]uint8, len(p.Ops))
	var visit func(i int) error
	visit = func(i int) error {
		switch state[i] {
		case 1:
			return fmt.Errorf("sim: profile ops form a cycle through op %d (%q)", i, p.Ops[i].Name)
		case 2:
			return nil
		}
		state[i] = 1
		for _, d := range p.Ops[i].Preds {
			if err := visit(d); err != nil {
				return err
			}
		}
		state[i] = 2
		return nil
	}
	for i := range p.Ops {
		if err := visit(i); err != nil {
			return err
		}
	}
	return nil
}

func bad(x float64) bool { return x < 0 || math.IsNaN(x) || math.IsInf(x, 0) }

func checkPoints(pts []Point) error {
	for j, pt := range pts {
		if pt.Rows <= 0 {
			return fmt.Errorf("size %d rows: want a positive size", pt.Rows)
		}
		if j > 0 && pt.Rows <= pts[j-1].Rows {
			return fmt.Errorf("sizes %d and %d are not ascending", pts[j-1].Rows, pt.Rows)
		}
		if pt.Edges < 0 || pt.OpEdges < 0 || pt.Fwd < 0 || pt.Bwd < 0 || pt.Mem < 0 || pt.OutBytes < 0 || pt.Temp < 0 || pt.GradIn < 0 || pt.GradOut < 0 {
			return fmt.Errorf("at %d rows: negative time or size", pt.Rows)
		}
		if pt.Fwd > maxOpTime || pt.Bwd > maxOpTime {
			return fmt.Errorf("at %d rows: forward %v, backward %v: want at most %v each", pt.Rows, pt.Fwd, pt.Bwd, maxOpTime)
		}
		if max(pt.Mem, pt.OutBytes, pt.Temp, pt.GradIn, pt.GradOut) > maxSize {
			return fmt.Errorf("at %d rows: a size over %s", pt.Rows, core.FormatBytes(maxSize))
		}
	}
	return nil
}

// Cost is an op's (or the per-unit overhead's) predicted cost at one size.
type Cost struct {
	Fwd, Bwd                             time.Duration
	Mem, OutBytes, Temp, GradIn, GradOut int64
}

// At predicts the op's cost for a unit computing rows rows over a graph
// of edges edges: linear interpolation between the two nearest ladder
// points, linear extrapolation from the two end points beyond them (below
// the first, between its value in proportion and its value; a single
// point scales in proportion), never below zero. Graph ops
// (KindGraph) interpolate in edges when the points and the query have
// them, since their work follows the edges; every other op in rows.
func (o *OpProfile) At(rows, edges int64) Cost {
	return interp(o.Points, rows, edges, o.Kind == core.KindGraph)
}

// walksBackward reports whether the profile has per-op backward
// gradients (Point.GradIn, GradOut; see Point.Temp).
func (p *Profile) walksBackward() bool {
	for _, op := range p.Ops {
		for _, pt := range op.Points {
			if pt.GradIn > 0 || pt.GradOut > 0 {
				return true
			}
		}
	}
	return false
}

// SetupAt predicts the per-unit overhead at a size (zero without Setup),
// from every Setup point.
func (p *Profile) SetupAt(rows, edges int64) Cost {
	if len(p.Setup) == 0 {
		return Cost{}
	}
	return interp(p.Setup, rows, edges, false)
}

// SetupFor predicts the overhead of a unit computing the whole graph
// (whole) or a subgraph of the given size, from the Setup points measured
// with that kind of unit (all points when none were).
func (p *Profile) SetupFor(rows, edges int64, whole bool) Cost {
	var pts []Point
	for _, pt := range p.Setup {
		if pt.Whole == whole {
			pts = append(pts, pt)
		}
	}
	if len(pts) == 0 {
		return p.SetupAt(rows, edges)
	}
	return interp(pts, rows, edges, false)
}

func interp(pts []Point, rows, edges int64, byEdges bool) Cost {
	if len(pts) == 0 {
		return Cost{}
	}
	x := func(pt Point) float64 { return float64(pt.Rows) }
	q := float64(rows)
	if byEdges && edges > 0 {
		ok := true
		for _, pt := range pts {
			ok = ok && pt.Edges > 0
		}
		if ok {
			x = func(pt Point) float64 { return float64(pt.Edges) }
			q = float64(edges)
			if !sort.SliceIsSorted(pts, func(i, j int) bool { return pts[i].Edges < pts[j].Edges }) {
				pts = append([]Point(nil), pts...)
				sort.SliceStable(pts, func(i, j int) bool { return pts[i].Edges < pts[j].Edges })
			}
		}
	}
	return interpAlong(pts, x, q)
}

// AtOut predicts the op's cost where it outputs out bytes: At's
// interpolation along the points' output sizes instead of their units'.
// A subgraph unit's ops compute different hops of its receptive field,
// whose sizes do not grow with the unit's rows alike (a 2-layer GCN's
// first aggregation outputs the 1-hop rows, its second the targets, while
// the unit's rows are its 2-hop field); the unit's shape pass says what
// each op outputs (CostModel.UnitOuts). Where the points' outputs do not
// grow strictly with their sizes (an op whose output is fixed, a loss;
// a roofline profile scales every other op's output with its rows) or out
// is unknown (<= 0), it is At(rows, edges).
func (o *OpProfile) AtOut(out, rows, edges int64) Cost {
	x := func(pt Point) float64 { return float64(pt.OutBytes) }
	if out <= 0 || !rising(o.Points, x) {
		return o.At(rows, edges)
	}
	return interpAlong(o.Points, x, float64(out))
}

// rising reports whether x is positive and grows strictly over pts.
func rising(pts []Point, x func(Point) float64) bool {
	for i, pt := range pts {
		if x(pt) <= 0 || i > 0 && x(pt) <= x(pts[i-1]) {
			return false
		}
	}
	return len(pts) > 0
}

// AtOwn predicts the op's cost in a unit where it outputs out bytes and,
// a graph op, reads a graph of opEdges edges (< 0: not known): its sizes
// are AtOut's (an aggregation outputs a row per destination, whatever
// its edges); its times, for a graph op whose points recorded the edges
// they read (Point.OpEdges), interpolate along them, as its work follows
// the edges it reads, and otherwise are AtOut's too.
func (o *OpProfile) AtOwn(out, opEdges, rows, edges int64) Cost {
	c := o.AtOut(out, rows, edges)
	x := func(pt Point) float64 { return float64(pt.OpEdges) }
	if o.Kind == core.KindGraph && opEdges >= 0 && rising(o.Points, x) {
		t := interpAlong(o.Points, x, float64(opEdges))
		c.Fwd, c.Bwd = t.Fwd, t.Bwd
	}
	return c
}

// interpAlong interpolates the points' fields at q along x (ascending
// over pts): linearly between the two nearest, linearly beyond the ends
// but below the first between its value in proportion and its value, in
// proportion with one point, never below zero.
func interpAlong(pts []Point, x func(Point) float64, q float64) Cost {
	fields := func(pt Point) [7]float64 {
		return [7]float64{float64(pt.Fwd), float64(pt.Bwd), float64(pt.Mem), float64(pt.OutBytes), float64(pt.Temp),
			float64(pt.GradIn), float64(pt.GradOut)}
	}
	var y [7]float64
	if len(pts) == 1 {
		f := fields(pts[0])
		s := 0.0
		if x0 := x(pts[0]); x0 > 0 {
			s = q / x0
		}
		for k := range y {
			y[k] = f[k] * s
		}
	} else {
		// The segment holding q, or the end segment beyond the ladder.
		i := sort.Search(len(pts), func(i int) bool { return x(pts[i]) >= q })
		i = min(max(i, 1), len(pts)-1)
		a, b := pts[i-1], pts[i]
		xa, xb := x(a), x(b)
		fa, fb := fields(a), fields(b)
		t := 0.0
		if xb != xa {
			t = (q - xa) / (xb - xa)
		}
		for k := range y {
			y[k] = fa[k] + t*(fb[k]-fa[k])
		}
		if x0 := x(pts[0]); q < x0 && x0 > 0 {
			// Below the ladder: the first segment's line keeps a fixed
			// cost (a launch) where it has one; where it would fall
			// faster than in proportion (even below zero), proportion;
			// never above the first point.
			f0 := fields(pts[0])
			for k := range y {
				y[k] = min(max(y[k], f0[k]*q/x0), f0[k])
			}
		}
	}
	for k := range y {
		y[k] = max(0, y[k])
	}
	return Cost{Fwd: time.Duration(math.Round(y[0])), Bwd: time.Duration(math.Round(y[1])),
		Mem: int64(math.Round(y[2])), OutBytes: int64(math.Round(y[3])), Temp: int64(math.Round(y[4])),
		GradIn: int64(math.Round(y[5])), GradOut: int64(math.Round(y[6]))}
}
