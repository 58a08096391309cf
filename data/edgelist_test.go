package data

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

// rows lists each CSR row's sources, for compact comparisons.
func rows(g *core.Graph) [][]int32 {
	out := make([][]int32, g.NumDst)
	for i := range out {
		out[i] = slices.Clone(g.Indices[g.Offsets[i]:g.Offsets[i+1]])
		if out[i] == nil {
			out[i] = []int32{}
		}
	}
	return out
}

func equalRows(a, b [][]int32) bool {
	return slices.EqualFunc(a, b, func(x, y []int32) bool { return slices.Equal(x, y) })
}

func TestParseEdgeList(t *testing.T) {
	cases := []struct {
		name     string
		in       string
		opt      EdgeListOptions
		kind     string
		nodes    int
		rows     [][]int32
		nodeIDs  []int64
		warnings []string
	}{
		{name: "tabs", in: "0\t1\n1\t2\n", kind: KindStatic, nodes: 3, rows: [][]int32{{1}, {0, 2}, {1}}},
		{name: "spaces commas comments", in: "# a comment\n% another\n\n0, 1\n  1   2  \r\n2,0\n", kind: KindStatic, nodes: 3,
			rows: [][]int32{{1, 2}, {0, 2}, {0, 1}}},
		{name: "self-loops and repeats dropped", in: "0 1\n1 0\n1 1\n0 1\n", kind: KindStatic, nodes: 2, rows: [][]int32{{1}, {0}},
			warnings: []string{"dropped 1 self-loops", "dropped 2 repeated undirected edges (either direction)"}},
		{name: "directed", in: "0 1\n2 1\n1 0\n", opt: EdgeListOptions{Directed: true}, kind: KindStatic, nodes: 3,
			rows: [][]int32{{1}, {0, 2}, {}}},
		{name: "weights dropped", in: "0 1 0.5\n1 2 -2\n", kind: KindStatic, nodes: 3, rows: [][]int32{{1}, {0, 2}, {1}}},
		{name: "num nodes", in: "0 1\n", opt: EdgeListOptions{NumNodes: 4}, kind: KindStatic, nodes: 4, rows: [][]int32{{1}, {0}, {}, {}}},
		{name: "remap", in: "1000 7\n7 42\n", opt: EdgeListOptions{Remap: true}, kind: KindStatic, nodes: 3,
			rows: [][]int32{{1, 2}, {0}, {0}}, nodeIDs: []int64{7, 42, 1000}},
		{name: "remap sparse ids", in: "9000000000000 5\n5 1\n", opt: EdgeListOptions{Remap: true}, kind: KindStatic, nodes: 3,
			rows: [][]int32{{1}, {0, 2}, {1}}, nodeIDs: []int64{1, 5, 9000000000000}},
		{name: "timed", in: "0 1 1 200\n1 2 -1 100\n0 1 3 300\n", kind: KindDynamic, nodes: 3,
			rows: [][]int32{{}, {0}, {1}}, warnings: []string{"events were not in time order; sorted them by time (stably)"}},
		{name: "empty", in: "# nothing\n", kind: KindStatic, nodes: 0, rows: [][]int32{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := ParseEdgeList(strings.NewReader(c.in), "test.txt", c.opt)
			if err != nil {
				t.Fatal(err)
			}
			if d.Kind != c.kind || d.NumNodes != c.nodes {
				t.Errorf("kind %s nodes %d, want %s %d", d.Kind, d.NumNodes, c.kind, c.nodes)
			}
			if got := rows(d.Graph); !equalRows(got, c.rows) {
				t.Errorf("rows %v, want %v", got, c.rows)
			}
			if !slices.Equal(d.NodeIDs, c.nodeIDs) {
				t.Errorf("node ids %v, want %v", d.NodeIDs, c.nodeIDs)
			}
			if !slices.Equal(d.Warnings, c.warnings) {
				t.Errorf("warnings %q, want %q", d.Warnings, c.warnings)
			}
			if err := d.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
	d, err := ParseEdgeList(strings.NewReader("0 1 1 200\n1 2 -1 100\n0 1 3 300\n"), "t", EdgeListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{{1, 2, -1, 100}, {0, 1, 1, 200}, {0, 1, 3, 300}}
	if !slices.Equal(d.Events, want) || d.NumEdges() != 3 || d.Graph.NumEdges() != 2 {
		t.Errorf("events %v (edges %d, union %d), want %v", d.Events, d.NumEdges(), d.Graph.NumEdges(), want)
	}
}

func TestParseEdgeListErrors(t *testing.T) {
	cases := []struct {
		name, in string
		opt      EdgeListOptions
		want     error
		msg      string
	}{
		{name: "one field", in: "0 1\n2\n", want: ErrMalformed, msg: `data: g.txt:2: 1 fields, but line 1 has 2; every line needs the same columns (src dst [weight [time]]): "2"`},
		{name: "five fields", in: "# c\n0 1 2 3 4\n", want: ErrMalformed, msg: "data: g.txt:2: 5 fields, expected 2 to 4 (src dst [weight [time]])"},
		{name: "columns change", in: "0 1\n1 2 0.5\n", want: ErrMalformed, msg: "g.txt:2: 3 fields, but line 1 has 2"},
		{name: "not integer", in: "0 1\na 2\n", want: ErrMalformed, msg: `g.txt:2: src "a" is not an integer node id`},
		{name: "float id", in: "0 1.5\n", want: ErrMalformed, msg: `g.txt:1: dst "1.5" is not an integer node id`},
		{name: "negative", in: "0 1\n0 -4\n", want: ErrMalformed, msg: "g.txt:2: dst node id -4 is negative; ids must be non-negative integers"},
		{name: "beyond NumNodes", in: "0 1\n0 4\n", opt: EdgeListOptions{NumNodes: 4}, want: ErrMalformed, msg: "g.txt:2: dst node id 4 outside [0,4) (NumNodes)"},
		{name: "beyond int32", in: "0 3000000000\n", want: ErrMalformed, msg: "g.txt:1: dst node id 3000000000 outside [0,2147483647); ids must fit int32, or use Remap"},
		{name: "sparse ids", in: "0 2000000000\n", want: ErrMalformed, msg: "largest node id 2000000000 for only 1 edges would make 2000000001 mostly isolated nodes; use Remap"},
		{name: "bad weight", in: "0 1 x\n", want: ErrMalformed, msg: `g.txt:1: weight "x" is not a finite number`},
		{name: "inf weight", in: "0 1 inf\n", want: ErrMalformed, msg: `g.txt:1: weight "inf" is not a finite number`},
		{name: "bad time", in: "0 1 1 12:00\n", want: ErrMalformed, msg: `g.txt:1: time "12:00" is not an integer`},
		{name: "overflow", in: "0 99999999999999999999\n", want: ErrMalformed, msg: `g.txt:1: dst "99999999999999999999" is not an integer node id`},
		{name: "remap with NumNodes", in: "0 1\n", opt: EdgeListOptions{Remap: true, NumNodes: 3}, want: ErrSpec, msg: "NumNodes cannot be combined with Remap"},
		{name: "long line", in: "0 1\n" + strings.Repeat("1", 2<<20) + "\n", want: ErrMalformed, msg: "g.txt:2: line longer than 1048576 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseEdgeList(strings.NewReader(c.in), "g.txt", c.opt)
			checkErr(t, err, c.want, c.msg)
		})
	}
}

func TestLoadEdgeListFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "karate.edges")
	if err := os.WriteFile(p, []byte("1 2\n2 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := LoadEdgeList(p, EdgeListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "karate" || d.Source != p || d.NumNodes != 4 || d.NumEdges() != 2 {
		t.Errorf("%+v", d.Info())
	}
	_, err = LoadEdgeList(filepath.Join(t.TempDir(), "nope.txt"), EdgeListOptions{})
	checkErr(t, err, ErrMissingFile, "cannot open edge list")

	// Open picks the edge-list loader for a plain file.
	d, err = Open(p)
	if err != nil || d.NumNodes != 4 {
		t.Errorf("Open(%s): %v", p, err)
	}
}

// An edge list opened as a --data value (Open) gets errors that say what a
// command-line user can do about ids too large or too sparse to be node
// numbers; the Go API (ParseEdgeList, LoadEdgeList) names its options.
func TestOpenEdgeListIDHints(t *testing.T) {
	for _, c := range []struct {
		name, in, msg string
	}{
		{"beyond int32", "0\t99999999999\n", "g.txt:1: dst node id 99999999999 is too large: node ids must be below 2147483647; edge-list ids are used as node numbers, so renumber them densely from 0 to n-1"},
		{"sparse ids", "0\t2000000000\n", "largest node id 2000000000 for only 1 edges would make 2000000001 mostly isolated nodes; edge-list ids are used as node numbers, so renumber them densely from 0 to n-1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "g.txt")
			if err := os.WriteFile(p, []byte(c.in), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Open(p)
			checkErr(t, err, ErrMalformed, c.msg)
			if strings.Contains(err.Error(), "Remap") || strings.Contains(err.Error(), "NumNodes") {
				t.Errorf("error %q names Go options a command-line user cannot set", err)
			}
			_, err = LoadEdgeList(p, EdgeListOptions{})
			checkErr(t, err, ErrMalformed, "use Remap")
		})
	}
}
