package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/internal/memsweep"
)

func TestSweptCaps(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name   string
		peaks  []int64
		mem    int64
		n      int
		lo, hi int64 // the first and last cap; 0: none
	}{
		{"half the lightest to four times the heaviest", []int64{400 * mib, 300 * mib, 500 * mib}, 40 << 30, 8, 150 * mib, 2000 * mib},
		{"the devices' memory bounds it, and is left out", []int64{400 * mib, 500 * mib}, 1000 * mib, 6, 200 * mib, 0},
		{"no plan fits", nil, 40 << 30, 8, 0, 0},
		{"a peak at the memory", []int64{8}, 4, 8, 0, 0},
	} {
		caps := sweptCaps(c.peaks, c.mem, c.n)
		if c.lo == 0 {
			if len(caps) != 0 {
				t.Errorf("%s: %v, want none", c.name, caps)
			}
			continue
		}
		if len(caps) == 0 || caps[0] != c.lo || caps[len(caps)-1] >= c.mem || c.hi > 0 && caps[len(caps)-1] != c.hi {
			t.Errorf("%s: %v, want %d to %d under %d", c.name, caps, c.lo, c.hi, c.mem)
		}
		if c.hi == 0 && len(caps) != c.n-1 {
			t.Errorf("%s: %d caps, want %d (the last, the memory, left out)", c.name, len(caps), c.n-1)
		}
	}
}

// TestSweptSmoke sweeps a small uno on 4 devices, at a fixed m and
// memory-capped: every scheduler plans at the devices' memory and at
// the caps below it, its swept plan is its fastest, and the goal is read
// on the swept plans.
func TestSweptSmoke(t *testing.T) {
	c := config{
		models:  []model{{"uno", 2, core.ModelConfig{InDim: 256, Hidden: 256, Classes: 2, Layers: 2, Branches: 2}, ""}},
		devices: []int{4}, preset: "pcie-a100", ports: true, samples: 1024, m: 4, capFrac: 1.5,
	}
	for _, capFrac := range []float64{0, c.capFrac} {
		var heard []string
		cells, err := sweptTable(context.Background(), c, capFrac, 6, func(s string) { heard = append(heard, s) })
		if err != nil {
			t.Fatal(err)
		}
		if len(cells) != 1 || len(cells[0].scheds) != 3 || len(heard) != 3 {
			t.Fatalf("capFrac %v: %d cells, progress %v", capFrac, len(cells), heard)
		}
		cell := cells[0]
		if capFrac == 0 && cell.mem != 40<<30 || capFrac > 0 && cell.mem >= 40<<30 {
			t.Errorf("capFrac %v: memory %d", capFrac, cell.mem)
		}
		for i, s := range cell.scheds {
			if want := []string{"graphpipe", "1f1b", "gpipe"}[i]; s.name != want {
				t.Errorf("scheduler %d is %s, want %s", i, s.name, want)
			}
			if s.best == nil && i == 2 {
				// GPipe, every micro-batch in flight, fits no cap of the
				// capped table: each row says why.
				for _, r := range s.rows {
					if !strings.Contains(r.Error, "does not fit") {
						t.Errorf("gpipe at %d: %q, want a no-fit error", r.CapBytes, r.Error)
					}
				}
				continue
			}
			if s.plain == nil || s.best == nil || len(s.rows) != cell.caps || cell.caps < 3 {
				t.Fatalf("capFrac %v, %s: plain %v, best %v, %d rows of %d caps", capFrac, s.name, s.plain, s.best, len(s.rows), cell.caps)
			}
			// The devices' memory is the last cap, and its row the plain
			// search's.
			if last := s.rows[len(s.rows)-1]; last.CapBytes != cell.mem || s.plain != &s.rows[len(s.rows)-1] {
				t.Errorf("%s: the last cap is %d, want the memory %d", s.name, last.CapBytes, cell.mem)
			}
			if s.best.IterationMs > s.plain.IterationMs || s.best != memsweep.Fastest(s.rows, 0) {
				t.Errorf("%s: swept %.4g ms, plain %.4g", s.name, s.best.IterationMs, s.plain.IterationMs)
			}
			for j, r := range s.rows {
				if j > 0 && r.CapBytes <= s.rows[j-1].CapBytes {
					t.Errorf("%s: caps not ascending at row %d: %d after %d", s.name, j, r.CapBytes, s.rows[j-1].CapBytes)
				}
				if r.Fits() && r.PeakBytes > r.CapBytes {
					t.Errorf("%s at %d: peak %d over the cap", s.name, r.CapBytes, r.PeakBytes)
				}
			}
		}
		// GraphPipe's search holds the 1F1B chain's, at every cap.
		if gp, one := cell.scheds[0].best, cell.scheds[1].best; gp.IterationMs > one.IterationMs*(1+1e-9) {
			t.Errorf("capFrac %v: GraphPipe swept %.4g ms, the 1F1B chain %.4g", capFrac, gp.IterationMs, one.IterationMs)
		}
		// Its plot.
		p, err := sweptPlot("title", cells)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "swept.png")
		if err := save(p, file); err != nil {
			t.Fatal(err)
		}
		if fh, err := os.Open(file); err != nil {
			t.Error(err)
		} else {
			cfg, err := png.DecodeConfig(fh)
			fh.Close()
			if err != nil || cfg.Width < 400 {
				t.Errorf("%s: %v, %dx%d", file, err, cfg.Width, cfg.Height)
			}
		}
		var out bytes.Buffer
		printSwept(&out, "title", cells)
		row := fmt.Sprintf("| uno-2 | 4 | %s | %d |", core.FormatBytes(cell.mem), cell.caps)
		if !strings.Contains(out.String(), row) || !strings.Contains(out.String(), cell.goal()+" |") {
			t.Errorf("table lacks %q or the goal %q:\n%s", row, cell.goal(), out.String())
		}
	}
}

func TestSweptGoal(t *testing.T) {
	row := func(ms float64, peak int64) *memsweep.Row {
		return &memsweep.Row{CapBytes: peak + 1, IterationMs: ms, PeakBytes: peak, Plan: "p"}
	}
	cell := func(gp []memsweep.Row, oneF, gpipe *memsweep.Row) sweptCell {
		g := swept{name: "graphpipe", rows: gp, best: memsweep.Fastest(gp, 0)}
		return sweptCell{scheds: []swept{g, {name: "1f1b", best: oneF}, {name: "gpipe", best: gpipe}}}
	}
	for _, c := range []struct {
		name string
		cell sweptCell
		want string
	}{
		{"faster and lighter", cell([]memsweep.Row{*row(10, 90)}, row(13, 100), row(14, 80)), "yes"},
		{"GPipe's chain is the faster", cell([]memsweep.Row{*row(10, 90)}, row(14, 100), row(12.9, 80)), "no: 1.290x"},
		{"heavier, but a lighter plan of its sweep", cell([]memsweep.Row{*row(9, 120), *row(10, 90)}, row(13, 100), row(14, 80)), "under the 1F1B chain's peak: 1.300x"},
		{"heavier, and nothing lighter is fast enough", cell([]memsweep.Row{*row(9, 120), *row(11, 90)}, row(13, 100), row(14, 80)), "no: 120 B vs 100 B"},
		{"no chain", cell([]memsweep.Row{*row(9, 120)}, nil, nil), "- (no chain plan)"},
		{"no GraphPipe plan", cell(nil, row(13, 100), nil), "- (no GraphPipe plan)"},
		{"GPipe's chain alone, slower by 1.3x", cell([]memsweep.Row{*row(10, 90)}, nil, row(14, 80)), "no 1F1B chain plan to compare peaks with"},
		{"GPipe's chain alone, within 1.3x", cell([]memsweep.Row{*row(10, 90)}, nil, row(12, 80)), "no: 1.200x"},
	} {
		if got := c.cell.goal(); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %q, want %q…", c.name, got, c.want)
		}
	}
}
