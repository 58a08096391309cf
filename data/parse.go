package data

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// The parsers of the shared layout's files. Each reads one file from an
// io.Reader and names it file in its messages; the counts that meta.json
// gives come in as arguments, so every parser can be fuzzed on its own.

// edgeData is the parsed edge file: src/dst for static graphs, events for
// dynamic ones (src/dst are then the events' endpoints too).
type edgeData struct {
	src, dst []int32
	events   []Event
}

// parseEdges parses the TAB-separated edge file with the columns cols over
// nodes nodes. Static files must list each edge once, with no self-loops,
// and, when undirected, with src < dst. Dynamic files must be sorted by
// time.
func parseEdges(r io.Reader, file string, cols edgeCols, nodes int, kind string, directed bool) (*edgeData, error) {
	l := newLines(r, file)
	var ed edgeData
	var f [][]byte
	prevTime := int64(math.MinInt64)
	prevLine := 0
	want := columnList(cols)
	for {
		b, ok := l.next()
		if !ok {
			break
		}
		if len(b) == 0 {
			return nil, l.errf("empty line; expected %d TAB-separated fields (%s)", cols.n, want)
		}
		f = splitTabs(f, b)
		if len(f) != cols.n {
			return nil, l.errf("%d TAB-separated fields, expected %d (%s): %s", len(f), cols.n, want, quote(b))
		}
		s, err := nodeField(l, f[cols.src], "src", nodes)
		if err != nil {
			return nil, err
		}
		d, err := nodeField(l, f[cols.dst], "dst", nodes)
		if err != nil {
			return nil, err
		}
		w := float32(1)
		if cols.weight >= 0 {
			v, ok := parseFloat(f[cols.weight])
			if !ok {
				return nil, l.errf("weight %s is not a finite number", quote(f[cols.weight]))
			}
			if v == 0 && kind == KindDynamic {
				return nil, l.errf("weight 0; a dynamic edge's weight is never 0 (its sign is the edge's sign): drop the line or give it a sign")
			}
			w = v
		}
		var t int64
		if cols.time >= 0 {
			v, ok := parseInt(f[cols.time])
			if !ok {
				return nil, l.errf("time %s is not an integer (Unix seconds)", quote(f[cols.time]))
			}
			t = v
		}
		if kind == KindDynamic {
			if t < prevTime {
				return nil, l.errf("time %d is before %d on line %d; events must be sorted by time", t, prevTime, prevLine)
			}
			prevTime, prevLine = t, l.n
			ed.events = append(ed.events, Event{Src: s, Dst: d, Weight: w, Time: t})
		} else {
			if s == d {
				return nil, l.errf("self-loop %d -> %d; static edge files have none", s, d)
			}
			if !directed && s > d {
				return nil, l.errf("edge %d %d has src > dst; an undirected edge is listed once with src < dst", s, d)
			}
		}
		ed.src = append(ed.src, s)
		ed.dst = append(ed.dst, d)
	}
	if err := l.Err(); err != nil {
		return nil, err
	}
	if kind == KindStatic {
		if k, j, ok := firstDuplicate(ed.src, ed.dst); ok {
			return nil, malformed(file, k+1, "edge %d %d repeats line %d; static edge files list each edge once", ed.src[k], ed.dst[k], j+1)
		}
	}
	return &ed, nil
}

func columnList(c edgeCols) string {
	names := make([]string, c.n)
	for i := range names {
		switch i {
		case c.src:
			names[i] = "src"
		case c.dst:
			names[i] = "dst"
		case c.weight:
			names[i] = "weight"
		case c.time:
			names[i] = "time"
		}
	}
	s := ""
	for i, n := range names {
		if i > 0 {
			s += " "
		}
		s += n
	}
	return s
}

// nodeField parses a node id in [0, nodes).
func nodeField(l *lines, b []byte, col string, nodes int) (int32, error) {
	v, ok := parseInt(b)
	if !ok {
		return 0, l.errf("%s %s is not an integer node id", col, quote(b))
	}
	if v < 0 || v >= int64(nodes) {
		return 0, l.errf("%s node id %d outside [0,%d)", col, v, nodes)
	}
	return int32(v), nil
}

// firstDuplicate finds an edge equal to an earlier one: it returns the
// later position k and the earlier j. Edges are compared as (src, dst).
func firstDuplicate(src, dst []int32) (k, j int, found bool) {
	key := func(i int) uint64 { return uint64(uint32(src[i]))<<32 | uint64(uint32(dst[i])) }
	sorted := true
	for i := 1; i < len(src); i++ {
		if key(i) <= key(i-1) {
			sorted = false
			break
		}
	}
	if sorted {
		return 0, 0, false
	}
	ord := make([]int32, len(src))
	for i := range ord {
		ord[i] = int32(i)
	}
	slices.SortStableFunc(ord, func(a, b int32) int {
		ka, kb := key(int(a)), key(int(b))
		switch {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
	best := -1
	for i := 1; i < len(ord); i++ {
		if key(int(ord[i])) == key(int(ord[i-1])) && (best < 0 || int(ord[i]) < int(ord[best])) {
			best = i
		}
	}
	if best < 0 {
		return 0, 0, false
	}
	// ord is stable, so ord[best-1] is an earlier line with the same edge;
	// walk back to the first one.
	first := best - 1
	for first > 0 && key(int(ord[first-1])) == key(int(ord[best])) {
		first--
	}
	return int(ord[best]), int(ord[first]), true
}

// parseLabels parses one class id per line for nodes nodes: values in
// [0, classes) or -1.
func parseLabels(r io.Reader, file string, nodes, classes int) ([]int32, error) {
	l := newLines(r, file)
	labels := make([]int32, 0, min(nodes, 1<<20))
	for {
		b, ok := l.next()
		if !ok {
			break
		}
		if l.n > nodes {
			return nil, l.errf("more than %d lines; expected one label per node (meta.json nodes = %d)", nodes, nodes)
		}
		v, ok := parseInt(b)
		if !ok {
			return nil, l.errf("%s is not an integer class id", quote(b))
		}
		if v < -1 || v >= int64(classes) {
			return nil, l.errf("label %d of node %d outside [0,%d) (or -1 for no label)", v, l.n-1, classes)
		}
		labels = append(labels, int32(v))
	}
	if err := l.Err(); err != nil {
		return nil, err
	}
	if len(labels) != nodes {
		return nil, mismatch(file, "%d lines, but meta.json says nodes = %d; the layout has one label per node (line i = node i): correct nodes or the file", len(labels), nodes)
	}
	return labels, nil
}

// parseSplit parses a split file: node ids, one a line, strictly ascending,
// in [0, nodes), each with a label (labels[id] >= 0).
func parseSplit(r io.Reader, file string, nodes int, labels []int32) ([]int32, error) {
	l := newLines(r, file)
	var ids []int32
	prev, prevLine := int64(-1), 0
	for {
		b, ok := l.next()
		if !ok {
			break
		}
		v, ok := parseInt(b)
		if !ok {
			return nil, l.errf("%s is not an integer node id", quote(b))
		}
		if v < 0 || v >= int64(nodes) {
			return nil, l.errf("node id %d outside [0,%d)", v, nodes)
		}
		if v == prev {
			return nil, l.errf("node %d listed twice (also line %d)", v, prevLine)
		}
		if v < prev {
			return nil, l.errf("node ids not ascending: %d after %d on line %d", v, prev, prevLine)
		}
		if labels != nil && labels[v] < 0 {
			return nil, l.errf("node %d has no label (-1 in the label file); split nodes must be labelled", v)
		}
		ids = append(ids, int32(v))
		prev, prevLine = v, l.n
	}
	if err := l.Err(); err != nil {
		return nil, err
	}
	return ids, nil
}

// checkDisjoint reports a node in two split sets.
func checkDisjoint(names []string, sets [][]int32) error {
	for a := 0; a < len(sets); a++ {
		for b := a + 1; b < len(sets); b++ {
			x, y := sets[a], sets[b]
			i, j := 0, 0
			for i < len(x) && j < len(y) { // both ascending
				switch {
				case x[i] < y[j]:
					i++
				case x[i] > y[j]:
					j++
				default:
					return &Error{File: names[a], Msg: fmt.Sprintf("node %d is also in %s; the split sets must be disjoint", x[i], names[b]), Kind: ErrMalformed}
				}
			}
		}
	}
	return nil
}

// parseNodeIDs parses the original ids of nodes nodes, one a line.
func parseNodeIDs(r io.Reader, file string, nodes int) ([]int64, error) {
	l := newLines(r, file)
	ids := make([]int64, 0, min(nodes, 1<<20))
	for {
		b, ok := l.next()
		if !ok {
			break
		}
		if l.n > nodes {
			return nil, l.errf("more than %d lines; expected one id per node (meta.json nodes = %d)", nodes, nodes)
		}
		v, ok := parseInt(b)
		if !ok {
			return nil, l.errf("%s is not an integer id", quote(b))
		}
		ids = append(ids, v)
	}
	if err := l.Err(); err != nil {
		return nil, err
	}
	if len(ids) != nodes {
		return nil, mismatch(file, "%d lines, but meta.json says nodes = %d; the layout has one original id per node (line i = node i): correct nodes or the file", len(ids), nodes)
	}
	if k, j, ok := firstRepeat(ids); ok {
		return nil, malformed(file, k+1, "original id %d repeats line %d; each node has its own original id", ids[k], j+1)
	}
	return ids, nil
}

// firstRepeat finds the earliest position k whose value equals an earlier
// one, and the first position j holding that value.
func firstRepeat(v []int64) (k, j int, found bool) {
	ord := make([]int32, len(v))
	for i := range ord {
		ord[i] = int32(i)
	}
	slices.SortStableFunc(ord, func(a, b int32) int { return cmp.Compare(v[a], v[b]) })
	k = -1
	for i := 1; i < len(ord); i++ {
		if v[ord[i]] == v[ord[i-1]] && (k < 0 || int(ord[i]) < k) {
			k = int(ord[i])
		}
	}
	if k < 0 {
		return 0, 0, false
	}
	j = k
	for _, i := range ord { // stable: the first index with the value comes first
		if v[i] == v[k] {
			j = int(i)
			break
		}
	}
	return k, j, true
}

// parseFeatures reads nodes*dim little-endian float32 values, all finite,
// and nothing more.
func parseFeatures(r io.Reader, file string, nodes, dim int) ([]float32, error) {
	if nodes < 0 || dim < 0 {
		return nil, malformed(file, 0, "negative shape %d x %d", nodes, dim)
	}
	count := int64(nodes) * int64(dim)
	if dim != 0 && count/int64(dim) != int64(nodes) || count > math.MaxInt64/4 {
		return nil, malformed(file, 0, "shape %d x %d is too large", nodes, dim)
	}
	want := count * 4
	out := make([]float32, 0, min(count, 1<<22))
	buf := make([]byte, 256<<10)
	var got int64
	for got < want {
		chunk := buf[:min(int64(len(buf)), want-got)]
		n, err := io.ReadFull(r, chunk)
		got += int64(n)
		for k := 0; k+4 <= n; k += 4 {
			v := math.Float32frombits(binary.LittleEndian.Uint32(chunk[k:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				i := int64(len(out))
				return nil, malformed(file, 0, "node %d feature %d (byte offset %d) is %v; features must be finite", i/int64(dim), i%int64(dim), 4*i, v)
			}
			out = append(out, v)
		}
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, mismatch(file, "truncated: %d bytes, expected %d (%d nodes x %d features x 4 bytes)", got, want, nodes, dim)
		}
		if err != nil {
			return nil, &Error{File: file, Msg: "read failed", Kind: ErrMalformed, Err: err}
		}
	}
	extra, err := io.Copy(io.Discard, r)
	if err != nil {
		return nil, &Error{File: file, Msg: "read failed", Kind: ErrMalformed, Err: err}
	}
	if extra > 0 {
		return nil, mismatch(file, "oversized: %d bytes, expected %d (%d nodes x %d features x 4 bytes)", want+extra, want, nodes, dim)
	}
	return out, nil
}
