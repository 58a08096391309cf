package graphpipe

import (
	"math"
	"slices"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// costs are what the partitioners weigh, per op and per micro-batch, all
// read from the simulator's cost model (sim.CostModel): the op times,
// memory and output sizes at the sizes the simulator gives this plan's
// micro-batches, the links, the gradient reductions (into home, or into
// each parameter's owner), the optimizer steps and the resident memory. There is no other cost model:
// what the partitioners add is the pipeline arithmetic (stage rates,
// in-flight counts, the flush), which estimate spells out and the
// simulator checks.
type costs struct {
	cm   *sim.CostModel
	w    *core.Workload
	devs []core.DeviceID
	m    int // micro-batches (as BuildPlan makes them)
	// Per op, per micro-batch on devs[0]: forward and backward seconds
	// (mean over the micro-batches); bytes held from forward to backward,
	// backward transient bytes and output bytes (largest micro-batch);
	// the parameter bytes it reads.
	fwd, bwd, time []float64
	// step: with owners, the optimizer step of the parameters op o is
	// the first (in index order) to read, over the m micro-batches. With
	// amortize (a copy made by amortized), time includes it and a stage's
	// rate counts it: the DPs then weigh the step a stage's owners take
	// at the flush per micro-batch, as the paper's time per sample
	// amortises per-iteration work. On d replicas a stage's step is its
	// largest owner's (repRate: spreadOwners gives each parameter whole
	// to one replica).
	step     []float64
	amortize bool
	// reduce (a copy made by flushAmortized, amortize set too): repRate
	// adds, for a stage on d > 1 replicas, the reductions of its
	// gradients into their owners per micro-batch (reduction).
	reduce                 bool
	held, temp, out, wbyte []float64
	// walk: the profile gives each op's backward gradients (gIn left for
	// its inputs, gOut of its outputs freed: sim.Point.GradIn, GradOut),
	// and a stage's backward transient is the walk over its ops the
	// simulator makes (walk), not the sum of temp.
	walk      bool
	gIn, gOut []float64
	// needGrad[o]: a gradient of op o's output is needed
	// (core.Workload.OpsNeedGrad): only those cross devices on the way
	// back.
	needGrad []bool
	// A micro-batch brings to a device only the inputs its ops there read
	// (as the executor and the simulator do): readFeat[o] says op o reads
	// the features, readW[o] the weighted graphs whose edge weights it
	// reads (indices), featShare and wShare the parts of setupMem they are.
	readFeat          []bool
	readW             [][]int
	featShare, wShare float64
	// The per-unit setup on a device (seconds forward and backward; its
	// inputs' bytes).
	setupF, setupB, setupMem float64
	sync                     bool          // the consumer's task copies its inputs (CPU executor)
	hostScale                float64       // >1: the devices share fewer host cores
	memCap                   float64       // smallest device memory (0: unlimited)
	memDev                   core.DeviceID // the device with memCap
	memUneven                bool          // some device has more than memCap
	resHome, resOther        float64       // resident bytes on home and elsewhere (sim.CostModel.Resident)
	maxParam                 float64       // the largest parameter's bytes (a home-step reduction's staging)
	// owners: the plans step each parameter on its owner
	// (core.Plan.StepOwners); the flush and the resident memory follow
	// the parameters (opPar: each op's, by index into parBytes; pbyte:
	// each op's bytes).
	owners   bool
	bucket   float64 // PlanOptions.BucketBytes (0 or less: none)
	opPar    [][]int32
	parBytes []float64
	pbyte    []float64
	parSeen  []int32 // stamps, as mark
	// flush: ownerFlush's tables, kept for its next call (scratch, as
	// mark: nil in a scratchCopy).
	flush *flushScratch
	// With owners, sim.CostModel.ResidentOwned's terms: the model's
	// parameter bytes and optimizer-state bytes per parameter byte.
	paramBytes, optPer float64
	last               int // the loss op: its stage holds home
	succ               [][]int
	maxCons            []int // each op's last consumer (-1: none)
	// link is the typical stage-to-stage transfer (devs[0] -> devs[1]).
	link func(bytes float64) float64
	// mark and seen (with stamp) flag a priced set's ops and the outside
	// values it reads.
	mark, seen []int32
	stamp      int32
	// memo keeps the estimates and chain read-outs made at these costs
	// (searchMemo.costsAt; nil: nothing kept). Scratch copies share it.
	memo *costMemo
}

func secs(d time.Duration) float64 { return d.Seconds() }

// MicroUnits are the m units BuildPlan makes: contiguous shares of the
// batch, each computing its targets' receptive field (at most one per
// target; an empty batch gets one unit).
func MicroUnits(w *core.Workload, m int) []core.Unit {
	m = max(1, min(m, len(w.Batch)))
	if len(w.Batch) == 0 {
		m = 1
	}
	units := make([]core.Unit, 0, m)
	for i := 0; i < m; i++ {
		lo, hi := i*len(w.Batch)/m, (i+1)*len(w.Batch)/m
		u := core.Unit{ID: i, Targets: append([]int32(nil), w.Batch[lo:hi]...), Subgraph: true, LossWeight: 1}
		if len(w.Batch) > 0 {
			u.LossWeight = float64(hi-lo) / float64(len(w.Batch))
		}
		units = append(units, u)
	}
	return units
}

// newCosts prices w's ops for m micro-batches on devs with cm, for plans
// stepped under mode step.
func newCosts(cm *sim.CostModel, w *core.Workload, devs []core.DeviceID, m int, step StepMode) *costs {
	n := len(w.Ops)
	units := MicroUnits(w, m)
	c := &costs{cm: cm, w: w, devs: devs, m: len(units), last: n - 1, owners: step.owners(w), bucket: DefaultBucketBytes,
		fwd: make([]float64, n), bwd: make([]float64, n), time: make([]float64, n),
		held: make([]float64, n), temp: make([]float64, n), out: make([]float64, n), wbyte: make([]float64, n),
		gIn: make([]float64, n), gOut: make([]float64, n),
		succ: make([][]int, n), maxCons: make([]int, n), mark: make([]int32, n), seen: make([]int32, n)}
	d0 := devs[0]
	for _, u := range units {
		rows, edges := cm.UnitSize(u)
		ocs := cm.UnitOps(d0, u) // each op at its own size; the setup last
		for o := range w.Ops {
			oc := ocs[o]
			c.fwd[o] += secs(oc.Fwd) / float64(len(units))
			c.bwd[o] += secs(oc.Bwd) / float64(len(units))
			c.held[o] = max(c.held[o], float64(oc.Mem))
			c.temp[o] = max(c.temp[o], float64(oc.Temp))
			c.gIn[o] = max(c.gIn[o], float64(oc.GradIn))
			c.gOut[o] = max(c.gOut[o], float64(oc.GradOut))
			c.out[o] = max(c.out[o], float64(oc.OutBytes))
		}
		sc := ocs[len(w.Ops)]
		c.setInputShares(rows, edges)
		c.setupF += secs(sc.Fwd) / float64(len(units))
		c.setupB += secs(sc.Bwd) / float64(len(units))
		c.setupMem = max(c.setupMem, float64(sc.Mem))
	}
	for o := range w.Ops {
		c.walk = c.walk || c.gIn[o] > 0 || c.gOut[o] > 0
	}
	c.needGrad = w.OpsNeedGrad()
	for o, op := range w.Ops {
		c.time[o] = c.fwd[o] + c.bwd[o]
		c.wbyte[o] = float64(op.Cost.WeightBytes)
		c.maxCons[o] = -1
		for _, d := range op.Deps {
			c.succ[d] = append(c.succ[d], o)
		}
	}
	for o := range w.Ops {
		for _, s := range c.succ[o] {
			c.maxCons[o] = max(c.maxCons[o], s)
		}
	}
	if c.owners {
		_, c.parBytes, c.opPar = paramIndex(w)
		c.pbyte = make([]float64, n)
		c.step = make([]float64, n)
		first := make([]bool, len(c.parBytes))
		for o, ps := range c.opPar {
			var nb float64
			for _, p := range ps {
				c.pbyte[o] += c.parBytes[p]
				if !first[p] {
					first[p] = true
					nb += c.parBytes[p]
				}
			}
			if nb > 0 {
				c.step[o] = secs(cm.StepBytes(d0, int64(nb))) / float64(c.m)
			}
		}
		c.parSeen = make([]int32, len(c.parBytes))
		c.paramBytes = float64(cm.ParamBytes())
		c.optPer = 2
		if c.paramBytes > 0 {
			c.optPer = float64(cm.OptStateBytes(cm.ParamBytes())) / c.paramBytes
		}
	}
	// Home-step plans: off home a device holds only its stage's
	// parameters; the DP prices every stage at the whole model's, an
	// upper bound that keeps its memory check safe without tracking which
	// stage reads what. (Owner-step plans price each stage's own, see
	// resident; resHome, the whole training state, still bounds every
	// device's resident part in memoryFree.)
	c.resHome, c.resOther = float64(cm.Resident(true, false, cm.ParamBytes())), float64(cm.Resident(false, false, cm.ParamBytes()))
	for _, op := range w.Ops {
		for _, r := range op.Params {
			c.maxParam = max(c.maxParam, float64(r.Bytes))
		}
	}
	cl := cm.Cluster()
	c.sync = cl.SyncTransfers
	c.hostScale = 1
	if cl.HostCores > 0 && float64(len(devs)) > cl.HostCores {
		c.hostScale = float64(len(devs)) / cl.HostCores
	}
	caps := map[core.DeviceID]float64{}
	for _, d := range devs {
		if mc := cm.Capacity(d); mc > 0 {
			caps[d] = float64(mc)
		}
	}
	for _, d := range w.Devices {
		if d.MemCap > 0 && (caps[d.ID] == 0 || float64(d.MemCap) < caps[d.ID]) {
			caps[d.ID] = float64(d.MemCap)
		}
	}
	var most float64
	for d, mc := range caps {
		if c.memCap == 0 || mc < c.memCap || mc == c.memCap && d < c.memDev {
			c.memCap, c.memDev = mc, d
		}
		most = max(most, mc)
	}
	c.memUneven = most > c.memCap
	a, b := d0, d0
	if len(devs) > 1 {
		b = devs[1]
	}
	c.link = func(bytes float64) float64 {
		if bytes <= 0 {
			return 0
		}
		return secs(cm.Transfer(a, b, int64(bytes)))
	}
	return c
}

// scratchCopy is c with scratch of its own for stat (mark, seen,
// parSeen and stamp, which stat writes), so that another goroutine can
// price stages beside c; everything else is shared and read-only.
func (c *costs) scratchCopy() *costs {
	cp := *c
	cp.mark = make([]int32, len(c.mark))
	cp.seen = make([]int32, len(c.seen))
	cp.parSeen = make([]int32, len(c.parSeen))
	cp.stamp = 0
	cp.flush = nil
	return &cp
}

// stageStat is what one stage (a set of ops) costs per micro-batch on
// one replica.
type stageStat struct {
	f, b   float64  // forward and backward seconds, setup and synchronous copies included
	held   float64  // bytes one in-flight micro-batch keeps: what its forwards hold, its inputs, the values received
	inPart float64  // the part of the micro-batch's inputs (setupMem) its ops read
	trans  float64  // backward transient bytes: temporaries and the gradients received
	ret    float64  // of those, the gradients its backward leaves for other stages' values (held until they fetch them)
	wins   []retWin // set by the estimate: ret split by how many micro-batches' worth may wait (costs.windows; none: the in-flight ones')
	w      float64  // parameter bytes its ops read (Cost.WeightBytes: what a home flush moves)
	pw     float64  // with owners: the bytes of the distinct parameters its ops read (OpInfo.Params)
	pmax   float64  // with owners: the largest of those parameters
	amort  float64  // with costs.amortize: its ops' costs.step (per micro-batch)
	in     float64  // activation bytes received per micro-batch
	gin    float64  // gradient bytes received per micro-batch
	home   bool     // holds the loss op (the plan's home, with the optimizer state)
}

func (s stageStat) t() float64 { return s.f + s.b }

// retWin is part of a stage's ret: bytes per micro-batch that wait for
// a producing stage's fetch, of at most win micro-batches at once
// (costs.windows).
type retWin struct {
	win   int
	bytes float64
}

// waiting is the retained-gradient bytes a replica holds beyond those
// of n micro-batches: of each part of ret, the micro-batches its window
// has past n.
func (s stageStat) waiting(n int) float64 {
	var b float64
	for _, w := range s.wins {
		b += float64(max(w.win-n, 0)) * w.bytes
	}
	return b
}

// rate is what the DPs hold against their target per micro-batch on one
// device: the stage's forward and backward, with its amortised step
// under costs.amortize (repRate spreads it over replicas).
func (s stageStat) rate() float64 { return s.t() + s.amort }

// nextStamp starts a new mark, seen and parSeen generation.
func (c *costs) nextStamp() {
	c.stamp++
	if c.stamp == math.MaxInt32 {
		clear(c.mark)
		clear(c.seen)
		clear(c.parSeen)
		c.stamp = 1
	}
}

// stat prices the ops as one stage.
func (c *costs) stat(ops []int) stageStat {
	c.nextStamp()
	for _, o := range ops {
		c.mark[o] = c.stamp
	}
	var s stageStat
	for _, o := range ops {
		if c.owners {
			for _, p := range c.opPar[o] {
				if c.parSeen[p] != c.stamp {
					c.parSeen[p] = c.stamp
					s.pw += c.parBytes[p]
					s.pmax = max(s.pmax, c.parBytes[p])
				}
			}
		}
		s.f += c.fwd[o]
		s.b += c.bwd[o]
		if c.amortize {
			s.amort += c.step[o]
		}
		s.held += c.held[o]
		if !c.walk {
			s.trans += c.temp[o]
		}
		if o == c.last {
			s.home = true
		}
		for _, q := range c.w.Ops[o].Deps {
			if c.mark[q] != c.stamp && c.seen[q] != c.stamp {
				c.seen[q] = c.stamp // each outside value once
				s.in += c.out[q]
			}
		}
		for _, q := range c.succ[o] {
			if c.mark[q] != c.stamp && c.needGrad[o] {
				s.gin += c.out[o] // its gradient, sent back from another stage
				break
			}
		}
	}
	s.w = float64(c.cm.UsedBytes(ops))
	s.inPart = c.inputPart(ops)
	if c.walk {
		s.trans, s.ret = c.walkTrans(ops, s.gin)
	}
	c.finish(&s)
	return s
}

// setInputShares sets which inputs each op reads and the parts of a
// micro-batch's inputs (rows x features, edges per weighted graph) the
// features and each graph's edge weights are; without the model, every
// stage is charged all of them.
func (c *costs) setInputShares(rows, edges int64) {
	m := c.w.Model
	n := len(c.w.Ops)
	c.readFeat, c.readW = make([]bool, n), make([][]int, n)
	c.featShare, c.wShare = 1, 0
	if m == nil || len(m.Ops) != n {
		for o := range c.readFeat {
			c.readFeat[o] = true
		}
		return
	}
	graph := map[string]int{}
	for _, g := range m.Graphs {
		if g.Weights != core.WeightsNone {
			graph[g.Name+".w"] = len(graph)
		}
	}
	for o := range m.Ops {
		feat, weights := m.InputsRead([]int{o})
		c.readFeat[o] = feat
		for _, v := range weights {
			c.readW[o] = append(c.readW[o], graph[v])
		}
	}
	fb, eb := float64(rows)*float64(c.w.FeatureDim), float64(max(edges, 0))
	if total := fb + eb*float64(len(graph)); total > 0 {
		c.featShare, c.wShare = fb/total, eb/total
	}
}

// inputPart is the part of a micro-batch's inputs a stage of ops reads.
func (c *costs) inputPart(ops []int) float64 {
	if c.readFeat == nil {
		return 1
	}
	feat, gs := false, map[int]bool{}
	for _, o := range ops {
		feat = feat || c.readFeat[o]
		for _, g := range c.readW[o] {
			gs[g] = true
		}
	}
	p := c.wShare * float64(len(gs))
	if feat {
		p += c.featShare
	}
	return p
}

// walkTrans is a stage's backward transient under the walk the simulator
// makes (sim.WalkBackward), starting from the gradients received.
func (c *costs) walkTrans(ops []int, received float64) (peak, left float64) {
	at := func(xs []float64) func(int) int64 { return func(o int) int64 { return int64(xs[o]) } }
	p, l := sim.WalkBackward(ops, at(c.temp), at(c.gIn), at(c.gOut), int64(received))
	return float64(p), float64(l)
}

// finish adds the per-unit setup and, for synchronous copies, the
// transfers to a stage's times, and the received values to its memory.
func (c *costs) finish(s *stageStat) {
	s.f += c.setupF
	s.b += c.setupB
	if c.sync {
		s.f += c.link(s.in)
		s.b += c.link(s.gin)
	}
	s.held += c.setupMem*s.inPart + s.in
	if !c.walk {
		s.trans += s.gin // the walk starts from them
	}
}

// inFlight is how many micro-batches a replica of a stage keeps in
// flight under the schedule kind, with d replicas sharing the m
// micro-batches and W devices on the heaviest path from the stage to a
// sink (its own included; see Warmup).
func (c *costs) inFlight(kind Kind, W, d int) int {
	per := (c.m + d - 1) / d
	if kind == GPipe {
		return per
	}
	return min((W+d-1)/d, per)
}

// resident is the resident part of the memory of one of d replicas of
// a stage, as the simulator counts it (sim.CostModel). Home-step plans:
// the whole model's parameters, gradients and optimizer state on home,
// and (an upper bound: the DP does not track which stage reads what) the
// whole model's parameters and gradients elsewhere. Owner-step plans: the
// stage's parameters and gradients, and the optimizer state of at most
// pw/d + (1-1/d)·pmax of its parameter bytes — spreadOwners gives each
// parameter, largest first, to a least-owning reader, and a replica's
// readers' own bytes are all the stage's, so (Graham's list-scheduling
// bound) no replica owns more (exact for one replica unless an earlier
// stage reads some of them too; home alike).
func (c *costs) resident(s stageStat, d int) float64 {
	if c.owners {
		return c.residentOwned(s.pw, ownedBound(s.pw, s.pmax, d))
	}
	if s.home {
		return c.resHome
	}
	return c.resOther
}

// ownedBound is the most parameter bytes one of d replicas owns when
// spreadOwners spreads parameters of total bytes over them, the largest
// of which has largest bytes.
func ownedBound(total, largest float64, d int) float64 {
	if d <= 1 {
		return total
	}
	return min(total, total/float64(d)+(1-1/float64(d))*largest)
}

// residentOwned is sim.CostModel.ResidentOwned (to its rounding; the
// DP calls it in its inner loops): a device reading used parameter bytes
// and owning owned of them.
func (c *costs) residentOwned(used, owned float64) float64 {
	return 2*used + c.optPer*owned // home too: it keeps only what it reads
}

// peak is a replica's predicted peak memory: the resident part (see
// resident) plus its in-flight micro-batches and one backward's
// transients.
func (c *costs) peak(s stageStat, kind Kind, W, d int) float64 {
	return c.peakWith(c.resident(s, d), s, kind, W, d)
}

// peakWith is peak with the resident part r.
func (c *costs) peakWith(r float64, s stageStat, kind Kind, W, d int) float64 {
	L := c.inFlight(kind, W, d)
	return r + float64(L)*s.held + s.waiting(L) + s.trans
}

// retAll is the most ret bytes a replica holds at once: after its last
// backward, its windows' (costs.windows).
func (s stageStat) retAll() float64 { return s.waiting(0) }

// windows sets, per stage of the partition, how many micro-batches'
// worth of each part of the gradients its backward leaves for other
// stages' values (stageStat.ret, .wins) a replica may hold between
// their forward and their fetch, whatever the timing: a producing stage
// u fetches the gradients of its values with its backward of that
// micro-batch, and meanwhile the replica runs on as far as u lets it
// (window), so each producer's part waits by its own window. Under
// GPipe every micro-batch is in flight already. At least L_s: at most
// L_s of them are in flight, and the rest hold only their retained
// gradients (each smaller than the held values it is the gradient of,
// so the most memory is with L_s in flight: peakWith). gradBytes[u·S+s]
// is the bytes of the values of u whose gradients s sends back; ret
// goes to the producers from the longest window down, each at most its
// bytes, and what they leave to the longest (the walk's ret is what
// the backward leaves, these bytes what it is made of).
func (c *costs) windows(part Partition, kind Kind, W []int, gradBytes []float64, st []stageStat) {
	S := len(part.Devices)
	for s, devs := range part.Devices {
		ret := st[s].ret
		if ret <= 0 {
			continue
		}
		ds := len(devs)
		L := c.inFlight(kind, W[s], ds)
		var ws []retWin
		if kind != GPipe {
			for u := range S {
				if b := gradBytes[u*S+s]; b > 0 {
					du := len(part.Devices[u])
					ws = append(ws, retWin{max(L, c.window(c.inFlight(kind, W[u], du), du, ds)), b})
				}
			}
		}
		if len(ws) == 0 {
			st[s].wins = []retWin{{L, ret}}
			continue
		}
		slices.SortFunc(ws, func(a, b retWin) int { return b.win - a.win })
		out, left := ws[:0], ret
		for _, w := range ws {
			if b := min(w.bytes, left); b > 0 {
				out = append(out, retWin{w.win, b})
				left -= b
			}
		}
		out[0].bytes += left
		st[s].wins = out
	}
}

// window is how many of its micro-batches a replica of a stage on ds
// replicas may have forwarded since the oldest one a replica of an
// earlier stage (on du replicas, lu in flight) holds back, that one
// included: micro-batch i goes to replica i mod d, so the earlier
// replica forwards at most lu-1 more of its own, one every du, and the
// later one forwards none it has not: it stops before the first one past
// those that both take, the next multiple of lcm(du, ds) on, having taken
// one in every ds before it; at most ceil(m/ds).
func (c *costs) window(lu, du, ds int) int {
	l := lcm(du, ds)
	return min(l/ds*((lu-1)*du/l+1), (c.m+ds-1)/ds)
}

// slack is how much W a replica of a stage (1F1B, d replicas, W devices
// on its heaviest path to a sink) can gain and still fit memory.
func (c *costs) slack(s stageStat, W, d int) int {
	if c.memCap <= 0 {
		return unlimited
	}
	r := c.resident(s, d)
	room := c.memCap - r - s.trans
	per := (c.m + d - 1) / d
	if s.held <= 0 || room >= float64(per)*s.held {
		return unlimited // even all its micro-batches fit
	}
	most := int(math.Floor(room / s.held)) // in-flight micro-batches that fit
	return most*d - W
}

// minReplicas is the fewest replicas of a stage that meet the target
// tau (per micro-batch, over its replicas) and fit memory under 1F1B with
// k in flight downstream (a replica on d devices keeps min(ceil((k+d)/d),
// ceil(m/d)) micro-batches); math.MaxInt32 if none does.
func (c *costs) minReplicas(s stageStat, tau float64, k int) int {
	d := 1
	if tau > 0 && !math.IsInf(tau, 1) {
		d = max(1, int(math.Ceil(s.rate()/tau*(1-eps)))) // repRate(d) >= rate/d
		for c.repRate(s, d) > tau*(1+eps) {
			if d++; d > len(c.devs) && (s.amort > 0 || c.reduce) {
				// A parameter's step does not split, and reductions grow
				// with d: no replica count meets tau.
				return math.MaxInt32
			}
		}
	}
	if c.memCap <= 0 {
		return d
	}
	// More replicas each own less (resident falls with d) and keep fewer
	// micro-batches, so fitting is monotone in d: the fewest that fit,
	// by bisection up to the cluster's devices (no plan uses more).
	limit := max(len(c.devs), d)
	fitsAt := func(d int) bool { return c.fits(s, OneFOneB, k+d, d) }
	if fitsAt(d) {
		return d // the usual case: the fewest replicas that meet tau fit
	}
	if d++; d > limit || !fitsAt(limit) {
		return math.MaxInt32 // not even the most replicas fit
	}
	lo, hi := d, limit
	for lo < hi {
		if mid := (lo + hi) / 2; fitsAt(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if c.reduce && tau > 0 && !math.IsInf(tau, 1) {
		// The reductions grow with d, so the rate may have risen past
		// tau by lo: the fewest replicas from lo on that meet it (all
		// of them fit).
		for ; lo <= limit; lo++ {
			if c.repRate(s, lo) <= tau*(1+eps) {
				return lo
			}
		}
		return math.MaxInt32
	}
	return lo
}

// memoryFree reports whether memory can never bind: every op's held
// bytes for all m micro-batches at once, and every transient, fit a
// device with the home's resident part.
func (c *costs) memoryFree() bool {
	if c.memCap <= 0 {
		return true
	}
	var held, trans float64
	for o := range c.held {
		held += c.held[o] + c.out[o]
		trans += c.temp[o] + c.out[o]
	}
	return c.resHome+float64(c.m)*(held+c.setupMem)+trans <= c.memCap
}

func (c *costs) fits(s stageStat, kind Kind, W, d int) bool {
	return c.memCap <= 0 || c.peak(s, kind, W, d) <= c.memCap
}

// thirdPass reports whether the DPs also run with each stage's whole
// flush amortised (pools: costs.flushAmortized): with owners, on graphs
// of at most smallOps ops (a pass's time, kept out of the 1,000-op
// bound), over more than one device.
func (c *costs) thirdPass() bool {
	return weighFlush && c.step != nil && len(c.time) <= smallOps && len(c.devs) > 1
}

// flushAmortized is amortized with reduce set: the DPs weigh, per
// micro-batch, a stage's step and, on d > 1 replicas, the reductions of
// its gradients into their owners (reduction).
func (c *costs) flushAmortized() *costs {
	a := c.amortized()
	a.reduce = true
	return a
}

// capped is c with every device's memory held to memCap, for the chain
// DP's ladder of caps (Scheduler.ladder, capsPass), on scratch of its
// own (scratchCopy).
func (c *costs) capped(memCap float64) *costs {
	a := c.scratchCopy()
	a.memCap = memCap
	a.memo = nil // its estimates are under another cap
	return a
}

// reduction is the time per micro-batch of a stage's gradient
// reductions on d replicas as the third DP pass weighs it: every owner
// receives its parameters' gradients from the d−1 other replicas
// (spreadOwners: at most ownedBound bytes each, over one port), once per
// iteration of c.m micro-batches. Grows with d where it matters: the
// pass's answers replicate stages of large parameters less.
func (c *costs) reduction(s stageStat, d int) float64 {
	if d <= 1 || s.pw <= 0 {
		return 0
	}
	return c.link(float64(d-1)*ownedBound(s.pw, s.pmax, d)) / float64(c.m)
}

// secondPass reports whether the DPs also run with the steps amortised
// (pools): see stepMaterial. Never with home steps (no stage steps its
// own parameters; amortized needs c.step).
func (c *costs) secondPass() bool {
	if c.step == nil || c.stepShare() < stepMaterial {
		return false
	}
	return len(c.time) <= smallOps || c.stepShift() >= shiftMaterial
}

// stepShare is the optimizer steps' time over the ops' forward and
// backward time per iteration (above 1 where the steps take longer; 0
// without owners).
func (c *costs) stepShare() float64 {
	st, t := c.stepTotals()
	if t <= 0 {
		return 0
	}
	return st / t
}

// stepTotals is the optimizer steps' time and the ops' forward and
// backward time per micro-batch, summed over the ops (0, 0 without
// owners).
func (c *costs) stepTotals() (st, t float64) {
	if c.step == nil {
		return 0, 0
	}
	for o := range c.time {
		st += c.step[o]
		t += c.fwd[o] + c.bwd[o]
	}
	return st, t
}

// stepShift is how much weighing the optimizer steps reshapes the op
// times: the total variation distance between each op's share of the
// forward and backward time per iteration and its share of that time
// with the steps (costs.step) added, in [0, 1); 0 without owners. Where
// the steps are proportional to the ops' times (dense layers, whose step
// and compute both scale with their weights) it is small however large
// the steps are (the DPs' answers then differ mainly in how replicated
// stages share a step: repRate); where a few ops carry large steps and
// little compute (embedding tables) it is large. It varies with m and
// the batch: the ops' time per iteration falls with fewer samples and
// fewer, larger micro-batches, the steps' does not.
func (c *costs) stepShift() float64 {
	st, t := c.stepTotals()
	if t <= 0 {
		return 0
	}
	var d float64
	for o := range c.time {
		ot := c.fwd[o] + c.bwd[o]
		d += math.Abs(ot/t - (ot+c.step[o])/(t+st))
	}
	return d / 2
}

// amortized is a copy of c whose DPs weigh each stage's optimizer step
// (costs.step) per micro-batch; its estimate is c's. The copy has scratch
// of its own, so it and c may run DPs side by side. c must step on
// owners (c.step set): with home steps no stage steps its own.
func (c *costs) amortized() *costs {
	a := *c
	a.amortize = true
	a.time = make([]float64, len(c.time))
	for o := range a.time {
		a.time[o] = c.fwd[o] + c.bwd[o] + c.step[o]
	}
	a.mark, a.seen = make([]int32, len(c.mark)), make([]int32, len(c.seen))
	a.parSeen = make([]int32, len(c.parSeen))
	a.stamp = 0
	a.memo = nil  // its own costs, whose estimates are not looked up in c's
	a.flush = nil // ownerFlush's tables are c's: a copy estimating beside c would share them
	return &a
}

// repRate is a stage's time per micro-batch on d replicas as the DPs
// weigh it: its forward and backward spread over the replicas and, under
// amortize, the step of the most parameter bytes one replica owns
// (ownedBound: spreadOwners gives each parameter whole to one replica, so
// a stage of one large table steps it on one device however many
// replicas it has), and under reduce (the third pass) its reductions
// (reduction). At least rate()/d; non-increasing in d except under
// reduce, where the reductions grow with d.
func (c *costs) repRate(s stageStat, d int) float64 {
	r := s.t() / float64(d)
	if c.reduce {
		r += c.reduction(s, d)
	}
	if s.amort > 0 {
		share := 1 / float64(d)
		if s.pw > 0 {
			share = ownedBound(s.pw, s.pmax, d) / s.pw
		}
		r += s.amort * share
	}
	return r
}
