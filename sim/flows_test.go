package sim

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// flowSim is a bare simulator over cluster c for driving transfers alone.
func flowSim(c *Cluster) *sim {
	return &sim{c: c, linkFree: map[[2]core.DeviceID]time.Duration{},
		res: &Result{Comm: map[core.DeviceID]time.Duration{}, Trace: &core.Trace{}}}
}

// drain runs the flow events until none is left.
func (s *sim) drain(t *testing.T) {
	t.Helper()
	for s.q.Len() > 0 {
		e := s.q.pop()
		if e.kind != evFlow {
			t.Fatalf("unexpected event %+v", e)
		}
		s.flowsDone(e.version, e.t)
	}
}

// TestFlowRates: ports are shared max-min fairly. A sends to B, C and D
// through its 24 GB/s port (8 GB/s each); E sends to B too, and B's port
// in has 24 − 8 = 16 GB/s left for it, under E's 20 GB/s link; F sends
// to G alone at its link's 20 GB/s.
func TestFlowRates(t *testing.T) {
	link := Link{GBps: 20, Latency: 5 * time.Microsecond, PortGBps: 24}
	s := flowSim(&Cluster{Link: link})
	for _, p := range [][2]core.DeviceID{{"A", "B"}, {"A", "C"}, {"A", "D"}, {"E", "B"}, {"F", "G"}} {
		s.send(p[0], p[1], 1<<20, 0, "x", -1, func(time.Duration) {})
	}
	want := []float64{8, 8, 8, 16, 20}
	for i, f := range s.flows {
		if math.Abs(f.rate-want[i]) > 1e-9 {
			t.Errorf("flow %s->%s at %.3f GB/s, want %v", f.src, f.dst, f.rate, want[i])
		}
	}
}

// TestFlowTimes: transfers end when their bytes are through, at rates
// that change as others start and end, and arrive a latency later. A
// sends 24 MB to B and to C at once: 12 GB/s each, both there after
// 2 ms; a third 24 MB to D starting at 1 ms shares the port three ways
// (8 GB/s) until the first two end at 2.5 ms, then runs alone.
func TestFlowTimes(t *testing.T) {
	const mb = 24_000_000
	lat := 5 * time.Microsecond
	c := &Cluster{Link: Link{GBps: 24, Latency: lat, PortGBps: 24}}
	s := flowSim(c)
	got := map[core.DeviceID]time.Duration{}
	for _, d := range []core.DeviceID{"B", "C"} {
		s.send("A", d, mb, 0, "x", -1, func(at time.Duration) { got[d] = at })
	}
	// Run to 1 ms (the first send's lone completion there is superseded),
	// then start the third.
	for s.q.Len() > 0 && s.q[0].t <= time.Millisecond {
		e := s.q.pop()
		s.flowsDone(e.version, e.t)
	}
	if len(got) != 0 || len(s.flows) != 2 {
		t.Fatalf("by 1 ms: %d transfers there, %d flows; want 0 and 2", len(got), len(s.flows))
	}
	s.send("A", "D", mb, time.Millisecond, "x", -1, func(at time.Duration) { got["D"] = at })
	s.drain(t)
	// B, C: 12 MB each by 1 ms, then 12 MB at 8 GB/s: 1.5 ms more.
	// D: 12 MB by 2.5 ms at 8 GB/s, 12 MB alone at 24 GB/s: 0.5 ms more.
	want := map[core.DeviceID]time.Duration{"B": 2500 * time.Microsecond, "C": 2500 * time.Microsecond, "D": 3 * time.Millisecond}
	for d, w := range want {
		if diff := got[d] - (w + lat); diff < -time.Nanosecond || diff > time.Nanosecond {
			t.Errorf("transfer to %s there at %v, want %v", d, got[d], w+lat)
		}
	}
	if len(s.res.Trace.Events) != 3 || s.res.BytesMoved != 3*mb {
		t.Errorf("traced %d transfers, %d bytes; want 3, %d", len(s.res.Trace.Events), s.res.BytesMoved, 3*mb)
	}
}

// TestFlowFIFOWithoutPorts: a link without a port keeps one transfer at
// a time per ordered pair, the time known at once.
func TestFlowFIFOWithoutPorts(t *testing.T) {
	c := &Cluster{Link: Link{GBps: 10, Latency: time.Microsecond}}
	s := flowSim(c)
	s.cm = &CostModel{c: c}
	var at []time.Duration
	for range 2 {
		s.send("A", "B", 10_000, 0, "x", -1, func(t time.Duration) { at = append(at, t) })
	}
	if s.q.Len() != 0 || len(s.flows) != 0 {
		t.Fatalf("a FIFO link made flows or events")
	}
	if want := []time.Duration{2 * time.Microsecond, 4 * time.Microsecond}; len(at) != 2 || at[0] != want[0] || at[1] != want[1] {
		t.Errorf("FIFO transfers there at %v, want %v", at, want)
	}
}

// TestFlowBackInTime: a transfer dated before the flows' clock is an
// internal error, not bandwidth taken back in time.
func TestFlowBackInTime(t *testing.T) {
	s := flowSim(&Cluster{Link: Link{GBps: 24, PortGBps: 24}})
	s.send("A", "B", 1000, time.Millisecond, "x", -1, func(time.Duration) {})
	s.send("A", "C", 1000, 0, "y", -1, func(time.Duration) { t.Error("the back-dated transfer ran") })
	if s.err == nil {
		t.Fatal("a transfer before the clock was accepted")
	}
}

// TestFlowDemandFirst: a demanded flow takes its ports' bandwidth before
// the others, which share what it leaves. A sends 24 MB to B, C and D
// and E 24 MB to D, all at 0: A's port gives 8 GB/s to each of its three
// and D's port the 16 GB/s left to E's. At 0.5 ms (4 MB of each of A's
// through, 8 MB of E's) a task starts waiting for A's value to D: it
// runs alone at 24 GB/s, there at 1.33 ms, and every other flow stops
// (its ports are full); then E's runs at 24 GB/s (16 MB: 2 ms) and
// A's to B and C at 12 GB/s each (20 MB: 3 ms).
func TestFlowDemandFirst(t *testing.T) {
	const mb = 24_000_000
	lat := 5 * time.Microsecond
	s := flowSim(&Cluster{Link: Link{GBps: 24, Latency: lat, PortGBps: 24}, DemandFirst: true})
	got := map[string]time.Duration{}
	var toD *flow
	for _, p := range [][2]core.DeviceID{{"A", "B"}, {"A", "C"}, {"A", "D"}, {"E", "D"}} {
		name := string(p[0] + p[1])
		f := s.send(p[0], p[1], mb, 0, name, -1, func(at time.Duration) { got[name] = at })
		if name == "AD" {
			toD = f
		}
	}
	rates := func() []float64 {
		var r []float64
		for _, f := range s.flows {
			r = append(r, f.rate)
		}
		return r
	}
	if r := rates(); !slices.Equal(r, []float64{8, 8, 8, 16}) {
		t.Fatalf("rates before the demand %v GB/s, want [8 8 8 16]", r)
	}
	for s.q.Len() > 0 && s.q[0].t <= 500*time.Microsecond {
		e := s.q.pop()
		s.flowsDone(e.version, e.t)
	}
	s.demand(toD, 500*time.Microsecond)
	s.demand(toD, 500*time.Microsecond) // once is enough: no change
	if r := rates(); !slices.Equal(r, []float64{0, 0, 24, 0}) {
		t.Fatalf("rates with A's flow to D demanded %v GB/s, want [0 0 24 0]", r)
	}
	s.drain(t)
	want := map[string]time.Duration{"AD": 1333333 * time.Nanosecond, "ED": 2 * time.Millisecond, "AB": 3 * time.Millisecond, "AC": 3 * time.Millisecond}
	for name, w := range want {
		if diff := got[name] - (w + lat); diff < -2*time.Nanosecond || diff > 2*time.Nanosecond {
			t.Errorf("%s there at %v, want %v", name, got[name], w+lat)
		}
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
}

// TestFlowDrainedBeforeDemand: a flow whose bytes are through, its end
// not yet handled, ends at that instant even when a flow demanded then
// takes its port's bandwidth. X (12 MB) and F (24 MB) share A's
// 24 GB/s port: X is through at 1 ms, when F is demanded before X's end
// is handled; F's other 12 MB then run alone (1.5 ms).
func TestFlowDrainedBeforeDemand(t *testing.T) {
	lat := 5 * time.Microsecond
	s := flowSim(&Cluster{Link: Link{GBps: 24, Latency: lat, PortGBps: 24}, DemandFirst: true})
	got := map[string]time.Duration{}
	s.send("A", "B", 12_000_000, 0, "X", -1, func(at time.Duration) { got["X"] = at })
	f := s.send("A", "C", 24_000_000, 0, "F", -1, func(at time.Duration) { got["F"] = at })
	s.demand(f, time.Millisecond)
	s.drain(t)
	for name, w := range map[string]time.Duration{"X": time.Millisecond, "F": 1500 * time.Microsecond} {
		if diff := got[name] - (w + lat); diff < -2*time.Nanosecond || diff > 2*time.Nanosecond {
			t.Errorf("%s there at %v, want %v", name, got[name], w+lat)
		}
	}
}
