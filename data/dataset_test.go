package data

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

func TestSnapshots(t *testing.T) {
	in := "0 1 5 100\n1 2 -3 100\n2 1 1 150\n0 1 7 199\n3 0 2 460\n"
	d, err := ParseEdgeList(strings.NewReader(in), "dyn.txt", EdgeListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := d.Snapshots(100)
	if err != nil {
		t.Fatal(err)
	}
	// Windows [100,200) [200,300) [300,400) [400,500).
	if len(snaps) != 4 {
		t.Fatalf("%d snapshots, want 4", len(snaps))
	}
	wantCounts := []int{4, 0, 0, 1}
	for k, s := range snaps {
		if s.Index != k || s.Start != 100+int64(k)*100 || len(s.Events) != wantCounts[k] || s.Graph.NumEdges() != wantCounts[k] {
			t.Errorf("snapshot %d: index %d start %d, %d events, %d entries", k, s.Index, s.Start, len(s.Events), s.Graph.NumEdges())
		}
		if s.Graph.NumDst != 4 || s.Graph.NumSrc != 4 {
			t.Errorf("snapshot %d graph is %dx%d", k, s.Graph.NumDst, s.Graph.NumSrc)
		}
	}
	// Snapshot 0: row 1 has sources 0 (w 5), 0 (w 7), 2 (w 1); row 2 has 1 (w -3).
	g := snaps[0].Graph
	if got := rows(g); !equalRows(got, [][]int32{{}, {0, 0, 2}, {1}, {}}) {
		t.Errorf("rows %v", got)
	}
	if w := snaps[0].Weights; !slices.Equal(w, []float32{5, 7, 1, -3}) {
		t.Errorf("weights %v, want [5 7 1 -3]", w)
	}
	// A union graph keeps each pair once.
	if d.Graph.NumEdges() != 4 {
		t.Errorf("union has %d entries, want 4", d.Graph.NumEdges())
	}

	for _, s := range []int64{0, -5} {
		if _, err := d.Snapshots(s); !errors.Is(err, ErrSpec) {
			t.Errorf("Snapshots(%d): %v", s, err)
		}
	}
	big := &Dataset{Name: "wide", Kind: KindDynamic, NumNodes: 2, Events: []Event{{0, 1, 1, -1 << 62}, {0, 1, 1, 1 << 62}}}
	if _, err := big.Snapshots(1); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "choose longer snapshots") {
		t.Errorf("too many snapshots: %v", err)
	}
	c, err := Cora()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Snapshots(10); !errors.Is(err, ErrNotDynamic) {
		t.Errorf("Cora snapshots: %v", err)
	}
}

func TestBuildCSRMatchesCore(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 50; trial++ {
		n := 1 + r.IntN(40)
		m := r.IntN(200)
		src, dst := make([]int32, m), make([]int32, m)
		for k := range src {
			src[k], dst[k] = int32(r.IntN(n)), int32(r.IntN(n))
		}
		// Reference: drop self-loops and repeats by hand, then core.
		seen := map[[2]int32]bool{}
		var a, b []int32
		for k := range src {
			x, y := min(src[k], dst[k]), max(src[k], dst[k])
			if x == y || seen[[2]int32{x, y}] {
				continue
			}
			seen[[2]int32{x, y}] = true
			a, b = append(a, x), append(b, y)
		}
		want, err := core.Undirected(n, a, b)
		if err != nil {
			t.Fatal(err)
		}
		got, st, err := buildCSR(n, src, dst, true, true, true)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Offsets, want.Offsets) || !slices.Equal(got.Indices, want.Indices) {
			t.Fatalf("trial %d: buildCSR differs from core.Undirected", trial)
		}
		loops := 0
		for k := range src {
			if src[k] == dst[k] {
				loops++
			}
		}
		if st.selfLoops != loops || st.duplicates != m-loops-len(a) {
			t.Errorf("trial %d: stats %+v, want %d loops %d duplicates", trial, st, loops, m-loops-len(a))
		}
		// Directed, no dedupe: same as core.FromEdges.
		wantD, _ := core.FromEdges(n, n, src, dst)
		gotD, _, _ := buildCSR(n, src, dst, false, false, false)
		if !slices.Equal(gotD.Offsets, wantD.Offsets) || !slices.Equal(gotD.Indices, wantD.Indices) {
			t.Fatalf("trial %d: directed buildCSR differs from core.FromEdges", trial)
		}
	}
}

// Signed features are divided by each row's L1 norm: signs stay, values
// stay in [-1, 1]. Divided by the plain sum, row 1 (sum 0.001) was scaled
// up 1000 times and row 2 (sum -2) had its signs flipped.
func TestRowNormalizedFeaturesSigned(t *testing.T) {
	for _, c := range []struct {
		name      string
		row, want []float32
	}{
		{"mixed signs", []float32{1, -3, 0, 0}, []float32{0.25, -0.75, 0, 0}},
		{"sum nearly 0", []float32{1, -0.999, 0.5, -0.5}, []float32{1 / 2.999, -0.999 / 2.999, 0.5 / 2.999, -0.5 / 2.999}},
		{"negative sum", []float32{-1, -1, 0, 0}, []float32{-0.5, -0.5, 0, 0}},
		{"sum exactly 0", []float32{2, -2, 0, 0}, []float32{0.5, -0.5, 0, 0}},
		{"all zero", []float32{0, 0, 0, 0}, []float32{0, 0, 0, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &Dataset{NumNodes: 1, FeatureDim: 4, Features: c.row}
			got := d.RowNormalizedFeatures()
			for j := range got {
				if math.Abs(float64(got[j]-c.want[j])) > 1e-6 {
					t.Fatalf("got %v, want %v", got, c.want)
				}
			}
		})
	}
	ss, err := ParseSynthetic("synthetic:sbm,nodes=300,classes=4,feat=16")
	if err != nil {
		t.Fatal(err)
	}
	ds, err := Generate(ss)
	if err != nil {
		t.Fatal(err)
	}
	x := ds.RowNormalizedFeatures()
	for i, v := range x {
		if raw := ds.Features[i]; v > 1+1e-6 || v < -1-1e-6 || (raw > 0) != (v > 0) || (raw < 0) != (v < 0) {
			t.Fatalf("sbm feature %d: %g normalised to %g", i, raw, v)
		}
	}
}

func TestRowNormalizedFeatures(t *testing.T) {
	d := &Dataset{NumNodes: 3, FeatureDim: 3, Features: []float32{1, 1, 0, 0, 0, 0, 2, 1, 1}}
	got := d.RowNormalizedFeatures()
	want := []float32{0.5, 0.5, 0, 0, 0, 0, 0.5, 0.25, 0.25}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if d.Features[0] != 1 {
		t.Error("RowNormalizedFeatures changed the dataset")
	}
	if (&Dataset{}).RowNormalizedFeatures() != nil {
		t.Error("no features should give nil")
	}
	c, err := Cora()
	if err != nil {
		t.Fatal(err)
	}
	x := c.RowNormalizedFeatures()
	for i := 0; i < c.NumNodes; i++ {
		var s float64
		for _, v := range x[i*c.FeatureDim : (i+1)*c.FeatureDim] {
			s += float64(v)
		}
		if s < 0.9999 || s > 1.0001 {
			t.Fatalf("cora row %d sums to %v after normalisation", i, s)
		}
	}
}

func TestValidateRejects(t *testing.T) {
	base := func() *Dataset {
		d, err := ParseEdgeList(strings.NewReader("0 1\n1 2\n"), "v", EdgeListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Labels = []int32{0, 1, -1}
		d.NumClasses = 2
		d.Train = []int32{0}
		d.Val = []int32{1}
		return d
	}
	if err := base().Validate(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(d *Dataset){
		"kind":            func(d *Dataset) { d.Kind = "temporal" },
		"no graph":        func(d *Dataset) { d.Graph = nil },
		"node count":      func(d *Dataset) { d.NumNodes = 4 },
		"features":        func(d *Dataset) { d.FeatureDim = 2; d.Features = make([]float32, 5) },
		"label range":     func(d *Dataset) { d.Labels[0] = 2 },
		"labels length":   func(d *Dataset) { d.Labels = d.Labels[:2] },
		"split order":     func(d *Dataset) { d.Train = []int32{1, 0} },
		"split unlabeled": func(d *Dataset) { d.Test = []int32{2} },
		"split overlap":   func(d *Dataset) { d.Test = []int32{0} },
		"split range":     func(d *Dataset) { d.Test = []int32{3} },
		"not symmetric":   func(d *Dataset) { d.Graph, _ = core.FromEdges(3, 3, []int32{0}, []int32{1}) },
		"events static":   func(d *Dataset) { d.Events = []Event{{0, 1, 1, 1}} },
		"node ids":        func(d *Dataset) { d.NodeIDs = []int64{1} },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			d := base()
			mutate(d)
			if err := d.Validate(); !errors.Is(err, ErrMalformed) && !errors.Is(err, core.ErrInvalidGraph) {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestInfo(t *testing.T) {
	d, err := ParseEdgeList(strings.NewReader("0 1\n1 2\n0 2\n"), "tri", EdgeListOptions{NumNodes: 5})
	if err != nil {
		t.Fatal(err)
	}
	in := d.Info()
	if in.Nodes != 5 || in.Edges != 3 || in.CSREntries != 6 || in.IsolatedNodes != 2 || in.MaxInDegree != 2 || in.MeanDegree != 1.2 {
		t.Errorf("%+v", in)
	}
	c, err := Cora()
	if err != nil {
		t.Fatal(err)
	}
	ci := c.Info()
	if ci.Edges != 5278 || ci.CSREntries != 10556 || ci.Train != 140 || ci.Classes != 7 || !slices.Equal(ci.ClassCounts, []int{351, 217, 418, 818, 426, 298, 180}) || ci.IsolatedNodes != 0 || ci.MaxInDegree != 168 {
		t.Errorf("cora info %+v", ci)
	}
}

func TestOpen(t *testing.T) {
	for _, spec := range []string{"", "cora", " cora ", "embedded:cora"} {
		d, err := Open(spec)
		if err != nil || d.Name != "cora" || d.NumNodes != 2708 {
			t.Errorf("Open(%q): %v", spec, err)
		}
	}
	d, err := Open("synthetic:sbm,nodes=300,seed=2")
	if err != nil || d.NumNodes != 300 {
		t.Errorf("Open(synthetic): %v", err)
	}
	_, err = Open("synthetic:sbm,nodez=3")
	checkErr(t, err, ErrSpec, `unknown key "nodez"`)
	_, err = Open("corra")
	checkErr(t, err, ErrSpec, `data: open "corra": no such file or folder, and not a dataset name`)

	files, meta := tinyStatic()
	dir := writeDataset(t, "tiny", files, meta, files)
	for _, p := range []string{dir, filepath.Join(dir, "meta.json")} {
		d, err := Open(p)
		if err != nil || d.Name != "tiny" {
			t.Errorf("Open(%s): %v", p, err)
		}
	}
	empty := t.TempDir()
	_, err = Open(empty)
	checkErr(t, err, ErrMissingFile, "a folder without meta.json")
	if err := os.WriteFile(filepath.Join(empty, "g.csv"), []byte("0,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if d, err := Open(filepath.Join(empty, "g.csv")); err != nil || d.NumEdges() != 1 || d.Name != "g" {
		t.Errorf("Open(edge list): %v", err)
	}
}
