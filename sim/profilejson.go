package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// ProfileFormat names the JSON layout WriteProfile writes.
const ProfileFormat = "graphpipe-profile+gnnkit/1"

// ErrBadProfile is wrapped by every error reading a malformed profile.
var ErrBadProfile = errors.New("sim: malformed profile")

// fileOp is one op record of GraphPipe's profile.json (inputs,
// input_size, weight_size, runtime[batch_size], reserved_mem[batch_size])
// plus gnnkit's fields. Maps are keyed by the batch size in rows, as a
// decimal string; times are milliseconds, memory bytes.
type fileOp struct {
	ID          *int               `json:"id,omitempty"`
	Name        string             `json:"name,omitempty"`
	Kind        string             `json:"kind,omitempty"`
	Inputs      []int              `json:"inputs"`
	InputSize   float64            `json:"input_size"`
	WeightSize  float64            `json:"weight_size"`
	Runtime     map[string]float64 `json:"runtime"`
	ReservedMem map[string]float64 `json:"reserved_mem"`

	ForwardMs         map[string]float64 `json:"forward_ms,omitempty"`
	BackwardMs        map[string]float64 `json:"backward_ms,omitempty"`
	OutputBytes       map[string]float64 `json:"output_bytes,omitempty"`
	BackwardMem       map[string]float64 `json:"backward_mem,omitempty"`
	GradInBytes       map[string]float64 `json:"grad_in_bytes,omitempty"`
	GradOutBytes      map[string]float64 `json:"grad_out_bytes,omitempty"`
	OpEdges           map[string]float64 `json:"op_edges,omitempty"`
	OutputBytesPerRow *float64           `json:"output_bytes_per_row,omitempty"`
}

type fileLadder struct {
	Rows  int64 `json:"rows"`
	Edges int64 `json:"edges"`
}

type fileSetup struct {
	ForwardMs  map[string]float64 `json:"forward_ms"`
	BackwardMs map[string]float64 `json:"backward_ms"`
	InputBytes map[string]float64 `json:"input_bytes"`
	// WholeGraph lists the batch sizes measured with a unit computing the
	// whole graph (Point.Whole).
	WholeGraph []int64 `json:"whole_graph,omitempty"`
}

type fileProfile struct {
	Format              string           `json:"format,omitempty"`
	Model               string           `json:"model,omitempty"`
	Device              *core.DeviceInfo `json:"device,omitempty"`
	TimeUnit            string           `json:"time_unit,omitempty"`
	Ladder              []fileLadder     `json:"ladder,omitempty"`
	ParamBytes          float64          `json:"param_bytes,omitempty"`
	OptStateBytes       float64          `json:"optimizer_state_bytes,omitempty"`
	ResidentInputBytes  float64          `json:"resident_input_bytes,omitempty"`
	StepMs              float64          `json:"step_ms,omitempty"`
	HandoffMs           float64          `json:"handoff_ms,omitempty"`
	HandoffBusyMs       float64          `json:"handoff_busy_ms,omitempty"`
	IterationOverheadMs float64          `json:"iteration_overhead_ms,omitempty"`
	Setup               *fileSetup       `json:"setup,omitempty"`
	Ops                 []fileOp         `json:"ops"`
}

// WriteProfile writes p as JSON in GraphPipe's profile schema: an object
// whose "ops" are GraphPipe's per-op records — "inputs" (predecessor op
// ids), "input_size" (elements per sample), "weight_size" (bytes),
// "runtime" (forward + backward milliseconds by batch size) and
// "reserved_mem" (bytes by batch size) — with gnnkit's fields beside them:
// "forward_ms", "backward_ms", "output_bytes", "backward_mem" (bytes the
// backward needs while it runs), "grad_in_bytes" and "grad_out_bytes"
// (gradients it leaves and frees; see Point.Temp), "op_edges" (the edges a
// graph op read: Point.OpEdges), "output_bytes_per_row" and "kind" per op, and the ladder's edge counts, the resident sizes, the
// optimizer step, the executor's handoffs and iteration overhead and the
// per-unit setup at the top level. Batch sizes are
// rows (nodes computed; samples for models without a graph).
func WriteProfile(w io.Writer, p *Profile) error {
	if err := p.Validate(); err != nil {
		return err
	}
	f := fileProfile{Format: ProfileFormat, Model: p.Model, TimeUnit: "ms",
		ParamBytes: float64(p.ParamBytes), OptStateBytes: float64(p.OptStateBytes),
		ResidentInputBytes: float64(p.ResidentInputBytes), StepMs: ms(p.Step),
		HandoffMs: ms(p.Handoff), HandoffBusyMs: ms(p.HandoffBusy), IterationOverheadMs: ms(p.IterationOverhead)}
	if p.Device.ID != "" || p.Device.Name != "" || p.Device.Backend != "" {
		d := p.Device
		f.Device = &d
	}
	ladder := map[int64]int64{}
	for _, op := range p.Ops {
		for _, pt := range op.Points {
			ladder[pt.Rows] = max(ladder[pt.Rows], pt.Edges)
		}
	}
	for _, pt := range p.Setup {
		ladder[pt.Rows] = max(ladder[pt.Rows], pt.Edges)
	}
	for r, e := range ladder {
		f.Ladder = append(f.Ladder, fileLadder{Rows: r, Edges: e})
	}
	sort.Slice(f.Ladder, func(i, j int) bool { return f.Ladder[i].Rows < f.Ladder[j].Rows })
	if len(p.Setup) > 0 {
		s := &fileSetup{ForwardMs: map[string]float64{}, BackwardMs: map[string]float64{}, InputBytes: map[string]float64{}}
		for _, pt := range p.Setup {
			k := strconv.FormatInt(pt.Rows, 10)
			s.ForwardMs[k], s.BackwardMs[k], s.InputBytes[k] = ms(pt.Fwd), ms(pt.Bwd), float64(pt.Mem)
			if pt.Whole {
				s.WholeGraph = append(s.WholeGraph, pt.Rows)
			}
		}
		f.Setup = s
	}
	for i, op := range p.Ops {
		id := i
		per := op.OutBytesPerRow
		fo := fileOp{ID: &id, Name: op.Name, Kind: op.Kind.String(), Inputs: append([]int{}, op.Preds...),
			InputSize: op.InputSize, WeightSize: float64(op.WeightBytes), OutputBytesPerRow: &per,
			Runtime: map[string]float64{}, ReservedMem: map[string]float64{}, ForwardMs: map[string]float64{},
			BackwardMs: map[string]float64{}, OutputBytes: map[string]float64{}, BackwardMem: map[string]float64{}}
		for _, pt := range op.Points {
			k := strconv.FormatInt(pt.Rows, 10)
			fo.Runtime[k] = ms(pt.Fwd + pt.Bwd)
			fo.ReservedMem[k] = float64(pt.Mem)
			fo.ForwardMs[k] = ms(pt.Fwd)
			fo.BackwardMs[k] = ms(pt.Bwd)
			fo.OutputBytes[k] = float64(pt.OutBytes)
			fo.BackwardMem[k] = float64(pt.Temp)
			if pt.GradIn != 0 || pt.GradOut != 0 {
				if fo.GradInBytes == nil {
					fo.GradInBytes, fo.GradOutBytes = map[string]float64{}, map[string]float64{}
				}
				fo.GradInBytes[k], fo.GradOutBytes[k] = float64(pt.GradIn), float64(pt.GradOut)
			}
			if pt.OpEdges != 0 {
				if fo.OpEdges == nil {
					fo.OpEdges = map[string]float64{}
				}
				fo.OpEdges[k] = float64(pt.OpEdges)
			}
		}
		f.Ops = append(f.Ops, fo)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(f)
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// ReadProfile reads a profile written by WriteProfile or by GraphPipe's
// profiler: either an object with "ops" or a bare array of op records.
// Records with only GraphPipe's fields get a forward/backward split of
// 1:2 of "runtime" and output sizes derived from their consumers'
// "input_size" (4-byte elements; a consumer with several inputs is split
// evenly among them). Times are milliseconds unless "time_unit" says
// "us", "ns" or "s". Malformed input is an error wrapping ErrBadProfile
// that names the op and field.
func ReadProfile(r io.Reader) (*Profile, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("sim: reading profile: %w", err)
	}
	return ParseProfile(b)
}

// ParseProfile is ReadProfile on bytes.
func ParseProfile(b []byte) (*Profile, error) {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrBadProfile, fmt.Sprintf(format, a...))
	}
	var f fileProfile
	t := bytes.TrimSpace(b)
	switch {
	case len(t) == 0:
		return nil, fail("empty input")
	case t[0] == '[':
		if err := json.Unmarshal(t, &f.Ops); err != nil {
			return nil, fail("%v", err)
		}
	case t[0] == '{':
		if err := json.Unmarshal(t, &f); err != nil {
			return nil, fail("%v", err)
		}
	default:
		return nil, fail("want a JSON object with \"ops\" or an array of op records")
	}
	if len(f.Ops) == 0 {
		return nil, fail("no ops")
	}
	unit := 1e6 // ms
	switch strings.ToLower(f.TimeUnit) {
	case "", "ms":
	case "us", "µs":
		unit = 1e3
	case "ns":
		unit = 1
	case "s":
		unit = 1e9
	default:
		return nil, fail("time_unit %q: want ms, us, ns or s", f.TimeUnit)
	}
	dur := func(v float64, what string) (time.Duration, error) {
		d := v * unit
		if bad(v) || d > math.MaxInt64/2 {
			return 0, fail("%s: time %v is negative or out of range", what, v)
		}
		return time.Duration(math.Round(d)), nil
	}
	size := func(v float64, what string) (int64, error) {
		if bad(v) || v > math.MaxInt64/2 {
			return 0, fail("%s: size %v is negative or out of range", what, v)
		}
		return int64(math.Round(v)), nil
	}
	p := &Profile{Model: f.Model}
	if f.Device != nil {
		p.Device = *f.Device
	}
	var err error
	if p.ParamBytes, err = size(f.ParamBytes, "param_bytes"); err != nil {
		return nil, err
	}
	if p.OptStateBytes, err = size(f.OptStateBytes, "optimizer_state_bytes"); err != nil {
		return nil, err
	}
	if p.ResidentInputBytes, err = size(f.ResidentInputBytes, "resident_input_bytes"); err != nil {
		return nil, err
	}
	for _, t := range []struct {
		to   *time.Duration
		ms   float64
		name string
	}{{&p.Step, f.StepMs, "step_ms"}, {&p.Handoff, f.HandoffMs, "handoff_ms"},
		{&p.HandoffBusy, f.HandoffBusyMs, "handoff_busy_ms"}, {&p.IterationOverhead, f.IterationOverheadMs, "iteration_overhead_ms"}} {
		if *t.to, err = dur(t.ms, t.name); err != nil {
			return nil, err
		}
	}
	edges := map[int64]int64{}
	for _, l := range f.Ladder {
		if l.Rows <= 0 || l.Edges < 0 {
			return nil, fail("ladder entry {rows %d, edges %d}: want positive rows and non-negative edges", l.Rows, l.Edges)
		}
		if _, ok := edges[l.Rows]; ok {
			return nil, fail("ladder lists %d rows twice", l.Rows)
		}
		edges[l.Rows] = l.Edges
	}
	// Order ops by id (positional when no ids are given).
	n := len(f.Ops)
	ops := make([]*fileOp, n)
	for i := range f.Ops {
		fo := &f.Ops[i]
		id := i
		if fo.ID != nil {
			id = *fo.ID
		}
		if id < 0 || id >= n {
			return nil, fail("op record %d has id %d; ids must be 0..%d", i, id, n-1)
		}
		if ops[id] != nil {
			return nil, fail("two op records have id %d", id)
		}
		ops[id] = fo
	}
	keys := func(m map[string]float64, where, field string) ([]int64, error) {
		out := make([]int64, 0, len(m))
		for k := range m {
			v, err := strconv.ParseInt(strings.TrimSpace(k), 10, 64)
			if err != nil || v <= 0 {
				return nil, fail("%s: %s key %q is not a positive batch size", where, field, k)
			}
			out = append(out, v)
		}
		sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
		for i := 1; i < len(out); i++ {
			if out[i] == out[i-1] {
				return nil, fail("%s: %s lists batch size %d twice", where, field, out[i])
			}
		}
		return out, nil
	}
	get := func(m map[string]float64, r int64) (float64, bool) {
		if v, ok := m[strconv.FormatInt(r, 10)]; ok {
			return v, true
		}
		for k, v := range m { // keys written with spaces or leading zeros
			if x, err := strconv.ParseInt(strings.TrimSpace(k), 10, 64); err == nil && x == r {
				return v, true
			}
		}
		return 0, false
	}
	consumers := make([][]int, n)
	for i, fo := range ops {
		for _, d := range fo.Inputs {
			if d < 0 || d >= n || d == i {
				return nil, fail("op %d (%q): input %d is not another op id (0..%d)", i, fo.Name, d, n-1)
			}
			consumers[d] = append(consumers[d], i)
		}
	}
	for i, fo := range ops {
		where := fmt.Sprintf("op %d (%q)", i, fo.Name)
		name := fo.Name
		if name == "" {
			name = fmt.Sprintf("op%d", i)
		}
		op := OpProfile{Name: name, Preds: append([]int(nil), fo.Inputs...), InputSize: fo.InputSize}
		if bad(fo.InputSize) {
			return nil, fail("%s: input_size %v is negative", where, fo.InputSize)
		}
		if op.WeightBytes, err = size(fo.WeightSize, where+": weight_size"); err != nil {
			return nil, err
		}
		if fo.Kind != "" {
			k, ok := parseKind(fo.Kind)
			if !ok {
				return nil, fail("%s: unknown kind %q", where, fo.Kind)
			}
			op.Kind = k
		}
		split := fo.ForwardMs != nil || fo.BackwardMs != nil
		src := fo.Runtime
		if split {
			if len(fo.ForwardMs) != len(fo.BackwardMs) {
				return nil, fail("%s: forward_ms and backward_ms list different batch sizes", where)
			}
			src = fo.ForwardMs
		}
		rows, err := keys(src, where, "runtime")
		if err != nil {
			return nil, err
		}
		if len(rows) == 0 {
			return nil, fail("%s: no runtime measurements", where)
		}
		for _, field := range []struct {
			name string
			m    map[string]float64
		}{{"runtime", fo.Runtime}, {"reserved_mem", fo.ReservedMem}, {"backward_ms", fo.BackwardMs}, {"output_bytes", fo.OutputBytes}, {"backward_mem", fo.BackwardMem},
			{"grad_in_bytes", fo.GradInBytes}, {"grad_out_bytes", fo.GradOutBytes}, {"op_edges", fo.OpEdges}} {
			if _, err := keys(field.m, where, field.name); err != nil {
				return nil, err
			}
		}
		for _, r := range rows {
			pt := Point{Rows: r, Edges: edges[r]}
			at := fmt.Sprintf("%s at batch size %d", where, r)
			if split {
				fv, _ := get(fo.ForwardMs, r)
				bv, ok := get(fo.BackwardMs, r)
				if !ok {
					return nil, fail("%s: backward_ms missing", at)
				}
				if pt.Fwd, err = dur(fv, at+": forward_ms"); err != nil {
					return nil, err
				}
				if pt.Bwd, err = dur(bv, at+": backward_ms"); err != nil {
					return nil, err
				}
				// GraphPipe's runtime beside them is not read, but must
				// not be nonsense either.
				if v, ok := get(fo.Runtime, r); ok {
					if _, err := dur(v, at+": runtime"); err != nil {
						return nil, err
					}
				}
			} else {
				v, _ := get(fo.Runtime, r)
				total, err := dur(v, at+": runtime")
				if err != nil {
					return nil, err
				}
				pt.Fwd = total / 3
				pt.Bwd = total - pt.Fwd
			}
			if v, ok := get(fo.ReservedMem, r); ok {
				if pt.Mem, err = size(v, at+": reserved_mem"); err != nil {
					return nil, err
				}
			}
			if v, ok := get(fo.OutputBytes, r); ok {
				if pt.OutBytes, err = size(v, at+": output_bytes"); err != nil {
					return nil, err
				}
			}
			if v, ok := get(fo.BackwardMem, r); ok {
				if pt.Temp, err = size(v, at+": backward_mem"); err != nil {
					return nil, err
				}
			}
			if v, ok := get(fo.GradInBytes, r); ok {
				if pt.GradIn, err = size(v, at+": grad_in_bytes"); err != nil {
					return nil, err
				}
			}
			if v, ok := get(fo.GradOutBytes, r); ok {
				if pt.GradOut, err = size(v, at+": grad_out_bytes"); err != nil {
					return nil, err
				}
			}
			if v, ok := get(fo.OpEdges, r); ok {
				if pt.OpEdges, err = size(v, at+": op_edges"); err != nil {
					return nil, err
				}
			}
			op.Points = append(op.Points, pt)
		}
		switch {
		case fo.OutputBytesPerRow != nil:
			if bad(*fo.OutputBytesPerRow) {
				return nil, fail("%s: output_bytes_per_row %v is negative", where, *fo.OutputBytesPerRow)
			}
			op.OutBytesPerRow = *fo.OutputBytesPerRow
		default:
			// GraphPipe records only input sizes: an op's output is what
			// its consumers read.
			per := -1.0
			for _, c := range consumers[i] {
				share := ops[c].InputSize * 4 / float64(len(ops[c].Inputs))
				if len(ops[c].Inputs) == 1 || per < 0 {
					per = share
				}
				if len(ops[c].Inputs) == 1 {
					break
				}
			}
			op.OutBytesPerRow = max(per, 0)
		}
		if fo.OutputBytes == nil {
			for k := range op.Points {
				op.Points[k].OutBytes = int64(math.Round(op.OutBytesPerRow * float64(op.Points[k].Rows)))
			}
		}
		p.Ops = append(p.Ops, op)
	}
	if f.Setup != nil {
		rows, err := keys(f.Setup.ForwardMs, "setup", "forward_ms")
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			at := fmt.Sprintf("setup at batch size %d", r)
			pt := Point{Rows: r, Edges: edges[r], Whole: slices.Contains(f.Setup.WholeGraph, r)}
			fv, _ := get(f.Setup.ForwardMs, r)
			bv, _ := get(f.Setup.BackwardMs, r)
			mv, _ := get(f.Setup.InputBytes, r)
			if pt.Fwd, err = dur(fv, at); err != nil {
				return nil, err
			}
			if pt.Bwd, err = dur(bv, at); err != nil {
				return nil, err
			}
			if pt.Mem, err = size(mv, at+": input_bytes"); err != nil {
				return nil, err
			}
			p.Setup = append(p.Setup, pt)
		}
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadProfile, err)
	}
	return p, nil
}

func parseKind(s string) (core.OpKind, bool) {
	for k := core.KindDense; k <= core.KindGather; k++ {
		if k.String() == s {
			return k, true
		}
	}
	return 0, false
}
