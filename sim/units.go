package sim

import (
	"fmt"

	"github.com/gnnkit/gnnkit/core"
)

// UnitShape is the size of every op of one unit, for plans whose units
// each compute a graph of their own (dynamic-GNN snapshot groups,
// engine.RunOptions.Groups): Ops[o] is the rows and edges op o computes
// (a T-GCN aggregation over snapshot t at that snapshot's nodes and
// edges, the pair scorer at the pairs, the loss at the pair rows), Setup
// the size the per-unit overhead is looked up at. Out, when set, gives
// each op's output bytes for the unit (what moves to a consumer on
// another device), overriding the profile's.
type UnitShape struct {
	Ops   []core.Dims `json:"ops"`
	Setup core.Dims   `json:"setup"`
	Out   []int64     `json:"out_bytes,omitempty"`
}

// SimulateUnits is SimulateWith with the size of every (unit, op) given
// by shapes (one per plan unit) instead of one size per unit taken from
// the workload's graph: op o of unit u costs prof.Ops[o].At(rows, edges)
// of shapes[u].Ops[o] (graph ops interpolate in edges, the rest in rows),
// and the unit's overhead prof.SetupFor(shapes[u].Setup, whole). With a nil
// profile each device's roofline (Roofline of w) is looked up the same
// way, which is consistent because an op's roofline cost is linear in the
// rows and edges it computes. Everything else — transfers, memory,
// contention, stream overlap — is Simulate's model.
func SimulateUnits(p *core.Plan, w *core.Workload, prof *Profile, c *Cluster, o Options, shapes []UnitShape) (*Result, error) {
	s, err := newSim(p, w, prof, c, o)
	if err != nil {
		return nil, err
	}
	if len(shapes) != len(p.Units) {
		return nil, fmt.Errorf("sim: %d unit shapes for %d units", len(shapes), len(p.Units))
	}
	for u, sh := range shapes {
		if len(sh.Ops) != s.nOps || (sh.Out != nil && len(sh.Out) != s.nOps) {
			return nil, fmt.Errorf("sim: unit %d's shape sizes %d ops (%d output sizes); the workload has %d", u, len(sh.Ops), len(sh.Out), s.nOps)
		}
		// The cost cache is keyed by (rows, edges, whole); a negative edge
		// count no real size has makes the key the unit's own.
		s.rows[u], s.edges[u] = max(sh.Setup.Nodes, 1), -int64(u+1)
		s.outs[u], s.mems[u] = nil, nil // the shapes given price the unit
		key := [3]int64{s.rows[u], s.edges[u], 0}
		if s.whole[u] {
			key[2] = 1
		}
		for _, dp := range s.prof {
			costs := make([]Cost, s.nOps+1)
			for op, j := range dp.idx {
				d := sh.Ops[op]
				costs[op] = dp.p.Ops[j].At(max(d.Nodes, 1), max(d.Edges, 0))
				if sh.Out != nil {
					costs[op].OutBytes = sh.Out[op]
				}
			}
			costs[s.nOps] = dp.p.SetupFor(max(sh.Setup.Nodes, 1), max(sh.Setup.Edges, 0), s.whole[u])
			dp.cache[key] = costs
		}
	}
	return s.run()
}
