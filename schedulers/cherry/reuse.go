package cherry

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/gnnkit/gnnkit/core"
)

// reusePlan turns the parts into a plan with activation reuse that fits
// usable bytes (resident included): the shared nodes are split into
// producer chunks, kept alive between the phases when that fits and
// recomputed otherwise; chunks, then parts, double until the estimate
// fits.
func (s *Scheduler) reusePlan(ctx context.Context, w *core.Workload, dev core.DeviceID, usable int64,
	targets []int32, parts [][]int32) (*core.Plan, error) {
	boundary := w.Model.ReuseBoundary()
	hops := w.Model.Config.Layers
	var best int64 = -1
	for {
		shared, err := sharedNodes(w.Graph, parts)
		if err != nil {
			return nil, err
		}
		m := min(len(parts), len(shared))
		for {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			var chunks [][]int32
			if len(shared) > 0 {
				chunks = Partition(w.Graph, shared, max(m, 1))
			}
			for _, keep := range []bool{true, false} {
				plan := s.basePlan(w, dev, targets, parts)
				plan.Reuse = &core.Reuse{Boundary: boundary, Chunks: chunks, Keep: keep}
				est, err := w.PlanEstimator(plan)
				if err != nil {
					return nil, err
				}
				if best < 0 || est < best {
					best = est
				}
				if est <= usable {
					plan.MemEstimate = map[core.DeviceID]int64{dev: est}
					plan.Metrics["reuse_shared"] = float64(len(shared))
					plan.Metrics["reuse_chunks"] = float64(len(chunks))
					plan.Metrics["reuse_keep"] = map[bool]float64{true: 1, false: 0}[keep]
					if r, err := reuseRedundancy(w.Graph, targets, parts, chunks, shared, hops); err == nil {
						plan.Metrics["redundancy"] = r
					}
					return plan, nil
				}
			}
			if m >= len(shared) {
				break
			}
			m = min(2*m, len(shared))
		}
		if len(parts) >= len(targets) {
			return nil, fmt.Errorf("%w: with activation reuse the smallest plan found needs %s on %s (one target per micro-batch), over the usable %s; raise --device-mem or train without reuse",
				ErrTooSmall, core.FormatBytes(best), dev, core.FormatBytes(usable))
		}
		parts = Partition(w.Graph, targets, min(2*len(parts), len(targets)))
	}
}

// sharedNodes returns, sorted, the nodes of g in the 1-hop field (targets
// and their in-neighbours) of two or more parts: the rows of the last
// layer's input that reuse computes once.
func sharedNodes(g *core.Graph, parts [][]int32) ([]int32, error) {
	uses := make([]int32, g.NumDst)
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		f, err := g.KHop(p, 1)
		if err != nil {
			return nil, err
		}
		for _, v := range f.Nodes {
			uses[v]++
		}
	}
	var out []int32
	for v, n := range uses {
		if n >= 2 {
			out = append(out, int32(v))
		}
	}
	return out, nil
}

// reuseRedundancy is, under reuse, the input rows all producers gather
// (each part's private nodes' and each chunk's (L-1)-hop field) over the
// batch's L-hop field.
func reuseRedundancy(g *core.Graph, targets []int32, parts, chunks [][]int32, shared []int32, hops int) (float64, error) {
	all, err := g.KHop(targets, hops)
	if err != nil || len(all.Nodes) == 0 {
		return math.NaN(), err
	}
	sum := 0
	for _, c := range chunks {
		f, err := g.KHop(c, hops-1)
		if err != nil {
			return 0, err
		}
		sum += len(f.Nodes)
	}
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		f, err := g.KHop(p, 1)
		if err != nil {
			return 0, err
		}
		var priv []int32
		for _, v := range f.Nodes {
			if _, ok := slices.BinarySearch(shared, v); !ok {
				priv = append(priv, v)
			}
		}
		if len(priv) == 0 {
			continue
		}
		pf, err := g.KHop(priv, hops-1)
		if err != nil {
			return 0, err
		}
		sum += len(pf.Nodes)
	}
	return float64(sum) / float64(len(all.Nodes)), nil
}
