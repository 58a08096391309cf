package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// Flow-level transfers (design-log.md "Transfer model"): an asynchronous
// transfer over a link with a port (Link.PortGBps) is a flow through the
// sender's out-port and the receiver's in-port. At every start and end
// of a flow the ports' bandwidth is shared max-min fairly among the
// flows through them (each also capped at its link's GBps), and the next
// completion is moved accordingly; a value is handed over the link's
// latency after its last byte. Links without a port keep one transfer at
// a time per ordered pair (FIFO).

// flow is one transfer in progress through ports.
type flow struct {
	src, dst core.DeviceID
	out, in  int     // port indices (s.portCap)
	cap      float64 // the link's bytes per ns (0: only the ports limit it)
	rem      float64 // bytes left
	rate     float64 // bytes per ns, set by flowRates
	bytes    int64
	lat      time.Duration
	start    time.Duration
	what     string
	unit     int
	done     func(at time.Duration)
	// urgent: a task waits for this value now (demanded); demanded
	// flows take the ports' bandwidth before the others.
	urgent bool
}

type portKey struct {
	dev  core.DeviceID
	name string
	out  bool
}

// port returns the index of device d's port name in one direction,
// making it with bandwidth gbps (the smallest any link gives it).
func (s *sim) port(d core.DeviceID, name string, out bool, gbps float64) int {
	k := portKey{d, name, out}
	if i, ok := s.portIdx[k]; ok {
		s.portCap[i] = min(s.portCap[i], gbps)
		return i
	}
	if s.portIdx == nil {
		s.portIdx = map[portKey]int{}
	}
	s.portIdx[k] = len(s.portCap)
	s.portCap = append(s.portCap, gbps)
	return len(s.portCap) - 1
}

// send moves bytes from src to dst from now on and calls done with the
// time they are there: at once over a FIFO link (the time is known), or
// when the flow completes.
func (s *sim) send(src, dst core.DeviceID, bytes int64, now time.Duration, what string, unit int, done func(at time.Duration)) *flow {
	name, gbps := s.c.PortBetween(src, dst)
	l := s.c.LinkBetween(src, dst)
	if gbps <= 0 || bytes <= 0 {
		k := [2]core.DeviceID{src, dst}
		st := max(now, s.linkFree[k])
		en := st + s.cm.Transfer(src, dst, bytes)
		s.linkFree[k] = en
		s.linkEvent(k, what, unit, bytes, st, en)
		done(en)
		return nil
	}
	if now < s.lastFlow {
		// A transfer dated before the flows' clock would take bandwidth
		// back in time: a bug in the caller, not in the plan.
		s.err = fmt.Errorf("sim: internal error: %s from %s to %s starts at %v, before the transfers' clock %v", what, src, dst, now, s.lastFlow)
		return nil
	}
	s.advanceFlows(now)
	f := &flow{src: src, dst: dst, out: s.port(src, name, true, gbps), in: s.port(dst, name, false, gbps),
		cap: l.GBps, rem: float64(bytes), bytes: bytes, lat: l.Latency, start: now, what: what, unit: unit, done: done}
	s.flows = append(s.flows, f)
	s.rescheduleFlows(now)
	return f
}

// demand marks flow f (still in progress) as waited for from now on: it
// goes ahead of the flows nobody waits for yet. Nothing without
// Cluster.DemandFirst, or for no flow (a FIFO link's transfer, or one
// already there).
func (s *sim) demand(f *flow, now time.Duration) {
	if f == nil || f.urgent || !s.c.DemandFirst {
		return
	}
	if now < s.lastFlow {
		s.err = fmt.Errorf("sim: internal error: %s from %s to %s is waited for at %v, before the transfers' clock %v", f.what, f.src, f.dst, now, s.lastFlow)
		return
	}
	s.advanceFlows(now)
	f.urgent = true
	s.rescheduleFlows(now)
}

// advanceFlows drains every flow at its rate up to now.
func (s *sim) advanceFlows(now time.Duration) {
	el := float64(now - s.lastFlow)
	for _, f := range s.flows {
		f.rem -= el * f.rate
	}
	s.lastFlow = now
}

// flowRates shares the ports max-min fairly (progressive filling), the
// demanded flows first and the others over what they leave: repeatedly
// the tightest constraint — a port's bandwidth left over its unfixed
// flows of the class, or a flow's link cap — fixes the rate of the flows
// it binds, and their rate is taken from their ports.
func (s *sim) flowRates() {
	left := append(s.capScratch[:0], s.portCap...)
	users := s.userScratch[:0]
	for range s.portCap {
		users = append(users, 0)
	}
	fixed := s.fixScratch[:0]
	for range s.flows {
		fixed = append(fixed, false)
	}
	s.capScratch, s.userScratch, s.fixScratch = left, users, fixed
	for _, urgent := range [2]bool{true, false} {
		todo := 0
		for _, f := range s.flows {
			if f.urgent == urgent {
				users[f.out]++
				users[f.in]++
				todo++
			}
		}
		s.fill(left, users, fixed, urgent, todo)
	}
}

// fill is one class's progressive filling (flowRates).
func (s *sim) fill(left []float64, users []int, fixed []bool, urgent bool, todo int) {
	share := func(p int) float64 { return left[p] / float64(users[p]) }
	for todo > 0 {
		v := math.Inf(1)
		for p, n := range users {
			if n > 0 {
				v = min(v, share(p))
			}
		}
		for i, f := range s.flows {
			if !fixed[i] && f.urgent == urgent && f.cap > 0 {
				v = min(v, f.cap)
			}
		}
		v = max(v, 0)
		lim := v * (1 + 1e-12)
		var bind []int
		for i, f := range s.flows {
			if !fixed[i] && f.urgent == urgent && (f.cap > 0 && f.cap <= lim || share(f.out) <= lim || share(f.in) <= lim) {
				bind = append(bind, i)
			}
		}
		for _, i := range bind {
			f := s.flows[i]
			f.rate, fixed[i] = v, true
			left[f.out] -= v
			left[f.in] -= v
			users[f.out]--
			users[f.in]--
			todo--
		}
	}
}

// rescheduleFlows sets the rates and schedules the next completion
// (earlier ones superseded by the version).
func (s *sim) rescheduleFlows(now time.Duration) {
	s.flowVersion++
	if len(s.flows) == 0 {
		return
	}
	s.flowRates()
	next := math.Inf(1)
	for _, f := range s.flows {
		if f.rate > 0 {
			next = min(next, max(0, f.rem)/f.rate)
		} else if f.rem <= 0.5 {
			// Drained, its end not yet handled, and now without
			// bandwidth (a flow demanded at this instant took it): it
			// ends now, not after the demanded one.
			next = 0
		}
	}
	if math.IsInf(next, 1) {
		return // no bandwidth anywhere: the run reports what never finished
	}
	s.push(event{t: now + time.Duration(math.Ceil(next)), kind: evFlow, version: s.flowVersion})
}

// flowsDone ends the flows drained by now (in the order they started)
// and hands their bytes over.
func (s *sim) flowsDone(version int, now time.Duration) {
	if version != s.flowVersion {
		return
	}
	s.advanceFlows(now)
	var done []*flow
	keep := s.flows[:0]
	for _, f := range s.flows {
		// Half a byte absorbs the rounding of rates that end together.
		if f.rem <= 0.5 {
			done = append(done, f)
		} else {
			keep = append(keep, f)
		}
	}
	for i := len(keep); i < len(s.flows); i++ {
		s.flows[i] = nil
	}
	s.flows = keep
	for _, f := range done {
		at := now + f.lat
		s.linkEvent([2]core.DeviceID{f.src, f.dst}, f.what, f.unit, f.bytes, f.start, at)
		f.done(at)
	}
	s.rescheduleFlows(now)
}
