package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/gnnkit/gnnkit/core"
)

// schedTok is one forward or backward task of a stream's schedule.
type schedTok struct {
	kind byte // 'F' or 'B'
	unit int
}

func (t schedTok) String() string { return fmt.Sprintf("%c%d", t.kind, t.unit) }

// compressSchedule writes a stream's forward and backward tasks in order,
// collapsing runs of one kind over evenly spaced micro-batches ("F0-2";
// a replica's every d-th: "F1,3…15") and the alternation of 1F1B's steady
// part ("B0 F3 … B12 F15 (13×)").
func compressSchedule(toks []schedTok) string {
	var parts []string
	for i := 0; i < len(toks); {
		a := toks[i]
		// A run of one kind with a constant positive stride.
		if i+1 < len(toks) && toks[i+1].kind == a.kind && toks[i+1].unit > a.unit {
			stride := toks[i+1].unit - a.unit
			j := i + 1
			for j+1 < len(toks) && toks[j+1].kind == a.kind && toks[j+1].unit-toks[j].unit == stride {
				j++
			}
			z := toks[j]
			switch {
			case j == i+1:
				parts = append(parts, a.String(), z.String())
			case stride == 1:
				parts = append(parts, fmt.Sprintf("%c%d-%d", a.kind, a.unit, z.unit))
			default:
				parts = append(parts, fmt.Sprintf("%c%d,%d…%d", a.kind, a.unit, a.unit+stride, z.unit))
			}
			i = j + 1
			continue
		}
		// Alternating pairs (a b)(a' b')… with both advancing by one stride.
		if i+3 < len(toks) && toks[i+1].kind != a.kind {
			b := toks[i+1]
			stride := toks[i+2].unit - a.unit
			pair := func(n int) bool { // is pair n the pattern's?
				k := i + 2*n
				return k+1 < len(toks) && toks[k].kind == a.kind && toks[k+1].kind == b.kind &&
					toks[k].unit == a.unit+n*stride && toks[k+1].unit == b.unit+n*stride
			}
			n := 1
			for stride > 0 && pair(n) {
				n++
			}
			if n >= 3 {
				last := i + 2*(n-1)
				parts = append(parts, fmt.Sprintf("%s %s … %s %s (%d×)", a, b, toks[last], toks[last+1], n))
				i += 2 * n
				continue
			}
		}
		parts = append(parts, a.String())
		i++
	}
	return strings.Join(parts, " ")
}

// scheduleRow is one device stream's schedule.
type scheduleRow struct {
	Device core.DeviceID
	Stream int
	Stage  int    // -1: no stage (a stream of reductions and steps)
	Tasks  string // compressed forward/backward order, then the flush
}

// scheduleOf lists every stream's tasks in plan order; stages (from
// Plan.StageGraph) name the stage each stream runs.
func scheduleOf(p *core.Plan, stages []core.Stage) []scheduleRow {
	toks := map[streamKey][]schedTok{}
	flush := map[streamKey][]string{}
	var order []streamKey
	seen := map[streamKey]bool{}
	for _, t := range p.Tasks {
		k := streamKey{t.Device, t.Stream}
		if !seen[k] {
			seen[k] = true
			order = append(order, k)
		}
		switch t.Kind {
		case core.TaskForward:
			toks[k] = append(toks[k], schedTok{'F', t.Unit})
		case core.TaskBackward:
			toks[k] = append(toks[k], schedTok{'B', t.Unit})
		case core.TaskReduceGrads:
			flush[k] = append(flush[k], "reduce←"+string(t.From))
		case core.TaskStep:
			if n := len(t.Params); n == 1 { // one of its device's step groups
				flush[k] = append(flush[k], "step of 1 parameter")
			} else if n > 1 {
				flush[k] = append(flush[k], fmt.Sprintf("step of %d parameters", n))
			} else {
				flush[k] = append(flush[k], "step")
			}
		}
	}
	stageOf := map[streamKey]int{}
	for si, st := range stages {
		for _, r := range st.Replicas {
			stageOf[streamKey{r.Device, r.Stream}] = si
		}
	}
	sortStreams(order)
	rows := make([]scheduleRow, 0, len(order))
	for _, k := range order {
		si, ok := stageOf[k]
		if !ok {
			si = -1
		}
		s := compressSchedule(toks[k])
		if f := compressFlush(flush[k]); f != "" {
			if s != "" {
				s += " · "
			}
			s += f
		}
		rows = append(rows, scheduleRow{Device: k.d, Stream: k.s, Stage: si, Tasks: s})
	}
	return rows
}

// compressFlush writes a stream's reductions and steps, consecutive
// reductions as one count.
func compressFlush(items []string) string {
	var parts []string
	for i := 0; i < len(items); {
		j := i
		for j+1 < len(items) && strings.HasPrefix(items[j+1], "reduce") && strings.HasPrefix(items[i], "reduce") {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d reductions", j-i+1))
		} else {
			parts = append(parts, items[i])
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// replicasString writes a stage's replicas grouped by stream, each
// group's devices as index ranges: "cuda:0-3 stream 2".
func replicasString(rs []core.StageReplica) string {
	byStream := map[int][]core.DeviceID{}
	var streams []int
	for _, r := range rs {
		if byStream[r.Stream] == nil {
			streams = append(streams, r.Stream)
		}
		byStream[r.Stream] = append(byStream[r.Stream], r.Device)
	}
	sort.Ints(streams)
	var parts []string
	for _, s := range streams {
		parts = append(parts, fmt.Sprintf("%s stream %d", deviceRanges(byStream[s]), s))
	}
	return strings.Join(parts, "; ")
}

// deviceRanges writes device ids with consecutive indices of one backend
// as ranges: cuda:0-3,5 cpu:1.
func deviceRanges(ids []core.DeviceID) string {
	type dev struct {
		backend string
		index   int
	}
	var devs []dev
	var other []string
	for _, id := range ids {
		b, i, err := core.ParseDeviceID(string(id))
		if err != nil {
			other = append(other, string(id))
			continue
		}
		devs = append(devs, dev{b, i})
	}
	sort.Slice(devs, func(i, j int) bool {
		if devs[i].backend != devs[j].backend {
			return devs[i].backend < devs[j].backend
		}
		return devs[i].index < devs[j].index
	})
	var parts []string
	for i := 0; i < len(devs); {
		j := i
		var idx []string
		for j < len(devs) && devs[j].backend == devs[i].backend {
			k := j
			for k+1 < len(devs) && devs[k+1].backend == devs[j].backend && devs[k+1].index == devs[k].index+1 {
				k++
			}
			if k > j {
				idx = append(idx, fmt.Sprintf("%d-%d", devs[j].index, devs[k].index))
			} else {
				idx = append(idx, strconv.Itoa(devs[j].index))
			}
			j = k + 1
		}
		parts = append(parts, devs[i].backend+":"+strings.Join(idx, ","))
		i = j
	}
	return strings.Join(append(parts, other...), " ")
}

// opsString names a stage's ops: all of them when few, else the first
// and the last with the count.
func opsString(ops []int, w *core.Workload) string {
	name := func(o int) string { return w.Ops[o].Name }
	switch len(ops) {
	case 0:
		return "no ops"
	case 1:
		return "1 op: " + name(ops[0])
	case 2, 3:
		var ns []string
		for _, o := range ops {
			ns = append(ns, name(o))
		}
		return fmt.Sprintf("%d ops: %s", len(ops), strings.Join(ns, " "))
	}
	gaps := ""
	if ops[len(ops)-1]-ops[0] != len(ops)-1 {
		gaps = " (not contiguous)"
	}
	return fmt.Sprintf("%d ops: %s … %s%s", len(ops), name(ops[0]), name(ops[len(ops)-1]), gaps)
}

// stageEdges writes "s0 → s3, s4" (or "s5 (sink)").
func stageEdges(i int, st core.Stage) string {
	if len(st.Succ) == 0 {
		return fmt.Sprintf("s%d (sink)", i)
	}
	var ss []string
	for _, t := range st.Succ {
		ss = append(ss, fmt.Sprintf("s%d", t))
	}
	return fmt.Sprintf("s%d → %s", i, strings.Join(ss, ", "))
}

// dotQuote quotes s as a Graphviz string: only '"' and '\\' escaped,
// newlines as \n (Graphviz reads no other escapes, so strconv.Quote's
// \t or \u00ad would show as text).
func dotQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// writeDOT writes the stage DAG for Graphviz (dot -Tsvg).
func writeDOT(out io.Writer, stages []core.Stage, w *core.Workload, title string) error {
	q := dotQuote
	fmt.Fprintf(out, "digraph stages {\n  label=%s;\n  labelloc=t;\n  rankdir=LR;\n  node [shape=box, fontname=\"Helvetica\"];\n", q(title))
	for i, st := range stages {
		label := fmt.Sprintf("s%d: %s\n%s\n%s, k=%d", i, opsString(st.Ops, w), replicasString(st.Replicas), units(st.Units), st.Depth)
		fmt.Fprintf(out, "  s%d [label=%s];\n", i, q(label))
	}
	for i, st := range stages {
		for _, t := range st.Succ {
			fmt.Fprintf(out, "  s%d -> s%d;\n", i, t)
		}
	}
	_, err := fmt.Fprintln(out, "}")
	return err
}

// units writes "1 unit" or "n units".
func units(n int) string {
	if n == 1 {
		return "1 unit"
	}
	return fmt.Sprintf("%d units", n)
}
