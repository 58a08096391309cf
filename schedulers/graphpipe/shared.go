package graphpipe

import "github.com/gnnkit/gnnkit/core"

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
		all = append(all, ds[1:]...)
	}
	all = append(all, firsts...)
	q.Devices = append(q.Devices, all)
	return q, true
}
