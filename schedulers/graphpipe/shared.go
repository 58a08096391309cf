package graphpipe

import (
	"cmp"
	"maps"
	"slices"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// trunkOps is the model's trunk: the ops of the series-parallel root's
// children after its last parallel child (a multi-branch model's joins
// and head after the last branch joins), or nil when the root is not a
// series ending that way.
func trunkOps(root *spNode) []int {
	if root == nil || root.kind != spSeries {
		return nil
	}
	last := -1
	for i, ch := range root.children {
		if ch.kind == spParallel {
			last = i
		}
	}
	if last < 0 || last == len(root.children)-1 {
		return nil
	}
	var ops []int
	for _, ch := range root.children[last+1:] {
		ops = append(ops, ch.ops...) // a node's ops are its subtree's
	}
	return ops
}

// branchOps are the model's branches: the ops of each child of the
// series-parallel root's last parallel child (a multi-branch model's
// towers, before they join), or nil when the root has none.
func branchOps(root *spNode) [][]int {
	if root == nil || root.kind != spSeries {
		return nil
	}
	var par *spNode
	for _, ch := range root.children {
		if ch.kind == spParallel {
			par = ch
		}
	}
	if par == nil {
		return nil
	}
	out := make([][]int, len(par.children))
	for i, ch := range par.children {
		out[i] = ch.ops
	}
	return out
}

// splitBranches is p with every stage that holds two or more whole
// branches and nothing else, on two or more replicas, split into one
// stage per group of its branches, its replicas shared among the groups:
// model parallelism in place of data parallelism on the same devices.
// The DAG DP gives a device to each stage, so on as many devices as
// branches it cannot place every branch on a device of its own and the
// trunk beside them; it puts two branches (and the trunk) on a stage of
// two replicas, and the shared-trunk variant of that keeps the two
// branches data-parallel, one micro-batch on each replica at most:
// uno-4 (hidden 16) on 4 A100s planned 0.2373 ms, where each branch on
// its own device with the trunk shared gives 0.1755 ms, and 5 devices
// planned that faster plan. Groups are balanced by the branches' time
// (longest first to the lightest group); the heaviest groups get the
// replicas left over. The new stages take the old one's place, so the
// stage order stays topological. With spare devices (those the plan
// leaves idle; nil: none), such a stage also takes some, the busiest
// stage first, up to a device per branch. ok is false when no stage
// splits (and for chains, whose stages follow one another).
func splitBranches(p Partition, branches [][]int, time []float64, spare []core.DeviceID) (Partition, bool) {
	if p.Chain || len(branches) < 2 {
		return Partition{}, false
	}
	branchOf := make([]int, len(p.StageOf))
	for o := range branchOf {
		branchOf[o] = -1
	}
	btime := make([]float64, len(branches))
	for b, ops := range branches {
		for _, o := range ops {
			branchOf[o] = b
			btime[b] += time[o]
		}
	}
	stages := p.Stages()
	helds := make([]map[int]int, len(stages)) // branch → its ops in the stage; nil: not of whole branches alone
	stime := make([]float64, len(stages))
	var cands []int // the stages of two or more whole branches alone
	for s, ops := range stages {
		held := map[int]int{}
		for _, o := range ops {
			if branchOf[o] < 0 {
				held = nil
				break
			}
			held[branchOf[o]]++
			stime[s] += time[o]
		}
		for b, n := range held {
			if n != len(branches[b]) {
				held = nil
				break
			}
		}
		if len(held) >= 2 {
			helds[s] = held
			cands = append(cands, s)
		}
	}
	// The spare devices to the busiest such stages first, each up to a
	// device per branch.
	extra := make([][]core.DeviceID, len(stages))
	slices.SortStableFunc(cands, func(a, b int) int { return cmp.Compare(stime[b], stime[a]) })
	for _, s := range cands {
		n := min(len(helds[s])-len(p.Devices[s]), len(spare))
		if n > 0 {
			extra[s], spare = spare[:n:n], spare[n:]
		}
	}
	q := Partition{StageOf: make([]int, len(p.StageOf)), WarmupCap: p.WarmupCap}
	split := false
	for s, ops := range stages {
		held := helds[s]
		ds := append(slices.Clone(p.Devices[s]), extra[s]...)
		if held == nil || len(ds) < 2 {
			for _, o := range ops {
				q.StageOf[o] = len(q.Devices)
			}
			q.Devices = append(q.Devices, p.Devices[s])
			continue
		}
		split = true
		bs := slices.Sorted(maps.Keys(held))
		slices.SortStableFunc(bs, func(a, b int) int { return cmp.Compare(btime[b], btime[a]) })
		g := min(len(ds), len(bs))
		groups, load := make([][]int, g), make([]float64, g)
		for _, b := range bs {
			i := 0 // the lightest group, the one of fewer branches on a tie: none stays empty
			for j := range load {
				if load[j] < load[i] || load[j] == load[i] && len(groups[j]) < len(groups[i]) {
					i = j
				}
			}
			groups[i] = append(groups[i], b)
			load[i] += btime[b]
		}
		byLoad := make([]int, g) // the groups, heaviest first: they get the replicas left over
		for i := range byLoad {
			byLoad[i] = i
		}
		slices.SortStableFunc(byLoad, func(a, b int) int { return cmp.Compare(load[b], load[a]) })
		share := make([]int, g)
		for r, i := range byLoad {
			share[i] = len(ds) / g
			if r < len(ds)%g {
				share[i]++
			}
		}
		next := 0
		for i, grp := range groups {
			for _, b := range grp {
				for _, o := range branches[b] {
					q.StageOf[o] = len(q.Devices)
				}
			}
			q.Devices = append(q.Devices, slices.Clone(ds[next:next+share[i]]))
			next += share[i]
		}
	}
	if !split {
		return Partition{}, false
	}
	return q, true
}

// sharedTrunk is the shared-trunk variant of a partition: the trunk's ops
// leave their stages and become one last stage replicated over every
// device of the partition, each device running it beside the stage it
// already hosts (BuildPlan gives it a stream of its own; the estimate
// sums a device's stages), first on the devices that are not their
// stage's first replica. The trunk is small next to the branches and
// otherwise rides on one branch's devices, which then set the pipeline's
// pace; shared, its work spreads evenly. ok is false when the trunk is
// empty or fills whole stages (their devices would be left idle).
func sharedTrunk(p Partition, trunk []int) (Partition, bool) {
	return sharedTrunkOn(p, trunk, false)
}

// sharedTrunkFirsts is sharedTrunk with the trunk on each stage's first
// replica only (ok false where every stage has one, or on a graph of
// more than smallOps ops). Replicated over every device, a trunk's
// tensor is reduced into and refreshed from its owner once per other
// replica, all through the owner's port: uno-8's 16 MiB trunk weight on
// 16 A100s, about 10 ms of a 13 ms flush. On one replica per branch
// stage it does more compute per replica but half the traffic (uno-8 on
// 16 A100s, m = 16: 54.7 → 49.5 ms with one step per owner, 54.5 → 49.2
// with step groups). On the 1,000-op search-time DAG it changed no plan
// and cost 8% of the search, hence smallOps.
func sharedTrunkFirsts(p Partition, trunk []int) (Partition, bool) {
	if len(p.StageOf) > smallOps {
		return Partition{}, false
	}
	for _, ds := range p.Devices {
		if len(ds) > 1 {
			return sharedTrunkOn(p, trunk, true)
		}
	}
	return Partition{}, false // the same as sharedTrunk's
}

func sharedTrunkOn(p Partition, trunk []int, firstsOnly bool) (Partition, bool) {
	if len(trunk) == 0 || len(p.Devices) < 2 {
		return Partition{}, false
	}
	in := make([]bool, len(p.StageOf))
	for _, o := range trunk {
		in[o] = true
	}
	left := make([]int, len(p.Devices)) // non-trunk ops per stage
	for o, s := range p.StageOf {
		if !in[o] {
			left[s]++
		}
	}
	for _, n := range left {
		if n == 0 {
			return Partition{}, false
		}
	}
	q := Partition{StageOf: make([]int, len(p.StageOf)), Devices: append([][]core.DeviceID(nil), p.Devices...)}
	for o, s := range p.StageOf {
		q.StageOf[o] = s
		if in[o] {
			q.StageOf[o] = len(p.Devices)
		}
	}
	// The trunk's first replica becomes home: start the trunk on the
	// replicas after their stage's first, so home does not pile onto the
	// device whose stage it also leads (spreadOwners, which names owners
	// replica by replica, then starts a tie there too).
	var all, firsts []core.DeviceID
	for _, ds := range p.Devices {
		firsts = append(firsts, ds[0])
		if !firstsOnly {
			all = append(all, ds[1:]...)
		}
	}
	all = append(all, firsts...)
	q.Devices = append(q.Devices, all)
	return q, true
}

// widened is partition p with some of the devices it leaves idle given
// to its stages as replicas: the stage with the most forward and
// backward time per replica (a replica runs ceil(m/d) of the m
// micro-batches) takes the devices that lower that count by one, while
// they are idle and the stage stays within limit replicas. It returns
// the plan each time its device count passes a power of two, and at the
// end: more replicas also mean more gradient traffic, so the most is
// not always the best. The DPs spend the fewest devices that reach
// their time target, but the target weighs a stage's optimizer step as
// if spread over the micro-batches, where it runs after the last
// backward: a plan bound by one parameter's step (an embedding table's)
// then leaves devices idle that would shorten the pipeline before it.
// With fits (nil: none), a step after which fits reports false is undone
// and its stage takes no more (a replica more can cost the stage's owner
// a staged copy of every gradient it owns, and the busiest stage is not
// always the one that can pay for it), and every step's plan is
// returned: where memory binds, which stage got the last devices
// matters more than their count.
// None when p uses every device or no stage can take another replica.
func widened(p Partition, c *costs, devs []core.DeviceID, limit int, fits func(Partition) bool) []Partition {
	spare := spareDevices(p, devs)
	if len(spare) == 0 || len(p.StageOf) > smallOps && len(spare)*widenIdle < len(devs) {
		return nil // nothing idle, or too little for a large graph's search time
	}
	stages := p.Stages()
	t := make([]float64, len(stages))
	for s, ops := range stages {
		t[s] = c.stat(ops).t()
	}
	q := p
	q.Devices = cloneDevices(p.Devices)
	snapshot := func() Partition {
		r := q
		r.Devices = cloneDevices(q.Devices)
		return r
	}
	cl := c.cm.Cluster() // NodeOf: 0 for every device without nodes
	most := min(limit, c.m)
	// A replica runs ceil(m/d) of a stage's m micro-batches: a stage's
	// load per replica drops only at the counts where that does, so a
	// stage takes the devices to the next such count at once.
	load := func(s int) float64 { return t[s] * float64((c.m+len(q.Devices[s])-1)/len(q.Devices[s])) }
	stuck := make([]bool, len(q.Devices))
	n := len(devs) - len(spare) // the devices p uses
	next := 1                   // the next power of two above n
	for next <= n {
		next *= 2
	}
	var out []Partition
	taken := n // the devices of the last snapshot
	for len(spare) > 0 {
		best := -1
		for s := range q.Devices {
			if !stuck[s] && (best < 0 || load(s) > load(best)) {
				best = s
			}
		}
		if best < 0 {
			break // no stage can take more
		}
		d := len(q.Devices[best])
		pick := nextReplicas(cl, q.Devices[best], c.m, most, spare)
		if pick == nil {
			stuck[best] = true
			continue
		}
		q.Devices[best] = append(q.Devices[best], pick...)
		if fits != nil && !fits(q) {
			q.Devices[best] = q.Devices[best][:d]
			stuck[best] = true
			continue
		}
		spare = slices.DeleteFunc(spare, func(x core.DeviceID) bool { return slices.Contains(pick, x) })
		n += len(pick)
		if fits != nil || n >= next {
			out, taken = append(out, snapshot()), n
			for next <= n {
				next *= 2
			}
		}
	}
	if n > taken {
		out = append(out, snapshot())
	}
	return out
}

// nextReplicas are the spare devices a stage on ds takes next (nil:
// none): a replica runs ceil(m/d) of the m micro-batches, so the stage
// takes at once the devices that lower that count by one, as long as it
// stays within most replicas and enough are spare. The stage's node
// first: its replicas' gradients and their inputs then cross fewer
// nodes' ports.
func nextReplicas(cl *sim.Cluster, ds []core.DeviceID, m, most int, spare []core.DeviceID) []core.DeviceID {
	d := len(ds)
	per := (m + d - 1) / d
	want := (m + per - 2) / max(1, per-1) // the fewest replicas running per−1 each
	if per <= 1 || want > most || want-d > len(spare) {
		return nil
	}
	home := cl.NodeOf(ds[0])
	var pick []core.DeviceID
	for _, onHome := range []bool{true, false} {
		for _, x := range spare {
			if len(pick) < want-d && (cl.NodeOf(x) == home) == onHome {
				pick = append(pick, x)
			}
		}
	}
	return pick
}

// widenedByEstimate is p with its idle devices given, one step at a
// time, to the stage whose next replicas (nextReplicas) the estimate
// says shorten the iteration most while every device fits, until no
// step shortens it; every step's plan is returned. widened goes by load
// and keeps plans at powers of two: the stage of the most load can be
// one whose replica alone shortens nothing (one branch's first layer of
// four), and the plan it keeps can be past the best count. Each step
// estimates one candidate per stage, so it runs on graphs of at most
// smallOps ops only (the estimates are the search's time there), and on
// p fitting.
func widenedByEstimate(p Partition, c *costs, devs []core.DeviceID, limit int, kind Kind) []Partition {
	if len(p.StageOf) > smallOps {
		return nil
	}
	spare := spareDevices(p, devs)
	if len(spare) == 0 {
		return nil
	}
	cur := c.estimate(p, kind)
	if !cur.fits {
		return nil
	}
	q := p
	q.Devices = cloneDevices(p.Devices)
	cl := c.cm.Cluster()
	most := min(limit, c.m)
	var out []Partition
	for len(spare) > 0 {
		best, bestIter := -1, cur.iter*(1-1e-9)
		var bestPick []core.DeviceID
		for s := range q.Devices {
			pick := nextReplicas(cl, q.Devices[s], c.m, most, spare)
			if pick == nil {
				continue
			}
			r := q
			r.Devices = slices.Clone(q.Devices)
			r.Devices[s] = append(slices.Clone(q.Devices[s]), pick...)
			if e := c.estimate(r, kind); e.fits && e.iter < bestIter {
				best, bestIter, bestPick = s, e.iter, pick
			}
		}
		if best < 0 {
			break // no step shortens the iteration
		}
		q.Devices[best] = append(q.Devices[best], bestPick...)
		spare = slices.DeleteFunc(spare, func(x core.DeviceID) bool { return slices.Contains(bestPick, x) })
		cur.iter = bestIter
		r := q
		r.Devices = cloneDevices(q.Devices)
		out = append(out, r)
	}
	return out
}

// spareDevices are the devices of devs (in their order) that p leaves
// idle.
func spareDevices(p Partition, devs []core.DeviceID) []core.DeviceID {
	used := map[core.DeviceID]bool{}
	for _, ds := range p.Devices {
		for _, d := range ds {
			used[d] = true
		}
	}
	var spare []core.DeviceID
	for _, d := range devs {
		if !used[d] {
			spare = append(spare, d)
		}
	}
	return spare
}

// cloneDevices is a deep copy of a partition's replica lists.
func cloneDevices(dss [][]core.DeviceID) [][]core.DeviceID {
	out := make([][]core.DeviceID, len(dss))
	for s, ds := range dss {
		out[s] = slices.Clone(ds)
	}
	return out
}

// widenIdle: on a graph of more than smallOps ops, widened leaves alone
// a plan that keeps more than all but 1/widenIdle of the devices busy.
// On the 1,000-op DAG over 64 devices with m searched, widening such
// plans (57–63 devices used) added 15% to the search's CPU time (19.7 →
// 22.7 s, against a bound of 5× the 4.8 s search at one count) and found
// nothing faster. On small graphs it pays: the 1F1B chain of uno-4 on
// 16 A100s gets 48.30 ms from a plan on 15 of them widened, 49.27 ms
// without.
const widenIdle = 8

// deviceCount is the number of distinct devices a partition uses.
func deviceCount(p Partition) int {
	n := 0
	for _, ds := range p.Devices {
		n += len(ds)
	}
	seen := make(map[core.DeviceID]bool, n) // sized once: growing it was a fifth of a 1,024-device search
	for _, ds := range p.Devices {
		for _, d := range ds {
			seen[d] = true
		}
	}
	return len(seen)
}
