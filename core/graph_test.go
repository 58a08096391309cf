package core

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

func mustEdges(t *testing.T, n int, src, dst []int32) *Graph {
	t.Helper()
	g, err := FromEdges(n, n, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestFromEdgesSortsAndValidates(t *testing.T) {
	g := mustEdges(t, 4, []int32{3, 0, 2, 1, 0}, []int32{1, 1, 0, 3, 3})
	if want := []int64{0, 1, 3, 3, 5}; !reflect.DeepEqual(g.Offsets, want) {
		t.Errorf("offsets %v, want %v", g.Offsets, want)
	}
	if want := []int32{2, 0, 3, 0, 1}; !reflect.DeepEqual(g.Indices, want) {
		t.Errorf("indices %v, want %v", g.Indices, want)
	}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	if want := []int32{1, 2, 0, 2}; !reflect.DeepEqual(g.InDegrees(), want) {
		t.Errorf("in-degrees %v, want %v", g.InDegrees(), want)
	}
	if want := []int32{2, 1, 1, 1}; !reflect.DeepEqual(g.OutDegrees(), want) {
		t.Errorf("out-degrees %v, want %v", g.OutDegrees(), want)
	}
}

func TestGraphErrors(t *testing.T) {
	cases := []struct {
		name     string
		src, dst []int32
		n        int
	}{
		{"source out of range", []int32{5}, []int32{0}, 3},
		{"negative destination", []int32{0}, []int32{-1}, 3},
		{"length mismatch", []int32{0, 1}, []int32{0}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := FromEdges(c.n, c.n, c.src, c.dst); !errors.Is(err, ErrInvalidGraph) {
				t.Errorf("err = %v, want ErrInvalidGraph", err)
			}
		})
	}
	bad := []*Graph{
		{NumDst: 2, NumSrc: 2, Offsets: []int64{0, 1}, Indices: []int32{0}},
		{NumDst: 1, NumSrc: 1, Offsets: []int64{0, 2}, Indices: []int32{0}},
		{NumDst: 2, NumSrc: 2, Offsets: []int64{0, 2, 1}, Indices: []int32{0}},
		{NumDst: 1, NumSrc: 1, Offsets: []int64{0, 1}, Indices: []int32{1}},
		{NumDst: 1, NumSrc: 1, Offsets: []int64{0, 1}, Indices: []int32{0}, EIDs: []int32{-1}},
	}
	for i, g := range bad {
		if err := g.Validate(); !errors.Is(err, ErrInvalidGraph) {
			t.Errorf("case %d: Validate = %v, want ErrInvalidGraph", i, err)
		}
	}
}

func TestReverseKeepsEdgeIDs(t *testing.T) {
	g := mustEdges(t, 3, []int32{0, 1, 2, 2}, []int32{1, 2, 0, 1})
	r := g.Reverse()
	if r.Reverse() != g {
		t.Error("reverse of reverse is not the original")
	}
	// Every reverse entry (i <- j in r) is the edge j -> i... of g with the same id.
	for i := 0; i < r.NumDst; i++ {
		for e := r.Offsets[i]; e < r.Offsets[i+1]; e++ {
			j := r.Indices[e]
			id := r.EdgeID(int(e))
			// in g, edge id is at row j, source i
			found := false
			for f := g.Offsets[j]; f < g.Offsets[j+1]; f++ {
				if g.Indices[f] == int32(i) && g.EdgeID(int(f)) == id {
					found = true
				}
			}
			if !found {
				t.Errorf("reverse entry %d (%d<-%d, id %d) has no matching edge in g", e, i, j, id)
			}
		}
	}
}

func TestWithSelfLoopsAndGCNNorm(t *testing.T) {
	g, err := Undirected(3, []int32{0, 1}, []int32{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	s, err := g.WithSelfLoops()
	if err != nil {
		t.Fatal(err)
	}
	// rows: 0: {0,1}; 1: {0,1}; 2: {2}
	if want := []int32{0, 1, 0, 1, 2}; !reflect.DeepEqual(s.Indices, want) {
		t.Fatalf("indices %v, want %v", s.Indices, want)
	}
	w := s.GCNNorm()
	for e, want := range []float64{0.5, 0.5, 0.5, 0.5, 1} {
		if math.Abs(float64(w[e])-want) > 1e-7 {
			t.Errorf("norm[%d] = %v, want %v", e, w[e], want)
		}
	}
	m := s.MeanWeights()
	if m[0] != 0.5 || m[4] != 1 {
		t.Errorf("mean weights %v", m)
	}
}

func TestKHop(t *testing.T) {
	// path 0-1-2-3-4
	g, err := Undirected(5, []int32{0, 1, 2, 3}, []int32{1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		seeds []int32
		k     int
		want  []int32
	}{
		{[]int32{0}, 0, []int32{0}},
		{[]int32{0}, 1, []int32{0, 1}},
		{[]int32{0}, 2, []int32{0, 1, 2}},
		{[]int32{4, 0}, 1, []int32{4, 0, 3, 1}},
	} {
		sub, err := g.KHop(c.seeds, c.k)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sub.Nodes, c.want) {
			t.Errorf("KHop(%v,%d) nodes %v, want %v", c.seeds, c.k, sub.Nodes, c.want)
		}
		if err := sub.Validate(); err != nil {
			t.Error(err)
		}
		// Every subgraph edge maps to an original edge with the same endpoints.
		for l := 0; l < sub.NumDst; l++ {
			for e := sub.Offsets[l]; e < sub.Offsets[l+1]; e++ {
				id := sub.EdgeID(int(e))
				gd, gs := sub.Nodes[l], sub.Nodes[sub.Indices[e]]
				if g.Indices[id] != gs || !(g.Offsets[gd] <= int64(id) && int64(id) < g.Offsets[gd+1]) {
					t.Errorf("subgraph edge %d has id %d, not edge %d->%d", e, id, gs, gd)
				}
			}
		}
	}
	if _, err := g.KHop([]int32{9}, 1); !errors.Is(err, ErrInvalidGraph) {
		t.Errorf("seed out of range: %v", err)
	}
	if _, err := g.KHop([]int32{1, 1}, 1); !errors.Is(err, ErrInvalidGraph) {
		t.Errorf("duplicate seed: %v", err)
	}
}
