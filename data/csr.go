package data

import (
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gnnkit/gnnkit/core"
)

// maxNodes is the most nodes a dataset may have: ids are int32.
const maxNodes = math.MaxInt32

// csrStats counts what buildCSR dropped, in input edges.
type csrStats struct {
	selfLoops  int // input edges with src == dst, dropped
	duplicates int // input edges equal to an earlier one, dropped
}

// buildCSR builds the dst-major CSR graph over n nodes of the edges
// src[k] -> dst[k]; with sym, also dst[k] -> src[k] (a self-loop once).
// Each row is sorted by source. With dedupe, repeated entries are kept
// once; with noSelf, self-loops are dropped. Ids must be in [0, n). The
// result equals core.Undirected (sym) or core.FromEdges on the deduplicated
// input, but is built in O(E) plus short per-row sorts, in parallel.
func buildCSR(n int, src, dst []int32, sym, dedupe, noSelf bool) (*core.Graph, csrStats, error) {
	var st csrStats
	off := make([]int64, n+1)
	for k := range src {
		s, d := src[k], dst[k]
		if s == d {
			if noSelf {
				st.selfLoops++
				continue
			}
			off[d+1]++
			continue
		}
		off[d+1]++
		if sym {
			off[s+1]++
		}
	}
	for i := 0; i < n; i++ {
		off[i+1] += off[i]
	}
	if off[n] > math.MaxInt32 {
		return nil, st, &Error{Msg: "graph has more CSR entries than int32 edge ids allow", Kind: ErrMalformed, Err: core.ErrInvalidGraph}
	}
	idx := make([]int32, off[n])
	pos := make([]int64, n)
	copy(pos, off[:n])
	for k := range src {
		s, d := src[k], dst[k]
		if s == d && noSelf {
			continue
		}
		idx[pos[d]] = s
		pos[d]++
		if sym && s != d {
			idx[pos[s]] = d
			pos[s]++
		}
	}
	pos = nil

	// Sort (and deduplicate) every row, in parallel over blocks of rows.
	newLen := make([]int32, n)
	const block = 2048
	var next atomic.Int64
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				a := int(next.Add(block)) - block
				if a >= n {
					return
				}
				b := min(a+block, n)
				for i := a; i < b; i++ {
					row := idx[off[i]:off[i+1]]
					if len(row) > 1 && !slices.IsSorted(row) {
						slices.Sort(row)
					}
					if dedupe {
						row = slices.Compact(row)
					}
					newLen[i] = int32(len(row))
				}
			}
		}()
	}
	wg.Wait()

	if dedupe {
		var w int64
		for i := 0; i < n; i++ {
			l := int64(newLen[i])
			copy(idx[w:w+l], idx[off[i]:off[i]+l])
			off[i] = w
			w += l
		}
		removed := off[n] - w
		off[n] = w
		if sym {
			removed /= 2 // each duplicate undirected pair is two entries
		}
		st.duplicates = int(removed)
		if w < int64(len(idx))*3/4 {
			idx = append([]int32(nil), idx[:w]...)
		} else {
			idx = idx[:w]
		}
	}
	g, err := core.NewGraph(n, n, off, idx, nil)
	if err != nil {
		return nil, st, &Error{Msg: "building the graph", Kind: ErrMalformed, Err: err}
	}
	return g, st, nil
}
