package sim

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// TestClusterRoundTrip: every preset written and read back is the same
// cluster, with the demanded transfers first or not.
func TestClusterRoundTrip(t *testing.T) {
	for _, name := range Presets() {
		for _, demand := range []bool{false, true} {
			c, err := Preset(name, 12)
			if err != nil {
				t.Fatal(err)
			}
			c.DemandFirst = demand
			var b bytes.Buffer
			if err := WriteCluster(&b, c); err != nil {
				t.Fatal(err)
			}
			got, err := ReadCluster(&b)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !reflect.DeepEqual(got, c) {
				t.Errorf("%s: read back\n%+v\nwant\n%+v", name, got, c)
			}
		}
	}
}

func TestParseClusterErrors(t *testing.T) {
	good := func() string {
		c, _ := Preset("pcie-a100", 2)
		var b bytes.Buffer
		WriteCluster(&b, c)
		return b.String()
	}
	cases := []struct {
		name, in, want string
	}{
		{"empty", "", "empty input"},
		{"not JSON", "cuda x2", "invalid character"},
		{"two values", good() + good(), "text after the cluster object"},
		{"trailing brackets", good() + "]]] trailing", "text after the cluster object"},
		{"misspelt field", strings.Replace(good(), `"port_gbps"`, `"port_gpbs"`, 1), `unknown field "port_gpbs"`},
		{"pair links", strings.Replace(good(), `"name"`, `"Links": {}, "name"`, 1), `unknown field "Links"`},
		{"no devices", `{"name": "x", "devices": []}`, "no devices"},
		{"bad id", strings.Replace(good(), `"cuda:1"`, `"gpu one"`, 1), `devices[1] (gpu one): id "gpu one": want backend:index`},
		{"duplicate id", strings.Replace(good(), `"cuda:1"`, `"cuda:0"`, 1), "id cuda:0 appears twice"},
		{"zero speed", strings.Replace(good(), `"gflops": 11700`, `"gflops": 0`, 1), "gflops = 0: want 0.001 to 1e+09"},
		{"negative bandwidth", strings.Replace(good(), `"mem_gbps": 1244`, `"mem_gbps": -1`, 1), "mem_gbps = -1"},
		{"negative memory", strings.Replace(good(), `"mem_bytes": 42949672960`, `"mem_bytes": -5`, 1), "mem_bytes = -5"},
		{"overlap above 1", strings.Replace(good(), `"sms": 108`, `"sms": 108, "stream_overlap": 2`, 1), "stream_overlap = 2"},
		{"negative link", strings.Replace(good(), `"gbps": 24`, `"gbps": -24`, 1), "link: gbps = -24"},
		{"a link too slow to time", strings.Replace(good(), `"gbps": 24`, `"gbps": 1e-18`, 1), "link: gbps = 1e-18: want 0 or 0.001"},
		{"a port too slow to time", strings.Replace(good(), `"port_gbps": 24`, `"port_gbps": 1e-300`, 1), "port_gbps = 1e-300"},
		{"slow compute", strings.Replace(good(), `"gflops": 11700`, `"gflops": 1e-300`, 1), "gflops = 1e-300"},
		{"launch of an hour", strings.Replace(good(), `"launch_ns": 5000`, `"launch_ns": 3600000000000`, 1), "launch_ns = 3600000000000"},
		{"optimizer state factor", strings.Replace(good(), `"sync_transfers": false`, `"sync_transfers": false, "opt_state_factor": 1e300`, 1), "opt_state_factor = 1e+300"},
		{"tiny host cores", strings.Replace(good(), `"sync_transfers": false`, `"sync_transfers": false, "host_cores": 1e-300`, 1), "host_cores = 1e-300"},
		{"id with a space", strings.Replace(good(), `"cuda:1"`, `" cuda:1"`, 1), `id " cuda:1"`},
		{"id with a leading zero", strings.Replace(good(), `"cuda:1"`, `"cuda:00"`, 1), `id "cuda:00"`},
		{"negative node size", strings.Replace(good(), `"node_size": 8`, `"node_size": -8`, 1), "node_size = -8"},
		{"negative host cores", strings.Replace(good(), `"sync_transfers": false`, `"sync_transfers": false, "host_cores": -2`, 1), "host_cores = -2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.in == good() && c.name != "empty" {
				t.Fatalf("the case did not change the good cluster:\n%s", c.in)
			}
			_, err := ParseCluster([]byte(c.in))
			if err == nil || !errors.Is(err, ErrBadCluster) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want ErrBadCluster containing %q", err, c.want)
			}
		})
	}
}

// FuzzParseCluster: arbitrary bytes give a cluster that validates or an
// ErrBadCluster, never a panic.
func FuzzParseCluster(f *testing.F) {
	for _, name := range Presets() {
		c, _ := Preset(name, 3)
		var b bytes.Buffer
		WriteCluster(&b, c)
		f.Add(b.Bytes())
	}
	f.Add([]byte(`{"devices": [{"id": "cuda:0", "gflops": 1e308, "mem_gbps": 1}], "link": {"gbps": 1e-300}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCluster(b)
		if err != nil {
			if !errors.Is(err, ErrBadCluster) {
				t.Fatalf("error %v is not ErrBadCluster", err)
			}
			return
		}
		if len(c.Devices) > 64 {
			return
		}
		// Whatever it accepts, the simulator replays a plan on, in
		// bounded time, to finite non-negative figures.
		type out struct {
			res *Result
			err error
		}
		done := make(chan out, 1)
		go func() {
			r, e := Simulate(twoStagePlan(c))
			done <- out{r, e}
		}()
		var o out
		timer := time.NewTimer(5 * time.Second)
		select {
		case o = <-done:
			timer.Stop()
		case <-timer.C:
			t.Fatalf("simulation did not end in 5 s on %s", b)
		}
		res, err := o.res, o.err
		if err != nil {
			t.Fatalf("simulating on a parsed cluster: %v", err)
		}
		if res.Iteration < 0 || math.IsNaN(res.Bubble) || res.Bubble < -1e-9 || res.Bubble > 1+1e-9 {
			t.Fatalf("iteration %v, bubble %v on %+v", res.Iteration, res.Bubble, c)
		}
		for d, b := range res.Busy {
			if b < 0 || res.Comm[d] < 0 || res.PeakMem[d] < 0 {
				t.Fatalf("%s: busy %v, comm %v, peak %d", d, b, res.Comm[d], res.PeakMem[d])
			}
		}
	})
}

// twoStagePlan is a 1F1B-free two-stage GPipe plan of 4 units over c's
// first two devices (one device: both stages on it), with op costs from
// the roofline of c's first device.
func twoStagePlan(c *Cluster) (*core.Plan, *core.Workload, *Profile, *Cluster) {
	d0, d1 := c.Devices[0].ID, c.Devices[min(1, len(c.Devices)-1)].ID
	w := &core.Workload{ModelName: "two", Dims: core.Dims{Nodes: 4096}, Batch: []int32{0, 1, 2, 3},
		Ops: []core.OpInfo{
			{Index: 0, Name: "a", Cost: core.Cost{FLOPs: 1e9, BytesMoved: 1e8, ActivationBytes: 1 << 24, WeightBytes: 1 << 20}},
			{Index: 1, Name: "b", Deps: []int{0}, Cost: core.Cost{FLOPs: 1e9, BytesMoved: 1e8, ActivationBytes: 1 << 24, WeightBytes: 1 << 20}}},
		ParamBytes: 2 << 20, Devices: c.Infos()}
	p := &core.Plan{Home: d0}
	const m = 4
	for u := range m {
		p.Units = append(p.Units, core.Unit{ID: u, Targets: []int32{int32(u)}, LossWeight: 1.0 / m, Subgraph: true})
	}
	add := func(t core.Task) int { t.ID = len(p.Tasks); p.Tasks = append(p.Tasks, t); return t.ID }
	var f0, f1, b0, b1 []int
	for u := range m {
		f0 = append(f0, add(core.Task{Kind: core.TaskForward, Unit: u, Device: d0, Ops: []int{0}}))
		f1 = append(f1, add(core.Task{Kind: core.TaskForward, Unit: u, Device: d1, Ops: []int{1}, Deps: []int{f0[u]}}))
	}
	for u := range m {
		b1 = append(b1, add(core.Task{Kind: core.TaskBackward, Unit: u, Device: d1, Ops: []int{1}, Deps: []int{f1[u]}}))
		b0 = append(b0, add(core.Task{Kind: core.TaskBackward, Unit: u, Device: d0, Ops: []int{0}, Deps: []int{f0[u], b1[u]}}))
	}
	deps := b0
	if d1 != d0 {
		deps = append(deps, add(core.Task{Kind: core.TaskReduceGrads, Unit: -1, Device: d0, Stream: 1, From: d1, Deps: b1}))
	}
	add(core.Task{Kind: core.TaskStep, Unit: -1, Device: d0, Stream: 1, Deps: deps})
	prof, err := Roofline(w, c.Devices[0])
	if err != nil {
		panic(err)
	}
	return p, w, prof, c
}
