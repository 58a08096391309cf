package graphpipe

import (
	"cmp"
	"math"
	"slices"

	"github.com/gnnkit/gnnkit/core"
)

// prediction is what estimate expects the simulator to report for a
// plan of a partition.
type prediction struct {
	iter  float64 // seconds per iteration
	pipe  float64 // of which the pipeline (first forward to last backward)
	tail  float64 // and the flush: the gradient reductions, the steps, the refresh
	peak  float64 // the largest per-device peak, bytes
	fits  bool    // every device within its memory
	depth int
}

// setMetrics reports pr on plan p: predicted_iteration_ms,
// predicted_flush_ms and predicted_peak_bytes.
func (pr prediction) setMetrics(p *core.Plan) {
	p.Metrics["predicted_iteration_ms"] = pr.iter * 1e3
	p.Metrics["predicted_flush_ms"] = pr.tail * 1e3
	p.Metrics["predicted_peak_bytes"] = pr.peak
}

// gradBytes is, for producing stage u and consuming stage s at u·S+s,
// the bytes of u's values whose gradients s sends back per micro-batch,
// each value once (stages: part.Stages()).
func (c *costs) gradBytes(part Partition, stages [][]int) []float64 {
	S := len(stages)
	out := make([]float64, S*S)
	for so, ops := range stages {
		c.nextStamp()
		for _, o := range ops {
			for _, q := range c.w.Ops[o].Deps {
				if sq := part.StageOf[q]; sq != so && c.needGrad[q] && c.seen[q] != c.stamp {
					c.seen[q] = c.stamp
					out[sq*S+so] += c.out[q]
				}
			}
		}
	}
	return out
}

// estimate predicts one iteration of the partition's plan under the
// schedule kind from the simulator's costs, with pipeline arithmetic:
//
//   - stage s costs t_s = f_s + b_s per micro-batch on a replica (its ops
//     at the micro-batch size, the unit setup, and with synchronous copies
//     the transfers of its inputs and gradients); its d_s replicas take
//     ceil(m/d_s) micro-batches each;
//   - 1F1B: the longest path through every replica's tasks in
//     BuildPlan's order (taskPipe: a replica's warm-up forwards, then a
//     backward and a forward in turn; each task after its predecessor
//     there, its inputs from the stages before and, for a backward, the
//     gradients from the stages after, transfers included where a copy
//     engine moves values between stages), and no less than the first
//     micro-batch's round trip L plus the steady part of a link or port
//     busier than the stages (a link between two replicas carries every
//     lcm(d_s, d_q)-th micro-batch); the replicas sharing a device add
//     their load (below). Before taskPipe this was L + max_s
//     (ceil(m/d_s) − 1)·t_s, which charges the round trip in full even
//     where a replica's forwards in flight hide it. A partition whose
//     1F1B order deadlocks is priced under GPipe, the order build gives
//     it;
//     GPipe: L's forward half plus the busiest stage's or link's
//     forwards, then the same for the backwards;
//   - the flush, as the executor does it. Home-step plans: every non-home
//     device, in plan order, sends the gradients of the parameters its
//     ops read to home once its last backward is done (stage s's ends
//     before the pipeline does by the backward path from s to a source),
//     home adds them in, one device after another; the optimizer step;
//     then home sends every device its new parameters (in parallel over
//     copy engines, in turn with synchronous copies). Owner-step plans
//     (ownerFlush): the same per owner, all owners at once, each with
//     only the replicas that read what it owns, stepping only its bytes;
//     under 1F1B a replica's last backward ends where taskPipe has it
//     (later by what contention adds to the pipeline); under GPipe a
//     pipeline beat (the steady part over m−1) earlier per micro-batch
//     after its last one.
//
// Memory per replica is sim's model, bounded over timings: the resident
// part (costs.resident; exact per replica under owner steps) plus
// min(k_s, ceil(m/d_s)) in-flight micro-batches under 1F1B (ceil(m/d_s)
// under GPipe), the gradients earlier ones left for other stages that
// may still wait (costs.windows), and one backward's transients.
//
// Callers go through estimate, which keeps its answers where the costs
// have a memo (a search's: searchMemo).
func (c *costs) price(part Partition, kind Kind) prediction {
	stages := part.Stages()
	preds, succs := part.StageDAG(c.w)
	k := InFlight(succs)
	W := part.depths(succs)
	S := len(stages)
	st := make([]stageStat, S)
	used := 0
	for s, ops := range stages {
		st[s] = c.stat(ops)
		used += min(len(part.Devices[s]), c.m)
	}
	scale := 1.0
	if hc := c.cm.Cluster().HostCores; hc > 0 && float64(used) > hc {
		scale = float64(used) / hc
	}
	// The transfers between two stages per micro-batch, each value on its
	// own (latency each), by producing and consuming stage: xs forward,
	// xsB the gradients sent back, of the values whose gradient is needed
	// (costs.needGrad; the simulator and the executor send no other).
	// Through ports (sim.Link.PortGBps) a replica's sends share its port,
	// as do its receives: portOut[s] and portIn[s] are the seconds stage
	// s's activations take through its port per micro-batch, out and in,
	// gradOut[s] and gradIn[s] its gradients', and lat[s] its port's
	// latency. Where every gradient is needed, xsB is xs and the gradient
	// loads are the activations' the other way.
	xs, xsB := map[[2]int]float64{}, map[[2]int]float64{}
	portOut, portIn, lat := make([]float64, S), make([]float64, S), make([]float64, S)
	gradOut, gradIn := make([]float64, S), make([]float64, S)
	gradBytes := c.gradBytes(part, stages)
	if !c.sync {
		seen := map[[2]int]bool{} // (producer op, consumer stage)
		for o, op := range c.w.Ops {
			so := part.StageOf[o]
			for _, q := range op.Deps {
				sq := part.StageOf[q]
				if sq != so && !seen[[2]int{q, so}] {
					seen[[2]int{q, so}] = true
					a, b := part.Devices[sq][0], part.Devices[so][0]
					t := secs(c.cm.Transfer(a, b, int64(c.out[q])))
					xs[[2]int{sq, so}] += t
					grad := c.needGrad[q]
					if grad {
						xsB[[2]int{sq, so}] += t
					}
					if _, gbps := c.cm.Cluster().PortBetween(a, b); gbps > 0 {
						x := c.out[q] / (gbps * 1e9)
						portOut[sq] += x
						portIn[so] += x
						if grad {
							gradOut[so] += x
							gradIn[sq] += x
						}
						l := secs(c.cm.Transfer(a, b, 0))
						lat[sq], lat[so] = max(lat[sq], l), max(lat[so], l)
					}
				}
			}
		}
	}
	c.windows(part, kind, W, gradBytes, st)
	// For a chain, into[q] and intoB[q]: the most any earlier stage sends
	// q (a chain edge waits for all of them), once rather than per call.
	var into, intoB []float64
	if part.Chain {
		inbound := func(xs map[[2]int]float64) []float64 {
			in := make([]float64, S)
			for k, v := range xs {
				if k[0] < k[1] {
					in[k[1]] = max(in[k[1]], v)
				}
			}
			return in
		}
		into, intoB = inbound(xs), inbound(xsB)
	}
	// e(s, q): the transfers on stage edge s -> q (a chain edge waits for
	// what q reads from every earlier stage, which come over their own
	// links at once), and no sooner than s's port sends all its
	// activations and q's receives all of its. eB(s, q): the same for
	// the gradients q sends s back (q's port sending, s's receiving).
	edge := func(xs map[[2]int]float64, into, out, in []float64, s, q int) float64 {
		x := xs[[2]int{s, q}]
		if part.Chain {
			x = max(x, into[q]) // transfer times: none below 0
		}
		if out[s] > 0 || in[q] > 0 {
			x = max(x, max(out[s], in[q])+max(lat[s], lat[q]))
		}
		return x
	}
	e := func(s, q int) float64 { return edge(xs, into, portOut, portIn, s, q) }
	eB := func(s, q int) float64 { return edge(xsB, intoB, gradIn, gradOut, s, q) }
	// portLoad is the busier direction of stage s's port per micro-batch:
	// its activations and gradients out, or in.
	portLoad := func(s int) float64 {
		return max(portOut[s]+gradOut[s], portIn[s]+gradIn[s])
	}
	f, b, t := make([]float64, S), make([]float64, S), make([]float64, S)
	per := make([]float64, S)
	for s := range st {
		f[s], b[s] = st[s].f*scale, st[s].b*scale
		t[s] = f[s] + b[s]
		per[s] = float64((c.m + len(part.Devices[s]) - 1) / len(part.Devices[s]))
	}
	// Stages in reverse topological order (sinks first).
	order := topoStages(preds, succs)
	latF, latB := make([]float64, S), make([]float64, S)
	// steady: the busiest stage's, link's or port's work after its first
	// micro-batch (the pipeline's rate: beat = steady/(m−1)); comm: the
	// links' and ports' part of it; steadyF, steadyB, linkSteady: GPipe's
	// phases.
	var steadyF, steadyB, steady, linkSteady, comm float64
	for i := len(order) - 1; i >= 0; i-- {
		s := order[i]
		var df, db float64
		for _, q := range succs[s] {
			x := e(s, q)
			df = max(df, x+latF[q])
			db = max(db, eB(s, q)+latB[q])
			// Micro-batch i goes from replica i mod d_s to replica i mod
			// d_q, so a link between two replicas carries every
			// lcm(d_s, d_q)-th micro-batch, one transfer at a time, each
			// direction on its own: a link busier than the stages is the
			// bottleneck.
			dd := lcm(len(part.Devices[s]), len(part.Devices[q]))
			link := float64((c.m+dd-1)/dd-1) * x
			steady = max(steady, link)
			linkSteady = max(linkSteady, link)
			comm = max(comm, link)
		}
		// A port carries a replica's activations out and in and their
		// gradients back, per micro-batch (under GPipe a phase one way): a
		// port busier than the stages is the bottleneck.
		steady = max(steady, (per[s]-1)*portLoad(s))
		comm = max(comm, (per[s]-1)*portLoad(s))
		linkSteady = max(linkSteady, (per[s]-1)*max(portOut[s], portIn[s]))
		latF[s], latB[s] = f[s]+df, b[s]+db
		steadyF = max(steadyF, (per[s]-1)*f[s])
		steadyB = max(steadyB, (per[s]-1)*b[s])
		steady = max(steady, (per[s]-1)*t[s])
	}
	var L, LF, LB float64
	warm := warmups(W, part.Devices)
	for s := range st {
		L = max(L, latF[s]+latB[s])
		LF = max(LF, latF[s])
		LB = max(LB, latB[s])
		// 1F1B: a replica holds at most its warm-up w in flight, and each
		// micro-batch takes the round trip down the pipeline and back
		// (transfers included) before its slot frees: its micro-batch
		// i+w cannot start before micro-batch i is back.
		if w := warm[s]; w > 0 && int(per[s]) > w {
			groups := (int(per[s]) + w - 1) / w
			steady = max(steady, float64(groups-1)*(latF[s]+latB[s]))
		}
	}
	shared := sharedDevices(part)
	// upB[s]: the backward path from s up to a source, s excluded: s's
	// last backward ends that long before the pipeline does. upF[s]: the
	// forward path from a source to s, s excluded: s's first micro-batch
	// arrives that long after the start.
	upB, upF := make([]float64, S), make([]float64, S)
	for _, s := range order {
		for _, q := range preds[s] {
			upB[s] = max(upB[s], eB(q, s)+b[q]+upB[q])
			upF[s] = max(upF[s], upF[q]+f[q]+e(q, s))
		}
	}
	p := prediction{pipe: L + steady, fits: true}
	// Per stage and replica: its last backward's end (taskPipe), of a
	// pipeline ending at taskEnd.
	var taskLast [][]float64
	var taskEnd float64
	if kind == OneFOneB {
		// Every replica's tasks in its 1F1B order, each waiting for its
		// predecessor there and for its data (taskPipe): where a replica's
		// forwards in flight hide the round trip below it, this is less
		// than L + (ceil(m/d_s) − 1)·t_s by what they hide; where the
		// stages below are busier, their queue shows in its waits. A link
		// or port busier than the stages adds its steady part to L.
		tp, last, ok := taskPipe(c.m, part.Devices, succs, warm, f, b, e, eB)
		if !ok {
			// The 1F1B order deadlocks: BuildPlan gives this partition
			// GPipe's order (Scheduler.build), so price that.
			return c.estimate(part, GPipe)
		}
		p.pipe = max(L+comm, tp)
		taskEnd, taskLast = tp, last
	}
	if kind == GPipe {
		// All forwards, then all backwards: each phase is as slow as its
		// busiest stage or link.
		p.pipe = LF + max(steadyF, linkSteady) + LB + max(steadyB, linkSteady)
	}
	if kind == OneFOneB && len(shared) > 0 {
		// A device hosting several stages (a shared trunk) runs all their
		// micro-batches one task at a time: from the first micro-batch's
		// arrival at the earliest of its stages (upF, the forward path
		// from a source) through its whole load, then the backward path
		// from the latest of them up to a source (upB).
		for _, hs := range shared {
			var load, portO, portI float64
			start, tail := math.Inf(1), math.Inf(1)
			for _, h := range hs {
				if h.replica >= c.m {
					continue // a replica past the micro-batch count runs nothing
				}
				d := len(part.Devices[h.stage])
				n := float64((c.m - h.replica + d - 1) / d)
				load += n * t[h.stage]
				portO += n * (portOut[h.stage] + gradOut[h.stage])
				portI += n * (portIn[h.stage] + gradIn[h.stage])
				start = min(start, upF[h.stage])
				tail = min(tail, upB[h.stage])
			}
			if load > 0 {
				p.pipe = max(p.pipe, start+max(load, max(portO, portI))+tail)
			}
		}
	}
	if c.owners {
		// A replica's last backward: stage s's last micro-batch's ends
		// upB[s] before the pipeline does, and each earlier micro-batch's
		// a beat earlier (the pipeline's steady rate per micro-batch).
		beat := 0.0
		if c.m > 1 {
			beat = steady / float64(c.m-1)
			if kind == GPipe {
				beat = max(steadyB, linkSteady) / float64(c.m-1)
			}
		}
		// GPipe: the backward phase starts when the forwards are done; a
		// replica of s ends its first backward latB[s] later and then one
		// every rate[s]: the slowest per-micro-batch backward of s and the
		// stages after it (b_q/d_q), times d_s (it takes every d_s-th).
		// A stage faster than what feeds it finishes early (under 1F1B
		// the forwards interleave and it runs at the pipeline's beat).
		var rate []float64
		if kind == GPipe {
			rate = make([]float64, S)
			for _, s := range order {
				rate[s] = b[s] / float64(len(part.Devices[s]))
			}
			for i := len(order) - 1; i >= 0; i-- {
				s := order[i]
				for _, q := range succs[s] {
					rate[s] = max(rate[s], rate[q])
				}
			}
		}
		bStart := LF + max(steadyF, linkSteady)
		lastB := func(s, r int) float64 {
			if taskLast != nil {
				// Where the pipeline's end is a port's, a link's or a
				// shared device's, every replica's ends that much later.
				return taskLast[s][r] + p.pipe - taskEnd
			}
			d := len(part.Devices[s])
			if len(preds[s]) == 0 && len(succs[s]) == 0 {
				// One stage (data parallelism): the replicas run in
				// lockstep, nothing feeding them one beat apart; one
				// with fewer micro-batches ends that many earlier.
				return p.pipe - float64((c.m+d-1)/d-(c.m-r+d-1)/d)*t[s]
			}
			j := r + d*((c.m-1-r)/d) // replica r's last micro-batch
			end := p.pipe - (LB - latB[s]) - float64(c.m-1-j)*beat
			if kind == GPipe {
				end = min(end, bStart+latB[s]+float64(j/d)*rate[s]*float64(d))
			}
			return end
		}
		var owned map[core.DeviceID]float64
		var staged map[core.DeviceID]staging
		p.iter, p.peak, p.fits, owned, staged = c.ownerFlush(part, stages, st, p.pipe, lastB, kind, W, len(shared) > 0)
		if len(shared) > 0 {
			res := func(d core.DeviceID, used float64) float64 { return c.residentOwned(used, owned[d]) }
			c.sharedPeaks(&p, part, shared, st, res, staged, kind, W, preds)
		}
		p.tail = p.iter - p.pipe
		for s := range st {
			p.depth = max(p.depth, k[s])
		}
		return p
	}
	home := part.Devices[part.StageOf[c.last]][0]
	clock := 0.0
	var bcast float64
	reduced := false
	for s, devs := range part.Devices {
		wb := int64(st[s].w)
		for r, d := range devs {
			if r >= c.m || d == home {
				continue // a replica with no micro-batch runs nothing
			}
			reduced = true
			clock = max(clock, p.pipe-upB[s]) + secs(c.cm.Transfer(d, home, wb)) + secs(c.cm.ReduceSum(home, wb))
			x := secs(c.cm.Transfer(home, d, wb))
			if c.sync {
				bcast += x
			} else {
				bcast = max(bcast, x)
			}
		}
	}
	clock = max(clock, p.pipe) + secs(c.cm.Step(home)) + bcast
	p.iter = clock
	p.tail = clock - p.pipe
	// Home adds each reduction in once its own backwards are done, a
	// parameter's gradient at a time (engine's reduceGrads), beside the
	// gradients its stages left for others that may still wait.
	if reduced {
		flush := c.resHome + c.maxParam
		for s, devs := range part.Devices {
			if slices.Contains(devs, home) {
				flush += st[s].retAll()
			}
		}
		p.peak = max(p.peak, flush)
		if c.memCap > 0 && flush > c.memCap {
			p.fits = false
		}
	}
	for s := range st {
		p.depth = max(p.depth, k[s])
		pk := c.peak(st[s], kind, W[s], len(part.Devices[s]))
		p.peak = max(p.peak, pk)
		if c.memCap > 0 && pk > c.memCap {
			p.fits = false
		}
	}
	if len(shared) > 0 {
		// Every device holds the whole model's parameters and gradients,
		// home its optimizer state too (costs.resident).
		res := func(d core.DeviceID, _ float64) float64 {
			if d == home {
				return c.resHome
			}
			return c.resOther
		}
		c.sharedPeaks(&p, part, shared, st, res, nil, kind, W, preds)
	}
	return p
}

// ownerFlush is the end of the iteration of the partition's owner-stepped
// plan (core.Plan.StepOwners) whose pipeline ends at pipe (lastB(s, r):
// replica r of stage s's last backward), and the largest per-device peak,
// whether every device fits, and the bytes each device owns. Owners are
// BuildPlan's (spreadOwners). Each owner O, in parallel with the others:
// every device E reading parameters O owns sends it their gradients once
// E's last backward reading them is done, and O adds them in after its
// own last backward reading them (one reduction after another on O's
// flush stream, sources in plan order); O steps the bytes it owns once
// all its backwards are done, then sends the new values to those devices
// (in parallel over copy engines, in turn with synchronous copies).
// Memory: a replica holds its stage's parameters and gradients and the
// optimizer state of what it owns (home alike: it drops the parameters
// it does not read). With withStaging (devices hosting several stages,
// for sharedPeaks) it also returns each device's staged gradients.
func (c *costs) ownerFlush(part Partition, stages [][]int, st []stageStat, pipe float64, lastB func(s, r int) float64, kind Kind, W []int, withStaging bool) (iter, peak float64, fits bool, ownedDev map[core.DeviceID]float64, stagedDev map[core.DeviceID]staging) {
	S := len(stages)
	nP := len(c.parBytes)
	// The parameters each stage reads.
	stageParams := paramsOfStages(stages, c.opPar, nP)
	// What each replica runs on: replicas past the micro-batch count run
	// nothing and hold nothing.
	active := make([][]core.DeviceID, S)
	for s := range S {
		active[s] = part.Devices[s][:min(len(part.Devices[s]), c.m)]
	}
	owner := spreadOwners(stageParams, active, c.parBytes)
	// A replicated stage's last backward runs in buckets (PlanOptions.
	// BucketBytes, the latest ops first): a parameter is final when the
	// bucket reading it ends, off[s][p] before the whole backward does
	// (the buckets after it).
	off := make([][]float64, S) // by parameter; nil: no buckets
	var offSet []bool           // off[s][p] set (reused from stage to stage)
	// trans[s]: the backward transients beside which fetched gradients
	// wait on a replica of s: with buckets the largest of every bucket
	// but the first to run (earlier buckets' gradients arrive while the
	// later ones run), else the whole backward's (a pipeline's replicas
	// end apart, so gradients arrive while the owner still computes).
	trans := make([]float64, S)
	for s := range S {
		trans[s] = st[s].trans
	}
	if c.bucket > 0 {
		for s := range S {
			if len(part.Devices[s]) < 2 {
				continue
			}
			bs := bucketOps(stages[s], c.opPar, c.parBytes, c.bucket)
			if bs == nil {
				continue
			}
			off[s] = make([]float64, nP)
			if offSet == nil {
				offSet = make([]bool, nP)
			} else {
				clear(offSet)
			}
			trans[s] = 0
			for _, b := range bs[1:] {
				trans[s] = max(trans[s], c.stat(b).trans)
			}
			after := 0.0
			for i := len(bs) - 1; i >= 0; i-- {
				for _, o := range bs[i] {
					for _, q := range c.opPar[o] {
						if !offSet[q] {
							offSet[q], off[s][q] = true, after
						}
					}
				}
				for _, o := range bs[i] {
					after += c.bwd[o]
				}
			}
		}
	}
	final := func(s int, end float64, p int32) float64 {
		if off[s] == nil {
			return end
		}
		return end - off[s][p]
	}
	nAct := 0 // replicas that run: maps sized once (growing them cost on 1,024 devices)
	for s := range S {
		nAct += len(active[s])
	}
	ownedDev = make(map[core.DeviceID]float64, nAct)
	for p, d := range owner {
		if d != "" {
			ownedDev[d] += c.parBytes[p]
		}
	}
	// Devices in plan order (stage by stage, replica by replica), the
	// replicas each hosts, and each replica's last backward.
	pos := make(map[core.DeviceID]int, nAct)
	var devs []core.DeviceID
	var hostedOn [][][2]int
	var devEnd []float64 // a device steps after all its backwards
	ends := make([][]float64, S)
	for s := range S {
		ends[s] = make([]float64, len(active[s]))
		for r, d := range active[s] {
			i, ok := pos[d]
			if !ok {
				i = len(devs)
				pos[d] = i
				devs = append(devs, d)
				hostedOn = append(hostedOn, nil)
				devEnd = append(devEnd, 0)
			}
			ends[s][r] = lastB(s, r)
			hostedOn[i] = append(hostedOn[i], [2]int{s, r})
			devEnd[i] = max(devEnd[i], ends[s][r])
		}
	}
	// Each parameter's owner (by plan position) and the owner's last
	// backward reading it.
	sc := c.flushTables(nP, len(devs))
	ownerAt, mine := sc.ownerAt, sc.mine
	for p, d := range owner {
		ownerAt[p] = -1
		if d != "" {
			ownerAt[p] = pos[d]
		}
	}
	for s := range S {
		for r, d := range active[s] {
			at := pos[d]
			for _, p := range stageParams[s] {
				if ownerAt[p] == at {
					mine[p] = max(mine[p], final(s, ends[s][r], p))
				}
			}
		}
	}
	// The reductions: from each device into each other owner of what it
	// reads, with the source's last backward over the parameters moved
	// and the owner's.
	type red = flushRed
	into := sc.into // by the owner's plan position
	// One reduction per owner and readiness (core.Plan.OwnerStepIn: a
	// source's gradients final at different times travel apart):
	// groups[o] are the current source's into owner o (its readiness,
	// its index in into[o]), valid where groupsOf[o] is the source.
	type group = flushGroup
	groups, groupsOf := sc.groups, sc.groupsOf
	stamp, endAt := sc.stamp, sc.endAt
	list := sc.list
	for e := range devs {
		list = list[:0]
		for _, h := range hostedOn[e] {
			for _, p := range stageParams[h[0]] {
				end := final(h[0], ends[h[0]][h[1]], p)
				if stamp[p] != e {
					stamp[p], endAt[p] = e, end
					list = append(list, p)
				} else {
					endAt[p] = max(endAt[p], end)
				}
			}
		}
		for _, p := range list {
			o := ownerAt[p]
			if o == e || o < 0 {
				continue
			}
			if groupsOf[o] != e {
				groupsOf[o], groups[o] = e, groups[o][:0]
			}
			j := -1
			for _, g := range groups[o] {
				if g.end == endAt[p] {
					j = g.j
					break
				}
			}
			if j < 0 {
				j = len(into[o])
				groups[o] = append(groups[o], group{endAt[p], j})
				into[o] = append(into[o], red{e: e})
			}
			x := &into[o][j]
			x.nb += c.parBytes[p]
			x.end = max(x.end, endAt[p])
			x.mine = max(x.mine, mine[p])
		}
	}
	sc.list = list
	// With copy engines (!c.sync) every reduction is fetched as soon as
	// its source is done with the gradients (engine.RunOptions.
	// PrefetchReductions), each pair's one after another on its link, and
	// staged on the owner until the owner adds it in its turn; with
	// synchronous copies the reduction's task copies them in its turn.
	// Through ports (sim.Link.PortGBps) a device's fetches out share its
	// port, as do an owner's fetches in and the steps' refreshes both
	// ways: a transfer ends no sooner than its ports have carried all of
	// theirs from the first one's start (redOut and redIn from redFrom*;
	// bcastOut and bcastIn as if all started at once), the latency after.
	// Not modelled: an owner whose backwards end well before the
	// pipeline's (lastB is the pipeline's drain), which overstates when a
	// large refresh starts.
	nD := len(devs)
	redOut, redIn, bcastOut, bcastIn := make([]float64, nD), make([]float64, nD), make([]float64, nD), make([]float64, nD)
	redFromOut, redFromIn := make([]float64, nD), make([]float64, nD)
	for i := range nD {
		redFromOut[i], redFromIn[i] = math.Inf(1), math.Inf(1)
	}
	ported := false
	cl := c.cm.Cluster()
	if !c.sync {
		for o := range devs {
			for _, x := range into[o] {
				// Cluster.PortBetween's bandwidth, without its name.
				if gbps := cl.LinkBetween(devs[x.e], devs[o]).PortGBps; gbps > 0 {
					ported = true
					t := x.nb / (gbps * 1e9)
					redOut[x.e] += t
					redIn[o] += t
					bcastOut[o] += t
					bcastIn[x.e] += t
					redFromOut[x.e] = min(redFromOut[x.e], x.end)
					redFromIn[o] = min(redFromIn[o], x.end)
				}
			}
		}
	}
	iter, fits = pipe, true
	if ported {
		// And a device's port carries its reductions and refreshes, out
		// and in, from its first reduction on: the flush ends no sooner.
		for i := range devs {
			from := min(redFromOut[i], redFromIn[i])
			if !math.IsInf(from, 1) {
				busy := max(redOut[i]+bcastOut[i], redIn[i]+bcastIn[i])
				iter = max(iter, from+busy+secs(c.cm.Transfer(devs[i], devs[i], 0)))
			}
		}
	}
	// The most fetched gradient bytes an owner holds, not yet added: from
	// before its own last backward ends (stagedBusy), and at all (staged).
	staged, stagedBusy := make([]float64, nD), make([]float64, nD)
	for o, d := range devs {
		if ownedDev[d] <= 0 {
			continue
		}
		clock := 0.0
		var bcast float64
		// The plan adds them in by when their gradients are ready
		// (core.Plan.OwnerStepIn), then in plan order.
		slices.SortStableFunc(into[o], func(a, b red) int { return cmp.Compare(a.end, b.end) })
		linkFree := sc.linkFree // by source, into o
		for _, x := range into[o] {
			linkFree[x.e] = 0
		}
		type span = flushSpan
		held := sc.held[:0]
		// A device hosting several stages runs one task at a time,
		// the earliest ready first: until its last backward, an add
		// waits for the task it runs, so one goes in per task (1F1B
		// alternates forwards and backwards: half the forward and
		// backward per micro-batch of its longest stage).
		gap, nextAdd := 0.0, math.Inf(-1)
		if len(hostedOn[o]) > 1 {
			for _, h := range hostedOn[o] {
				gap = max(gap, st[h[0]].t()/2)
			}
		}
		for _, x := range into[o] {
			nb := int64(x.nb)
			src := devs[x.e]
			// The links both ways, looked up once (CostModel.Transfer
			// is LinkBetween(a, b).Time).
			lin, lout := cl.LinkBetween(src, d), cl.LinkBetween(d, src)
			if c.sync {
				// The gradients travel in the reduction's turn, once the
				// source is done with them and the owner with its own
				// backwards of them (engine's ownerReduce), and are
				// added in; the copy is held from the transfer to the
				// end of the add.
				st := max(clock, max(x.end, x.mine))
				clock = st + secs(lin.Time(nb)) + secs(c.cm.ReduceSum(d, nb))
				held = append(held, span{st, clock, x.nb})
			} else {
				st := max(x.end, linkFree[x.e])
				got := st + secs(lin.Time(nb))
				if ported {
					l := secs(lin.Time(0))
					got = max(got, max(redFromOut[x.e]+redOut[x.e], redFromIn[o]+redIn[o])+l)
				}
				linkFree[x.e] = got
				start := max(max(clock, got), x.mine)
				if gap > 0 && start < devEnd[o] {
					if later := max(start, nextAdd); later < devEnd[o] {
						start = later
					} else {
						start = devEnd[o]
					}
					nextAdd = start + gap
				}
				clock = start + secs(c.cm.ReduceSum(d, nb))
				held = append(held, span{st, clock, x.nb})
			}
			t := secs(lout.Time(nb))
			if ported {
				t = max(t, max(bcastOut[o], bcastIn[x.e])+secs(lout.Time(0)))
			}
			if c.sync {
				bcast += t
			} else {
				bcast = max(bcast, t)
			}
		}
		// Sweep the spans' starts and ends (an end before a start at one
		// time: [from, to)); the held bytes at each start.
		type mark = flushMark
		sc.held = held
		marks := sc.marks[:0]
		for _, h := range held {
			marks = append(marks, mark{h.from, h.nb}, mark{h.to, -h.nb})
		}
		slices.SortFunc(marks, func(a, b mark) int {
			if c := cmp.Compare(a.at, b.at); c != 0 {
				return c
			}
			return cmp.Compare(a.nb, b.nb) // ends (negative) first
		})
		sc.marks = marks
		var sum float64
		for _, m := range marks {
			sum += m.nb
			if m.nb > 0 {
				staged[o] = max(staged[o], sum)
				if m.at < devEnd[o] {
					stagedBusy[o] = max(stagedBusy[o], sum)
				}
			}
		}
		clock = max(clock, devEnd[o]) + secs(c.cm.StepBytes(d, int64(ownedDev[d])))
		iter = max(iter, clock+bcast)
	}
	for q := range stages {
		var own, stg, busy float64
		for _, d := range active[q] {
			own = max(own, ownedDev[d])
			stg = max(stg, staged[pos[d]])
			busy = max(busy, stagedBusy[pos[d]])
		}
		r := c.residentOwned(st[q].pw, own)
		pk := c.peakWith(r, st[q], kind, W[q], len(part.Devices[q]))
		// Fetched gradients wait on the owner until added: beside its last
		// micro-batch's activations and its backward's transients while
		// that runs (with buckets, the last bucket's: the earlier ones'
		// gradients arrive during it), and the earlier micro-batches'
		// retained gradients; after it, beside all of those.
		pk = max(pk, max(r+st[q].held+trans[q]+busy+st[q].retAll()-st[q].ret, r+stg+st[q].retAll()))
		peak = max(peak, pk)
		if c.memCap > 0 && pk > c.memCap {
			fits = false
		}
	}
	if withStaging {
		stagedDev = make(map[core.DeviceID]staging, len(devs))
		for i, d := range devs {
			stagedDev[d] = staging{all: staged[i], busy: stagedBusy[i]}
		}
	}
	return iter, peak, fits, ownedDev, stagedDev
}

// flushScratch holds ownerFlush's tables between calls on one costs
// (which, as stat's marks, one goroutine uses at a time): by parameter,
// the owner's plan position and last backward reading it, and a source's
// readiness (stamped by source); by device, the reductions into it and
// the current source's groups of them, and each source's link; and the
// spans and marks of the staging sweep. Without it they were a third
// of the estimate's time, in allocation and collection.
type flushScratch struct {
	ownerAt, stamp []int
	mine, endAt    []float64
	list           []int32
	into           [][]flushRed
	groups         [][]flushGroup
	groupsOf       []int
	linkFree       []float64
	held           []flushSpan
	marks          []flushMark
}

// flushRed is one reduction into an owner: from source e (by plan
// position), nb bytes, ready at end, the owner's own last backward over
// them done at mine.
type flushRed struct {
	e         int
	nb        float64
	end, mine float64
}

type flushGroup struct {
	end float64
	j   int
}

type flushSpan struct{ from, to, nb float64 }

type flushMark struct{ at, nb float64 }

// flushTables is c's flushScratch for nP parameters and nD devices,
// reset: stamp and groupsOf −1, mine 0, every device's reductions none.
func (c *costs) flushTables(nP, nD int) *flushScratch {
	if c.flush == nil {
		c.flush = &flushScratch{}
	}
	sc := c.flush
	grow := func(n int) {
		if cap(sc.ownerAt) < n {
			sc.ownerAt, sc.stamp = make([]int, n), make([]int, n)
			sc.mine, sc.endAt = make([]float64, n), make([]float64, n)
		}
	}
	grow(nP)
	sc.ownerAt, sc.stamp, sc.mine, sc.endAt = sc.ownerAt[:nP], sc.stamp[:nP], sc.mine[:nP], sc.endAt[:nP]
	clear(sc.mine)
	for i := range sc.stamp {
		sc.stamp[i] = -1
	}
	for len(sc.into) < nD {
		sc.into, sc.groups = append(sc.into, nil), append(sc.groups, nil)
		sc.groupsOf, sc.linkFree = append(sc.groupsOf, 0), append(sc.linkFree, 0)
	}
	sc.into, sc.groups, sc.groupsOf, sc.linkFree = sc.into[:nD], sc.groups[:nD], sc.groupsOf[:nD], sc.linkFree[:nD]
	for o := range nD {
		sc.into[o], sc.groups[o], sc.groupsOf[o] = sc.into[o][:0], sc.groups[o][:0], -1
	}
	sc.list = sc.list[:0]
	return sc
}

// staging is the most fetched-gradient bytes an owner holds before it
// adds them in: while its own last backward still runs (busy), and at
// all.
type staging struct{ all, busy float64 }

// hosted is one replica a device runs: replica of stage.
type hosted struct{ stage, replica int }

// sharedDevices lists, for every device hosting two or more stages, the
// replicas it runs (nil: every stage has devices of its own).
func sharedDevices(part Partition) map[core.DeviceID][]hosted {
	// Counted first, in a map sized once (on 1,024 devices, growing the
	// map and a list per device took an eighth of the search).
	n := 0
	for _, devs := range part.Devices {
		n += len(devs)
	}
	count := make(map[core.DeviceID]int32, n)
	shared := false
	for _, devs := range part.Devices {
		for _, d := range devs {
			count[d]++
			shared = shared || count[d] > 1
		}
	}
	if !shared {
		return nil
	}
	out := map[core.DeviceID][]hosted{}
	for s, devs := range part.Devices {
		for r, d := range devs {
			if count[d] > 1 {
				out[d] = append(out[d], hosted{s, r})
			}
		}
	}
	return out
}

// sharedPeaks adds the peaks of devices hosting several stages to p: one
// resident part for all of them (the parameters each stage reads, the
// optimizer state of what the device owns), every stage's in-flight
// micro-batches and waiting gradients, and the largest one backward's
// transients (the device runs one task at a time) beside the gradients
// the other stages' backwards left for values of other stages, until
// those fetch them; or, as ownerFlush counts an owner's fetched
// gradients, those beside one micro-batch of each stage and the
// transients while its backwards run, and alone after. The executor
// keeps a micro-batch's values on a device until the device's last
// backward of it: a stage that an earlier stage on the same device (an
// ancestor a in the stage DAG, preds) holds back keeps its whole held
// bytes for as many micro-batches as a lets it forward meanwhile
// (window), not only its retained gradients.
func (c *costs) sharedPeaks(p *prediction, part Partition, shared map[core.DeviceID][]hosted, st []stageStat, resident func(d core.DeviceID, used float64) float64, staged map[core.DeviceID]staging, kind Kind, W []int, preds [][]int) {
	anc := ancestors(preds)
	for d, hs := range shared {
		var used, held, one, trans, ret, kept float64
		for _, h := range hs {
			if h.replica >= c.m {
				continue // runs nothing, holds nothing
			}
			ret += st[h.stage].ret
		}
		for _, h := range hs {
			if h.replica >= c.m {
				continue // runs nothing, holds nothing
			}
			s := st[h.stage]
			ds := len(part.Devices[h.stage])
			L := c.inFlight(kind, W[h.stage], ds)
			// keep: the micro-batches holding their held bytes (L in
			// flight, the rest kept); the rest of the window hold their
			// retained gradients.
			keep, behind := L, false
			for _, a := range hs {
				if a.replica < c.m && anc[h.stage][a.stage] {
					da := len(part.Devices[a.stage])
					keep = max(keep, c.window(c.inFlight(kind, W[a.stage], da), da, ds))
					behind = true
				}
			}
			// Past its backward a micro-batch holds its retained
			// gradients until fetched, and its held bytes too while kept.
			used += s.pw
			held += float64(keep)*s.held + float64(keep-L)*s.ret + s.waiting(keep)
			after := 0 // kept after the stage's last backward
			if behind {
				after = keep
			}
			kept += float64(after)*(s.held+s.ret) + s.waiting(after)
			one += s.held
			// Beside one stage's backward, the gradients the others'
			// backwards left for values of other stages wait to be
			// fetched (counted for a stage on this device too: an
			// overcount on the safe side).
			trans = max(trans, s.trans+ret-s.ret)
		}
		r := resident(d, used)
		pk := max(r+held+trans, max(r+one+trans+staged[d].busy+kept-ret, r+staged[d].all+kept))
		p.peak = max(p.peak, pk)
		if c.memCap > 0 && pk > c.memCap {
			p.fits = false
		}
	}
}

// ancestors says, per stage s, which stages precede it in the stage DAG
// (preds): anc[s][a].
func ancestors(preds [][]int) [][]bool {
	S := len(preds)
	anc := make([][]bool, S)
	var visit func(s int)
	visit = func(s int) {
		if anc[s] != nil {
			return
		}
		anc[s] = make([]bool, S)
		for _, q := range preds[s] {
			visit(q)
			anc[s][q] = true
			for a, ok := range anc[q] {
				anc[s][a] = anc[s][a] || ok
			}
		}
	}
	for s := range S {
		visit(s)
	}
	return anc
}

func lcm(a, b int) int {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
}

// topoStages orders the stages so that every stage comes after its
// predecessors.
func topoStages(preds, succs [][]int) []int {
	n := len(preds)
	left := make([]int, n)
	var q []int
	for s := range n {
		left[s] = len(preds[s])
		if left[s] == 0 {
			q = append(q, s)
		}
	}
	for i := 0; i < len(q); i++ {
		for _, t := range succs[q[i]] {
			if left[t]--; left[t] == 0 {
				q = append(q, t)
			}
		}
	}
	return q
}

// taskPipe is the end of the 1F1B pipeline of m micro-batches over the
// stage DAG (succs: each stage's successors) with the given replicas
// (devs) and warm-ups, and each replica's last task's end (last), by the
// longest path through every replica's tasks: a replica runs its
// micro-batches (i ≡ r mod d_s) in BuildPlan's 1F1B order, each task
// after the one before it there; stage s's forward of micro-batch i
// after its predecessors' forwards of i and the transfers e(p, s), its
// backward after its forward and its successors' backwards of i and the
// gradients they send back, eB(s, q). Compute f[s] and b[s] per task; what it leaves out is
// contention: stages sharing a device, and transfers sharing a link or
// port (estimate bounds those apart). ok is false if the order
// deadlocks.
func taskPipe(m int, devs [][]core.DeviceID, succs [][]int, warm []int, f, b []float64, e, eB func(s, q int) float64) (end float64, last [][]float64, ok bool) {
	S := len(devs)
	if m <= 0 || S == 0 {
		return 0, nil, true
	}
	id := func(s, i int, bwd bool) int {
		if bwd {
			return (s*m+i)*2 + 1
		}
		return (s*m + i) * 2
	}
	n := 2 * S * m
	// Kahn's order over the tasks: indeg counts each task's waits, next
	// is the task after it on its replica (-1: none).
	indeg := make([]int32, n)
	next := make([]int32, n)
	for t := range next {
		next[t] = -1
	}
	for s := range S {
		d := len(devs[s])
		for r := 0; r < d && r < m; r++ {
			// The replica's micro-batches: r, r+d, … below m (the k-th
			// is r+k·d).
			cnt := (m - r + d - 1) / d
			w := max(1, min(warm[s], cnt))
			last := -1
			put := func(t int) {
				if last >= 0 {
					next[last] = int32(t)
					indeg[t]++
				}
				last = t
			}
			for k := range w {
				put(id(s, r+k*d, false))
			}
			for j := range cnt {
				put(id(s, r+j*d, true))
				if w+j < cnt {
					put(id(s, r+(w+j)*d, false))
				}
			}
		}
	}
	// The transfers on each stage edge, once.
	type edge struct {
		to int
		x  float64
	}
	in, out := make([][]edge, S), make([][]edge, S)
	for s := range S {
		for _, q := range succs[s] {
			out[s] = append(out[s], edge{q, e(s, q)})
			in[q] = append(in[q], edge{s, eB(s, q)})
		}
	}
	for s := range S {
		for i := range m {
			indeg[id(s, i, false)] += int32(len(in[s]))
			indeg[id(s, i, true)] += int32(len(out[s])) + 1
		}
	}
	last = make([][]float64, S)
	for s := range S {
		last[s] = make([]float64, len(devs[s]))
	}
	start := make([]float64, n) // earliest start so far
	queue := make([]int32, 0, n)
	for t := range n {
		if indeg[t] == 0 {
			queue = append(queue, int32(t))
		}
	}
	done := 0
	release := func(t int, at float64) {
		start[t] = max(start[t], at)
		if indeg[t]--; indeg[t] == 0 {
			queue = append(queue, int32(t))
		}
	}
	for len(queue) > 0 {
		t := int(queue[0])
		queue = queue[1:]
		done++
		s, i, bwd := t/2/m, (t/2)%m, t%2 == 1
		dur := f[s]
		if bwd {
			dur = b[s]
		}
		fin := start[t] + dur
		end = max(end, fin)
		if next[t] < 0 {
			last[s][i%len(devs[s])] = fin
		}
		if nx := next[t]; nx >= 0 {
			release(int(nx), fin)
		}
		if !bwd {
			for _, ed := range out[s] {
				release(id(ed.to, i, false), fin+ed.x)
			}
			release(id(s, i, true), fin)
		} else {
			for _, ed := range in[s] {
				release(id(ed.to, i, true), fin+ed.x)
			}
		}
	}
	return end, last, done == n
}
