package data

import (
	"fmt"
	"math"

	"github.com/gnnkit/gnnkit/core"
)

// Dataset kinds.
const (
	KindStatic  = "static"  // one graph, node features, labels and splits
	KindDynamic = "dynamic" // a stream of timestamped edge events
)

// Dataset is a graph with its node data, as loaded or generated. Loaders
// return datasets that pass Validate; the slices are owned by the caller.
type Dataset struct {
	Name string
	Kind string // KindStatic or KindDynamic
	// NumNodes is the number of nodes; ids run 0..NumNodes-1.
	NumNodes int
	// Graph is, for a static dataset, the symmetric graph (both directions
	// of every undirected edge, no self-loops) as core.Undirected builds
	// it, or the directed graph for a directed edge list. For a dynamic
	// dataset it is the union of all events as a directed graph src -> dst,
	// each distinct (src, dst) pair once.
	Graph *core.Graph
	// Directed is false when Graph is symmetric (an undirected graph stored
	// with both directions); true for dynamic datasets and directed lists.
	Directed bool
	// Features is NumNodes*FeatureDim values, row-major (row i = node i);
	// nil when FeatureDim == 0.
	Features   []float32
	FeatureDim int
	// Labels holds the class of each node in [0, NumClasses), -1 for an
	// unlabelled node; nil when the dataset has no labels.
	Labels     []int32
	NumClasses int
	// Train, Val and Test are node ids, ascending, disjoint, labelled.
	Train, Val, Test []int32
	// Events are the timestamped edges of a dynamic dataset, sorted by
	// Time (ties in file order).
	Events []Event
	// SnapshotSeconds is the snapshot length the source recommends (from
	// meta.json snapshot_convention), 0 when it names none.
	SnapshotSeconds int64
	// NodeIDs, when not nil, holds the original id of each node (a remapped
	// edge list, node_ids.txt of a dynamic dataset).
	NodeIDs []int64
	// Source says where the data came from: a path, "embedded:cora", or
	// the canonical synthetic spec.
	Source string
	// Warnings lists what a loader dropped or changed (self-loops and
	// duplicate edges of an edge list), for the user to see.
	Warnings []string
}

// Event is one timestamped edge Src -> Dst of a dynamic dataset.
type Event struct {
	Src, Dst int32
	Weight   float32
	Time     int64 // Unix seconds
}

// NumEdges is the number of undirected edges of a static symmetric graph
// (each pair counted once, self-loops once), or the number of CSR entries
// of a directed graph. For a dynamic dataset it is the number of events.
func (d *Dataset) NumEdges() int {
	if d.Kind == KindDynamic {
		return len(d.Events)
	}
	if d.Graph == nil {
		return 0
	}
	if d.Directed {
		return d.Graph.NumEdges()
	}
	loops := selfLoops(d.Graph)
	return (d.Graph.NumEdges()-loops)/2 + loops
}

// Validate checks the dataset's invariants: array lengths, id and label
// ranges, the split rules (ascending, disjoint, labelled), events in range
// and sorted by time.
func (d *Dataset) Validate() error {
	bad := func(format string, args ...any) error {
		return errorf(ErrMalformed, "dataset %q: %s", d.Name, fmt.Sprintf(format, args...))
	}
	if d.Kind != KindStatic && d.Kind != KindDynamic {
		return bad("kind %q, want %q or %q", d.Kind, KindStatic, KindDynamic)
	}
	if d.NumNodes < 0 || int64(d.NumNodes) > maxNodes {
		return bad("%d nodes, want 0..%d", d.NumNodes, maxNodes)
	}
	if d.Graph == nil {
		return bad("no graph")
	}
	if d.Graph.NumDst != d.NumNodes || d.Graph.NumSrc != d.NumNodes {
		return bad("graph is %d x %d for %d nodes", d.Graph.NumDst, d.Graph.NumSrc, d.NumNodes)
	}
	if err := d.Graph.Validate(); err != nil {
		return &Error{Msg: fmt.Sprintf("dataset %q", d.Name), Kind: ErrMalformed, Err: err}
	}
	if !d.Directed {
		if d.Kind == KindDynamic {
			return bad("a dynamic dataset has a directed graph")
		}
		if !isSymmetric(d.Graph) {
			return bad("graph marked undirected is not symmetric")
		}
		if n := selfLoops(d.Graph); n > 0 {
			return bad("undirected graph has %d self-loops", n)
		}
	}
	if d.FeatureDim < 0 {
		return bad("negative feature dim %d", d.FeatureDim)
	}
	if d.FeatureDim == 0 && d.Features != nil {
		return bad("features present with feature dim 0")
	}
	if d.FeatureDim > 0 && len(d.Features) != d.NumNodes*d.FeatureDim {
		return bad("%d feature values, want %d nodes x %d = %d", len(d.Features), d.NumNodes, d.FeatureDim, d.NumNodes*d.FeatureDim)
	}
	if d.Labels != nil {
		if len(d.Labels) != d.NumNodes {
			return bad("%d labels for %d nodes", len(d.Labels), d.NumNodes)
		}
		for i, y := range d.Labels {
			if y < -1 || int(y) >= d.NumClasses {
				return bad("node %d has label %d, outside [0,%d) (or -1 for none)", i, y, d.NumClasses)
			}
		}
	} else if d.Train != nil || d.Val != nil || d.Test != nil {
		return bad("a split without labels")
	}
	seen := make(map[int32]string)
	for _, s := range []struct {
		name string
		ids  []int32
	}{{"train", d.Train}, {"val", d.Val}, {"test", d.Test}} {
		for k, v := range s.ids {
			if v < 0 || int(v) >= d.NumNodes {
				return bad("%s node %d outside [0,%d)", s.name, v, d.NumNodes)
			}
			if k > 0 && v <= s.ids[k-1] {
				return bad("%s ids not ascending at position %d (%d after %d)", s.name, k, v, s.ids[k-1])
			}
			if d.Labels[v] < 0 {
				return bad("%s node %d has no label", s.name, v)
			}
			if other, ok := seen[v]; ok {
				return bad("node %d is in both %s and %s", v, other, s.name)
			}
			seen[v] = s.name
		}
	}
	if d.NodeIDs != nil && len(d.NodeIDs) != d.NumNodes {
		return bad("%d original node ids for %d nodes", len(d.NodeIDs), d.NumNodes)
	}
	if d.Kind == KindStatic && d.Events != nil {
		return bad("events in a static dataset")
	}
	for k, e := range d.Events {
		if e.Src < 0 || int(e.Src) >= d.NumNodes || e.Dst < 0 || int(e.Dst) >= d.NumNodes {
			return bad("event %d (%d -> %d) outside [0,%d)", k, e.Src, e.Dst, d.NumNodes)
		}
		if k > 0 && e.Time < d.Events[k-1].Time {
			return bad("events not sorted by time at %d (%d after %d)", k, e.Time, d.Events[k-1].Time)
		}
	}
	if d.SnapshotSeconds < 0 {
		return bad("negative snapshot length %d", d.SnapshotSeconds)
	}
	return nil
}

// RowNormalizedFeatures returns a copy of the features with each row
// divided by its L1 norm, the sum of its absolute values (rows of zeros
// stay 0), as scikit-learn's normalize(norm="l1") does. On non-negative
// features, such as Cora's 0/1 bag of words, that is each row divided by
// its sum: Kipf & Welling's GCN preprocessing. On signed features
// (synthetic:sbm) dividing by the plain sum was wrong: rows summing to
// nearly 0 were scaled up thousands of times and rows with a negative sum
// had their signs flipped; with the L1 norm signs are kept and each row's
// absolute values sum to 1. The arithmetic is float32, as numpy does it on float32
// data. Nil when there are no features.
func (d *Dataset) RowNormalizedFeatures() []float32 {
	if d.FeatureDim == 0 || d.Features == nil {
		return nil
	}
	out := make([]float32, len(d.Features))
	f := d.FeatureDim
	for i := 0; i+f <= len(d.Features); i += f {
		row := d.Features[i : i+f]
		var s float64
		for _, v := range row {
			s += math.Abs(float64(v))
		}
		sum := float32(s)
		if sum == 0 {
			continue
		}
		inv := 1 / sum
		dst := out[i : i+f]
		for j, v := range row {
			dst[j] = v * inv
		}
	}
	return out
}

// isSymmetric reports whether every entry j -> i has its reverse i -> j.
func isSymmetric(g *core.Graph) bool {
	if g.NumDst != g.NumSrc {
		return false
	}
	in, out := g.InDegrees(), g.OutDegrees()
	for i := range in {
		if in[i] != out[i] {
			return false
		}
	}
	// Degrees agree; check the entries themselves (rows are sorted by our
	// builders but may not be in general, so use a per-row set walk).
	for i := 0; i < g.NumDst; i++ {
		for _, j := range g.Indices[g.Offsets[i]:g.Offsets[i+1]] {
			if !hasEntry(g, int(j), int32(i)) {
				return false
			}
		}
	}
	return true
}

// hasEntry reports whether row i lists source j.
func hasEntry(g *core.Graph, i int, j int32) bool {
	row := g.Indices[g.Offsets[i]:g.Offsets[i+1]]
	lo, hi := 0, len(row)
	for lo < hi { // binary search assuming sorted; fall back to a scan
		m := (lo + hi) / 2
		if row[m] < j {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(row) && row[lo] == j {
		return true
	}
	for _, v := range row {
		if v == j {
			return true
		}
	}
	return false
}

func selfLoops(g *core.Graph) int {
	n := 0
	for i := 0; i < g.NumDst; i++ {
		for _, j := range g.Indices[g.Offsets[i]:g.Offsets[i+1]] {
			if int(j) == i {
				n++
			}
		}
	}
	return n
}
