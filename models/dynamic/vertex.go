package dynamic

import (
	"fmt"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/models/nn"
)

// Graph names of the vertex-partitioned T-GCN (TGCNVertex). Part p owns
// O_p of a group's nodes; its rows R_p are O_p first, then its halo (the
// in-neighbours of O_p in some window snapshot), then one dummy row.
// A part's pair space ext_p is O_p first, then the sources of its pairs
// owned by other parts, then one padding row.
func (vpNames) Sel(p int) string    { return fmt.Sprintf("vp.sel.p%d", p) }        // (|R_p|+1) x nodes: gathers part p's feature rows
func (vpNames) Adj(t, p int) string { return fmt.Sprintf("vp.adj.t%d.p%d", t, p) } // square over R_p and the dummy row
func (vpNames) Own(p int) string    { return fmt.Sprintf("vp.own.p%d", p) }        // |O_p| x (|R_p|+1): the owned rows
func (vpNames) Send(q, p int) string {
	return fmt.Sprintf("vp.send.p%d.to%d", q, p) // S_qp x |O_q|: rows of part q that part p's pairs read
}
func (vpNames) Recv(p, q int) string {
	return fmt.Sprintf("vp.recv.p%d.from%d", p, q) // |ext_p| x S_qp: where they land in ext_p
}
func (vpNames) Ext(p int) string    { return fmt.Sprintf("vp.ext.p%d", p) }    // |ext_p| x |O_p|: part p's own rows in ext_p
func (vpNames) Pairs(p int) string  { return fmt.Sprintf("vp.pairs.p%d", p) }  // |O_p| x |ext_p|, edge id = part-local pair
func (vpNames) Gather(p int) string { return fmt.Sprintf("vp.gather.p%d", p) } // pairs x part p's pairs: back to the group's pair order

type vpNames struct{}

// VP names the graphs of TGCNVertex.
var VP vpNames

// PartPrefix is the op-name prefix of part p's ops in TGCNVertex: a
// vertex-partition scheduler runs them on device p and the ops without
// such a prefix (gathering the pair logits, the loss) on the home device.
func PartPrefix(p int) string { return fmt.Sprintf("p%d.", p) }

// aggregate wraps nn.Aggregate so that OpDims can tell its graph (an
// unweighted one reads no "G.w" that would name it).
type aggregate struct {
	*nn.Aggregate
	graph string
}

func (o aggregate) GraphName() string { return o.graph }

type pairScore struct {
	*nn.PairScore
	graph string
}

func (o pairScore) GraphName() string { return o.graph }

// TGCNVertex builds T-GCN as the vertex-partition baseline runs it: each
// of parts devices computes a slice of every snapshot of a group. It is
// TGCN (same parameters, same values, same loss and gradients up to
// summation order) rewritten over per-part graphs (the names in VP, built
// from a group by engine/dyntrain):
//
//   - part p gathers the features of its rows R_p (the node features are
//     replicated, as the engine places a group's on every device) and
//     recomputes X·W for its halo rather than receiving it; it aggregates
//     over each snapshot restricted to its owned rows' in-edges (halo rows
//     get dummy edges from the dummy row so that every degree, and so
//     every GCN weight of an owned row, is the whole graph's; their own
//     results are discarded) and keeps its owned rows;
//   - the GRU runs on the owned rows only (it is row-wise);
//   - the pair head: part p scores the pairs whose scored node it owns;
//     the other end's embedding comes from its owner (the halo exchange:
//     "p<q>.send.to<p>" on device q, read on device p, so the executor
//     moves those rows and their gradients back);
//   - the home device gathers every part's pair logits into the group's
//     pair order and computes the loss.
//
// Ops are listed part by part: first what part p computes from its own
// rows (including what it sends), then what it computes from the other
// parts' rows, then the head's gather and loss.
func TGCNVertex(cfg Config, parts int) (*core.Model, error) {
	if err := cfg.defaults("tgcn"); err != nil {
		return nil, err
	}
	if parts < 1 {
		return nil, fmt.Errorf("models/dynamic: tgcn vertex partition: %d parts", parts)
	}
	w, f, h := cfg.Layers, cfg.InDim, cfg.Hidden
	m := &core.Model{Name: fmt.Sprintf("tgcn-vp%d", parts), Config: cfg.ModelConfig, Inputs: []string{Features}, Output: Logits}
	b := &builder{m: m}
	spec := func(name string, gcn bool) {
		if gcn {
			m.Graphs = append(m.Graphs, core.GraphSpec{Name: name, SelfLoops: true, Weights: core.WeightsGCN})
		} else {
			m.Graphs = append(m.Graphs, core.GraphSpec{Name: name})
		}
	}
	for p := range parts {
		spec(VP.Sel(p), false)
		for t := range w {
			spec(VP.Adj(t, p), true)
		}
		spec(VP.Own(p), false)
		for q := range parts {
			if q != p {
				spec(VP.Send(p, q), false)
				spec(VP.Recv(p, q), false)
			}
		}
		spec(VP.Ext(p), false)
		spec(VP.Pairs(p), false)
		spec(VP.Gather(p), false)
	}
	// The parameters of TGCN, in its order (same names: same initial values).
	gw := b.param("gcn.weight", core.InitGlorot, f, h)
	gb := b.param("gcn.bias", core.InitZeros, 1, h)
	W, U, B := map[string]string{}, map[string]string{}, map[string]string{}
	for _, g := range []string{"z", "r", "n"} {
		W[g] = b.param("gru.w"+g, core.InitGlorot, h, h)
		U[g] = b.param("gru.u"+g, core.InitGlorot, h, h)
		B[g] = b.param("gru.b"+g, core.InitZeros, 1, h)
	}
	wa := b.param("head.a", core.InitGlorot, cfg.Hidden, cfg.Embed)
	wb := b.param("head.b", core.InitGlorot, cfg.Hidden, cfg.Embed)
	bias := b.param("head.bias", core.InitZeros, 1, 2)
	agg := func(name, graph, x, wt string, cols int) string {
		op := nn.NewAggregate(name, graph, core.ReduceSum, x, wt, name, cols, 1)
		return b.op(aggregate{op, graph})
	}
	ea, eb := make([]string, parts), make([]string, parts)
	for p := range parts {
		pre := PartPrefix(p)
		x := agg(pre+"x", VP.Sel(p), Features, "", f)
		xw := b.op(nn.NewLinear(pre+"gcn.xw", x, gw, pre+"gcn.xw", f, h))
		rows := make([]string, w)
		for t := range w {
			a := agg(fmt.Sprintf("%sgcn.agg.t%d", pre, t), VP.Adj(t, p), xw, VP.Adj(t, p)+".w", h)
			rows[t] = a
		}
		for t := range w {
			rows[t] = agg(fmt.Sprintf("%sgcn.own.t%d", pre, t), VP.Own(p), rows[t], "", h)
		}
		hp := b.gru(pre, rows, gb, W, U, B, h)
		ea[p] = b.op(nn.NewLinear(pre+"head.ea", hp, wa, pre+"head.ea", cfg.Hidden, cfg.Embed))
		eb[p] = b.op(nn.NewLinear(pre+"head.eb", hp, wb, pre+"head.eb", cfg.Hidden, cfg.Embed))
		for q := range parts {
			if q != p {
				agg(fmt.Sprintf("%ssend.to%d", pre, q), VP.Send(p, q), eb[p], "", cfg.Embed)
			}
		}
		agg(pre+"ext.own", VP.Ext(p), eb[p], "", cfg.Embed)
	}
	logits := make([]string, parts)
	for p := range parts {
		pre := PartPrefix(p)
		cur := pre + "ext.own"
		for q := range parts {
			if q == p {
				continue
			}
			r := agg(fmt.Sprintf("%sext.recv%d", pre, q), VP.Recv(p, q), fmt.Sprintf("%ssend.to%d", PartPrefix(q), p), "", cfg.Embed)
			cur = b.op(nn.NewAdd(fmt.Sprintf("%sext.sum%d", pre, q), cur, r, fmt.Sprintf("%sext.sum%d", pre, q), cfg.Embed))
		}
		s := b.op(pairScore{nn.NewPairScore(pre+"head.score", VP.Pairs(p), ea[p], cur, pre+"head.score", cfg.Embed), VP.Pairs(p)})
		logits[p] = b.op(nn.NewBias(pre+"head.logits", s, bias, pre+"head.logits", 2))
	}
	cur := ""
	for p := range parts {
		g := agg(fmt.Sprintf("head.gather%d", p), VP.Gather(p), logits[p], "", 2)
		switch {
		case parts == 1:
			cur = g
		case cur == "":
			cur = g
		case p == parts-1:
			cur = b.op(nn.NewAdd(Logits, cur, g, Logits, 2))
		default:
			cur = b.op(nn.NewAdd(fmt.Sprintf("head.sum%d", p), cur, g, fmt.Sprintf("head.sum%d", p), 2))
		}
	}
	if parts == 1 {
		// One part: the gathered logits are the output.
		m.Ops[len(m.Ops)-1] = aggregate{nn.NewAggregate(Logits, VP.Gather(0), core.ReduceSum, logits[0], "", Logits, 2, 1), VP.Gather(0)}
	}
	b.op(nn.NewCrossEntropy(Loss, Logits, Loss, 2))
	nn.AnnotateGrads(m)
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}
