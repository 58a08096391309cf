package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
	"github.com/gnnkit/gnnkit/sim"
)

// TestSimulatedSmoke runs both simulated tables on a small uno-like model
// over 4 devices and draws the plots: every scheduler plans, every plan
// validates and simulates, and the summaries carry what the plots draw.
func TestSimulatedSmoke(t *testing.T) {
	c := config{
		models:  []model{{"uno", 2, core.ModelConfig{InDim: 256, Hidden: 256, Classes: 2, Layers: 2, Branches: 2}, ""}},
		devices: []int{4}, preset: "pcie-a100", ports: true, samples: 1024, m: 4, capFrac: 1.5, piper: true,
	}
	var out bytes.Buffer
	fixed, capped, err := simulated(&out, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| uno-2 | 4 | device's | graphpipe |", "| uno-2 | 4 | device's | 1f1b |", "| uno-2 | 4 | device's | gpipe |", "| uno-2 | 4 | device's | 1f1b-piper |", "vs best chain (1F1B, GPipe or Piper's 1F1B)",
		"memory-capped", "GraphPipe's busiest device computing"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if len(fixed) != 1 || len(capped) != 1 {
		t.Fatalf("%d fixed and %d capped summaries, want 1 and 1", len(fixed), len(capped))
	}
	if fixed[0].headroomM == 0 || capped[0].headroomM != 0 {
		t.Errorf("bound at m: fixed %v, capped %v; want it in the fixed table only", fixed[0].headroomM, capped[0].headroomM)
	}
	if fixed[0].headroomGP != 0 || capped[0].headroomGP == 0 {
		t.Errorf("bound at GraphPipe's m: fixed %v, capped %v; want it in the capped table only", fixed[0].headroomGP, capped[0].headroomGP)
	}
	for _, s := range append(fixed, capped...) {
		t.Logf("held under the 1F1B chain's peak: %.2fx, %d vs %d bytes (%s)", s.iso, s.isoPeak, s.peak1F1B, s.isoWhat)
		// GraphPipe plans over a space holding the chains; its simulated
		// choice may lose a little to GPipe's order, not much.
		if s.vsAll < 0.9 || s.vs1f1b < 0.9 {
			t.Errorf("%+v: GraphPipe at %.2fx the best chain, %.2fx the 1F1B chain", s, s.vsAll, s.vs1f1b)
		}
		if s.headroom < s.vsAll*(1-1e-9) {
			t.Errorf("%+v: GraphPipe beats the compute bound", s)
		}
		if s.headroomM != 0 && (s.headroomM < s.vsAll*(1-1e-9) || s.headroomM > s.headroom*(1+1e-9)) {
			t.Errorf("%+v: the bound at m is beaten or looser than the whole batch's", s)
		}
		if s.headroomGP != 0 && s.headroomGP < s.vsAll*(1-1e-9) {
			t.Errorf("%+v: GraphPipe beats the bound at its own m", s)
		}
		if s.busy <= 0 || s.busy > 1 || s.peakGP <= 0 || s.peak1F1B <= 0 {
			t.Errorf("%+v: busy share or peaks out of range", s)
		}
		// Held under the 1F1B chain's peak, GraphPipe's plan is lighter
		// than that chain's and within the bound.
		if s.iso > 0 && (s.isoPeak <= 0 || s.isoPeak >= s.peak1F1B || s.iso > s.headroom*(1+1e-9) || s.isoWhat == "") {
			t.Errorf("%+v: GraphPipe held under the 1F1B chain's peak out of range", s)
		}
	}
	dir := filepath.Join(t.TempDir(), "plots")
	files, err := writePlots(dir, c, fixed, capped)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Errorf("%d plots, want 3: %v", len(files), files)
	}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(fh)
		fh.Close()
		if err != nil || cfg.Width < 400 {
			t.Errorf("%s: %v, %dx%d", f, err, cfg.Width, cfg.Height)
		}
	}
}

// TestSimulatedMSearched: -m 0 has every scheduler search m at the
// devices' own memory; the table says so and its summary gives each
// scheduler's m, not a bound at a fixed m. The bounds count the
// optimizer steps, so a step-bound model's bound stays finite.
func TestSimulatedMSearched(t *testing.T) {
	c := config{
		models:  []model{{"dlrm", 2, core.ModelConfig{InDim: 4, Hidden: 16, Classes: 2, Layers: 2, Branches: 2, TableRows: 100_000}, "dlrm-2 (10⁵×16)"}},
		devices: []int{4}, preset: "pcie-a100", ports: true, samples: 512, m: 0,
	}
	var out bytes.Buffer
	fixed, capped, err := simulated(&out, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"m searched by every scheduler", "(simulated, m searched):", "| m: graphpipe / 1f1b / gpipe |", "| dlrm-2 (10⁵×16) | 4 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if len(fixed) != 1 || len(capped) != 0 {
		t.Fatalf("%d and %d summaries, want 1 and 0", len(fixed), len(capped))
	}
	s := fixed[0]
	if s.headroomM != 0 || s.ms[0] == 0 || s.ms[1] == 0 {
		t.Errorf("%+v: want no bound at a fixed m and every scheduler's m", s)
	}
	if s.headroomGP < s.vsAll*(1-1e-9) {
		t.Errorf("%+v: GraphPipe beats the bound at its own m (%.3fx)", s, s.headroomGP)
	}
	t.Logf("GraphPipe %.2fx the best chain, bound %.2fx", s.vsAll, s.headroom)
	// 3.74x with the steps; the op work alone would allow 5.65x.
	if !(s.headroom >= s.vsAll*(1-1e-9) && s.headroom < 5) {
		t.Errorf("%+v: the bound (with the steps) is %.2fx", s, s.headroom)
	}
}

func TestSeries(t *testing.T) {
	names, by := series([]summary{{name: "a", devices: 4}, {name: "b", devices: 4}, {name: "a", devices: 8}})
	if strings.Join(names, ",") != "a,b" || len(by["a"]) != 2 || by["a"][1].devices != 8 || len(by["b"]) != 1 {
		t.Errorf("names %v, by %v", names, by)
	}
}

func TestGoal(t *testing.T) {
	for _, c := range []struct {
		s    summary
		want string
	}{
		{summary{vsAll: 1.4, peakGP: 100, peak1F1B: 200}, "yes"},
		{summary{vsAll: 1.2994, peakGP: 100, peak1F1B: 200}, "no: 1.299x"},
		{summary{vsAll: 1.4, peakGP: 300, peak1F1B: 200, disjoint: 1.31, peakDisjoint: 150}, "with disjoint stages"},
		{summary{vsAll: 1.4, peakGP: 300, peak1F1B: 200, disjoint: 1.29, peakDisjoint: 150}, "no: 300 B vs 200 B"},
		{summary{vsAll: 1.4, peakGP: 200, peak1F1B: 200}, "no: 200 B vs 200 B"},
		{summary{}, "- (no chain plan)"},
		{summary{vsAll: 1.29996, peakGP: 100, peak1F1B: 200}, "no: 1.299x"},
		{summary{vsAll: 1.4, peakGP: 100}, "no 1F1B chain plan to compare peaks with"},
		{summary{vsAll: 1.4, peakGP: 300, peak1F1B: 200, alt: 1.32999, altPeak: 150, altWhat: "dag, 4 stages", disjoint: 1.31, peakDisjoint: 150},
			"by another plan of the same search: 1.329x, 150 B (dag, 4 stages)"},
		{summary{vsAll: 1.4, peakGP: 300, peak1F1B: 200, iso: 1.35, isoPeak: 190, isoWhat: "dag, 5 stages", alt: 1.33, altPeak: 150, altWhat: "dag, 4 stages"},
			"held under the 1F1B chain's peak: 1.350x, 190 B (dag, 5 stages)"},
		{summary{vsAll: 1.4, peakGP: 300, peak1F1B: 200, iso: 1.29, isoPeak: 190, isoWhat: "dag, 5 stages"}, "no: 300 B vs 200 B"},
	} {
		if got := c.s.goal(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.s, got, c.want)
		}
	}
}

// TestHeldUnderUnlimited: on a cluster whose devices have no memory cap
// (the cpu preset: MemBytes 0), holding GraphPipe under a limit still
// caps every device: a limit nothing fits under gives no plan, and a
// plan found under a limit peaks below it.
func TestHeldUnderUnlimited(t *testing.T) {
	cfg := core.ModelConfig{InDim: 64, Hidden: 64, Classes: 2, Layers: 2, Branches: 2}
	mod, err := core.BuildModel("uno", cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := core.Undirected(256, nil, nil)
	batch := make([]int32, 256)
	for i := range batch {
		batch[i] = int32(i)
	}
	cl, err := sim.Preset("cpu", 2)
	if err != nil {
		t.Fatal(err)
	}
	if cl.Devices[0].MemBytes != 0 {
		t.Fatalf("cpu preset: memory %d, want 0 (unlimited)", cl.Devices[0].MemBytes)
	}
	w := core.NewWorkload(mod, g, cfg.InDim, batch, cl.Infos(), 1)
	prof, err := sim.Roofline(w, cl.Devices[0])
	if err != nil {
		t.Fatal(err)
	}
	iter, _, what, err := heldUnder(mod, g, cfg.InDim, batch, graphpipe.Scheduler{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: 4, Cluster: cl, Profile: prof}, 1)
	if err != nil || iter != 0 || what != "" {
		t.Errorf("held under 1 byte: %v, %q, %v; want no plan", iter, what, err)
	}
	const limit = 64 << 20
	iter, peak, what, err := heldUnder(mod, g, cfg.InDim, batch, graphpipe.Scheduler{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: 4, Cluster: cl, Profile: prof}, limit)
	if err != nil || iter <= 0 || peak <= 0 || peak >= limit || what == "" {
		t.Errorf("held under %d bytes: %v, peak %d, %q, %v", limit, iter, peak, what, err)
	}
	if cl.Devices[0].MemBytes != 0 {
		t.Errorf("heldUnder changed the caller's cluster")
	}
}
