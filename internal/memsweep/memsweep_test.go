package memsweep_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/internal/memsweep"
	_ "github.com/gnnkit/gnnkit/models"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
	"github.com/gnnkit/gnnkit/sim"
)

func TestCaps(t *testing.T) {
	const lo, hi = 200 << 20, 480 << 20
	cs := memsweep.Caps(lo, hi, 12)
	if len(cs) != 12 || cs[0] != lo || cs[11] != hi {
		t.Fatalf("caps %v", cs)
	}
	for i, c := range cs[1:11] {
		// Each cap between reads back from its printed size.
		back, err := core.ParseBytes(core.FormatBytes(c))
		if err != nil || back != c {
			t.Errorf("cap %d, %d B, prints as %s, which reads back as %d", i+1, c, core.FormatBytes(c), back)
		}
		// Geometric: each step about (480/200)^(1/11) = 1.083.
		if r := float64(c) / float64(cs[i]); r < 1.07 || r > 1.10 {
			t.Errorf("cap %d / cap %d = %.3f, want about 1.083", i+1, i, r)
		}
	}
	for _, c := range []struct {
		name   string
		lo, hi int64
		n      int
		want   []int64
	}{
		// Caps between that round up to hi or past it are dropped: hi
		// is last (the fuzzer's "1MiB:1.05MiB:3" swept 1.0 and 1.1 MiB).
		{"rounded past hi", 1 << 20, 1101005, 3, []int64{1 << 20, 1101005}},
		// A range of fewer whole bytes than caps asked for.
		{"fewer bytes than caps", 10, 12, 8, []int64{10, 11, 12}},
		{"two", 1 << 30, 2 << 30, 2, []int64{1 << 30, 2 << 30}},
	} {
		if got := memsweep.Caps(c.lo, c.hi, c.n); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: Caps(%d, %d, %d) = %v, want %v", c.name, c.lo, c.hi, c.n, got, c.want)
		}
	}
}

func TestCapText(t *testing.T) {
	for _, c := range []struct {
		in   int64
		want string
	}{
		{300000, "293.0 KiB (300000 B)"}, // reads back as 300032 B: the bytes too
		{200 << 20, "200.0 MiB"},
		{1 << 30, "1.0 GiB"},
	} {
		if got := memsweep.CapText(c.in); got != c.want {
			t.Errorf("CapText(%d) = %q, want %q", c.in, got, c.want)
		}
	}
}

// rows are a sweep's results as Run leaves them, before FillBest.
func rows() []memsweep.Row {
	return []memsweep.Row{
		{CapBytes: 1, Error: "no fit"},
		{CapBytes: 2, IterationMs: 30, PeakBytes: 2},
		{CapBytes: 3, IterationMs: 20, PeakBytes: 3},
		{CapBytes: 4, IterationMs: 25, PeakBytes: 3},                // slower than at cap 3
		{CapBytes: 5, IterationMs: 10, PeakBytes: 6, OverCap: true}, // over its cap: not reachable
		{CapBytes: 6, IterationMs: 20, PeakBytes: 2},                // a tie, lighter
		{CapBytes: 7, IterationMs: 15, PeakBytes: 7},
	}
}

func TestFillBest(t *testing.T) {
	rs := rows()
	memsweep.FillBest(rs)
	want := []struct {
		cap int64
		ms  float64
	}{{0, 0}, {2, 30}, {3, 20}, {3, 20}, {3, 20}, {3, 20}, {7, 15}} // ties: the smaller cap
	for i, w := range want {
		if rs[i].BestCapBytes != w.cap || rs[i].BestIterationMs != w.ms {
			t.Errorf("row %d: best %.0f ms at cap %d, want %.0f at %d", i, rs[i].BestIterationMs, rs[i].BestCapBytes, w.ms, w.cap)
		}
	}
}

func TestFastest(t *testing.T) {
	rs := rows()
	for _, c := range []struct {
		below   int64
		wantCap int64 // 0: none
	}{
		{0, 7},  // the fastest that fits
		{7, 6},  // under 7 B: 20 ms, the lighter of the two
		{3, 6},  // under 3 B: the 20 ms plan at 2 B
		{2, 0},  // nothing under 2 B
		{-1, 7}, // no bound
	} {
		got := memsweep.Fastest(rs, c.below)
		switch {
		case c.wantCap == 0 && got != nil:
			t.Errorf("Fastest(below %d) = cap %d, want none", c.below, got.CapBytes)
		case c.wantCap != 0 && (got == nil || got.CapBytes != c.wantCap):
			t.Errorf("Fastest(below %d) = %+v, want cap %d", c.below, got, c.wantCap)
		}
	}
}

// uno plans a 4-branch uno on n simulated A100s for the sweep, with the
// 1F1B chain at m micro-batches planning on the cluster it returns.
func uno(t testing.TB, n, m int) (*graphpipe.Scheduler, *core.Workload, *sim.Cluster, *sim.Profile) {
	t.Helper()
	mod, err := core.BuildModel("uno", core.ModelConfig{InDim: 1024, Hidden: 512, Classes: 2, Layers: 2, Branches: 4})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := core.Undirected(1024, nil, nil)
	batch := make([]int32, 1024)
	for i := range batch {
		batch[i] = int32(i)
	}
	cl, err := sim.Preset("pcie-a100", n)
	if err != nil {
		t.Fatal(err)
	}
	w := core.NewWorkload(mod, g, 1024, batch, cl.Infos(), 1)
	prof, err := sim.Roofline(w, cl.Devices[0])
	if err != nil {
		t.Fatal(err)
	}
	return &graphpipe.Scheduler{Kind: graphpipe.OneFOneB, MicroBatches: m, Cluster: cl, Profile: prof}, w, cl, prof
}

func TestRun(t *testing.T) {
	s, w, cl, prof := uno(t, 4, 8)
	caps := memsweep.Caps(1<<20, 4<<30, 6)
	done := 0
	rs, err := memsweep.Run(context.Background(), s, w, cl, prof, caps, func() { done++ })
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(caps) || done != len(caps) {
		t.Fatalf("%d rows, %d progress calls, for %d caps", len(rs), done, len(caps))
	}
	// The smallest cap fits nothing: the scheduler's no-fit error, with
	// its figure, kept whole for its type.
	var nf *graphpipe.NoFitError
	if rs[0].Fits() || !errors.As(rs[0].Err, &nf) || nf.Need <= caps[0] || rs[0].Error == "" {
		t.Errorf("cap %s: %+v, want a no-fit error naming more memory", core.FormatBytes(caps[0]), rs[0])
	}
	fits := 0
	for i, r := range rs {
		if !r.Fits() {
			continue
		}
		fits++
		if r.PeakBytes <= 0 || r.PeakBytes > r.CapBytes || r.NeedBytes < r.PeakBytes || r.IterationMs <= 0 || r.Plan == "" {
			t.Errorf("row %d: %+v", i, r)
		}
		if r.BestIterationMs > r.IterationMs || r.BestCapBytes > r.CapBytes {
			t.Errorf("row %d: best %.4g ms at %d, its own %.4g ms at %d", i, r.BestIterationMs, r.BestCapBytes, r.IterationMs, r.CapBytes)
		}
	}
	if fits < 3 {
		t.Errorf("%d of %d caps fit a plan, want the larger ones", fits, len(caps))
	}
	// The sweep's rows are the scheduler's searches: the largest cap's
	// is the plain search at that memory.
	last := rs[len(rs)-1]
	plan, err := s.Schedule(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Simulate(plan, w, prof, cl)
	if err != nil {
		t.Fatal(err)
	}
	if ms := float64(res.Iteration) / 1e6; ms != last.IterationMs {
		t.Errorf("the plain search at %s simulates %.6g ms, the sweep's row %.6g", core.FormatBytes(last.CapBytes), ms, last.IterationMs)
	}
	if f := memsweep.Fastest(rs, 0); f == nil || f.IterationMs != last.BestIterationMs {
		t.Errorf("Fastest = %+v, the last row's best %.4g ms", f, last.BestIterationMs)
	}
	// A cancelled context ends the sweep with its error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := memsweep.Run(ctx, s, w, cl, prof, caps, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled sweep: %v", err)
	}
}

// A sweep of the 1F1B chain's plans against memory on four simulated
// A100s: at each cap the fastest plan the search finds there.
func ExampleRun() {
	mod, _ := core.BuildModel("uno", core.ModelConfig{InDim: 1024, Hidden: 512, Classes: 2, Layers: 2, Branches: 4})
	g, _ := core.Undirected(1024, nil, nil)
	batch := make([]int32, 1024)
	for i := range batch {
		batch[i] = int32(i)
	}
	cl, _ := sim.Preset("pcie-a100", 4)
	w := core.NewWorkload(mod, g, 1024, batch, cl.Infos(), 1)
	prof, _ := sim.Roofline(w, cl.Devices[0])
	s := &graphpipe.Scheduler{Kind: graphpipe.OneFOneB, MicroBatches: 8, Cluster: cl, Profile: prof}
	rows, err := memsweep.Run(context.Background(), s, w, cl, prof, memsweep.Caps(16<<20, 64<<20, 3), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range rows {
		if !r.Fits() {
			fmt.Printf("%s: no plan\n", core.FormatBytes(r.CapBytes))
			continue
		}
		fmt.Printf("%s: %.3f ms, peak %s\n", core.FormatBytes(r.CapBytes), r.IterationMs, core.FormatBytes(r.PeakBytes))
	}
	// Output:
	// 16.0 MiB: no plan
	// 32.0 MiB: 3.511 ms, peak 30.5 MiB
	// 64.0 MiB: 3.445 ms, peak 34.3 MiB
}
