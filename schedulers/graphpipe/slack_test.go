package graphpipe

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// slackCand is a simulated candidate of the given iteration (µs), peak
// (MiB) and devices, over memory with over.
func slackCand(us, mib int64, devs int, over bool) *candidate {
	res := &sim.Result{Iteration: time.Duration(us) * time.Microsecond, PeakMem: map[core.DeviceID]int64{}}
	for i := range devs {
		res.PeakMem[core.DeviceID(fmt.Sprintf("cuda:%d", i))] = mib << 20
	}
	if over {
		res.OverCap = []core.DeviceID{"cuda:0"}
	}
	p := &core.Plan{Metrics: map[string]float64{"stages": 1, "depth": 1}}
	for i := range devs {
		p.Tasks = append(p.Tasks, core.Task{Device: core.DeviceID(fmt.Sprintf("cuda:%d", i))})
	}
	return &candidate{from: fmt.Sprintf("dag %d/%d", us, mib), m: 4, plan: p, res: res}
}

// TestLightestWithin: Scheduler.Slack's choice among simulated plans:
// the lightest within (1+slack) of the fastest; equal peaks go to the
// faster; a plan over memory never; a fastest over memory stays.
func TestLightestWithin(t *testing.T) {
	fastest := slackCand(100000, 500, 4, false)
	b := slackCand(100500, 300, 4, false) // +0.5%
	f := slackCand(100200, 300, 4, false) // +0.2%, as light as b
	c := slackCand(101000, 250, 4, false) // +1%
	d := slackCand(101500, 100, 4, true)  // +1.5%, over memory
	e := slackCand(102000, 200, 4, false) // +2%
	sims := []*candidate{b, fastest, f, c, d, e}
	for _, tc := range []struct {
		slack float64
		want  *candidate
	}{
		{0, fastest},
		{0.001, fastest},
		{0.002, f},
		{0.006, f}, // b is as light, and slower
		{0.01, c},
		{0.019, c}, // d is lighter but over memory
		{0.02, e},
		{0.5, e},
	} {
		if got := lightestWithin(sims, fastest, tc.slack); got != tc.want {
			t.Errorf("slack %v: chose %s, want %s", tc.slack, got.from, tc.want.from)
		}
	}
	if over := slackCand(99000, 50, 1, true); lightestWithin(sims, over, 0.5) != over {
		t.Error("a fastest over memory was traded: nothing fits, the caller reports it")
	}
	// The alternatives: the chosen, then the faster plans it passed
	// over (each lighter than every faster one: b, as heavy as f, is
	// not), then the lighter (d is over memory).
	front := func(sims []*candidate, best, fastest *candidate, want ...*candidate) {
		t.Helper()
		got := paretoFront(sims, best, fastest)
		if len(got) != len(want) {
			t.Fatalf("front %+v, want %d entries", got, len(want))
		}
		for i, w := range want {
			if !strings.Contains(got[i].Description, w.from) || got[i].Chosen != (i == 0) {
				t.Errorf("entry %d: %+v, want %s (chosen %v)", i, got[i], w.from, i == 0)
			}
		}
	}
	front(sims, c, fastest, c, fastest, f, e)
	// A fastest that ties the chosen's time (better2 took it for its
	// fewer devices) is still listed as passed over.
	tie := slackCand(100000, 400, 8, false)
	few := slackCand(100000, 500, 2, false)
	if got := lightestWithin([]*candidate{tie, few}, few, 0.01); got != tie {
		t.Fatalf("slack 1%%: chose %s, want the lighter plan of the same time", got.from)
	}
	front([]*candidate{tie, few}, tie, few, tie, few)
}

// TestSlackOption: the registry's slack option reads a fraction or a
// percentage and refuses the rest with what it wants.
func TestSlackOption(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want float64
		ok   bool
	}{
		{"0.01", 0.01, true}, {"1%", 0.01, true}, {" 2.5 % ", 0.025, true}, {"0", 0, true},
		{"-0.1", 0, false}, {"1", 0, false}, {"150%", 0, false}, {"NaN", 0, false}, {"Inf", 0, false}, {"lots", 0, false}, {"", 0, false},
	} {
		s, err := core.NewScheduler("1f1b", map[string]string{"slack": tc.v})
		if !tc.ok {
			if err == nil || !strings.Contains(err.Error(), "slack") || !strings.Contains(err.Error(), "fraction") && !strings.Contains(err.Error(), "below 1") {
				t.Errorf("slack=%q: %v, want an error saying what slack takes", tc.v, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("slack=%q: %v", tc.v, err)
			continue
		}
		if got := s.(*Scheduler).Slack; got < tc.want-1e-12 || got > tc.want+1e-12 {
			t.Errorf("slack=%q: Slack %v, want %v", tc.v, got, tc.want)
		}
	}
	// Set in Go, the field is checked where the search would read it.
	for _, v := range []float64{-0.01, 1, math.NaN(), math.Inf(1)} {
		_, err := (&Scheduler{Slack: v}).Schedule(context.Background(), &core.Workload{})
		if err == nil || !strings.Contains(err.Error(), "Slack") {
			t.Errorf("Slack %v: %v, want an error saying what Slack takes", v, err)
		}
	}
}

// TestSlack: on a benchmark cell (uno-4 on 32 A100s, m = 16), GraphPipe
// with 1% slack takes a plan at least as light as without, within 1% of
// that plan's time, and says what it passed over; without slack the
// plan is the fastest its search simulated.
func TestSlack(t *testing.T) {
	if testing.Short() {
		t.Skip("searches uno-4 on 32 A100s twice (seconds)")
	}
	w, cl, prof := rooflineWorkload(t, "uno", core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}, 8192, 32)
	plan := func(slack float64) *core.Plan {
		p, err := (&Scheduler{Graph: true, Kind: OneFOneB, MicroBatches: 16, Cluster: cl, Profile: prof, Slack: slack}).Schedule(context.Background(), w)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	fast, light := plan(0), plan(0.01)
	peak := func(p *core.Plan) int64 { return p.Alternatives[0].PeakBytes }
	ms := func(p *core.Plan) float64 { return p.Metrics["simulated_iteration_ms"] }
	t.Logf("slack 0: %.3f ms, %s (%s); 1%%: %.3f ms, %s (%s)", ms(fast), core.FormatBytes(peak(fast)), fast.Alternatives[0].Description,
		ms(light), core.FormatBytes(peak(light)), light.Alternatives[0].Description)
	if _, ok := fast.Metrics["slack_chosen"]; ok {
		t.Errorf("without slack the plan says slack_chosen")
	}
	for _, a := range fast.Alternatives[1:] {
		if a.IterationMs < ms(fast) {
			t.Errorf("without slack an alternative is faster than the chosen: %+v", a)
		}
	}
	if light.Metrics["slack_chosen"] != 1 {
		t.Fatalf("1%% slack kept the fastest plan (%.3f ms, %s); this cell has a plan 0.5%% slower and 35%% lighter", ms(light), core.FormatBytes(peak(light)))
	}
	if got, want := light.Metrics["fastest_iteration_ms"], ms(fast); got != want {
		t.Errorf("fastest_iteration_ms %v, want the plan without slack's %v", got, want)
	}
	if got, want := int64(light.Metrics["fastest_peak_bytes"]), peak(fast); got != want {
		t.Errorf("fastest_peak_bytes %v, want %v", got, want)
	}
	if ms(light) > ms(fast)*1.01 || peak(light) >= peak(fast) {
		t.Errorf("1%% slack: %.3f ms, %d B against %.3f ms, %d B: want within 1%% and lighter", ms(light), peak(light), ms(fast), peak(fast))
	}
	if a := light.Alternatives; len(a) < 2 || a[1].IterationMs != ms(fast) || a[1].PeakBytes != peak(fast) {
		t.Errorf("alternatives %+v: want the fastest plan passed over listed right after the chosen", a)
	}
	// Sampled training rebuilds a kept choice: the plan still says what
	// the search passed over (train averages the metrics over its
	// iterations), and another slack is another search, not the choice
	// kept under the first.
	s := &Scheduler{Graph: true, Kind: OneFOneB, MicroBatches: 16, Cluster: cl, Profile: prof, Slack: 0.01, reuse: &searchReuse{}}
	for i := range 2 {
		p, err := s.Schedule(context.Background(), w)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Metrics["search_reused"]; got != float64(i) {
			t.Errorf("call %d: search_reused %v, want %d", i, got, i)
		}
		for _, k := range []string{"slack_chosen", "fastest_iteration_ms", "fastest_peak_bytes", "simulated_iteration_ms"} {
			if p.Metrics[k] != light.Metrics[k] {
				t.Errorf("call %d: %s %v, want %v", i, k, p.Metrics[k], light.Metrics[k])
			}
		}
	}
	s.Slack = 0
	p, err := s.Schedule(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if p.Metrics["search_reused"] != 0 || p.Metrics["slack_chosen"] != 0 || ms(p) != ms(fast) {
		t.Errorf("slack 0 after 1%% on the same shape: %.3f ms, metrics %v; want a search of its own, the fastest plan (%.3f ms)", ms(p), p.Metrics, ms(fast))
	}
}
