package data

import (
	"fmt"
	"math"
	"slices"

	"github.com/gnnkit/gnnkit/core"
)

// maxSnapshots bounds the number of snapshots Snapshots builds.
const maxSnapshots = 1 << 20

// Snapshot is one time window of a dynamic dataset.
type Snapshot struct {
	Index int
	// Start is the first second of the window: tmin + Index*seconds. The
	// window is [Start, Start+seconds).
	Start int64
	// Events are the window's events, in time order.
	Events []Event
	// Graph is the directed CSR graph (by destination) over all the
	// dataset's nodes with one entry src -> dst per event; rows sorted by
	// source, events of the same pair kept in time order.
	Graph *core.Graph
	// Weights[e] is the weight of the event behind CSR entry e.
	Weights []float32
}

// Snapshots cuts a dynamic dataset into windows of secondsPerSnapshot:
// snapshot k holds the events with floor((time - tmin)/seconds) == k, tmin
// being the earliest event's time. Every window from the first event to the
// last is returned, empty ones included. Use d.SnapshotSeconds for the
// length the source recommends.
func (d *Dataset) Snapshots(secondsPerSnapshot int64) ([]Snapshot, error) {
	if d.Kind != KindDynamic {
		return nil, errorf(ErrNotDynamic, "snapshots of %q: a %s dataset has no events to cut", d.Name, d.Kind)
	}
	counts, err := snapshotCounts(d.Events, secondsPerSnapshot)
	if err != nil {
		return nil, err
	}
	if len(counts) == 0 {
		return nil, nil
	}
	if uint64(len(counts))*uint64(d.NumNodes+1) > 1<<31 {
		return nil, errorf(ErrSpec, "snapshots of %q: %d snapshots x %d nodes is too many CSR rows; choose longer snapshots", d.Name, len(counts), d.NumNodes)
	}
	tmin := minTime(d.Events)
	// Bucket the events by window, stably (in case they are not sorted).
	start := make([]int, len(counts)+1)
	for k, c := range counts {
		start[k+1] = start[k] + c
	}
	bucketed := make([]Event, len(d.Events))
	pos := slices.Clone(start[:len(counts)])
	for _, e := range d.Events {
		k := window(e.Time, tmin, secondsPerSnapshot)
		bucketed[pos[k]] = e
		pos[k]++
	}
	snaps := make([]Snapshot, len(counts))
	for k := range snaps {
		ev := bucketed[start[k]:start[k+1]]
		if !slices.IsSortedFunc(ev, func(a, b Event) int { return cmpInt64(a.Time, b.Time) }) {
			slices.SortStableFunc(ev, func(a, b Event) int { return cmpInt64(a.Time, b.Time) })
		}
		g, w, err := eventGraph(d.NumNodes, ev)
		if err != nil {
			return nil, &Error{Msg: fmt.Sprintf("snapshot %d of %q", k, d.Name), Kind: ErrMalformed, Err: err}
		}
		snaps[k] = Snapshot{Index: k, Start: tmin + int64(k)*secondsPerSnapshot, Events: ev, Graph: g, Weights: w}
	}
	return snaps, nil
}

// snapshotCounts counts the events in each window of seconds.
func snapshotCounts(events []Event, seconds int64) ([]int, error) {
	if seconds <= 0 {
		return nil, errorf(ErrSpec, "snapshot length %d s: want > 0", seconds)
	}
	if len(events) == 0 {
		return nil, nil
	}
	tmin, tmax := minTime(events), maxTime(events)
	span := uint64(tmax) - uint64(tmin) // exact: tmax >= tmin
	k := span / uint64(seconds)
	if k >= maxSnapshots {
		return nil, errorf(ErrSpec, "%d s snapshots over %d s of events make %d snapshots, more than %d; choose longer snapshots", seconds, span, k+1, maxSnapshots)
	}
	counts := make([]int, k+1)
	for _, e := range events {
		counts[window(e.Time, tmin, seconds)]++
	}
	return counts, nil
}

func window(t, tmin, seconds int64) int {
	return int((uint64(t) - uint64(tmin)) / uint64(seconds))
}

func minTime(ev []Event) int64 {
	m := int64(math.MaxInt64)
	for _, e := range ev {
		m = min(m, e.Time)
	}
	return m
}

func maxTime(ev []Event) int64 {
	m := int64(math.MinInt64)
	for _, e := range ev {
		m = max(m, e.Time)
	}
	return m
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// eventGraph builds the dst-major CSR of the events (one entry each) and
// the weight of each entry.
func eventGraph(n int, ev []Event) (*core.Graph, []float32, error) {
	ord := make([]int32, len(ev))
	for i := range ord {
		ord[i] = int32(i)
	}
	slices.SortStableFunc(ord, func(a, b int32) int {
		ea, eb := ev[a], ev[b]
		if ea.Dst != eb.Dst {
			return int(ea.Dst) - int(eb.Dst)
		}
		return int(ea.Src) - int(eb.Src)
	})
	off := make([]int64, n+1)
	idx := make([]int32, len(ev))
	w := make([]float32, len(ev))
	for e, k := range ord {
		if s, d := ev[k].Src, ev[k].Dst; s < 0 || int(s) >= n || d < 0 || int(d) >= n {
			return nil, nil, fmt.Errorf("event %d -> %d outside [0,%d)", s, d, n)
		}
		off[ev[k].Dst+1]++
		idx[e] = ev[k].Src
		w[e] = ev[k].Weight
	}
	for i := 0; i < n; i++ {
		off[i+1] += off[i]
	}
	g, err := core.NewGraph(n, n, off, idx, nil)
	return g, w, err
}
