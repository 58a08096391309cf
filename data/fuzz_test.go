package data

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/data/internal/pack"
)

// Fuzz tests for every parser: none may panic, and whatever they accept
// must satisfy the rules they enforce.

var (
	staticCols  = edgeCols{n: 2, src: 0, dst: 1, weight: -1, time: -1}
	dynamicCols = edgeCols{n: 4, src: 0, dst: 1, weight: 2, time: 3}
)

func FuzzParseEdges(f *testing.F) {
	f.Add([]byte("0\t1\n0\t2\n1\t2\n"), uint16(3), false, false)
	f.Add([]byte("0\t1\n1\t0\n"), uint16(2), false, true)
	f.Add([]byte("0\t1\t5\t100\n1\t2\t-3\t100\n2\t3\t1\t150\n"), uint16(4), true, true)
	f.Add([]byte("0\t1\t1e3\t-9223372036854775808\n"), uint16(2), true, true)
	f.Add([]byte("0\t1\n\n"), uint16(2), false, false)
	f.Add([]byte("0\t1\t0\t100\n"), uint16(2), true, true)       // weight 0
	f.Add([]byte("\xef\xbb\xbf0\t1\n"), uint16(2), false, false) // BOM
	f.Fuzz(func(t *testing.T, b []byte, nodes uint16, dynamic, directed bool) {
		cols, kind := staticCols, KindStatic
		if dynamic {
			cols, kind, directed = dynamicCols, KindDynamic, true
		}
		ed, err := parseEdges(bytes.NewReader(b), "e.tsv", cols, int(nodes), kind, directed)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "data: e.tsv") {
				t.Fatalf("error without file prefix: %v", err)
			}
			return
		}
		if len(ed.src) != len(ed.dst) || dynamic && len(ed.events) != len(ed.src) {
			t.Fatal("length mismatch")
		}
		seen := map[[2]int32]bool{}
		for k := range ed.src {
			s, d := ed.src[k], ed.dst[k]
			if s < 0 || d < 0 || int(s) >= int(nodes) || int(d) >= int(nodes) {
				t.Fatalf("edge %d -> %d outside [0,%d)", s, d, nodes)
			}
			if !dynamic {
				if s == d || !directed && s > d || seen[[2]int32{s, d}] {
					t.Fatalf("accepted bad static edge %d %d", s, d)
				}
				seen[[2]int32{s, d}] = true
			} else if k > 0 && ed.events[k].Time < ed.events[k-1].Time {
				t.Fatal("accepted unsorted events")
			} else if ed.events[k].Weight == 0 {
				t.Fatal("accepted weight 0")
			}
		}
	})
}

func FuzzParseLabels(f *testing.F) {
	f.Add([]byte("0\n1\n-1\n"), uint16(3), uint8(2))
	f.Add([]byte("3\n"), uint16(1), uint8(3))
	f.Add([]byte("+1\r\n-0\n"), uint16(2), uint8(2))
	f.Add([]byte("\xef\xbb\xbf1\n0\n"), uint16(2), uint8(2)) // BOM
	f.Fuzz(func(t *testing.T, b []byte, nodes uint16, classes uint8) {
		labels, err := parseLabels(bytes.NewReader(b), "l.txt", int(nodes), int(classes))
		if err != nil {
			return
		}
		if len(labels) != int(nodes) {
			t.Fatalf("%d labels for %d nodes", len(labels), nodes)
		}
		for _, y := range labels {
			if y < -1 || int(y) >= int(classes) {
				t.Fatalf("label %d outside [-1,%d)", y, classes)
			}
		}
	})
}

func FuzzParseSplit(f *testing.F) {
	f.Add([]byte("0\n1\n2\n"), uint16(10))
	f.Add([]byte("2\n1\n"), uint16(10))
	f.Add([]byte("4\n"), uint16(10)) // unlabelled
	f.Fuzz(func(t *testing.T, b []byte, nodes uint16) {
		labels := make([]int32, nodes)
		for i := range labels {
			if i%5 == 4 {
				labels[i] = -1
			}
		}
		ids, err := parseSplit(bytes.NewReader(b), "s.txt", int(nodes), labels)
		if err != nil {
			return
		}
		for k, v := range ids {
			if v < 0 || int(v) >= int(nodes) || labels[v] < 0 || k > 0 && v <= ids[k-1] {
				t.Fatalf("accepted bad split %v", ids)
			}
		}
	})
}

func FuzzParseFeatures(f *testing.F) {
	f.Add(f32bytes(1, 0, 0.5, 2), uint8(2), uint8(2))
	f.Add(f32bytes(1, 0, 0.5), uint8(2), uint8(2))
	f.Add(f32bytes(float32(math.NaN())), uint8(1), uint8(1))
	f.Add([]byte{}, uint8(0), uint8(7))
	f.Fuzz(func(t *testing.T, b []byte, nodes, dim uint8) {
		x, err := parseFeatures(bytes.NewReader(b), "f.f32", int(nodes), int(dim))
		if err != nil {
			return
		}
		if len(x) != int(nodes)*int(dim) || len(b) != 4*len(x) {
			t.Fatalf("%d values from %d bytes for %d x %d", len(x), len(b), nodes, dim)
		}
		for _, v := range x {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatal("accepted a non-finite value")
			}
		}
	})
}

func FuzzParseMeta(f *testing.F) {
	for _, mk := range []func() (map[string][]byte, map[string]any){tinyStatic, tinyDynamic} {
		_, m := mk()
		b, _ := json.Marshal(m)
		f.Add(b)
	}
	for _, name := range []string{"cora", "bitcoin_alpha"} {
		if b, err := os.ReadFile(filepath.Join("..", "..", "shared", "data", name, "meta.json")); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"kind":"static","nodes":1,"edges":0,"directed":false}`))
	f.Add([]byte(`{"kind":"static","nodes":1,"edges":0,"directed":false,"files":{"../x":{"bytes":1}}}`))
	f.Add([]byte(`{"kind":"static"} {}`))
	f.Add([]byte("\xef\xbb\xbf{\"kind\":\"static\",\"nodes\":1,\"edges\":0,\"directed\":false}")) // BOM
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseMeta(bytes.NewReader(b), "meta.json")
		if err != nil {
			return
		}
		if *m.Nodes < 0 || *m.Edges < 0 || m.FeatureDim < 0 || m.Classes < 0 || m.cols.src < 0 || m.cols.dst < 0 {
			t.Fatalf("accepted bad counts: %+v", m)
		}
		if m.kind == KindDynamic && (m.cols.time < 0 || !*m.Directed) {
			t.Fatal("accepted a dynamic dataset without time or direction")
		}
		for name := range m.Files {
			if !filepath.IsLocal(filepath.FromSlash(name)) {
				t.Fatalf("accepted file %q outside the folder", name)
			}
		}
	})
}

func FuzzParseSynthetic(f *testing.F) {
	for _, s := range []string{"synthetic:sbm,nodes=100,seed=3", "rmat,nodes=64,edges=300,a=0.6,b=0.2,c=0.1", "sbm,nodez=5",
		"sbm,nodes=1k,classes=3,feat=0,avgdeg=2.5,pin=1", "rmat,nodes=1.5k,edges=0", "sbm,,", "synthetic:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := ParseSynthetic(spec)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "data: synthetic spec ") {
				t.Fatalf("error %q lacks its prefix", err)
			}
			return
		}
		back, err := ParseSynthetic(s.String())
		if err != nil || back != s {
			t.Fatalf("%q -> %s -> %+v, %v", spec, s.String(), back, err)
		}
		if s.Nodes > 2000 || s.Edges > 20000 || s.Nodes*s.Feat > 100000 || s.AvgDeg > 20 {
			return // too big to generate on every fuzz input
		}
		d, err := Generate(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Validate(); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzEdgeList(f *testing.F) {
	f.Add([]byte("# c\n0 1\n1,2\n2\t0\n"), false, false, uint8(0))
	f.Add([]byte("5 7 0.5\n7 5 1\n"), true, true, uint8(0))
	f.Add([]byte("0 1 1 200\n1 2 -1 100\n"), false, false, uint8(0))
	f.Add([]byte("0 1\n1 1\n"), false, false, uint8(3))
	f.Add([]byte("% mm\n1 2 3 4 5\n"), false, false, uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, directed, remap bool, numNodes uint8) {
		opt := EdgeListOptions{Directed: directed, Remap: remap}
		if !remap {
			opt.NumNodes = int(numNodes)
			if numNodes == 0 && hasLongNumber(b, 6) {
				return // would build a graph of up to 16M nodes: valid, but slow to fuzz
			}
		}
		d, err := ParseEdgeList(bytes.NewReader(b), "g.txt", opt)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "data: g.txt") {
				t.Fatalf("error %q lacks its prefix", err)
			}
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("accepted list fails Validate: %v", err)
		}
		if d.Kind == KindStatic && selfLoops(d.Graph) > 0 {
			t.Fatal("static graph with self-loops")
		}
	})
}

func hasLongNumber(b []byte, n int) bool {
	run := 0
	for _, c := range b {
		if c >= '0' && c <= '9' {
			run++
			if run > n {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

func FuzzDecodePack(f *testing.F) {
	f.Add(coraPack)
	small := &pack.Set{Name: "s", Nodes: 3, FeatureDim: 4, Classes: 2, FeatOff: []int64{0, 2, 2, 3}, FeatCols: []int32{0, 3, 1},
		Src: []int32{0, 0}, Dst: []int32{1, 2}, Labels: []int32{0, 1, -1}, Train: []int32{0}, Test: []int32{1}}
	var buf bytes.Buffer
	if err := pack.Encode(&buf, small); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("\x1f\x8b"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := pack.Decode(b)
		if err != nil || int64(s.Nodes)*int64(s.FeatureDim) > 1<<23 {
			return
		}
		d, err := decodePack(b, "fuzz")
		if err != nil {
			return // e.g. unlabelled split nodes
		}
		if err := d.Validate(); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzParseNodeIDs(f *testing.F) {
	f.Add([]byte("10\n20\n-3\n"), uint16(3))
	f.Add([]byte("1\n"), uint16(2))
	f.Add([]byte("7\n8\n7\n"), uint16(3))          // repeated id
	f.Add([]byte("\xef\xbb\xbf7\n8\n"), uint16(2)) // BOM
	f.Fuzz(func(t *testing.T, b []byte, nodes uint16) {
		ids, err := parseNodeIDs(bytes.NewReader(b), "n.txt", int(nodes))
		if err != nil {
			return
		}
		if len(ids) != int(nodes) {
			t.Fatalf("%d ids for %d nodes", len(ids), nodes)
		}
		if len(slices.Compact(slices.Sorted(slices.Values(ids)))) != len(ids) {
			t.Fatalf("accepted repeated ids %v", ids)
		}
	})
}
