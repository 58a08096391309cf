package dynamic_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/data"
	"github.com/gnnkit/gnnkit/data/dynamic"
)

func snaps(t *testing.T, spec string) ([]data.Snapshot, int) {
	t.Helper()
	s, err := dynamic.ParseDSBM(spec)
	if err != nil {
		t.Fatal(err)
	}
	d, err := dynamic.DSBM(s)
	if err != nil {
		t.Fatal(err)
	}
	sn, err := d.Snapshots(1)
	if err != nil {
		t.Fatal(err)
	}
	return sn, d.NumNodes
}

func TestDSBMSkew(t *testing.T) {
	sn, _ := snaps(t, "dsbm,nodes=500,snapshots=20,edges=50,skew=40")
	if len(sn) != 20 {
		t.Fatalf("%d snapshots", len(sn))
	}
	lo, hi := 1<<30, 0
	for _, s := range sn {
		lo, hi = min(lo, len(s.Events)), max(hi, len(s.Events))
	}
	if r := float64(hi) / float64(lo); r < 20 || r > 60 {
		t.Errorf("snapshot sizes %d..%d: ratio %.1f, want about 40", lo, hi, r)
	}
}

func TestBuild(t *testing.T) {
	sn, n := snaps(t, "dsbm,nodes=300,snapshots=20,edges=40,skew=10")
	for _, task := range []dynamic.Task{dynamic.LinkPrediction, dynamic.EdgeSign} {
		set, err := dynamic.Build(sn, n, dynamic.Options{Window: 3, Task: task, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(set.Train) + len(set.Val) + len(set.Test) + set.SkippedEmptyTargets; got != 17 {
			t.Errorf("%v: %d groups, want 17", task, got)
		}
		if set.TrainEnd != 14 || set.ValEnd != 16 {
			t.Errorf("split at %d, %d", set.TrainEnd, set.ValEnd)
		}
		for _, g := range append(append(set.Train, set.Val...), set.Test...) {
			if len(g.Snaps) != 3 || g.Pairs.NumEdgeIDs() != len(g.Labels) {
				t.Fatalf("group %d: %d snaps, %d pairs for %d labels", g.Target, len(g.Snaps), g.Pairs.NumEdgeIDs(), len(g.Labels))
			}
			for k := range g.Labels {
				// Edge id k of the pair graph is pair k.
				found := false
				for e := g.Pairs.Offsets[g.Dst[k]]; e < g.Pairs.Offsets[g.Dst[k]+1]; e++ {
					found = found || (g.Pairs.EdgeID(int(e)) == k && g.Pairs.Indices[e] == g.Src[k])
				}
				if !found {
					t.Fatalf("pair %d not at its edge id", k)
				}
			}
			pos := 0
			for _, l := range g.Labels {
				pos += int(l)
			}
			if task == dynamic.LinkPrediction {
				neg := 20
				if g.Target < set.TrainEnd {
					neg = 1
				}
				q := map[int32]bool{}
				for _, x := range g.Query {
					q[x] = true
				}
				if len(g.Labels) != len(q)*(neg+1) || pos < len(q) {
					t.Errorf("group %d: %d pairs for %d queries, %d positive", g.Target, len(g.Labels), len(q), pos)
				}
			}
		}
	}
}

func TestBuildErrors(t *testing.T) {
	sn, n := snaps(t, "dsbm,nodes=100,snapshots=6,edges=20,skew=2")
	empty := append([]data.Snapshot(nil), sn...)
	empty[5] = data.Snapshot{Index: 5}
	for _, c := range []struct {
		name  string
		sn    []data.Snapshot
		o     dynamic.Options
		check func(*dynamic.Set) bool
		want  string
	}{
		{"window too long", sn, dynamic.Options{Window: 6}, nil, "longer than the sequence"},
		{"window zero", sn, dynamic.Options{Window: 0}, nil, "want >= 1"},
		{"no training group", sn, dynamic.Options{Window: 4}, nil, "no training group"},
		{"no snapshots", nil, dynamic.Options{Window: 1}, nil, "no snapshots"},
		{"negative NegTrain", sn, dynamic.Options{Window: 1, NegTrain: -1}, nil, "NegTrain -1: want >= 1 negative samples per positive (0: the default, 1)"},
		{"negative NegEval", sn, dynamic.Options{Window: 1, NegEval: -3}, nil, "NegEval -3: want >= 1 negative samples per positive (0: the default, 20)"},
		{"zero counts are the defaults", sn, dynamic.Options{Window: 1}, func(s *dynamic.Set) bool {
			return negatives(s.Train[0]) == 1 && negatives(s.Test[0]) == 20
		}, ""},
		{"bad split", sn, dynamic.Options{Window: 1, TrainShare: 0.9, ValShare: 0.2}, nil, "split"},
		{"empty target skipped", empty, dynamic.Options{Window: 1}, func(s *dynamic.Set) bool { return s.SkippedEmptyTargets == 1 }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := dynamic.Build(c.sn, n, c.o)
			if c.want == "" {
				if err != nil || !c.check(s) {
					t.Fatalf("err %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, dynamic.ErrDynamic) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}

// negatives is the negative samples per positive of link-prediction group
// g (its pairs per query, less the positive).
func negatives(g *dynamic.Group) int {
	n := 0
	for _, q := range g.Query {
		if q == g.Query[0] {
			n++
		}
	}
	return n - 1
}

func TestParseDSBM(t *testing.T) {
	for _, c := range []struct {
		spec string
		ok   bool
	}{
		{"dsbm", true}, {"synthetic:dsbm,nodes=10,communities=2", true}, {"dsbm,skew=0.5", false},
		{"dsbm,nodes=x", false}, {"dsbm,what=1", false}, {"sbm", false}, {"dsbm,nodes", false},
	} {
		s, err := dynamic.ParseDSBM(c.spec)
		if (err == nil) != c.ok {
			t.Errorf("ParseDSBM(%q) err = %v", c.spec, err)
		}
		if err == nil {
			if s2, err := dynamic.ParseDSBM(s.String()); err != nil || s2 != s {
				t.Errorf("round trip of %q: %v %v", s.String(), s2, err)
			}
		}
	}
}

func FuzzParseDSBM(f *testing.F) {
	for _, s := range []string{"dsbm", "dsbm,nodes=50,snapshots=3,edges=2,skew=3", "synthetic:dsbm,seed=9", "dsbm,pin=2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := dynamic.ParseDSBM(spec)
		if err != nil {
			return
		}
		if s.Nodes*s.Snapshots > 20000 || float64(s.Edges)*s.Skew*float64(s.Snapshots) > 1e5 {
			return
		}
		d, err := dynamic.DSBM(s)
		if err != nil {
			t.Fatalf("valid spec %q: %v", spec, err)
		}
		if _, err := d.Snapshots(1); err != nil && len(d.Events) > 0 {
			t.Fatalf("snapshots of %q: %v", spec, err)
		}
	})
}

// TestDSBMTrend: grow is monotone and spans the skew; bitcoin follows
// Bitcoin-Alpha's profile (the burst early, the quiet tail late); the
// default keeps its canonical name.
func TestDSBMTrend(t *testing.T) {
	sizes := func(spec string) []int {
		sn, _ := snaps(t, spec)
		out := make([]int, len(sn))
		for i, s := range sn {
			out[i] = len(s.Events)
		}
		return out
	}
	g := sizes("dsbm,nodes=2000,snapshots=20,edges=50,skew=40,trend=grow")
	for i := 1; i < len(g); i++ {
		if g[i] < g[i-1]*9/10 {
			t.Errorf("grow: snapshot %d has %d edges after %d", i, g[i], g[i-1])
		}
	}
	if r := float64(g[len(g)-1]) / float64(g[0]); r < 30 || r > 60 { // self-loops drawn are dropped, more of them among few nodes
		t.Errorf("grow: last/first %.1f, want about 40", r)
	}
	b := sizes("dsbm,nodes=2000,snapshots=40,edges=50,skew=40,trend=bitcoin")
	peak := 0
	for i, e := range b {
		if e > b[peak] {
			peak = i
		}
	}
	// The real burst is at snapshots 12-15 of 137: 3.5-4.4 of 40.
	if peak < 3 || peak > 5 {
		t.Errorf("bitcoin: peak at snapshot %d (%v)", peak, b)
	}
	if b[len(b)-1] > b[peak]/20 || b[20] < 4*b[len(b)-1] {
		t.Errorf("bitcoin: want a plateau above a quiet tail: %v", b)
	}
	s, err := dynamic.ParseDSBM("dsbm,skew=7")
	if err != nil || strings.Contains(s.String(), "trend") {
		t.Errorf("default spec %q (%v): want no trend in the name", s, err)
	}
	if s, err = dynamic.ParseDSBM("dsbm,trend=bitcoin"); err != nil || !strings.Contains(s.String(), "trend=bitcoin") {
		t.Errorf("spec %q (%v)", s, err)
	}
	if _, err := dynamic.ParseDSBM("dsbm,trend=up"); !errors.Is(err, dynamic.ErrDynamic) {
		t.Errorf("trend=up: %v", err)
	}
}

// TestDSBMGraph: the generated dataset carries its Graph, the union of the
// events with each distinct pair once, as data.Dataset documents for
// dynamic datasets, and so passes Validate (it had no graph, so `gnnkit
// data info` could not summarise it).
func TestDSBMGraph(t *testing.T) {
	s, err := dynamic.ParseDSBM("dsbm,nodes=200,snapshots=5,edges=30,skew=4")
	if err != nil {
		t.Fatal(err)
	}
	d, err := dynamic.DSBM(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	pairs := map[[2]int32]bool{}
	for _, e := range d.Events {
		pairs[[2]int32{e.Src, e.Dst}] = true
	}
	g := d.Graph
	if g.NumEdges() != len(pairs) {
		t.Fatalf("graph has %d entries, the events %d distinct pairs", g.NumEdges(), len(pairs))
	}
	for v := 0; v < g.NumDst; v++ {
		for _, u := range g.Indices[g.Offsets[v]:g.Offsets[v+1]] {
			if !pairs[[2]int32{u, int32(v)}] {
				t.Fatalf("graph entry %d -> %d is no event", u, v)
			}
		}
	}
}
