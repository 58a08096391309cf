package backendtest_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/backendtest"
)

func TestCorpus(t *testing.T) {
	want := []string{"empty", "no-edges", "isolated", "zero_in_degree", "self_loops", "multi_edges",
		"unsorted", "power-law", "bipartite", "khop", "hub", "reverse"}
	have := map[string]*core.Graph{}
	for _, c := range backendtest.Corpus() {
		if c.Why == "" {
			t.Errorf("%s: no description", c.Name)
		}
		if err := c.G.Validate(); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
		have[c.Name] = c.G
	}
	for _, n := range want {
		if have[n] == nil {
			t.Errorf("corpus lacks %q", n)
		}
	}
	if g := have["bipartite"]; g != nil && g.NumDst == g.NumSrc {
		t.Error("bipartite graph is square")
	}
	if g := have["khop"]; g != nil && (g.EIDs == nil || g.NumEdgeIDs() <= g.NumEdges()) {
		t.Error("khop graph should carry edge ids of its parent")
	}
	if g := have["empty"]; g != nil && g.NumDst != 0 {
		t.Error("empty graph has nodes")
	}
	if g := have["zero_in_degree"]; g != nil && g.InDegrees()[0] != 0 {
		t.Error("zero_in_degree: row 0 is not empty")
	}
}

func TestParseEdgeList(t *testing.T) {
	g, why, err := backendtest.ParseEdgeList([]byte("# two nodes\n# a loop\n2 2\n0 1\n1 1\n"))
	if err != nil || why != "two nodes a loop" || g.NumEdges() != 2 || g.NumDst != 2 {
		t.Fatalf("got %v %q %v", g, why, err)
	}
	for _, bad := range []string{"", "# only a comment\n", "2 2\n0 5\n", "2\n", "2 2\n0 -1\n", "x y\n"} {
		if _, _, err := backendtest.ParseEdgeList([]byte(bad)); !errors.Is(err, core.ErrInvalidGraph) {
			t.Errorf("ParseEdgeList(%q) = %v, want ErrInvalidGraph", bad, err)
		}
	}
}

func FuzzParseEdgeList(f *testing.F) {
	f.Add([]byte("3 3\n0 1\n1 2\n"))
	f.Add([]byte("# c\n0 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, _, err := backendtest.ParseEdgeList(data)
		if err == nil {
			if err := g.Validate(); err != nil {
				t.Fatalf("parsed an invalid graph: %v", err)
			}
		}
	})
}

// graphFromBytes decodes fuzz input into a small CSR graph: the first
// bytes give the node counts, then each pair of bytes one edge; rows are
// filled in input order (so unsorted), and a flag byte adds edge ids.
func graphFromBytes(data []byte) *core.Graph {
	if len(data) < 3 {
		return nil
	}
	nd, ns, flags := int(data[0]%24), int(data[1]%24), data[2]
	data = data[3:]
	if nd == 0 || ns == 0 {
		g, _ := core.NewGraph(nd, ns, make([]int64, nd+1), nil, nil)
		return g
	}
	var src, dst []int32
	for len(data) >= 2 && len(src) < 256 {
		src = append(src, int32(int(data[0])%ns))
		dst = append(dst, int32(int(data[1])%nd))
		data = data[2:]
	}
	off := make([]int64, nd+1)
	for _, d := range dst {
		off[d+1]++
	}
	for i := range nd {
		off[i+1] += off[i]
	}
	pos := append([]int64(nil), off[:nd]...)
	idx := make([]int32, len(src))
	for k, d := range dst {
		idx[pos[d]] = src[k]
		pos[d]++
	}
	var eids []int32
	if flags&1 == 1 {
		eids = make([]int32, len(idx))
		for e := range eids {
			eids[e] = int32(len(idx) - 1 - e + int(flags>>1)) // reversed, shifted ids
		}
	}
	g, err := core.NewGraph(nd, ns, off, idx, eids)
	if err != nil {
		return nil
	}
	return g
}

// FuzzGraphKernels drives CheckGraph with the CPU backend.
func FuzzGraphKernels(f *testing.F) {
	f.Add([]byte{5, 5, 0, 0, 1, 1, 2, 2, 2, 4, 0})
	f.Add([]byte{3, 7, 3, 6, 0, 6, 0, 6, 0, 1, 2})
	f.Add([]byte{1, 1, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 4, 0})
	b, err := cpu.New(core.BackendOptions{Threads: 2})
	if err != nil {
		f.Fatal(err)
	}
	defer b.Close()
	dev := b.Devices()[0]
	f.Fuzz(func(t *testing.T, data []byte) {
		g := graphFromBytes(data)
		if g == nil {
			return
		}
		seed := uint64(0)
		if len(data) >= 8 {
			seed = binary.LittleEndian.Uint64(data[len(data)-8:])
		}
		backendtest.CheckGraph(t, dev, g, seed)
		backendtest.CheckGraph(t, dev, g.Reverse(), seed+1)
	})
}
