package engine

import (
	"fmt"
	"math/rand/v2"

	"github.com/gnnkit/gnnkit/core"
)

// Batch is one iteration's data: a graph over local node ids, the global
// id of each local node, and the local ids of the loss targets. The
// dataset graph itself (Nodes nil) is full-graph training; Sample builds
// sampled mini-batches.
type Batch struct {
	Graph   *core.Graph
	Nodes   []int32 // global id of local node l (nil: the identity)
	Targets []int32 // local ids
	// Graphs, when set, gives the graph of a GraphSpec by name (e.g. one
	// snapshot per time step of a dynamic model), over the same nodes as
	// Graph; specs not listed use Graph.
	Graphs map[string]*core.Graph
	// Labels, when set, labels the rows of the model's output that Targets
	// index (e.g. node pairs of a link-prediction head) instead of the
	// dataset's node labels.
	Labels []int32
	// HopEnds, when set (Sample sets it), says the nodes are in hop order
	// from the targets: HopEnds[h] nodes lie within h hops, h = 0..layers.
	// A whole-batch unit then computes each layer only on the rows a
	// later layer reads (PyG's trim_to_layer); the result is the same.
	HopEnds []int

	prepared bool
	hopRows  []int                   // HopEnds, when the batch's units trim their layers
	views    map[viewKey]*unitInputs // subgraph units' inputs, reused across iterations
	reuse    map[*core.Plan]*reuseLayout
	prep     map[string]*core.Graph // per GraphSpec: self-loops added as asked
	weights  map[string][]float32   // per GraphSpec with weights, by edge id of prep
	labels   []int32                // per local node
}

// Global returns the global id of local node l.
func (b *Batch) Global(l int32) int32 {
	if b.Nodes == nil {
		return l
	}
	return b.Nodes[l]
}

// FullBatch is full-graph training: the dataset graph with the given
// training nodes as targets.
func (t *Trainer) FullBatch(targets []int32) *Batch {
	return &Batch{Graph: t.data.Graph, Targets: targets}
}

// prepare builds the model's graphs and edge weights for the batch, once.
func (t *Trainer) prepare(b *Batch) error {
	if b.prepared {
		return nil
	}
	if b.Graph == nil {
		return fmt.Errorf("engine: batch has no graph")
	}
	if b.Nodes != nil && len(b.Nodes) != b.Graph.NumDst {
		return fmt.Errorf("engine: batch maps %d nodes but its graph has %d", len(b.Nodes), b.Graph.NumDst)
	}
	rows := b.Graph.NumDst
	if b.Labels != nil {
		rows = len(b.Labels)
	}
	for _, n := range b.Targets {
		if n < 0 || int(n) >= rows {
			return fmt.Errorf("engine: batch target %d outside its %d rows", n, rows)
		}
	}
	b.prep = map[string]*core.Graph{}
	b.weights = map[string][]float32{}
	for _, gs := range t.model.Graphs {
		g := b.Graph
		if og, ok := b.Graphs[gs.Name]; ok {
			g = og
		}
		if gs.SelfLoops {
			var err error
			if g, err = g.WithSelfLoops(); err != nil {
				return fmt.Errorf("engine: graph %s: %w", gs.Name, err)
			}
		}
		b.prep[gs.Name] = g
		switch gs.Weights {
		case core.WeightsGCN:
			b.weights[gs.Name] = g.GCNNorm()
		case core.WeightsMean:
			b.weights[gs.Name] = g.MeanWeights()
		}
	}
	if err := t.prepareHops(b); err != nil {
		return err
	}
	b.labels = t.data.Labels
	if b.Labels != nil {
		b.labels = b.Labels
	} else if b.Nodes != nil {
		b.labels = make([]int32, len(b.Nodes))
		for l, gid := range b.Nodes {
			b.labels[l] = t.data.Labels[gid]
		}
	}
	b.prepared = true
	return nil
}

// graph is the batch graph as the model's first graph input sees it.
func (t *Trainer) batchGraph(b *Batch) *core.Graph {
	if len(t.model.Graphs) == 0 {
		return b.Graph
	}
	return b.prep[t.model.Graphs[0].Name]
}

// Sample draws a mini-batch the way PyG's NeighborLoader does: the targets
// (global ids, distinct) first, then for each layer up to fanouts[l] of the
// in-neighbours of every node first reached at the previous hop, drawn
// without replacement (-1: all of them). The batch graph holds the sampled
// edges over local ids. The draw for a node depends only on (seed, node,
// hop), so it is reproducible and independent of visiting order.
func Sample(g *core.Graph, targets []int32, fanouts []int, seed uint64) (*Batch, error) {
	if g.NumDst != g.NumSrc {
		return nil, fmt.Errorf("engine: sampling needs a square graph, have %d x %d", g.NumDst, g.NumSrc)
	}
	local := make(map[int32]int32, len(targets)*4)
	nodes := make([]int32, 0, len(targets)*4)
	for _, v := range targets {
		if v < 0 || int(v) >= g.NumDst {
			return nil, fmt.Errorf("engine: sample: target %d outside [0,%d)", v, g.NumDst)
		}
		if _, dup := local[v]; dup {
			return nil, fmt.Errorf("engine: sample: target %d listed twice", v)
		}
		local[v] = int32(len(nodes))
		nodes = append(nodes, v)
	}
	var src, dst []int32
	frontier := append([]int32(nil), nodes...)
	ends := []int{len(nodes)}
	var pick []int32
	for hop, f := range fanouts {
		if f == 0 || f < -1 {
			return nil, fmt.Errorf("engine: sample: fan-out %d at layer %d; want a positive count or -1 for all", f, hop)
		}
		var next []int32
		for _, v := range frontier {
			nbrs := g.Indices[g.Offsets[v]:g.Offsets[v+1]]
			pick = append(pick[:0], nbrs...)
			if f > 0 && len(pick) > f {
				r := rand.New(rand.NewPCG(seed, uint64(v)<<8|uint64(hop)))
				for i := 0; i < f; i++ { // partial Fisher-Yates
					j := i + r.IntN(len(pick)-i)
					pick[i], pick[j] = pick[j], pick[i]
				}
				pick = pick[:f]
			}
			lv := local[v]
			for _, u := range pick {
				lu, ok := local[u]
				if !ok {
					lu = int32(len(nodes))
					local[u] = lu
					nodes = append(nodes, u)
					next = append(next, u)
				}
				src = append(src, lu)
				dst = append(dst, lv)
			}
		}
		frontier = next
		ends = append(ends, len(nodes))
	}
	bg, err := core.FromEdges(len(nodes), len(nodes), src, dst)
	if err != nil {
		return nil, err
	}
	tl := make([]int32, len(targets))
	for i := range tl {
		tl[i] = int32(i)
	}
	return &Batch{Graph: bg, Nodes: nodes, Targets: tl, HopEnds: ends}, nil
}

// unitInputs are what a unit's Env binds: graphs, the ids its rows stand
// for, its labels and targets, and the host data to upload for it.
type unitInputs struct {
	graphs  map[string]*core.Graph
	nodeIDs []int32 // global ids of rows (nil: identity)
	edgeIDs []int32 // batch edge ids of edge rows (nil: identity)
	labels  []int32
	targets []int32
	// hopRows, when set, trims each layer to its rows (core.Env.HopRows);
	// graphs then also holds each layer's block under core.AtHop names.
	hopRows []int
	// For subgraph units: the rows to gather (batch-local ids) and, per
	// graph spec, the batch edge ids to gather weights from.
	rows    []int32
	edgeMap map[string][]int32
	// noFeatures skips binding the input features (a reuse head unit,
	// whose ops start after the features are consumed).
	noFeatures bool
}

// viewKey identifies a unit's targets by identity: a plan reused across
// iterations (full-graph training) hits the cache.
type viewKey struct {
	first *int32
	n     int
}

// unitView works out a unit's inputs from the batch, once per batch and
// target set.
func (t *Trainer) unitView(b *Batch, u core.Unit) (*unitInputs, error) {
	if !u.Subgraph {
		return &unitInputs{graphs: b.prep, nodeIDs: b.Nodes, labels: b.labels, targets: u.Targets, hopRows: b.hopRows}, nil
	}
	if len(u.Targets) == 0 {
		return t.buildView(b, u)
	}
	k := viewKey{&u.Targets[0], len(u.Targets)}
	t.viewMu.Lock()
	in, ok := b.views[k]
	t.viewMu.Unlock()
	if ok {
		return in, nil
	}
	in, err := t.buildView(b, u)
	if err != nil {
		return nil, err
	}
	t.viewMu.Lock()
	if b.views == nil {
		b.views = map[viewKey]*unitInputs{}
	}
	b.views[k] = in
	t.viewMu.Unlock()
	return in, nil
}

func (t *Trainer) buildView(b *Batch, u core.Unit) (*unitInputs, error) {
	return t.buildViewHops(b, u, t.model.Config.Layers, 0)
}

// buildViewHops is buildView over the targets' hops-hop receptive field,
// for targets shift hops away from the loss targets (0 for units and
// reuse heads, 1 for reuse producers): its rows are trimmed per layer.
func (t *Trainer) buildViewHops(b *Batch, u core.Unit, hops, shift int) (*unitInputs, error) {
	if len(t.model.Graphs) == 0 {
		// No message passing: a unit's receptive field is its targets.
		in := &unitInputs{graphs: map[string]*core.Graph{}, rows: u.Targets, nodeIDs: make([]int32, len(u.Targets)),
			labels: make([]int32, len(u.Targets)), targets: make([]int32, len(u.Targets))}
		for i, bl := range u.Targets {
			in.nodeIDs[i], in.labels[i], in.targets[i] = b.Global(bl), b.labels[bl], int32(i)
		}
		return in, nil
	}
	if hops <= 0 {
		return nil, fmt.Errorf("engine: model %s does not state its depth (Config.Layers); subgraph units need it", t.model.Name)
	}
	first := t.model.Graphs[0].Name
	ks, err := b.prep[first].KHop(u.Targets, hops)
	if err != nil {
		return nil, fmt.Errorf("engine: unit %d: %w", u.ID, err)
	}
	in := &unitInputs{graphs: map[string]*core.Graph{}, edgeMap: map[string][]int32{}, rows: ks.Nodes}
	for _, gs := range t.model.Graphs {
		ind := ks.Graph
		if gs.Name != first {
			if ind, err = b.prep[gs.Name].Induced(ks.Nodes); err != nil {
				return nil, err
			}
		}
		in.graphs[gs.Name] = &core.Graph{NumDst: ind.NumDst, NumSrc: ind.NumSrc, Offsets: ind.Offsets, Indices: ind.Indices}
		in.edgeMap[gs.Name] = ind.EIDs
	}
	in.edgeIDs = in.edgeMap[first]
	if len(t.model.Graphs) == 1 && t.trim {
		// Rows are in ring order: layer blocks are CSR prefixes.
		rows := append(make([]int, shift), ks.HopEnds...)
		for h := range shift {
			rows[h] = ks.HopEnds[0]
		}
		if err := in.graphs[first].BindHopBlocks(in.graphs, first, rows, shift); err != nil {
			return nil, fmt.Errorf("engine: unit %d: %w", u.ID, err)
		}
		in.hopRows = rows
	}
	in.nodeIDs = make([]int32, len(ks.Nodes))
	in.labels = make([]int32, len(ks.Nodes))
	for l, bl := range ks.Nodes {
		in.nodeIDs[l] = b.Global(bl)
		in.labels[l] = b.labels[bl]
	}
	in.targets = make([]int32, len(u.Targets))
	for i := range in.targets {
		in.targets[i] = int32(i)
	}
	return in, nil
}

// prepareHops checks a batch's HopEnds and builds the layer blocks its
// whole-batch units trim to. Only single-graph models whose depth is the
// batch's hop count trim; others run every layer on every row.
func (t *Trainer) prepareHops(b *Batch) error {
	if b.HopEnds == nil || !t.trim || len(t.model.Graphs) != 1 || b.Labels != nil || len(b.Graphs) > 0 {
		return nil
	}
	L, ends := t.model.Config.Layers, b.HopEnds
	if len(ends) != L+1 || ends[L] != b.Graph.NumDst {
		return nil
	}
	for i := 1; i < len(ends); i++ {
		if ends[i] < ends[i-1] || ends[0] < 0 {
			return fmt.Errorf("engine: batch hop ends %v are not increasing", ends)
		}
	}
	for _, n := range b.Targets {
		if int(n) >= ends[0] {
			return fmt.Errorf("engine: batch target %d is outside the first %d rows its HopEnds put within 0 hops", n, ends[0])
		}
	}
	name := t.model.Graphs[0].Name
	if err := b.prep[name].BindHopBlocks(b.prep, name, ends, 0); err != nil {
		return fmt.Errorf("engine: batch graph is not in the hop order its HopEnds state: %w", err)
	}
	b.hopRows = ends
	return nil
}
