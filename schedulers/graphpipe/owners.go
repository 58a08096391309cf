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
	// The stages reading each parameter, lowest first; its readers are
	// their replicas in that order.
	stagesOf := make([][]int32, n)
	for s, ps := range stageParams {
		if len(devs[s]) == 0 {
			continue
		}
		for _, p := range ps {
			if k := len(stagesOf[p]); k == 0 || stagesOf[p][k-1] != int32(s) {
				stagesOf[p] = append(stagesOf[p], int32(s))
			}
		}
	}
	order := make([]int, 0, n)
	for i := range n {
		if len(stagesOf[i]) > 0 {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if c := cmp.Compare(stagesOf[a][0], stagesOf[b][0]); c != 0 {
			return c
		}
		return cmp.Compare(bytes[b], bytes[a])
	})
	// Each replica's device by number (devIdx, as devs).
	idx := map[core.DeviceID]int{}
	devIdx := make([][]int, len(devs))
	for s, ds := range devs {
		devIdx[s] = make([]int, len(ds))
		for r, d := range ds {
			i, ok := idx[d]
			if !ok {
				i = len(idx)
				idx[d] = i
			}
			devIdx[s][r] = i
		}
	}
	owned := make([]float64, len(idx))
	out := make([]core.DeviceID, n)
	for _, p := range order {
		var best core.DeviceID
		bi := -1
		for _, s := range stagesOf[p] {
			for r, i := range devIdx[s] {
				if bi < 0 || owned[i] < owned[bi] {
					best, bi = devs[s][r], i
				}
			}
		}
		out[p] = best
		owned[bi] += bytes[p]
	}
	return out
}

// paramIndex numbers w's parameters in the order its ops first read
// them: their names and bytes, and each op's parameters by number.
func paramIndex(w *core.Workload) (names []string, bytes []float64, opPar [][]int32) {
	idx := map[string]int32{}
	opPar = make([][]int32, len(w.Ops))
	for o, op := range w.Ops {
		for _, r := range op.Params {
			i, ok := idx[r.Name]
			if !ok {
				i = int32(len(names))
				idx[r.Name] = i
				names = append(names, r.Name)
				bytes = append(bytes, float64(r.Bytes))
			}
			if !slices.Contains(opPar[o], i) {
				opPar[o] = append(opPar[o], i)
			}
		}
	}
	return names, bytes, opPar
}

// paramsOfStages lists the parameters (numbers of paramIndex) each stage's
// ops read, each once, in op order.
func paramsOfStages(stages [][]int, opPar [][]int32, nParams int) [][]int32 {
	out := make([][]int32, len(stages))
	seen := make([]int, nParams)
	for i := range seen {
		seen[i] = -1
	}
	for s, ops := range stages {
		for _, o := range ops {
			for _, p := range opPar[o] {
				if seen[p] != s {
					seen[p] = s
					out[s] = append(out[s], p)
				}
			}
		}
	}
	return out
}

// planOwners is spreadOwners for BuildPlan: the owner of each of w's
// parameters, by name, under partition part with m micro-batches.
func planOwners(w *core.Workload, part Partition, m int) map[string]core.DeviceID {
	names, bytes, opPar := paramIndex(w)
	devs := make([][]core.DeviceID, len(part.Devices))
	for s, d := range part.Devices {
		devs[s] = d[:min(len(d), m)]
	}
	out := map[string]core.DeviceID{}
	for i, d := range spreadOwners(paramsOfStages(part.Stages(), opPar, len(names)), devs, bytes) {
		if d != "" {
			out[names[i]] = d
		}
	}
	return out
}
