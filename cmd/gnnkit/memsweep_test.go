package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/internal/memsweep"
)

func TestParseMemSweep(t *testing.T) {
	for _, c := range []struct {
		in     string
		lo, hi int64
		n      int
		err    string
	}{
		{in: "200MiB:1GiB", lo: 200 << 20, hi: 1 << 30, n: 8},
		{in: "200MiB:1GiB:12", lo: 200 << 20, hi: 1 << 30, n: 12},
		{in: " 1KiB : 2KiB : 2 ", lo: 1 << 10, hi: 2 << 10, n: 2},
		{in: "1GiB", err: "want LO:HI"},
		{in: "1:2:3:4", err: "want LO:HI"},
		{in: "x:1GiB", err: "LO"},
		{in: "1MiB:y", err: "HI"},
		{in: "1MiB:2MiB:1", err: "from 2 to 64"},
		{in: "1MiB:2MiB:65", err: "from 2 to 64"},
		{in: "1MiB:2MiB:two", err: "from 2 to 64"},
		{in: "0:2MiB", err: "LO must be positive"},
		{in: "2MiB:2MiB", err: "HI must be above LO"},
		{in: "2MiB:1MiB", err: "HI must be above LO"},
		{in: "1MiB:2PiB", err: "at most"},
	} {
		sw, err := parseMemSweep(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one saying %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || sw != (memSweep{c.lo, c.hi, c.n}) {
			t.Errorf("%q: %+v, %v; want %d:%d:%d", c.in, sw, err, c.lo, c.hi, c.n)
		}
	}
}

// FuzzParseMemSweep: no input panics, and what is accepted gives caps
// from LO to HI, ascending, at most N, each as the table prints it read
// back (but LO and HI, as given).
func FuzzParseMemSweep(f *testing.F) {
	for _, s := range []string{"200MiB:1GiB", "1KiB:2KiB:2", "1:3:64", "1GiB", "::", "1e3:1e9:7", "1MiB:1.05MiB:3", "1GiB:1.0001GiB:5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sw, err := parseMemSweep(s)
		if err != nil {
			return
		}
		cs := sw.caps()
		if len(cs) < 2 || len(cs) > sw.n || cs[0] != sw.lo || cs[len(cs)-1] != sw.hi {
			t.Fatalf("%q: caps %v", s, cs)
		}
		for i := 1; i < len(cs); i++ {
			if cs[i] <= cs[i-1] {
				t.Fatalf("%q: caps %v not ascending", s, cs)
			}
		}
	})
}

func TestFillBest(t *testing.T) {
	rows := []memsweep.Row{
		{CapBytes: 1, Error: "no fit"},
		{CapBytes: 2, IterationMs: 30},
		{CapBytes: 3, IterationMs: 20},
		{CapBytes: 4, IterationMs: 25},                // slower than at cap 3
		{CapBytes: 5, IterationMs: 10, OverCap: true}, // over its cap: not reachable
		{CapBytes: 6, IterationMs: 20},                // a tie: the smaller cap keeps it
		{CapBytes: 7, IterationMs: 15},
	}
	memsweep.FillBest(rows)
	want := []struct {
		cap int64
		ms  float64
	}{{0, 0}, {2, 30}, {3, 20}, {3, 20}, {3, 20}, {3, 20}, {7, 15}}
	for i, w := range want {
		if rows[i].BestCapBytes != w.cap || rows[i].BestIterationMs != w.ms {
			t.Errorf("row %d: best %.0f ms at cap %d, want %.0f at %d", i, rows[i].BestIterationMs, rows[i].BestCapBytes, w.ms, w.cap)
		}
	}
	if got := smallerCap(rows[3]); !strings.Contains(got, "20 ms at") {
		t.Errorf("row 3 (25 ms, 20 at a smaller cap) says %q", got)
	}
	for _, i := range []int{0, 2, 5, 6} {
		if got := smallerCap(rows[i]); got != "-" {
			t.Errorf("row %d says %q, want -", i, got)
		}
	}
}

// TestPlanMemSweep: the sweep of GraphPipe's plans for uno on 8 A100s
// from a cap nothing fits to one the uncapped plan fits: the smallest
// cap gives the scheduler's no-fit message, every plan needs no more
// than its cap, the best so far never gets slower, and the text, the
// JSON and the plot agree.
func TestPlanMemSweep(t *testing.T) {
	args := []string{"plan", "--scheduler", "graphpipe", "--model", "uno", "--hidden", "256", "--sched-opt", "m=16", "--preset", "pcie-a100", "--devices", "8"}
	out, err := run(t, append(args, "--simulate", "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var r planReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	hi := core.FormatBytes(core.RoundUpShownBytes(r.Plan.Alternatives[0].NeedBytes)) // what the uncapped plan needs
	sweep := "1MiB:" + hi + ":6"
	plot := filepath.Join(t.TempDir(), "sweep.png")
	out, err = run(t, append(args, "--json", "--mem-sweep", sweep, "--sweep-plot", plot)...)
	if err != nil {
		t.Fatal(err)
	}
	var rep sweepReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	if len(rep.Rows) != 6 || rep.Plot != plot || rep.Scheduler != "graphpipe" {
		t.Fatalf("report %+v", rep)
	}
	if first := rep.Rows[0]; !strings.Contains(first.Error, "the smallest per-device memory that fits is about") || first.BestCapBytes != 0 {
		t.Errorf("1 MiB: %+v, want the no-fit message naming the memory that fits", first)
	}
	prevBest := 0.0
	for i, row := range rep.Rows {
		if row.Error != "" {
			continue
		}
		if row.NeedBytes > row.CapBytes || row.NeedBytes < row.PeakBytes || row.OverCap || row.Plan == "" {
			t.Errorf("row %d: %+v: want a plan that needs no more than its cap, and at least its peak", i, row)
		}
		if row.BestIterationMs > row.IterationMs || prevBest > 0 && row.BestIterationMs > prevBest {
			t.Errorf("row %d: best %.4f ms, its own %.4f, the row before's best %.4f", i, row.BestIterationMs, row.IterationMs, prevBest)
		}
		prevBest = row.BestIterationMs
	}
	if last := rep.Rows[5]; last.Error != "" || core.FormatBytes(last.CapBytes) != hi {
		t.Errorf("at %s, which the uncapped plan needs, the sweep found %+v", hi, last)
	}
	png, err := os.ReadFile(plot)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("the plot: %v, %d bytes", err, len(png))
	}
	text, err := run(t, append(args, "--mem-sweep", sweep)...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "memory sweep: graphpipe on pcie-a100 x8") || !strings.Contains(text, "faster at a smaller cap") ||
		!strings.Contains(text, "\n"+hi+"  ") || !strings.Contains(text, "no plan fits; from about ") {
		t.Errorf("the table:\n%s", text)
	}
}

// TestPlanMemSweepRefuses: what does not go with --mem-sweep is refused
// before any work, saying why.
func TestPlanMemSweepRefuses(t *testing.T) {
	base := []string{"plan", "--scheduler", "graphpipe", "--devices", "2"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mem-sweep", "1MiB:2MiB", "--device-mem", "1MiB"}, "--device-mem does not go with --mem-sweep"},
		{[]string{"--mem-sweep", "1MiB:2MiB", "--simulate", "--trace", "t.json"}, "--trace does not go with --mem-sweep"},
		{[]string{"--mem-sweep", "1MiB:2MiB", "--dot", "d.dot"}, "--dot does not go"},
		{[]string{"--mem-sweep", "1MiB:2MiB", "--write-cluster", "c.json"}, "--write-cluster does not go"},
		{[]string{"--sweep-plot", "p.png"}, "--sweep-plot needs --mem-sweep"},
		{[]string{"--mem-sweep", "2MiB:1MiB"}, "HI must be above LO"},
	} {
		_, err := run(t, append(base, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	_, err := run(t, "plan", "--scheduler", "cherry", "--mem-sweep", "1MiB:2MiB", "--measure")
	if err == nil || !strings.Contains(err.Error(), "--measure does not go with --mem-sweep") || !strings.Contains(err.Error(), "--profile FILE") {
		t.Errorf("cherry with --measure: %v", err)
	}
}
