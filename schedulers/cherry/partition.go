package cherry

import (
	"sort"

	"github.com/gnnkit/gnnkit/core"
)

// hubCap bounds how many targets one shared in-neighbour links in the
// shared-neighbour graph, so a hub does not make building it quadratic.
const hubCap = 64

// Partition splits targets (node ids of g) into k parts of near-equal size
// that share as few in-neighbours as possible: a greedy graph-growing
// partition of the shared-neighbour graph (targets u, v joined with weight
// = the in-neighbours they share in g, plus 1 if one is the other's
// in-neighbour), visited in breadth-first order and cut into k runs, then
// refined by moving boundary targets to the part they share most with
// while the sizes stay within 5% of balance. It is deterministic.
func Partition(g *core.Graph, targets []int32, k int) [][]int32 {
	n := len(targets)
	if k <= 1 || n <= 1 {
		return [][]int32{append([]int32(nil), targets...)}
	}
	if k >= n {
		parts := make([][]int32, n)
		for i, t := range targets {
			parts[i] = []int32{t}
		}
		return parts
	}
	adj := sharedNeighbours(g, targets)
	order := bfsOrder(adj, n)
	part := make([]int, n)
	size := make([]int, k)
	for r, i := range order {
		p := r * k / n
		part[i] = p
		size[p]++
	}
	refine(adj, order, part, size, n, k)
	parts := make([][]int32, k)
	for _, i := range order {
		parts[part[i]] = append(parts[part[i]], targets[i])
	}
	out := parts[:0]
	for _, p := range parts {
		if len(p) > 0 {
			out = append(out, p)
		}
	}
	return out
}

type wedge struct {
	to int32
	w  int32
}

// sharedNeighbours builds the weighted shared-neighbour graph over target
// positions, each adjacency sorted by position.
func sharedNeighbours(g *core.Graph, targets []int32) [][]wedge {
	n := len(targets)
	pos := make(map[int32]int32, n)
	for i, t := range targets {
		pos[t] = int32(i)
	}
	// by[u] = target positions that have u as an in-neighbour (capped).
	by := map[int32][]int32{}
	for i, t := range targets {
		for _, u := range g.Indices[g.Offsets[t]:g.Offsets[t+1]] {
			if l := by[u]; len(l) < hubCap {
				by[u] = append(l, int32(i))
			}
		}
	}
	adj := make([][]wedge, n)
	count := make([]int32, n)
	var touched []int32
	for i, t := range targets {
		touched = touched[:0]
		add := func(j int32) {
			if j == int32(i) {
				return
			}
			if count[j] == 0 {
				touched = append(touched, j)
			}
			count[j]++
		}
		for _, u := range g.Indices[g.Offsets[t]:g.Offsets[t+1]] {
			if j, ok := pos[u]; ok {
				add(j)
			}
			for _, j := range by[u] {
				add(j)
			}
		}
		sort.Slice(touched, func(a, b int) bool { return touched[a] < touched[b] })
		for _, j := range touched {
			adj[i] = append(adj[i], wedge{j, count[j]})
			count[j] = 0
		}
	}
	return adj
}

// bfsOrder visits every target breadth-first over the shared-neighbour
// graph, heaviest links first, starting each component at its lowest
// position.
func bfsOrder(adj [][]wedge, n int) []int {
	seen := make([]bool, n)
	order := make([]int, 0, n)
	var nb []wedge
	for s := 0; s < n; s++ {
		if seen[s] {
			continue
		}
		seen[s] = true
		q := []int{s}
		for len(q) > 0 {
			v := q[0]
			q = q[1:]
			order = append(order, v)
			nb = append(nb[:0], adj[v]...)
			sort.SliceStable(nb, func(a, b int) bool { return nb[a].w > nb[b].w })
			for _, e := range nb {
				if !seen[e.to] {
					seen[e.to] = true
					q = append(q, int(e.to))
				}
			}
		}
	}
	return order
}

// refine moves targets to the part they share the most with, keeping part
// sizes within 5% of n/k (two passes, in BFS order).
func refine(adj [][]wedge, order []int, part, size []int, n, k int) {
	hi := (n*105/100 + k - 1) / k
	lo := n * 95 / 100 / k
	conn := make([]int32, k)
	for pass := 0; pass < 2; pass++ {
		moved := false
		for _, i := range order {
			p := part[i]
			for _, e := range adj[i] {
				conn[part[e.to]] += e.w
			}
			best := p
			for q := 0; q < k; q++ {
				if q != p && conn[q] > conn[best] && size[q] < hi && size[p] > lo {
					best = q
				}
			}
			for _, e := range adj[i] {
				conn[part[e.to]] = 0
			}
			if best != p {
				part[i] = best
				size[p]--
				size[best]++
				moved = true
			}
		}
		if !moved {
			return
		}
	}
}
