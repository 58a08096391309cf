package graphpipe

import (
	"cmp"
	"slices"

	"github.com/gnnkit/gnnkit/core"
)

// spreadOwners assigns each parameter an owner among the devices reading
// it (core.Plan.Owners): stageParams[s] are the parameters (indices into
// bytes) stage s's ops read, devs[s] the replicas of s that run
// micro-batches. Parameters are taken stage by stage (the lowest stage
// reading each), largest first, each to the reader owning the fewest bytes
// so far (ties: the earlier reader, stage by stage, replica by replica).
// A replicated stage's parameters so spread over its replicas — each
// holds the optimizer state of, and receives the gradients of, its share
// (ZeRO stage 1 at tensor granularity) — where the first replica used to
// own them all. Unread parameters get "".
func spreadOwners(stageParams [][]int32, devs [][]core.DeviceID, bytes []float64) []core.DeviceID {
	n := len(bytes)
	readers := make([][]core.DeviceID, n)
	first := make([]int, n)
	for i := range first {
		first[i] = -1
	}
	for s, ps := range stageParams {
		for _, p := range ps {
			if first[p] < 0 {
				first[p] = s
			}
			for _, d := range devs[s] {
				if !slices.Contains(readers[p], d) {
					readers[p] = append(readers[p], d)
				}
			}
		}
	}
	order := make([]int, 0, n)
	for i := range n {
		if first[i] >= 0 && len(readers[i]) > 0 {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(first[a], first[b]); c != 0 {
			return c
		}
		return cmp.Compare(bytes[b], bytes[a])
	})
	owned := map[core.DeviceID]float64{}
	out := make([]core.DeviceID, n)
	for _, p := range order {
		best := readers[p][0]
		for _, d := range readers[p][1:] {
			if owned[d] < owned[best] {
				best = d
			}
		}
		out[p] = best
		owned[best] += bytes[p]
	}
	return out
}

// planOwners is spreadOwners for BuildPlan: the owner of each of w's
// parameters, by name, under partition part with m micro-batches.
func planOwners(w *core.Workload, part Partition, m int) map[string]core.DeviceID {
	idx := map[string]int32{}
	var names []string
	var bytes []float64
	stageParams := make([][]int32, len(part.Devices))
	for o, op := range w.Ops {
		s := part.StageOf[o]
		for _, r := range op.Params {
			i, ok := idx[r.Name]
			if !ok {
				i = int32(len(names))
				idx[r.Name] = i
				names = append(names, r.Name)
				bytes = append(bytes, float64(r.Bytes))
			}
			if !slices.Contains(stageParams[s], i) {
				stageParams[s] = append(stageParams[s], i)
			}
		}
	}
	devs := make([][]core.DeviceID, len(part.Devices))
	for s, d := range part.Devices {
		devs[s] = d[:min(len(d), m)]
	}
	out := map[string]core.DeviceID{}
	for i, d := range spreadOwners(stageParams, devs, bytes) {
		if d != "" {
			out[names[i]] = d
		}
	}
	return out
}
