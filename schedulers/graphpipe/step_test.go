package graphpipe

import (
	"math"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// paperDLRM is GraphPipe's DLRM (the authors' profiler defaults: four
// embedding tables of 10⁶ × 64, bottom MLP 4-64-64, top MLP 64-64-2)
// over 8192 samples on n simulated PCIe A100s, roofline-priced.
func paperDLRM(t *testing.T, n int) (*core.Workload, *sim.Cluster, *sim.Profile) {
	return dlrmOn(t, n, 4, 64, 1_000_000)
}

// dlrmOn is a DLRM of the given tables, width and rows per table (bottom
// MLP from 4 inputs) over 8192 samples on n simulated PCIe A100s.
func dlrmOn(t *testing.T, n, tables, hidden, rows int) (*core.Workload, *sim.Cluster, *sim.Profile) {
	t.Helper()
	w, cl := presetWorkload(t, "dlrm", core.ModelConfig{InDim: 4, Hidden: hidden, Classes: 2, Layers: 2, Branches: tables, TableRows: rows}, 8192, n)
	prof, err := sim.Roofline(w, cl.Devices[0])
	if err != nil {
		t.Fatal(err)
	}
	return w, cl, prof
}

// TestAmortizedStep: where the optimizer steps are material
// (GraphPipe's DLRM: dense Adam over four 256 MB tables whose lookups
// cost little, 1.75× the ops' time at m = 16), the DPs also weigh each
// stage's step per micro-batch (costs.amortized), and both searches find
// plans that step one table per device, faster than the plans of the
// forward and backward times alone, which put two tables' steps on one
// device: 1.4× or more for the chain, 1.15× for GraphPipe, whose plain
// search splits such a stage over its idle devices (splitBranches).
// The ladder of memory caps (MemCaps) is off in both arms: it finds some
// of those chains on its own.
func TestAmortizedStep(t *testing.T) {
	w, cl, prof := paperDLRM(t, 8)
	plan := func(graph bool) (iter float64, perDev map[core.DeviceID]int) {
		s := &Scheduler{Graph: graph, Kind: OneFOneB, MicroBatches: 16, Cluster: cl, Profile: prof, Simulate: 8, MemCaps: -1}
		p, err := s.Schedule(t.Context(), w)
		if err != nil {
			t.Fatal(err)
		}
		perDev = map[core.DeviceID]int{}
		for name, d := range p.ParamOwners(func(op int) []string {
			var names []string
			for _, r := range w.Ops[op].Params {
				names = append(names, r.Name)
			}
			return names
		}) {
			if strings.HasSuffix(name, ".table") {
				perDev[d]++
			}
		}
		if p.Metrics["steps_weighed"] != 1 && stepMaterial <= 1 {
			t.Errorf("graph %v: the chosen plan's metrics lack steps_weighed: %v", graph, p.Metrics)
		}
		return p.Metrics["simulated_iteration_ms"], perDev
	}
	// The second pass alone: the third, which weighs the steps too, off
	// in both arms.
	saved := stepMaterial
	defer func() { stepMaterial, weighFlush = saved, true }()
	weighFlush = false
	for _, graph := range []bool{true, false} {
		stepMaterial = saved
		with, tables := plan(graph)
		stepMaterial = math.Inf(1)
		without, _ := plan(graph)
		t.Logf("graph %v: %.2f ms with the steps weighed, %.2f without; tables stepped per device %v", graph, with, without, tables)
		// GraphPipe's plain search splits the stage of two tables over
		// the devices it leaves idle (splitBranches) and gets most of
		// the way alone (2.79 ms; 3.2 ms or more before): 1.218x
		// there, held to 1.15x (one table per device, below, is the
		// point).
		want := 1.4
		if graph {
			want = 1.15
		}
		if !(with > 0 && without >= want*with) {
			t.Errorf("graph %v: %.2f ms with the steps weighed, %.2f without: want %.1fx faster or more", graph, with, without, want)
		}
		for d, n := range tables {
			if n > 1 {
				t.Errorf("graph %v: %s steps %d tables", graph, d, n)
			}
		}
	}
}

// TestSecondPassNeverSlower: the DPs' added passes (the steps weighed;
// the whole flush weighed) only add candidates (the walk over m, its
// replica caps and the least-memory fallback read the plain pass's; each
// added pass's best, their widened plans and warm-up variants, and their
// grouped variants are weighed beside the plain pass's, not in their
// place), so no plan gets slower in the simulation with the second pass
// than without, nor with the third than with the second alone, with m
// fixed or searched. The first two cases once got slower (0.644 → 0.982
// ms, 2.033 → 2.331 ms) when the walk read the union's estimates and
// stopped early; the seventh is 0.919 ms with the second pass and 1.464
// without, which a gate on the steps' shift alone missed. The uno cases
// are ones the third pass changes (uno-4 / 16: its steps are not
// material, no second pass there), one of them under a cap.
func TestSecondPassNeverSlower(t *testing.T) {
	if testing.Short() {
		t.Skip("a sweep of searches: skipped with -short")
	}
	saved := stepMaterial
	defer func() { stepMaterial, weighFlush = saved, true }()
	for _, tc := range []struct {
		model                            string
		devices, tables, hidden, rows, m int
		graph                            bool
		kind                             Kind
		capMiB                           int64
	}{
		{"dlrm", 8, 6, 64, 20_000, 0, true, OneFOneB, 0},
		{"dlrm", 4, 3, 256, 20_000, 0, true, OneFOneB, 0},
		{"dlrm", 8, 4, 64, 1_000_000, 0, true, OneFOneB, 0},
		{"dlrm", 8, 4, 64, 1_000_000, 0, false, OneFOneB, 0},
		{"dlrm", 16, 4, 64, 1_000_000, 16, true, OneFOneB, 0},
		{"dlrm", 4, 8, 128, 200_000, 16, false, OneFOneB, 0},
		{"dlrm", 8, 6, 64, 20_000, 16, true, OneFOneB, 0},
		{"uno", 16, 4, 2048, 0, 16, false, OneFOneB, 0},
		{"uno", 16, 4, 2048, 0, 0, false, GPipe, 0},
		{"uno", 16, 4, 2048, 0, 0, false, OneFOneB, 300},
	} {
		var w *core.Workload
		var cl *sim.Cluster
		var prof *sim.Profile
		if tc.model == "uno" {
			w, cl, prof = rooflineWorkload(t, "uno", core.ModelConfig{InDim: 4096, Hidden: tc.hidden, Classes: 2, Layers: 3, Branches: tc.tables}, 8192, tc.devices)
			if tc.capMiB > 0 {
				for i := range cl.Devices {
					cl.Devices[i].MemBytes = tc.capMiB << 20
				}
				w.Devices = cl.Infos()
			}
		} else {
			w, cl, prof = dlrmOn(t, tc.devices, tc.tables, tc.hidden, tc.rows)
		}
		iter := func(second, third bool) float64 {
			stepMaterial, weighFlush = math.Inf(1), third
			if second {
				stepMaterial = saved
			}
			s := &Scheduler{Graph: tc.graph, Kind: tc.kind, MicroBatches: tc.m, Cluster: cl, Profile: prof}
			p, err := s.Schedule(t.Context(), w)
			if err != nil {
				t.Fatal(err)
			}
			return p.Metrics["simulated_iteration_ms"]
		}
		both, second, neither := iter(true, true), iter(true, false), iter(false, false)
		t.Logf("%+v: %.3f ms with both added passes, %.3f with the second alone, %.3f without", tc, both, second, neither)
		if !(both > 0 && both <= second*(1+1e-9) && second <= neither*(1+1e-9)) {
			t.Errorf("%+v: %.3f ms with both added passes, %.3f with the second alone, %.3f without", tc, both, second, neither)
		}
	}
}

// TestSecondPassNeedsSimulation: without simulation (Simulate < 0) the
// estimate alone chooses, and it can flatter the second pass's plans, so
// the pass does not run: the plan is the plain search's.
func TestSecondPassNeedsSimulation(t *testing.T) {
	w, cl, prof := paperDLRM(t, 8)
	s := &Scheduler{Graph: true, Kind: OneFOneB, MicroBatches: 16, Cluster: cl, Profile: prof, Simulate: -1}
	p, err := s.Schedule(t.Context(), w)
	if err != nil {
		t.Fatal(err)
	}
	saved := stepMaterial
	defer func() { stepMaterial = saved }()
	stepMaterial = math.Inf(1)
	q, err := s.Schedule(t.Context(), w)
	if err != nil {
		t.Fatal(err)
	}
	if p.Metrics["steps_weighed"] != 0 || p.Metrics["flush_weighed"] != 0 || p.Metrics["candidates"] != q.Metrics["candidates"] || p.Metrics["predicted_iteration_ms"] != q.Metrics["predicted_iteration_ms"] {
		t.Errorf("without simulation: %v, want the plain search's %v", p.Metrics, q.Metrics)
	}
}

// TestSecondPassGate: the second pass runs where the steps are material
// (at least stepMaterial of the op time) on a small op graph, or on a
// large one where they reshape the op times; not on the 1,000-op uno
// over few samples, whose steps follow its compute (the pass there found
// nothing and took the search past 5 s), nor where the steps are a
// sliver.
func TestSecondPassGate(t *testing.T) {
	gate := func(w *core.Workload, cl *sim.Cluster) (share, shift float64, on bool) {
		prof, err := sim.Roofline(w, cl.Devices[0])
		if err != nil {
			t.Fatal(err)
		}
		c, _ := costsOn(t, w, cl, prof, 16)
		return c.stepShare(), c.stepShift(), c.secondPass()
	}
	big := func(samples int) (*core.Workload, *sim.Cluster) {
		w, cl, _ := bigUno(t, samples)
		return w, cl
	}
	for _, tc := range []struct {
		name string
		w    func() (*core.Workload, *sim.Cluster)
		on   bool
	}{
		{"GraphPipe's DLRM", func() (*core.Workload, *sim.Cluster) { w, cl, _ := paperDLRM(t, 8); return w, cl }, true},
		{"DLRM, 6 tables of 20,000", func() (*core.Workload, *sim.Cluster) { w, cl, _ := dlrmOn(t, 8, 6, 64, 20_000); return w, cl }, true},
		{"uno-4, 8192 samples", func() (*core.Workload, *sim.Cluster) {
			return unoWorkload(t, core.ModelConfig{InDim: 4096, Hidden: 2048, Classes: 2, Layers: 3, Branches: 4}, 8192, 8)
		}, false},
		{"1,000-op uno, 256 samples", func() (*core.Workload, *sim.Cluster) { return big(256) }, false},
		{"1,000-op uno, 64 samples", func() (*core.Workload, *sim.Cluster) { return big(64) }, false},
	} {
		w, cl := tc.w()
		share, shift, on := gate(w, cl)
		t.Logf("%s (%d ops): steps %.3f of the op time, shift %.3f, second pass %v", tc.name, len(w.Ops), share, shift, on)
		if on != tc.on {
			t.Errorf("%s: second pass %v, want %v", tc.name, on, tc.on)
		}
	}
	// Treated as large graphs, the DLRMs need the shift: GraphPipe's
	// (0.455) has it, the six small tables' (0.027) do not.
	saved := smallOps
	defer func() { smallOps = saved }()
	smallOps = 4
	for _, tc := range []struct {
		tables, rows int
		on           bool
	}{{4, 1_000_000, true}, {6, 20_000, false}} {
		w, cl, _ := dlrmOn(t, 8, tc.tables, 64, tc.rows)
		if _, shift, on := gate(w, cl); on != tc.on {
			t.Errorf("%d tables of %d as a large graph: shift %.3f, second pass %v, want %v", tc.tables, tc.rows, shift, on, tc.on)
		}
	}
}
