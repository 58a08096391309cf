package backendtest

import (
	"bufio"
	"bytes"
	"embed"
	"fmt"
	"math/rand/v2"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/gnnkit/gnnkit/core"
)

//go:embed testdata/*.edges
var fixtures embed.FS

// GraphCase is one labelled graph of the corpus.
type GraphCase struct {
	Name string
	// Why says what is awkward about the graph.
	Why string
	G   *core.Graph
}

// Corpus returns the labelled corpus of awkward graphs the suite runs
// every graph kernel on (in the spirit of DGL's graph_cases.py): empty,
// edgeless, isolated nodes, zero in-degree rows, self-loops, multi-edges,
// unsorted rows, a hub row, bipartite, power-law (R-MAT, seeded), a k-hop
// subgraph with foreign edge ids, and the reverse of a graph. The
// fixtures live in testdata/*.edges.
func Corpus() []GraphCase {
	var cs []GraphCase
	add := func(name, why string, g *core.Graph, err error) {
		if err != nil {
			panic(fmt.Sprintf("backendtest: corpus graph %s: %v", name, err))
		}
		cs = append(cs, GraphCase{Name: name, Why: why, G: g})
	}
	g, err := core.NewGraph(0, 0, []int64{0}, nil, nil)
	add("empty", "no nodes at all", g, err)
	g, err = core.NewGraph(5, 5, make([]int64, 6), nil, nil)
	add("no-edges", "nodes but no edges: every row empty", g, err)
	g, err = core.NewGraph(1, 1, []int64{0, 1}, []int32{0}, nil)
	add("single-self-loop", "one node, one self-loop", g, err)

	files, _ := fixtures.ReadDir("testdata")
	names := make([]string, 0, len(files))
	for _, f := range files {
		names = append(names, f.Name())
	}
	sort.Strings(names)
	for _, name := range names {
		data, err := fixtures.ReadFile(path.Join("testdata", name))
		if err != nil {
			panic(err)
		}
		g, why, err := ParseEdgeList(data)
		add(strings.TrimSuffix(name, ".edges"), why, g, err)
	}

	// Unsorted rows, built with NewGraph directly (FromEdges sorts).
	g, err = core.NewGraph(4, 4, []int64{0, 3, 3, 6, 8}, []int32{3, 0, 2, 1, 1, 0, 3, 2}, nil)
	add("unsorted", "rows list their sources out of order, with a repeat", g, err)

	pl := RMAT(200, 1600, 42)
	add("power-law", "R-MAT graph (a=0.57,b=c=0.19): skewed degrees", pl, nil)

	sub, err := pl.KHop([]int32{3, 17, 150}, 1)
	if err == nil {
		add("khop", "1-hop subgraph: non-nil EIDs that index the parent's edges", sub.Graph, nil)
	} else {
		add("khop", "", nil, err)
	}
	pl2 := RMAT(64, 300, 7)
	add("reverse", "reverse of an R-MAT graph: EIDs permute the edge ids", pl2.Reverse(), nil)
	return cs
}

// ParseEdgeList reads the testdata edge-list format: '#' comments (the
// first comment block is the graph's description), a line "NUMDST
// NUMSRC", then one "SRC DST" pair per line. The graph is built with
// core.FromEdges.
func ParseEdgeList(data []byte) (g *core.Graph, why string, err error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	var comment []string
	numDst, numSrc := -1, -1
	var src, dst []int32
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if c, ok := strings.CutPrefix(text, "#"); ok {
			if numDst < 0 {
				comment = append(comment, strings.TrimSpace(c))
			}
			continue
		}
		if text == "" {
			continue
		}
		f := strings.Fields(text)
		if len(f) != 2 {
			return nil, "", fmt.Errorf("%w: backendtest: edge list line %d: want two integers, got %q", core.ErrInvalidGraph, line, text)
		}
		a, err1 := strconv.ParseInt(f[0], 10, 32)
		b, err2 := strconv.ParseInt(f[1], 10, 32)
		if err1 != nil || err2 != nil || a < 0 || b < 0 {
			return nil, "", fmt.Errorf("%w: backendtest: edge list line %d: want two non-negative integers, got %q", core.ErrInvalidGraph, line, text)
		}
		if numDst < 0 {
			numDst, numSrc = int(a), int(b)
			if numDst > 1<<20 || numSrc > 1<<20 {
				return nil, "", fmt.Errorf("%w: backendtest: edge list line %d: %d x %d nodes is too many for a test graph", core.ErrInvalidGraph, line, numDst, numSrc)
			}
			continue
		}
		src = append(src, int32(a))
		dst = append(dst, int32(b))
	}
	if err := sc.Err(); err != nil {
		return nil, "", err
	}
	if numDst < 0 {
		return nil, "", fmt.Errorf("%w: backendtest: edge list has no node-count line", core.ErrInvalidGraph)
	}
	g, err = core.FromEdges(numDst, numSrc, src, dst)
	return g, strings.Join(comment, " "), err
}

// RMAT returns a directed R-MAT graph (Chakrabarti et al.) on n nodes
// with about m edges (duplicates and self-loops kept), deterministic in
// seed: a small power-law graph.
func RMAT(n, m int, seed uint64) *core.Graph {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	levels := 0
	for 1<<levels < n {
		levels++
	}
	src := make([]int32, 0, m)
	dst := make([]int32, 0, m)
	for len(src) < m {
		var u, v int
		for range levels {
			u, v = u<<1, v<<1
			switch p := r.Float64(); {
			case p < 0.57:
			case p < 0.76:
				v |= 1
			case p < 0.95:
				u |= 1
			default:
				u, v = u|1, v|1
			}
		}
		if u < n && v < n {
			src = append(src, int32(u))
			dst = append(dst, int32(v))
		}
	}
	g, err := core.FromEdges(n, n, src, dst)
	if err != nil {
		panic(err)
	}
	return g
}

// RandomGraph returns a random graph for fuzzing: up to maxNodes
// destinations and sources (square or bipartite), up to maxEdges edges
// with repeats and self-loops, optionally with unsorted rows and edge ids
// that are a permutation with gaps.
func RandomGraph(r *rand.Rand, maxNodes, maxEdges int) *core.Graph {
	nd := r.IntN(maxNodes + 1)
	ns := nd
	if r.IntN(3) == 0 {
		ns = r.IntN(maxNodes + 1)
	}
	ne := 0
	if nd > 0 && ns > 0 {
		ne = r.IntN(maxEdges + 1)
	}
	off := make([]int64, nd+1)
	rowOf := make([]int, ne)
	for e := range rowOf {
		rowOf[e] = r.IntN(nd)
		off[rowOf[e]+1]++
	}
	for i := range nd {
		off[i+1] += off[i]
	}
	idx := make([]int32, ne)
	for e := range idx {
		idx[e] = int32(r.IntN(ns))
	}
	var eids []int32
	if ne > 0 && r.IntN(2) == 0 {
		// a permutation of ids with gaps, as in a subgraph
		perm := r.Perm(ne + r.IntN(ne+1))
		eids = make([]int32, ne)
		for e := range eids {
			eids[e] = int32(perm[e])
		}
	}
	g, err := core.NewGraph(nd, ns, off, idx, eids)
	if err != nil {
		panic(err)
	}
	return g
}
