package bench

import (
	"slices"
	"strings"
	"testing"
)

func TestParseSuite(t *testing.T) {
	for _, tc := range []struct {
		name, in, err string
	}{
		{"ok", `{"name":"x","version":1,"epochs":2,"groups":[{"backends":["cpu"],"devices":[1],"schedulers":["sequential"],"models":["gcn"],"datasets":["cora"]}]}`, ""},
		{"unknown field", `{"name":"x","version":1,"epochs":2,"groupz":[]}`, "unknown field"},
		{"no version", `{"name":"x","epochs":2,"groups":[{"backends":["cpu"],"devices":[1],"schedulers":["s"],"models":["m"],"datasets":["d"]}]}`, "version"},
		{"no groups", `{"name":"x","version":1,"epochs":2,"groups":[]}`, "at least one group"},
		{"empty axis", `{"name":"x","version":1,"epochs":2,"groups":[{"backends":[],"devices":[1],"schedulers":["s"],"models":["m"],"datasets":["d"]}]}`, "at least one value"},
		{"no epochs", `{"name":"x","version":1,"groups":[{"backends":["cpu"],"devices":[1],"schedulers":["s"],"models":["m"],"datasets":["d"]}]}`, "no epochs"},
		{"bad devices", `{"name":"x","version":1,"epochs":1,"groups":[{"backends":["cpu"],"devices":[0],"schedulers":["s"],"models":["m"],"datasets":["d"]}]}`, "devices"},
		{"bad cap", `{"name":"x","version":1,"epochs":1,"groups":[{"backends":["cpu"],"devices":[1],"schedulers":["s"],"models":["m"],"datasets":["d"],"device_mem":["lots"]}]}`, "device_mem"},
		{"trailing", `{"name":"x","version":1,"epochs":2,"groups":[{"backends":["cpu"],"devices":[1],"schedulers":["sequential"],"models":["gcn"],"datasets":["cora"]}]} {}`, "trailing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSuite([]byte(tc.in))
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("ParseSuite: %v, want error containing %q", err, tc.err)
			}
		})
	}
}

// Every embedded suite parses, and the smoke suite covers every
// registered backend and scheduler.
func TestEmbeddedSuites(t *testing.T) {
	for _, name := range SuiteNames() {
		t.Run(name, func(t *testing.T) {
			s, err := LoadSuite(name)
			if err != nil {
				t.Fatal(err)
			}
			if s.Name != name {
				t.Errorf("suite file %s.json names itself %q", name, s.Name)
			}
			if len(s.Cells()) == 0 {
				t.Error("no cells")
			}
		})
	}
	s, _ := LoadSuite("smoke")
	have := map[string]bool{}
	for _, c := range s.Cells() {
		have[c.Backend], have[c.Scheduler] = true, true
	}
	for _, n := range append(registryBackends(), registrySchedulers()...) {
		if !have[n] {
			t.Errorf("smoke suite does not cover %s", n)
		}
	}
}

func TestCellsExpansion(t *testing.T) {
	s, err := ParseSuite([]byte(`{"name":"x","version":1,"epochs":2,"warmup":1,"seed":7,"groups":[
	 {"backends":["*"],"devices":[1,2],"schedulers":["sequential","graphpipe"],"models":["gcn"],"datasets":["cora"],
	  "sched_opts":{"graphpipe":[{"m":"2"},{"m":"4"}]}},
	 {"backends":["cpu"],"devices":[1],"schedulers":["sequential"],"models":["gcn"],"datasets":["cora"],"epochs":9}]}`))
	if err != nil {
		t.Fatal(err)
	}
	cells := s.Cells()
	want := len(registryBackends()) * 2 * 3 // (sequential + graphpipe×2 option sets) per backend and device count
	if len(cells) != want+1 {
		t.Fatalf("%d cells, want %d", len(cells), want+1)
	}
	ids := map[string]bool{}
	for _, c := range cells {
		if ids[c.ID()] {
			t.Errorf("duplicate %s", c.ID())
		}
		ids[c.ID()] = true
		if c.Seed != 7 || c.Warmup != 1 {
			t.Errorf("%s: seed %d warm-up %d", c.ID(), c.Seed, c.Warmup)
		}
	}
	if !ids["backend=cpu/devices=2/scheduler=graphpipe/opts=m:4/model=gcn/data=cora/epochs=2+1/seed=7"] ||
		!ids["backend=cpu/devices=1/scheduler=sequential/model=gcn/data=cora/epochs=9+1/seed=7"] {
		t.Errorf("missing expected ids in %v", slices.Sorted(func(y func(string) bool) {
			for k := range ids {
				if !y(k) {
					return
				}
			}
		}))
	}
}

func TestCellID(t *testing.T) {
	for _, tc := range []struct {
		c    Cell
		want string
	}{
		{Cell{Backend: "cpu", Devices: 1, Scheduler: "sequential", Model: "gcn", Dataset: "cora", Epochs: 3, Warmup: 1, Seed: 1},
			"backend=cpu/devices=1/scheduler=sequential/model=gcn/data=cora/epochs=3+1/seed=1"},
		{Cell{Backend: "cpu", Devices: 1, Scheduler: "cherry", SchedOpts: map[string]string{"k": "4", "headroom": "0.1"}, DeviceMem: "24MiB",
			Model: "gcn", Dataset: "cora", Epochs: 3, Seed: 2, Group: "ignored"},
			"backend=cpu/devices=1/scheduler=cherry/opts=headroom:0.1;k:4/mem=24MiB/model=gcn/data=cora/epochs=3+0/seed=2"},
	} {
		if got := tc.c.ID(); got != tc.want {
			t.Errorf("ID = %s, want %s", got, tc.want)
		}
	}
}

func TestSelector(t *testing.T) {
	c := Cell{Backend: "cpu", Devices: 2, Scheduler: "gpipe", SchedOpts: map[string]string{"m": "4"}, Model: "gcn", Dataset: "cora"}
	for _, tc := range []struct {
		sel  string
		want bool
		err  bool
	}{
		{"backend=cpu", true, false},
		{"backend=cpu,devices=2,scheduler=gpipe,opts=m:4,mem=", true, false},
		{DefaultBaseline, false, false},
		{"devices=1", false, false},
		{"colour=red", false, true},
		{"backend", false, true},
	} {
		s, err := ParseSelector(tc.sel)
		if (err != nil) != tc.err {
			t.Fatalf("%q: err %v", tc.sel, err)
		}
		if err == nil && s.Match(c) != tc.want {
			t.Errorf("%q matches = %v, want %v", tc.sel, !tc.want, tc.want)
		}
	}
}
