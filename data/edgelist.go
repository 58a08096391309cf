package data

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// EdgeListOptions tunes LoadEdgeList and ParseEdgeList. The zero value
// reads an undirected graph whose ids are 0..max.
type EdgeListOptions struct {
	// Directed keeps each edge src -> dst as given. By default a static
	// list is undirected: both directions of every edge are stored.
	// Timed lists (four columns) are always directed event streams.
	Directed bool
	// Remap maps the ids, any non-negative integers, to 0..n-1 in
	// ascending order of original id; Dataset.NodeIDs keeps the originals.
	// Without it ids are used as they are, and n is the largest id plus 1.
	Remap bool
	// NumNodes, when > 0, fixes the node count (ids must be below it);
	// it cannot be combined with Remap.
	NumNodes int
	// Name names the dataset; by default the file name without extension.
	Name string

	// cli is set when the list comes through Open, as a command-line
	// --data value: its errors then say what a user of the command can do
	// (renumber the ids) instead of naming Remap and NumNodes.
	cli bool
}

// denseIDsHint says, in an error about node ids too large or too sparse to
// use as node numbers, what the reader of the message can do about it.
func denseIDsHint(opt EdgeListOptions) string {
	if opt.cli {
		return "edge-list ids are used as node numbers, so renumber them densely from 0 to n-1 " +
			"(a dataset folder in the shared layout can keep the original ids in node_ids.txt; see shared/data/README.md)"
	}
	return "use Remap (or set NumNodes)"
}

// LoadEdgeList reads a plain edge-list file: one edge a line, "src dst",
// "src dst weight" or "src dst weight time", fields separated by spaces,
// TABs or commas; blank lines and lines starting with '#' or '%' are
// skipped. Every line must
// have the same number of fields. Static lists (2 or 3 fields; weights are
// checked and dropped) give a graph without self-loops or duplicate edges
// (what was dropped is listed in Warnings). Lists with a time column give
// a dynamic dataset whose events are sorted by time (stably).
func LoadEdgeList(path string, opt EdgeListOptions) (*Dataset, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Msg: "cannot open edge list", Kind: ErrMissingFile, Err: err}
	}
	defer f.Close()
	if opt.Name == "" {
		base := filepath.Base(path)
		opt.Name = strings.TrimSuffix(base, filepath.Ext(base))
	}
	d, err := ParseEdgeList(f, path, opt)
	if err != nil {
		return nil, err
	}
	d.Source = path
	return d, nil
}

// ParseEdgeList is LoadEdgeList over a reader; file names it in messages.
func ParseEdgeList(r io.Reader, file string, opt EdgeListOptions) (*Dataset, error) {
	if opt.NumNodes < 0 || opt.NumNodes > maxNodes {
		return nil, &Error{File: file, Msg: fmt.Sprintf("EdgeListOptions.NumNodes = %d, want 0..%d", opt.NumNodes, maxNodes), Kind: ErrSpec}
	}
	if opt.Remap && opt.NumNodes > 0 {
		return nil, &Error{File: file, Msg: "EdgeListOptions.NumNodes cannot be combined with Remap", Kind: ErrSpec}
	}
	l := newLines(r, file)
	var (
		f             [][]byte
		cols, colLine int
		src64, dst64  []int64 // with Remap
		src, dst      []int32 // without
		events        []Event
		maxID         = int64(-1)
		limit         = int64(maxNodes) // ids must be below
	)
	if opt.NumNodes > 0 {
		limit = int64(opt.NumNodes)
	}
	for {
		b, ok := l.next()
		if !ok {
			break
		}
		t := trimSpace(b)
		if len(t) == 0 || t[0] == '#' || t[0] == '%' {
			continue
		}
		f = splitLoose(f, t)
		if cols == 0 {
			if len(f) < 2 || len(f) > 4 {
				return nil, l.errf("%d fields, expected 2 to 4 (src dst [weight [time]]): %s", len(f), quote(b))
			}
			cols, colLine = len(f), l.n
		} else if len(f) != cols {
			return nil, l.errf("%d fields, but line %d has %d; every line needs the same columns (src dst [weight [time]]): %s", len(f), colLine, cols, quote(b))
		}
		var ids [2]int64
		for k, name := range [2]string{"src", "dst"} {
			v, ok := parseInt(f[k])
			if !ok {
				return nil, l.errf("%s %s is not an integer node id", name, quote(f[k]))
			}
			if v < 0 {
				return nil, l.errf("%s node id %d is negative; ids must be non-negative integers", name, v)
			}
			if !opt.Remap && v >= limit {
				if opt.NumNodes > 0 {
					return nil, l.errf("%s node id %d outside [0,%d) (NumNodes)", name, v, limit)
				}
				if opt.cli {
					return nil, l.errf("%s node id %d is too large: node ids must be below %d; %s", name, v, limit, denseIDsHint(opt))
				}
				return nil, l.errf("%s node id %d outside [0,%d); ids must fit int32, or use Remap", name, v, limit)
			}
			maxID = max(maxID, v)
			ids[k] = v
		}
		w := float32(1)
		if cols >= 3 {
			v, ok := parseFloat(f[2])
			if !ok {
				return nil, l.errf("weight %s is not a finite number", quote(f[2]))
			}
			w = v
		}
		var tm int64
		if cols == 4 {
			v, ok := parseInt(f[3])
			if !ok {
				return nil, l.errf("time %s is not an integer", quote(f[3]))
			}
			tm = v
			events = append(events, Event{Weight: w, Time: tm})
		}
		if opt.Remap {
			src64 = append(src64, ids[0])
			dst64 = append(dst64, ids[1])
		} else {
			src = append(src, int32(ids[0]))
			dst = append(dst, int32(ids[1]))
		}
	}
	if err := l.Err(); err != nil {
		return nil, err
	}

	d := &Dataset{Name: opt.Name, Kind: KindStatic, Source: file}
	if d.Name == "" {
		d.Name = file
	}
	n := opt.NumNodes
	switch {
	case opt.Remap:
		var err error
		src, dst, d.NodeIDs, err = remap(src64, dst64, maxID)
		if err != nil {
			return nil, malformed(file, 0, "%v", err)
		}
		n = len(d.NodeIDs)
	case n == 0:
		n = int(maxID + 1)
		if edges := len(src); n > 1<<24 && n/16 > edges {
			return nil, malformed(file, 0, "largest node id %d for only %d edges would make %d mostly isolated nodes; %s", maxID, edges, n, denseIDsHint(opt))
		}
	}
	d.NumNodes = n

	var st csrStats
	var err error
	if cols == 4 {
		d.Kind = KindDynamic
		d.Directed = true
		for k := range events {
			events[k].Src, events[k].Dst = src[k], dst[k]
		}
		if !slices.IsSortedFunc(events, func(a, b Event) int { return cmpInt64(a.Time, b.Time) }) {
			slices.SortStableFunc(events, func(a, b Event) int { return cmpInt64(a.Time, b.Time) })
			d.Warnings = append(d.Warnings, "events were not in time order; sorted them by time (stably)")
		}
		d.Events = events
		d.Graph, _, err = buildCSR(n, src, dst, false, true, false)
	} else {
		d.Directed = opt.Directed
		d.Graph, st, err = buildCSR(n, src, dst, !opt.Directed, true, true)
	}
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.File = file
		}
		return nil, err
	}
	if st.selfLoops > 0 {
		d.Warnings = append(d.Warnings, fmt.Sprintf("dropped %d self-loops", st.selfLoops))
	}
	if st.duplicates > 0 {
		what := "edges"
		if !opt.Directed {
			what = "undirected edges (either direction)"
		}
		d.Warnings = append(d.Warnings, fmt.Sprintf("dropped %d repeated %s", st.duplicates, what))
	}
	return d, nil
}

// remap maps the ids to 0..n-1 in ascending order and returns the mapped
// edges and the original id of each node.
func remap(src64, dst64 []int64, maxID int64) (src, dst []int32, orig []int64, err error) {
	all := make([]int64, 0, len(src64)+len(dst64))
	all = append(all, src64...)
	all = append(all, dst64...)
	slices.Sort(all)
	orig = slices.Clip(slices.Compact(all))
	if len(orig) > maxNodes {
		return nil, nil, nil, fmt.Errorf("%d distinct node ids, more than %d", len(orig), maxNodes)
	}
	src = make([]int32, len(src64))
	dst = make([]int32, len(dst64))
	if maxID < int64(4*len(orig))+1<<16 { // dense table
		table := make([]int32, maxID+1)
		for i, v := range orig {
			table[v] = int32(i)
		}
		for k := range src64 {
			src[k], dst[k] = table[src64[k]], table[dst64[k]]
		}
		return src, dst, orig, nil
	}
	for k := range src64 {
		i, _ := slices.BinarySearch(orig, src64[k])
		j, _ := slices.BinarySearch(orig, dst64[k])
		src[k], dst[k] = int32(i), int32(j)
	}
	return src, dst, orig, nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}
