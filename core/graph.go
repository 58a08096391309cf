package core

import (
	"fmt"
	"math"
	"sort"
	"sync"
)

// Graph is an immutable sparse graph in CSR form, by destination: row i
// lists, in Indices[Offsets[i]:Offsets[i+1]], the sources j of the edges
// j -> i. A message-passing layer computes row i from its sources. NumDst
// and NumSrc differ for bipartite blocks (sampled layers).
//
// Edge values (weights, attention scores) live in tensors, not in the
// graph, indexed by edge id: EdgeID(e) of the e-th CSR entry. A graph
// made from another (Reverse, KHop) keeps the original ids, so edge
// tensors computed on the original can be read through it.
//
// Derived forms (the reverse, degrees) are built once, lazily, and cached.
type Graph struct {
	NumDst, NumSrc int
	Offsets        []int64 // len NumDst+1
	Indices        []int32 // len NumEdges, each in [0, NumSrc)
	EIDs           []int32 // nil, or len NumEdges: the id of each entry

	revOnce sync.Once
	rev     *Graph
	degOnce sync.Once
	inDeg   []int32
	outDeg  []int32
	idOnce  sync.Once
	numIDs  int
}

// NewGraph checks and wraps CSR arrays (not copied).
func NewGraph(numDst, numSrc int, offsets []int64, indices, eids []int32) (*Graph, error) {
	g := &Graph{NumDst: numDst, NumSrc: numSrc, Offsets: offsets, Indices: indices, EIDs: eids}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return g, nil
}

// Validate checks the CSR invariants.
func (g *Graph) Validate() error {
	if g.NumDst < 0 || g.NumSrc < 0 {
		return fmt.Errorf("%w: negative node count (%d dst, %d src)", ErrInvalidGraph, g.NumDst, g.NumSrc)
	}
	if len(g.Offsets) != g.NumDst+1 {
		return fmt.Errorf("%w: %d offsets for %d rows, want %d", ErrInvalidGraph, len(g.Offsets), g.NumDst, g.NumDst+1)
	}
	if g.Offsets[0] != 0 || g.Offsets[g.NumDst] != int64(len(g.Indices)) {
		return fmt.Errorf("%w: offsets run %d..%d, want 0..%d", ErrInvalidGraph, g.Offsets[0], g.Offsets[g.NumDst], len(g.Indices))
	}
	for i := 0; i < g.NumDst; i++ {
		if g.Offsets[i+1] < g.Offsets[i] {
			return fmt.Errorf("%w: offsets decrease at row %d", ErrInvalidGraph, i)
		}
	}
	for e, j := range g.Indices {
		if j < 0 || int(j) >= g.NumSrc {
			return fmt.Errorf("%w: edge %d has source %d, outside [0,%d)", ErrInvalidGraph, e, j, g.NumSrc)
		}
	}
	if g.EIDs != nil {
		if len(g.EIDs) != len(g.Indices) {
			return fmt.Errorf("%w: %d edge ids for %d edges", ErrInvalidGraph, len(g.EIDs), len(g.Indices))
		}
		for e, id := range g.EIDs {
			if id < 0 {
				return fmt.Errorf("%w: edge %d has negative id %d", ErrInvalidGraph, e, id)
			}
		}
	}
	return nil
}

// FromEdges builds a CSR graph from edges src[k] -> dst[k]. Entries are
// sorted by (dst, src), stably, and edge ids are positions in that order
// (EIDs nil). Node ids must be in range.
func FromEdges(numDst, numSrc int, src, dst []int32) (*Graph, error) {
	if len(src) != len(dst) {
		return nil, fmt.Errorf("%w: %d sources but %d destinations", ErrInvalidGraph, len(src), len(dst))
	}
	if numDst < 0 || numSrc < 0 {
		return nil, fmt.Errorf("%w: negative node count", ErrInvalidGraph)
	}
	if int64(len(src)) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d edges exceed the int32 edge-id range", ErrInvalidGraph, len(src))
	}
	off := make([]int64, numDst+1)
	for k := range src {
		if src[k] < 0 || int(src[k]) >= numSrc || dst[k] < 0 || int(dst[k]) >= numDst {
			return nil, fmt.Errorf("%w: edge %d (%d -> %d) outside %d sources x %d destinations", ErrInvalidGraph, k, src[k], dst[k], numSrc, numDst)
		}
		off[dst[k]+1]++
	}
	for i := 0; i < numDst; i++ {
		off[i+1] += off[i]
	}
	idx := make([]int32, len(src))
	pos := append([]int64(nil), off[:numDst]...)
	for k := range src {
		d := dst[k]
		idx[pos[d]] = src[k]
		pos[d]++
	}
	for i := 0; i < numDst; i++ {
		row := idx[off[i]:off[i+1]]
		if !sort.SliceIsSorted(row, func(a, b int) bool { return row[a] < row[b] }) {
			sort.SliceStable(row, func(a, b int) bool { return row[a] < row[b] })
		}
	}
	return &Graph{NumDst: numDst, NumSrc: numSrc, Offsets: off, Indices: idx}, nil
}

// Undirected builds the symmetric graph of n nodes with both directions of
// every edge (a, b); self-loops in the input are kept once.
func Undirected(n int, a, b []int32) (*Graph, error) {
	if len(a) != len(b) {
		return nil, fmt.Errorf("%w: %d and %d endpoints", ErrInvalidGraph, len(a), len(b))
	}
	src := make([]int32, 0, 2*len(a))
	dst := make([]int32, 0, 2*len(a))
	for k := range a {
		src = append(src, a[k])
		dst = append(dst, b[k])
		if a[k] != b[k] {
			src = append(src, b[k])
			dst = append(dst, a[k])
		}
	}
	return FromEdges(n, n, src, dst)
}

// NumEdges is the number of CSR entries.
func (g *Graph) NumEdges() int { return len(g.Indices) }

// EdgeID is the id of the e-th CSR entry (its index into edge tensors).
func (g *Graph) EdgeID(e int) int {
	if g.EIDs == nil {
		return e
	}
	return int(g.EIDs[e])
}

// NumEdgeIDs is one more than the largest edge id: the row count an edge
// tensor for g must have.
func (g *Graph) NumEdgeIDs() int {
	if g.EIDs == nil {
		return len(g.Indices)
	}
	g.idOnce.Do(func() {
		m := -1
		for _, id := range g.EIDs {
			if int(id) > m {
				m = int(id)
			}
		}
		g.numIDs = m + 1
	})
	return g.numIDs
}

func (g *Graph) degrees() {
	g.degOnce.Do(func() {
		g.inDeg = make([]int32, g.NumDst)
		for i := 0; i < g.NumDst; i++ {
			g.inDeg[i] = int32(g.Offsets[i+1] - g.Offsets[i])
		}
		g.outDeg = make([]int32, g.NumSrc)
		for _, j := range g.Indices {
			g.outDeg[j]++
		}
	})
}

// InDegrees returns the edge count of each row (destination). Do not modify.
func (g *Graph) InDegrees() []int32 { g.degrees(); return g.inDeg }

// OutDegrees returns the edge count of each source. Do not modify.
func (g *Graph) OutDegrees() []int32 { g.degrees(); return g.outDeg }

// Reverse returns the transposed graph (CSR by source), built once. Its
// edge ids are g's, so SpMM(g.Reverse(), w, ...) reads the same weights:
// that is the transpose product used by backward passes.
func (g *Graph) Reverse() *Graph {
	g.revOnce.Do(func() {
		n := g.NumSrc
		off := make([]int64, n+1)
		for _, j := range g.Indices {
			off[j+1]++
		}
		for i := 0; i < n; i++ {
			off[i+1] += off[i]
		}
		idx := make([]int32, len(g.Indices))
		eid := make([]int32, len(g.Indices))
		pos := append([]int64(nil), off[:n]...)
		for i := 0; i < g.NumDst; i++ {
			for e := g.Offsets[i]; e < g.Offsets[i+1]; e++ {
				j := g.Indices[e]
				idx[pos[j]] = int32(i)
				eid[pos[j]] = int32(g.EdgeID(int(e)))
				pos[j]++
			}
		}
		g.rev = &Graph{NumDst: g.NumSrc, NumSrc: g.NumDst, Offsets: off, Indices: idx, EIDs: eid}
		g.rev.revOnce.Do(func() {}) // the reverse of the reverse is g
		g.rev.rev = g
	})
	return g.rev
}

// WithSelfLoops returns a square graph with the edge i -> i added to every
// row that lacks one. Edge ids are renumbered (EIDs nil).
func (g *Graph) WithSelfLoops() (*Graph, error) {
	if g.NumDst != g.NumSrc {
		return nil, fmt.Errorf("%w: self-loops need a square graph, have %d x %d", ErrInvalidGraph, g.NumDst, g.NumSrc)
	}
	off := make([]int64, g.NumDst+1)
	idx := make([]int32, 0, len(g.Indices)+g.NumDst)
	for i := 0; i < g.NumDst; i++ {
		row := g.Indices[g.Offsets[i]:g.Offsets[i+1]]
		has := false
		for _, j := range row {
			if int(j) == i {
				has = true
				break
			}
		}
		inserted := has
		for _, j := range row {
			if !inserted && int(j) > i {
				idx = append(idx, int32(i))
				inserted = true
			}
			idx = append(idx, j)
		}
		if !inserted {
			idx = append(idx, int32(i))
		}
		off[i+1] = int64(len(idx))
	}
	return &Graph{NumDst: g.NumDst, NumSrc: g.NumSrc, Offsets: off, Indices: idx}, nil
}

// GCNNorm returns the symmetric normalisation weight of every edge, indexed
// by edge id: 1/sqrt(deg(dst) * deg(src)) with deg the in-degree (row
// length) as in Kipf & Welling and PyG's gcn_norm; add self-loops first.
// Nodes of degree 0 give weight 0.
func (g *Graph) GCNNorm() []float32 {
	deg := g.InDegrees()
	srcDeg := deg
	if g.NumSrc != g.NumDst {
		srcDeg = g.OutDegrees()
	}
	w := make([]float32, g.NumEdgeIDs())
	for i := 0; i < g.NumDst; i++ {
		for e := g.Offsets[i]; e < g.Offsets[i+1]; e++ {
			j := g.Indices[e]
			d := float64(deg[i]) * float64(srcDeg[j])
			if d > 0 {
				w[g.EdgeID(int(e))] = float32(1 / math.Sqrt(d))
			}
		}
	}
	return w
}

// MeanWeights returns 1/deg(dst) for every edge, indexed by edge id: the
// weights under which a weighted sum equals ReduceMean.
func (g *Graph) MeanWeights() []float32 {
	w := make([]float32, g.NumEdgeIDs())
	for i := 0; i < g.NumDst; i++ {
		n := g.Offsets[i+1] - g.Offsets[i]
		for e := g.Offsets[i]; e < g.Offsets[i+1]; e++ {
			w[g.EdgeID(int(e))] = float32(1 / float64(n))
		}
	}
	return w
}

// Subgraph is a graph induced on a node set, with the map back to the
// original node ids. Its edge ids are the original graph's.
type Subgraph struct {
	*Graph
	// Nodes[l] is the original id of local node l; the seeds come first,
	// in the order given.
	Nodes []int32
	// Seeds is the number of seed nodes (a prefix of Nodes).
	Seeds int
	// HopEnds[h] is the number of nodes within h hops of the seeds (a
	// prefix of Nodes: nodes are in breadth-first ring order), h = 0..k.
	HopEnds []int
}

// KHop returns the subgraph induced on the seeds and every node that
// reaches a seed in at most k hops (following edges toward the
// destinations, i.e. a k-layer GNN's receptive field). Edge ids are g's.
func (g *Graph) KHop(seeds []int32, k int) (*Subgraph, error) {
	if g.NumDst != g.NumSrc {
		return nil, fmt.Errorf("%w: k-hop extraction needs a square graph, have %d x %d", ErrInvalidGraph, g.NumDst, g.NumSrc)
	}
	if k < 0 {
		return nil, fmt.Errorf("%w: k-hop with negative k=%d", ErrInvalidGraph, k)
	}
	local := make(map[int32]int32, len(seeds)*4)
	nodes := make([]int32, 0, len(seeds)*4)
	for _, s := range seeds {
		if s < 0 || int(s) >= g.NumDst {
			return nil, fmt.Errorf("%w: seed %d outside [0,%d)", ErrInvalidGraph, s, g.NumDst)
		}
		if _, dup := local[s]; dup {
			return nil, fmt.Errorf("%w: seed %d listed twice", ErrInvalidGraph, s)
		}
		local[s] = int32(len(nodes))
		nodes = append(nodes, s)
	}
	frontier := nodes
	ends := []int{len(nodes)}
	for hop := 0; hop < k; hop++ {
		var next []int32
		for _, v := range frontier {
			for _, u := range g.Indices[g.Offsets[v]:g.Offsets[v+1]] {
				if _, ok := local[u]; !ok {
					local[u] = int32(len(nodes))
					nodes = append(nodes, u)
					next = append(next, u)
				}
			}
		}
		frontier = next
		ends = append(ends, len(nodes))
	}
	sub, err := g.Induced(nodes)
	if err != nil {
		return nil, err
	}
	return &Subgraph{Graph: sub, Nodes: nodes, Seeds: len(seeds), HopEnds: ends}, nil
}

// DstPrefix returns the graph of g's first dst rows with their edges
// (sources, edge ids) as they are, over the first src source nodes: the
// block of one GNN layer when rows are in hop order (PyG's trim_to_layer).
// Every kept edge's source must lie below src.
func (g *Graph) DstPrefix(dst, src int) (*Graph, error) {
	if dst < 0 || dst > g.NumDst || src < 0 || src > g.NumSrc {
		return nil, fmt.Errorf("%w: prefix of %d dst x %d src rows of a %d x %d graph", ErrInvalidGraph, dst, src, g.NumDst, g.NumSrc)
	}
	n := g.Offsets[dst]
	idx := g.Indices[:n]
	for e, j := range idx {
		if int(j) >= src {
			return nil, fmt.Errorf("%w: prefix of %d rows: edge %d comes from node %d, outside the first %d sources (rows not in hop order?)",
				ErrInvalidGraph, dst, e, j, src)
		}
	}
	p := &Graph{NumDst: dst, NumSrc: src, Offsets: g.Offsets[:dst+1], Indices: idx}
	if g.EIDs != nil {
		p.EIDs = g.EIDs[:n]
	}
	return p, nil
}

// BindHopBlocks puts into graphs, for every hop h from from up to the
// last, the layer block of g whose output rows lie within h hops when
// rows[h] rows do: g.DstPrefix(rows[h], rows[h+1]) under AtHop(name, h).
func (g *Graph) BindHopBlocks(graphs map[string]*Graph, name string, rows []int, from int) error {
	for h := from; h+1 < len(rows); h++ {
		blk, err := g.DstPrefix(rows[h], rows[h+1])
		if err != nil {
			return err
		}
		graphs[AtHop(name, h)] = blk
	}
	return nil
}

// AtHop names the graph a layer reads when rows are trimmed to those
// within hop hops of the targets (see Env.HopRows).
func AtHop(name string, hop int) string { return fmt.Sprintf("%s@%d", name, hop) }

// Induced returns the subgraph on nodes (local id l = nodes[l], which must
// be distinct and in range): every edge of g between two listed nodes, in
// g's row order, with g's edge ids.
func (g *Graph) Induced(nodes []int32) (*Graph, error) {
	if g.NumDst != g.NumSrc {
		return nil, fmt.Errorf("%w: induced subgraphs need a square graph, have %d x %d", ErrInvalidGraph, g.NumDst, g.NumSrc)
	}
	local := make([]int32, g.NumDst)
	for i := range local {
		local[i] = -1
	}
	for l, v := range nodes {
		if v < 0 || int(v) >= g.NumDst {
			return nil, fmt.Errorf("%w: node %d outside [0,%d)", ErrInvalidGraph, v, g.NumDst)
		}
		if local[v] >= 0 {
			return nil, fmt.Errorf("%w: node %d listed twice", ErrInvalidGraph, v)
		}
		local[v] = int32(l)
	}
	off := make([]int64, len(nodes)+1)
	var idx, eid []int32
	for l, v := range nodes {
		for e := g.Offsets[v]; e < g.Offsets[v+1]; e++ {
			if lu := local[g.Indices[e]]; lu >= 0 {
				idx = append(idx, lu)
				eid = append(eid, int32(g.EdgeID(int(e))))
			}
		}
		off[l+1] = int64(len(idx))
	}
	if idx == nil {
		idx, eid = []int32{}, []int32{}
	}
	return &Graph{NumDst: len(nodes), NumSrc: len(nodes), Offsets: off, Indices: idx, EIDs: eid}, nil
}
