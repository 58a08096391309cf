package data

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseSynthetic(t *testing.T) {
	s, err := ParseSynthetic("synthetic:sbm,nodes=2k,classes=4,feat=16,avgdeg=6.5,pin=0.9,sep=1.5,train=10,val=100,test=200,seed=7")
	if err != nil {
		t.Fatal(err)
	}
	want := SyntheticSpec{Kind: "sbm", Nodes: 2000, Classes: 4, Feat: 16, AvgDeg: 6.5, PIn: 0.9, Sep: 1.5, TrainPerClass: 10, Val: 100, Test: 200, Seed: 7}
	if s != want {
		t.Errorf("got %+v\nwant %+v", s, want)
	}
	if got := s.String(); got != "synthetic:sbm,nodes=2000,classes=4,feat=16,avgdeg=6.5,pin=0.9,sep=1.5,train=10,val=100,test=200,seed=7" {
		t.Errorf("String() = %s", got)
	}
	// String round-trips, for every kind and the defaults.
	for _, spec := range []string{"sbm", "synthetic:rmat", "rmat,nodes=1M,edges=10M,a=0.45,b=0.15,c=0.15", "synthetic:rmat,nodes=1.5k"} {
		s, err := ParseSynthetic(spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		back, err := ParseSynthetic(s.String())
		if err != nil || back != s {
			t.Errorf("%s: String %s parses back to %+v, %v", spec, s.String(), back, err)
		}
	}
	r, _ := ParseSynthetic("rmat,nodes=1000")
	if r.Edges != 8000 || r.Nodes != 1000 {
		t.Errorf("rmat edges default: %+v", r)
	}
}

func TestParseSyntheticErrors(t *testing.T) {
	cases := []struct{ spec, msg string }{
		{"sbm,nodez=5", `data: synthetic spec "sbm,nodez=5": unknown key "nodez" (known: nodes, classes, feat, avgdeg, pin, sep, train, val, test, seed)`},
		{"synthetic:", `data: synthetic spec "": no generator kind (known: rmat, sbm)`},
		{"synthetic:ba,nodes=5", `unknown kind "ba" (known: rmat, sbm)`},
		{"sbm,nodes", `"nodes": expected key=value`},
		{"sbm,nodes=5,nodes=6", `key "nodes" given twice`},
		{"sbm,nodes=abc", `nodes=abc: not an integer count`},
		{"sbm,nodes=0", `nodes=0: want 1..1073741824`},
		{"sbm,nodes=1.5", `nodes=1.5: not an integer count`},
		{"sbm,nodes=1.0005k", `nodes=1.0005k: not a whole number`},
		{"sbm,pin=1.5", `pin=1.5: want 0..1`},
		{"sbm,pin=NaN", `pin=NaN: not a finite number`},
		{"sbm,nodes=10,classes=11", `classes=11: want 1..nodes (10)`},
		{"sbm,nodes=10,avgdeg=10", `avgdeg=10: want 0..nodes-1 (9)`},
		{"sbm,seed=-1", `seed=-1: not an unsigned integer`},
		{"rmat,a=0.5,b=0.3,c=0.3", `want non-negative probabilities with a+b+c <= 1`},
		{"rmat,avgdeg=3", `unknown key "avgdeg" (known: nodes, edges, a, b, c, feat, classes, train, val, test, seed)`},
		{"rmat,nodes=1M,feat=4096", `nodes x feat = 4096000000 feature values, more than 2147483648`},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			_, err := ParseSynthetic(c.spec)
			checkErr(t, err, ErrSpec, c.msg)
		})
	}
	if _, err := Generate(SyntheticSpec{Kind: "sbm"}); !errors.Is(err, ErrSpec) {
		t.Errorf("Generate(zero spec): %v", err)
	}
}

func genSpec(t testing.TB, spec string) *Dataset {
	t.Helper()
	s, err := ParseSynthetic(spec)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Generate(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestGenerateReproducible(t *testing.T) {
	for _, spec := range []string{"sbm,nodes=3000,seed=3", "rmat,nodes=5000,edges=40000,seed=3"} {
		t.Run(spec, func(t *testing.T) {
			a, b := genSpec(t, spec), genSpec(t, spec)
			sameDataset(t, a, b)
			if err := a.Validate(); err != nil {
				t.Fatal(err)
			}
			c := genSpec(t, spec+"1") // seed=31
			if slices.Equal(a.Graph.Indices, c.Graph.Indices) || slices.Equal(a.Features, c.Features) {
				t.Error("another seed gives the same graph or features")
			}
			if a.Source != mustParse(t, spec).String() {
				t.Errorf("source %q", a.Source)
			}
		})
	}
}

func mustParse(t testing.TB, spec string) SyntheticSpec {
	s, err := ParseSynthetic(spec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGenerateSplit(t *testing.T) {
	d := genSpec(t, "sbm,nodes=5000,classes=7")
	if len(d.Train) != 140 || len(d.Val) != 500 || len(d.Test) != 1000 {
		t.Errorf("split %d/%d/%d, want 140/500/1000", len(d.Train), len(d.Val), len(d.Test))
	}
	per := classCounts(pick(d.Labels, d.Train), 7)
	for c, n := range per {
		if n != 20 {
			t.Errorf("class %d has %d training nodes, want 20", c, n)
		}
	}
	// Proportional when small.
	d = genSpec(t, "sbm,nodes=100,classes=4")
	if len(d.Train) != 4 || len(d.Val) != 31 || len(d.Test) != 63 { // 100/1580 of 20 per class, 500, 1000
		t.Errorf("small split %d/%d/%d, want 4/31/63", len(d.Train), len(d.Val), len(d.Test))
	}
	if err := d.Validate(); err != nil {
		t.Error(err)
	}
	// Tiny graphs still work.
	for _, spec := range []string{"sbm,nodes=1,classes=1", "sbm,nodes=2,classes=2,avgdeg=1", "rmat,nodes=1,edges=5", "rmat,nodes=3,edges=10,a=0,b=0,c=0", "sbm,nodes=50,feat=0,avgdeg=0"} {
		d := genSpec(t, spec)
		if err := d.Validate(); err != nil {
			t.Errorf("%s: %v", spec, err)
		}
	}
}

func pick(labels []int32, ids []int32) []int32 {
	out := make([]int32, len(ids))
	for k, i := range ids {
		out[k] = labels[i]
	}
	return out
}

// TestSBMLearnable checks that the labels are learnable, and better with
// the structure: nearest-centroid accuracy (centroids from the training
// nodes) on the test nodes, from raw features and from features averaged
// over each node and its neighbours (one GCN-style propagation).
func TestSBMLearnable(t *testing.T) {
	d := genSpec(t, "sbm,nodes=3000,classes=5,feat=32,seed=11")
	raw := centroidAccuracy(d, d.Features)
	agg := centroidAccuracy(d, propagate(d))
	t.Logf("nearest-centroid test accuracy: features %.3f, features + 1 hop %.3f (chance %.3f)", raw, agg, 1/5.0)
	if raw < 0.35 || raw > 0.85 {
		t.Errorf("features alone give %.3f; want informative but imperfect (0.35..0.85)", raw)
	}
	if agg < raw+0.15 {
		t.Errorf("structure adds too little: %.3f with, %.3f without", agg, raw)
	}
	// Intra-class edges dominate.
	g, intra := d.Graph, 0
	for i := 0; i < g.NumDst; i++ {
		for _, j := range g.Indices[g.Offsets[i]:g.Offsets[i+1]] {
			if d.Labels[i] == d.Labels[j] {
				intra++
			}
		}
	}
	if frac := float64(intra) / float64(g.NumEdges()); math.Abs(frac-0.8) > 0.05 {
		t.Errorf("intra-class edge fraction %.3f, want about 0.8 (pin)", frac)
	}
}

func propagate(d *Dataset) []float32 {
	f, g := d.FeatureDim, d.Graph
	out := make([]float32, len(d.Features))
	for i := 0; i < d.NumNodes; i++ {
		row := out[i*f : (i+1)*f]
		copy(row, d.Features[i*f:(i+1)*f])
		nb := g.Indices[g.Offsets[i]:g.Offsets[i+1]]
		for _, j := range nb {
			for k, v := range d.Features[int(j)*f : int(j+1)*f] {
				row[k] += v
			}
		}
		for k := range row {
			row[k] /= float32(len(nb) + 1)
		}
	}
	return out
}

func centroidAccuracy(d *Dataset, x []float32) float64 {
	f, c := d.FeatureDim, d.NumClasses
	cent := make([]float64, c*f)
	cnt := make([]int, c)
	for _, i := range d.Train {
		y := d.Labels[i]
		cnt[y]++
		for k := 0; k < f; k++ {
			cent[int(y)*f+k] += float64(x[int(i)*f+k])
		}
	}
	for y := 0; y < c; y++ {
		for k := 0; k < f; k++ {
			cent[y*f+k] /= float64(cnt[y])
		}
	}
	right := 0
	for _, i := range d.Test {
		best, bestD := -1, math.Inf(1)
		for y := 0; y < c; y++ {
			var s float64
			for k := 0; k < f; k++ {
				diff := float64(x[int(i)*f+k]) - cent[y*f+k]
				s += diff * diff
			}
			if s < bestD {
				best, bestD = y, s
			}
		}
		if int32(best) == d.Labels[i] {
			right++
		}
	}
	return float64(right) / float64(len(d.Test))
}

func TestRMATPowerLaw(t *testing.T) {
	d := genSpec(t, "rmat,nodes=16384,edges=131072,feat=4")
	in := d.Info()
	if in.SelfLoops != 0 || in.Directed {
		t.Errorf("rmat: %+v", in)
	}
	if in.Edges < 100000 || in.Edges > 131072 {
		t.Errorf("%d unique edges from 131072 draws", in.Edges)
	}
	if float64(in.MaxInDegree) < 20*in.MeanDegree {
		t.Errorf("max degree %d vs mean %.1f: not skewed like a power law", in.MaxInDegree, in.MeanDegree)
	}
	if err := d.Validate(); err != nil {
		t.Error(err)
	}
}

// TestGenerateLarge is the benchmark-scale case: 1M nodes, 10M edges.
func TestGenerateLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("large graph generation skipped in -short mode")
	}
	start := time.Now()
	d := genSpec(t, "rmat,nodes=1M,edges=10M,feat=16")
	el := time.Since(start)
	t.Logf("rmat 1M nodes, 10M draws: %d undirected edges, %v", d.NumEdges(), el)
	if d.NumNodes != 1_000_000 || d.NumEdges() < 9_000_000 {
		t.Errorf("%d nodes, %d edges", d.NumNodes, d.NumEdges())
	}
	if el > 30*time.Second {
		t.Errorf("took %v", el)
	}
	if !strings.HasPrefix(d.Source, "synthetic:rmat,nodes=1000000,edges=10000000") {
		t.Errorf("source %q", d.Source)
	}
}

func BenchmarkGenerate(b *testing.B) {
	for _, c := range []struct{ name, spec string }{
		{"kind=rmat/nodes=1M/edges=10M/feat=32", "rmat,nodes=1M,edges=10M,feat=32"},
		{"kind=sbm/nodes=1M/avgdeg=20/feat=32", "sbm,nodes=1M,avgdeg=20,feat=32"},
	} {
		s := mustParse(b, c.spec)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Generate(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
