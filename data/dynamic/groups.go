package dynamic

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data"
)

// ErrDynamic wraps every error of this package.
var ErrDynamic = errors.New("dynamic")

func errf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrDynamic, fmt.Sprintf(format, a...))
}

// Task is what a group predicts about its target snapshot.
type Task uint8

const (
	// LinkPrediction scores the target snapshot's edges (label 1)
	// against negative samples (label 0).
	LinkPrediction Task = iota
	// EdgeSign classifies the target snapshot's edges by the sign of
	// their weight (label 1: positive).
	EdgeSign
)

func (t Task) String() string {
	if t == EdgeSign {
		return "edge-sign"
	}
	return "link"
}

// ParseTask reads "link" or "edge-sign" ("sign").
func ParseTask(s string) (Task, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "link", "link-prediction", "lp":
		return LinkPrediction, nil
	case "edge-sign", "sign":
		return EdgeSign, nil
	}
	return 0, errf("unknown task %q (want link or edge-sign)", s)
}

// Options control group building.
type Options struct {
	// Window is the BPTT length w: a group holds snapshots t-w..t-1 and
	// predicts snapshot t.
	Window int
	Task   Task
	// NegTrain and NegEval are the negative samples per positive pair for
	// training groups and for val/test groups (link prediction). Each
	// negative keeps the positive's scored node u and draws v uniformly
	// from the group's nodes. Zero means the default, 1 and 20; a
	// negative count is an error. Edge sign draws no negatives.
	NegTrain, NegEval int
	// Split are the train and val shares of the snapshots (the rest is
	// test); default 0.7, 0.1 (EvolveGCN).
	TrainShare, ValShare float64
	Seed                 uint64
	// Features, when set (NumNodes x FeatureDim), are the node features
	// (e.g. a dataset's own); otherwise Build derives degree and noise
	// features from the training snapshots.
	Features   []float32
	FeatureDim int
}

func (o *Options) defaults() error {
	if o.Window < 1 {
		return errf("window %d: want >= 1", o.Window)
	}
	if o.NegTrain < 0 {
		return errf("NegTrain %d: want >= 1 negative samples per positive (0: the default, 1)", o.NegTrain)
	}
	if o.NegEval < 0 {
		return errf("NegEval %d: want >= 1 negative samples per positive (0: the default, 20)", o.NegEval)
	}
	if o.NegTrain == 0 {
		o.NegTrain = 1
	}
	if o.NegEval == 0 {
		o.NegEval = 20
	}
	if o.TrainShare == 0 && o.ValShare == 0 {
		o.TrainShare, o.ValShare = 0.7, 0.1
	}
	if !(o.TrainShare > 0 && o.ValShare >= 0 && o.TrainShare+o.ValShare < 1) {
		return errf("split %.2f/%.2f: want train > 0, val >= 0 and train+val < 1", o.TrainShare, o.ValShare)
	}
	return nil
}

// Group is one unit of dynamic training: a window of snapshots over a
// local node set and the pairs scored on the next snapshot.
type Group struct {
	// Target is the index of the predicted snapshot; the window is
	// snapshots Target-Window .. Target-1.
	Target int
	// Nodes maps local node ids to global ones (ascending).
	Nodes []int32
	// Snaps are the window's graphs over the local nodes, oldest first.
	Snaps []*core.Graph
	// Pairs holds pair k as the edge Src[k] -> Dst[k] with edge id k: the
	// model scores <a[Dst[k]], b[Src[k]]>.
	Pairs    *core.Graph
	Src, Dst []int32
	// Labels[k] is 1 for a true edge (link) or a positive rating (sign).
	Labels []int32
	// Query[k] is the pair whose ranking pair k takes part in (link
	// prediction: a positive and its negatives share it; for MRR); nil
	// for edge sign.
	Query []int32
	// Edges is the number of window edges (the graph-op work).
	Edges int
}

// Set is a dynamic dataset cut into groups.
type Set struct {
	NumNodes             int
	Window               int
	Task                 Task
	Train, Val, Test     []*Group
	TrainEnd, ValEnd     int // snapshot indices where val and test begin
	Snapshots            int
	SkippedEmptyTargets  int // groups dropped because their target snapshot had no edges
	Features             []float32
	FeatureDim           int
	DegreeBuckets, Noise int
}

// Build cuts snaps (over numNodes nodes) into groups. Target snapshots
// without edges give no group (counted in SkippedEmptyTargets); empty
// snapshots inside a window are kept (their graph has no edges).
func Build(snaps []data.Snapshot, numNodes int, o Options) (*Set, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	T := len(snaps)
	if T == 0 {
		return nil, errf("no snapshots (no events)")
	}
	if o.Window >= T {
		return nil, errf("window %d is longer than the sequence: %d snapshots leave no target snapshot (need at least window+1)", o.Window, T)
	}
	if numNodes <= 0 {
		return nil, errf("%d nodes", numNodes)
	}
	s := &Set{NumNodes: numNodes, Window: o.Window, Task: o.Task, Snapshots: T}
	s.TrainEnd = int(math.Round(o.TrainShare * float64(T)))
	s.ValEnd = int(math.Round((o.TrainShare + o.ValShare) * float64(T)))
	if s.TrainEnd <= o.Window {
		return nil, errf("window %d leaves no training group: the first %d of %d snapshots are for training", o.Window, s.TrainEnd, T)
	}
	for t := o.Window; t < T; t++ {
		if len(snaps[t].Events) == 0 {
			s.SkippedEmptyTargets++
			continue
		}
		neg := o.NegEval
		if t < s.TrainEnd {
			neg = o.NegTrain
		}
		g, err := buildGroup(snaps, numNodes, t, o, neg)
		if err != nil {
			return nil, err
		}
		switch {
		case t < s.TrainEnd:
			s.Train = append(s.Train, g)
		case t < s.ValEnd:
			s.Val = append(s.Val, g)
		default:
			s.Test = append(s.Test, g)
		}
	}
	if len(s.Train) == 0 {
		return nil, errf("no training group: every training target snapshot is empty")
	}
	if o.Features != nil {
		if o.FeatureDim <= 0 || len(o.Features) != numNodes*o.FeatureDim {
			return nil, errf("%d feature values for %d nodes x %d", len(o.Features), numNodes, o.FeatureDim)
		}
		s.Features, s.FeatureDim = o.Features, o.FeatureDim
		return s, nil
	}
	s.DegreeBuckets, s.Noise = 16, 16
	s.Features, s.FeatureDim = features(snaps[:s.TrainEnd], numNodes, s.DegreeBuckets, s.Noise, o.Seed)
	return s, nil
}

func buildGroup(snaps []data.Snapshot, n, t int, o Options, neg int) (*Group, error) {
	g := &Group{Target: t}
	mark := map[int32]bool{}
	for _, s := range snaps[t-o.Window : t] {
		for _, e := range s.Events {
			mark[e.Src], mark[e.Dst] = true, true
		}
		g.Edges += len(s.Events)
	}
	// Target pairs (u = dst, v = src), distinct for link prediction.
	type pair struct{ u, v int32 }
	var pos []pair
	var sign []int32
	seen := map[pair]bool{}
	for _, e := range snaps[t].Events {
		p := pair{e.Dst, e.Src}
		if o.Task == LinkPrediction {
			if seen[p] || e.Src == e.Dst {
				continue
			}
			seen[p] = true
		}
		pos = append(pos, p)
		sign = append(sign, b2i(e.Weight > 0))
		mark[e.Src], mark[e.Dst] = true, true
	}
	if len(pos) == 0 {
		return nil, errf("snapshot %d has only self-loops", t)
	}
	for v := range mark {
		g.Nodes = append(g.Nodes, v)
	}
	slices.Sort(g.Nodes)
	local := make(map[int32]int32, len(g.Nodes))
	for i, v := range g.Nodes {
		local[v] = int32(i)
	}
	nl := len(g.Nodes)
	for _, s := range snaps[t-o.Window : t] {
		src, dst := make([]int32, len(s.Events)), make([]int32, len(s.Events))
		for i, e := range s.Events {
			src[i], dst[i] = local[e.Src], local[e.Dst]
		}
		gr, err := core.FromEdges(nl, nl, src, dst)
		if err != nil {
			return nil, errf("snapshot %d: %v", s.Index, err)
		}
		g.Snaps = append(g.Snaps, gr)
	}
	r := rand.New(rand.NewPCG(o.Seed, uint64(t)*0x9E3779B97F4A7C15+uint64(o.Task)))
	for k, p := range pos {
		u, v := local[p.u], local[p.v]
		q := int32(len(g.Src))
		g.Dst, g.Src = append(g.Dst, u), append(g.Src, v)
		if o.Task == EdgeSign {
			g.Labels = append(g.Labels, sign[k])
			continue
		}
		g.Labels = append(g.Labels, 1)
		g.Query = append(g.Query, q)
		for j := 0; j < neg; j++ {
			w := int32(r.IntN(nl))
			g.Dst, g.Src = append(g.Dst, u), append(g.Src, w)
			g.Labels = append(g.Labels, b2i(seen[pair{g.Nodes[u], g.Nodes[w]}]))
			g.Query = append(g.Query, q)
		}
	}
	pg, err := PairGraph(nl, g.Src, g.Dst)
	if err != nil {
		return nil, err
	}
	g.Pairs = pg
	return g, nil
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// PairGraph builds the n x n CSR whose edge id k is src[k] -> dst[k].
func PairGraph(n int, src, dst []int32) (*core.Graph, error) {
	return RectPairGraph(n, n, src, dst)
}

// RectPairGraph is PairGraph for numDst destinations and numSrc sources.
func RectPairGraph(numDst, numSrc int, src, dst []int32) (*core.Graph, error) {
	if len(src) != len(dst) {
		return nil, errf("%d sources for %d destinations", len(src), len(dst))
	}
	ord := make([]int32, len(src))
	for i := range ord {
		ord[i] = int32(i)
	}
	slices.SortStableFunc(ord, func(a, b int32) int {
		if dst[a] != dst[b] {
			return int(dst[a]) - int(dst[b])
		}
		return int(src[a]) - int(src[b])
	})
	off := make([]int64, numDst+1)
	idx := make([]int32, len(src))
	for e, k := range ord {
		if dst[k] < 0 || int(dst[k]) >= numDst || src[k] < 0 || int(src[k]) >= numSrc {
			return nil, errf("pair %d -> %d outside [0,%d) x [0,%d)", src[k], dst[k], numSrc, numDst)
		}
		off[dst[k]+1]++
		idx[e] = src[k]
	}
	for i := 0; i < numDst; i++ {
		off[i+1] += off[i]
	}
	g, err := core.NewGraph(numDst, numSrc, off, idx, ord)
	if err != nil {
		return nil, errf("pairs: %v", err)
	}
	return g, nil
}

// features returns per-node features: one-hot buckets of log2(1+in
// degree) and of log2(1+out degree) over the given (training) snapshots,
// then noise columns of N(0, 0.25) that act as a node identity.
func features(snaps []data.Snapshot, n, buckets, noise int, seed uint64) ([]float32, int) {
	in, out := make([]int, n), make([]int, n)
	for _, s := range snaps {
		for _, e := range s.Events {
			out[e.Src]++
			in[e.Dst]++
		}
	}
	dim := 2*buckets + noise
	x := make([]float32, n*dim)
	bucket := func(d int) int { return min(buckets-1, int(math.Log2(1+float64(d)))) }
	r := rand.New(rand.NewPCG(seed, 0xfea7))
	for i := 0; i < n; i++ {
		row := x[i*dim : (i+1)*dim]
		row[bucket(in[i])] = 1
		row[buckets+bucket(out[i])] = 1
		for j := 0; j < noise; j++ {
			row[2*buckets+j] = float32(r.NormFloat64() * 0.5)
		}
	}
	return x, dim
}
