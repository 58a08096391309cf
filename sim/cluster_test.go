package sim_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/sim"
)

func TestPresets(t *testing.T) {
	for _, c := range []struct {
		name       string
		n          int
		first      core.DeviceID
		sync       bool
		intra      sim.Link
		inter      sim.Link // between devices 0 and 8
		memBytes   int64
		minGFLOPS  float64
		hostShared bool
	}{
		{"cpu", 3, "cpu:0", true, sim.Link{GBps: 7, Latency: 8 * time.Microsecond}, sim.Link{}, 0, 50, true},
		{"pcie-a100", 16, "cuda:0", false, sim.Link{GBps: 24, Latency: 10 * time.Microsecond, PortGBps: 24, Port: "pcie"}, sim.Link{GBps: 24, Latency: 12 * time.Microsecond, PortGBps: 24, Port: "pcie"}, 40 << 30, 10000, false},
		{"nvlink-h100", 16, "cuda:0", false, sim.Link{GBps: 360, Latency: 3 * time.Microsecond, PortGBps: 360, Port: "nvlink"}, sim.Link{GBps: 40, Latency: 8 * time.Microsecond, PortGBps: 40, Port: "nic"}, 80 << 30, 30000, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, err := sim.Preset(c.name, c.n)
			if err != nil {
				t.Fatal(err)
			}
			if len(cl.Devices) != c.n || cl.Devices[0].ID != c.first || cl.SyncTransfers != c.sync || (cl.HostCores > 0) != c.hostShared {
				t.Fatalf("cluster %+v", cl)
			}
			d := cl.Devices[0]
			if d.MemBytes != c.memBytes || d.GFLOPS < c.minGFLOPS || d.MemGBps <= 0 {
				t.Errorf("device %+v", d)
			}
			if l := cl.LinkBetween(cl.Devices[0].ID, cl.Devices[1].ID); l != c.intra {
				t.Errorf("link 0->1 %+v, want %+v", l, c.intra)
			}
			if c.n > 8 {
				if l := cl.LinkBetween(cl.Devices[0].ID, cl.Devices[8].ID); l != c.inter {
					t.Errorf("link 0->8 %+v, want %+v", l, c.inter)
				}
			}
			infos := cl.Infos()
			if len(infos) != c.n || infos[0].ID != c.first || infos[0].MemCap != c.memBytes || infos[0].GFLOPS != d.GFLOPS {
				t.Errorf("infos %+v", infos[0])
			}
		})
	}
	for _, bad := range []struct {
		name string
		n    int
		want string
	}{{"tpu", 2, "unknown preset"}, {"cpu", 0, "positive device count"}} {
		if _, err := sim.Preset(bad.name, bad.n); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Preset(%q, %d) error %v, want %q", bad.name, bad.n, err, bad.want)
		}
	}
}

func TestLinkOverride(t *testing.T) {
	cl := sim.CPU(2, sim.DeviceModel{}, sim.Link{GBps: 1})
	cl.Links = map[[2]core.DeviceID]sim.Link{{"cpu:1", "cpu:0"}: {GBps: 2, Latency: time.Microsecond}}
	if l := cl.LinkBetween("cpu:0", "cpu:1"); l.GBps != 1 {
		t.Errorf("0->1 %+v", l)
	}
	if l := cl.LinkBetween("cpu:1", "cpu:0"); l.GBps != 2 {
		t.Errorf("1->0 %+v", l)
	}
	if got := (sim.Link{GBps: 2, Latency: time.Microsecond}).Time(4000); got != 3*time.Microsecond {
		t.Errorf("4000 bytes at 2 GB/s + 1 µs = %v, want 3µs", got)
	}
	if got := (sim.Link{}).Time(1 << 30); got != 0 {
		t.Errorf("an unlimited link took %v", got)
	}
}

// TestRooflinePresets simulates a real workload's plan on the GPU presets
// without a profile: faster devices and links give shorter iterations,
// and the memory fits.
func TestRooflinePresets(t *testing.T) {
	s := newAccuracySetup(t, "gcn", 2000, 32)
	var last time.Duration
	for _, name := range []string{"cpu", "pcie-a100", "nvlink-h100"} {
		cl, err := sim.Preset(name, 2)
		if err != nil {
			t.Fatal(err)
		}
		w, err := s.tr.Workload(s.b, cl.Infos())
		if err != nil {
			t.Fatal(err)
		}
		p, err := schedtest.Stages{K: 4, Assign: schedtest.Halves, GPipe: true}.Schedule(t.Context(), w)
		if err != nil {
			t.Fatal(err)
		}
		r, err := sim.Simulate(p, w, nil, cl)
		if err != nil {
			t.Fatal(err)
		}
		if r.Iteration <= 0 || (last > 0 && r.Iteration >= last) || len(r.OverCap) > 0 || r.BytesMoved == 0 {
			t.Errorf("%s: iteration %v (previous preset %v), over cap %v, moved %d", name, r.Iteration, last, r.OverCap, r.BytesMoved)
		}
		last = r.Iteration
	}
}

// TestNodeOfAnyNames: devices are found by their IDs whatever the IDs
// look like (the lookup takes BACKEND:i at position i at once, and scans
// otherwise): names out of order, names of another form, and a device
// that is not in the cluster (node 0, the default link).
func TestNodeOfAnyNames(t *testing.T) {
	c := &sim.Cluster{NodeSize: 2, Link: sim.Link{GBps: 10}, InterNode: sim.Link{GBps: 1}}
	ids := []core.DeviceID{"cuda:3", "cuda:1", "gpu-a", "cuda:0", "x:2:1"}
	for _, id := range ids {
		c.Devices = append(c.Devices, sim.DeviceModel{ID: id})
	}
	for i, id := range ids {
		if got := c.NodeOf(id); got != i/2 {
			t.Errorf("NodeOf(%s) = %d, want %d (position %d)", id, got, i/2, i)
		}
	}
	if got := c.NodeOf("cuda:9"); got != 0 {
		t.Errorf("NodeOf of a device not in the cluster = %d, want 0", got)
	}
	if l := c.LinkBetween("cuda:3", "cuda:1"); l.GBps != 10 {
		t.Errorf("cuda:3 and cuda:1 share node 0, got link %+v", l)
	}
	if l := c.LinkBetween("cuda:1", "gpu-a"); l.GBps != 1 {
		t.Errorf("cuda:1 (node 0) and gpu-a (node 1): got link %+v, want the inter-node one", l)
	}
}
