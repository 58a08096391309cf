package dyntrain

import (
	"fmt"
	"slices"
	"sync"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data/dynamic"
	"github.com/gnnkit/gnnkit/engine"
	mdyn "github.com/gnnkit/gnnkit/models/dynamic"
)

// Partition is a group cut into parts for vertex-partitioned training
// (models/dynamic.TGCNVertex): the part of every node, and per part the
// sizes that drive its cost.
type Partition struct {
	Parts int
	// Owner[v] is the part of local node v.
	Owner []int32
	// Per part: owned nodes, halo rows (in-neighbours of owned nodes in
	// some window snapshot, owned elsewhere), scored pairs, and the rows of
	// other parts its pairs read (the halo exchange).
	Owned, Halo, Pairs, Remote []int
	// Graphs are TGCNVertex's graphs for the group.
	Graphs map[string]*core.Graph
}

var vpCache sync.Map // vpKey -> *Partition

type vpKey struct {
	g     *dynamic.Group
	parts int
}

// VertexPartition cuts group g into parts (cached per group): nodes are
// ordered by a breadth-first search over the window's snapshots (either
// direction, components in id order) and cut into parts of equal node
// counts, so that a part is a connected region where the graph has
// them (a cheap stand-in for METIS); then the graphs of
// models/dynamic.TGCNVertex are built (see there).
func VertexPartition(g *dynamic.Group, parts int) (*Partition, error) {
	if v, ok := vpCache.Load(vpKey{g, parts}); ok {
		return v.(*Partition), nil
	}
	p, err := partition(g, parts)
	if err != nil {
		return nil, err
	}
	vpCache.Store(vpKey{g, parts}, p)
	return p, nil
}

func partition(g *dynamic.Group, P int) (*Partition, error) {
	n := len(g.Nodes)
	if P < 1 || n < P {
		return nil, fmt.Errorf("dyntrain: group %d has %d nodes: cannot cut it into %d parts", g.Target, n, P)
	}
	// BFS order over the window's snapshots, both directions.
	adj := make([][]int32, n)
	for _, s := range g.Snaps {
		for v := 0; v < n; v++ {
			for _, u := range s.Indices[s.Offsets[v]:s.Offsets[v+1]] {
				adj[v] = append(adj[v], u)
				adj[u] = append(adj[u], int32(v))
			}
		}
	}
	seen := make([]bool, n)
	order := make([]int32, 0, n)
	for s := 0; s < n; s++ {
		if seen[s] {
			continue
		}
		seen[s] = true
		order = append(order, int32(s))
		for i := len(order) - 1; i < len(order); i++ {
			for _, u := range adj[order[i]] {
				if !seen[u] {
					seen[u] = true
					order = append(order, u)
				}
			}
		}
	}
	pt := &Partition{Parts: P, Owner: make([]int32, n), Graphs: map[string]*core.Graph{},
		Owned: make([]int, P), Halo: make([]int, P), Pairs: make([]int, P), Remote: make([]int, P)}
	owned := make([][]int32, P)
	for p := range P {
		for _, v := range order[p*n/P : (p+1)*n/P] {
			pt.Owner[v] = int32(p)
			owned[p] = append(owned[p], v)
		}
		slices.Sort(owned[p])
		pt.Owned[p] = len(owned[p])
	}
	pos := make([]int32, n) // position of v among its part's owned nodes
	for p := range P {
		for i, v := range owned[p] {
			pos[v] = int32(i)
		}
	}
	add := func(name string, gr *core.Graph, err error) error {
		if err != nil {
			return fmt.Errorf("dyntrain: group %d: graph %s: %w", g.Target, name, err)
		}
		pt.Graphs[name] = gr
		return nil
	}
	// selection builds the numDst x numSrc graph whose row i holds the one
	// edge src[i] -> i (rows with src[i] < 0 are empty).
	selection := func(numDst, numSrc int, src []int32) (*core.Graph, error) {
		off := make([]int64, numDst+1)
		var idx []int32
		for i := range numDst {
			if i < len(src) && src[i] >= 0 {
				idx = append(idx, src[i])
			}
			off[i+1] = int64(len(idx))
		}
		return core.NewGraph(numDst, numSrc, off, idx, nil)
	}
	// Pairs per part (by scored node), and their sources.
	pairsOf := make([][]int, P)
	for k := range g.Labels {
		p := pt.Owner[g.Dst[k]]
		pairsOf[p] = append(pairsOf[p], k)
	}
	remote := make([][]int32, P) // per part: sources owned elsewhere, by (owner, id)
	for p := range P {
		mark := map[int32]bool{}
		for _, k := range pairsOf[p] {
			if v := g.Src[k]; pt.Owner[v] != int32(p) && !mark[v] {
				mark[v] = true
				remote[p] = append(remote[p], v)
			}
		}
		slices.SortFunc(remote[p], func(a, b int32) int {
			if pt.Owner[a] != pt.Owner[b] {
				return int(pt.Owner[a] - pt.Owner[b])
			}
			return int(a - b)
		})
		pt.Remote[p], pt.Pairs[p] = len(remote[p]), len(pairsOf[p])
	}
	// ext[p][v]: row of v in part p's pair space.
	ext := make([]map[int32]int32, P)
	for p := range P {
		ext[p] = map[int32]int32{}
		for i, v := range owned[p] {
			ext[p][v] = int32(i)
		}
		for i, v := range remote[p] {
			ext[p][v] = int32(len(owned[p]) + i)
		}
	}
	extRows := func(p int) int { return len(owned[p]) + len(remote[p]) + 1 } // + the padding row
	for p := range P {
		own := owned[p]
		// Rows R_p: owned, then halo, then the dummy row.
		local := map[int32]int32{}
		rows := slices.Clone(own)
		for i, v := range own {
			local[v] = int32(i)
		}
		for _, s := range g.Snaps {
			for _, c := range own {
				for _, u := range s.Indices[s.Offsets[c]:s.Offsets[c+1]] {
					if _, ok := local[u]; !ok {
						local[u] = -1
					}
				}
			}
		}
		var halo []int32
		for v, l := range local {
			if l < 0 {
				halo = append(halo, v)
			}
		}
		slices.Sort(halo)
		for _, v := range halo {
			local[v] = int32(len(rows))
			rows = append(rows, v)
		}
		pt.Halo[p] = len(halo)
		nr := len(rows) + 1
		z := int32(len(rows))
		gr, err := selection(nr, n, rows)
		if err := add(mdyn.VP.Sel(p), gr, err); err != nil {
			return nil, err
		}
		for t, s := range g.Snaps {
			off := make([]int64, nr+1)
			var idx []int32
			for i, v := range rows {
				row := s.Indices[s.Offsets[v]:s.Offsets[v+1]]
				if i < len(own) {
					for _, u := range row {
						idx = append(idx, local[u])
					}
				} else {
					// A halo row: as many in-edges as it has, from the dummy
					// row (a self-loop stays one: the runtime adds it back).
					k := len(row)
					if slices.Contains(row, v) {
						k--
					}
					for range k {
						idx = append(idx, z)
					}
				}
				off[i+1] = int64(len(idx))
			}
			off[nr] = int64(len(idx))
			gr, err := core.NewGraph(nr, nr, off, idx, nil)
			if err := add(mdyn.VP.Adj(t, p), gr, err); err != nil {
				return nil, err
			}
		}
		ids := make([]int32, len(own))
		for i := range ids {
			ids[i] = int32(i)
		}
		gr, err = selection(len(own), nr, ids)
		if err := add(mdyn.VP.Own(p), gr, err); err != nil {
			return nil, err
		}
		gr, err = selection(extRows(p), len(own), ids)
		if err := add(mdyn.VP.Ext(p), gr, err); err != nil {
			return nil, err
		}
		// The pairs: dst = the scored node's owned row, src = ext row.
		var src, dst []int32
		for _, k := range pairsOf[p] {
			dst = append(dst, pos[g.Dst[k]])
			src = append(src, ext[p][g.Src[k]])
		}
		if len(src) == 0 {
			// A dummy pair keeps the tensors non-empty; no logit reads it.
			dst, src = []int32{0}, []int32{int32(extRows(p) - 1)}
		}
		gr, err = dynamic.RectPairGraph(len(own), extRows(p), src, dst)
		if err := add(mdyn.VP.Pairs(p), gr, err); err != nil {
			return nil, err
		}
		gat := make([]int32, len(g.Labels))
		for k := range gat {
			gat[k] = -1
		}
		for j, k := range pairsOf[p] {
			gat[k] = int32(j)
		}
		gr, err = selection(len(g.Labels), len(src), gat)
		if err := add(mdyn.VP.Gather(p), gr, err); err != nil {
			return nil, err
		}
	}
	// The exchange: part q sends the rows part p's pairs read.
	for p := range P {
		for q := range P {
			if q == p {
				continue
			}
			var send, land []int32
			for _, v := range remote[p] {
				if pt.Owner[v] == int32(q) {
					send = append(send, pos[v])
					land = append(land, ext[p][v])
				}
			}
			if len(send) == 0 {
				send, land = []int32{0}, []int32{int32(extRows(p) - 1)} // the padding row
			}
			gr, err := selection(len(send), len(owned[q]), send)
			if err := add(mdyn.VP.Send(q, p), gr, err); err != nil {
				return nil, err
			}
			back := make([]int32, extRows(p))
			for i := range back {
				back[i] = -1
			}
			for j, r := range land {
				back[r] = int32(j)
			}
			gr, err = selection(extRows(p), len(send), back)
			if err := add(mdyn.VP.Recv(p, q), gr, err); err != nil {
				return nil, err
			}
		}
	}
	return pt, nil
}

// VertexBatch is the engine batch of group g for TGCNVertex with parts
// parts: the group's nodes (features gathered on every device), its pair
// labels, and the partition's graphs.
func VertexBatch(g *dynamic.Group, parts int) (*engine.Batch, error) {
	pt, err := VertexPartition(g, parts)
	if err != nil {
		return nil, err
	}
	tg := make([]int32, len(g.Labels))
	for i := range tg {
		tg[i] = int32(i)
	}
	return &engine.Batch{Graph: g.Snaps[len(g.Snaps)-1], Nodes: g.Nodes, Targets: tg, Graphs: pt.Graphs, Labels: g.Labels}, nil
}

// VertexOpDims is OpDims for TGCNVertex: each op at the size of the part
// graph it runs over (rows of its output for the others).
func VertexOpDims(g *dynamic.Group, m *core.Model, parts int) ([]core.Dims, core.Dims) {
	d, _ := vertexSizes(g, m, parts)
	return d, groupTotal(g)
}

// VertexOpOutRows is OpOutRows for TGCNVertex.
func VertexOpOutRows(g *dynamic.Group, m *core.Model, parts int) []int64 {
	_, r := vertexSizes(g, m, parts)
	return r
}

func vertexSizes(g *dynamic.Group, m *core.Model, parts int) ([]core.Dims, []int64) {
	pt, err := VertexPartition(g, parts)
	if err != nil {
		return make([]core.Dims, len(m.Ops)), make([]int64, len(m.Ops))
	}
	loops := map[string]bool{}
	for _, gs := range m.Graphs {
		loops[gs.Name] = gs.SelfLoops
	}
	dims := func(name string) core.Dims {
		gr := pt.Graphs[name]
		if gr == nil {
			return core.Dims{}
		}
		e := int64(gr.NumEdgeIDs())
		if loops[name] {
			e += int64(gr.NumDst) - selfLoops(gr)
		}
		return core.Dims{Nodes: int64(gr.NumDst), Edges: e}
	}
	n := int64(len(g.Nodes))
	return mdyn.OpDims(m, n, dims), mdyn.OpOutRows(m, n, dims)
}
