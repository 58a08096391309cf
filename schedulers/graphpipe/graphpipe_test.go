package graphpipe_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
)

func schedulers() []*graphpipe.Scheduler {
	return []*graphpipe.Scheduler{
		{Kind: graphpipe.GPipe, MicroBatches: 3},
		{Kind: graphpipe.OneFOneB, MicroBatches: 3},
		{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: 3},
	}
}

func TestConformance(t *testing.T) {
	for _, s := range schedulers() {
		t.Run(s.Name(), func(t *testing.T) {
			schedtest.Run(t, func(t *testing.T) core.Scheduler { return s })
		})
	}
}

// TestOracle: every schedule on every model (GNNs and the DAG models),
// on 2 and 4 devices, trains exactly like sequential.
func TestOracle(t *testing.T) {
	for _, s := range schedulers() {
		for _, d := range []int{2, 4} {
			t.Run(fmt.Sprintf("%s/devices=%d", s.Name(), d), func(t *testing.T) {
				schedtest.Oracle(t, s, schedtest.OracleOptions{Devices: d, Models: []string{"gcn", "gat", "mbgnn", "uno", "dlrm"}, Steps: 2})
			})
		}
	}
}

func fakeDevices(n int) []core.DeviceInfo {
	var out []core.DeviceInfo
	for i := 0; i < n; i++ {
		out = append(out, core.DeviceInfo{ID: core.DeviceID(fmt.Sprintf("sim:%d", i)), GFLOPS: 50, MemGBps: 20, MemCap: 100 << 20})
	}
	return out
}

// TestGraphPartitionRunsBranchesConcurrently: on 4-branch models over 8
// devices whose whole weights do not fit one device, GraphPipe's pipeline
// is never deeper than the chain baseline's, whose depth is its stage
// count; on the purely parallel uno its stages form a DAG (branches side
// by side).
func TestGraphPartitionRunsBranchesConcurrently(t *testing.T) {
	for _, model := range []string{"mbgnn", "uno"} {
		// Wide branches: the whole model's weights and optimizer state do
		// not fit one device, so stages are needed.
		m, err := core.BuildModel(model, core.ModelConfig{InDim: 512, Hidden: 2048, Classes: 8, Branches: 4})
		if err != nil {
			t.Fatal(err)
		}
		g, _ := core.Undirected(1000, []int32{0, 1, 2}, []int32{1, 2, 3})
		batch := make([]int32, 1000)
		for i := range batch {
			batch[i] = int32(i)
		}
		w := core.NewWorkload(m, g, 512, batch, fakeDevices(8), 1)
		gp, err := (&graphpipe.Scheduler{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: 8}).Schedule(t.Context(), w)
		if err != nil {
			t.Fatal(err)
		}
		ch, err := (&graphpipe.Scheduler{Kind: graphpipe.OneFOneB, MicroBatches: 8}).Schedule(t.Context(), w)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []*core.Plan{gp, ch} {
			if err := p.Validate(w); err != nil {
				t.Fatalf("%s: %v", p.Scheduler, err)
			}
		}
		t.Logf("%s: graphpipe %d stages depth %v; chain %d stages depth %v", model, int(gp.Metrics["stages"]), gp.Metrics["depth"], int(ch.Metrics["stages"]), ch.Metrics["depth"])
		if gp.Metrics["depth"] > ch.Metrics["depth"] {
			t.Errorf("%s: graphpipe's pipeline (depth %v) is deeper than the chain's (%v)", model, gp.Metrics["depth"], ch.Metrics["depth"])
		}
		if model == "uno" && !(gp.Metrics["depth"] < gp.Metrics["stages"]) {
			t.Errorf("%s: graphpipe stages are a chain (depth %v of %v stages)", model, gp.Metrics["depth"], gp.Metrics["stages"])
		}
		if ch.Metrics["depth"] != ch.Metrics["stages"] {
			t.Errorf("%s: the chain baseline's depth %v differs from its %v stages", model, ch.Metrics["depth"], ch.Metrics["stages"])
		}
	}
}

// TestPartitionSearchTime: the partitioner on a ~1,000-op DAG over 64
// devices (issue: at most 5 s).
func TestPartitionSearchTime(t *testing.T) {
	if testing.Short() {
		t.Skip("search-time check: skipped with -short")
	}
	m, err := core.BuildModel("uno", core.ModelConfig{InDim: 256, Hidden: 512, Classes: 8, Branches: 16, Layers: 20})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := core.Undirected(4096, nil, nil)
	batch := make([]int32, 4096)
	for i := range batch {
		batch[i] = int32(i)
	}
	devs := fakeDevices(64)
	for i := range devs {
		devs[i].MemCap = 160 << 20
	}
	w := core.NewWorkload(m, g, 256, batch, devs, 1)
	start := time.Now()
	p, err := (&graphpipe.Scheduler{Graph: true, Kind: graphpipe.OneFOneB, MicroBatches: 16}).Schedule(t.Context(), w)
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	t.Logf("%d ops on 64 devices: %d stages, depth %v, searched in %v", len(w.Ops), int(p.Metrics["stages"]), p.Metrics["depth"], el)
	if len(w.Ops) < 950 {
		t.Fatalf("model has only %d ops", len(w.Ops))
	}
	if el > 5*time.Second {
		t.Errorf("search took %v, want <= 5s", el)
	}
}

func TestBadInput(t *testing.T) {
	m, err := core.BuildModel("uno", core.ModelConfig{InDim: 512, Hidden: 2048, Classes: 8, Branches: 4})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := core.Undirected(100, nil, nil)
	batch := []int32{0, 1, 2, 3}
	devs := fakeDevices(2)
	for i := range devs {
		devs[i].MemCap = 1 << 20 // 1 MiB: nothing fits
	}
	w := core.NewWorkload(m, g, 512, batch, devs, 1)
	_, err = (&graphpipe.Scheduler{Graph: true}).Schedule(t.Context(), w)
	if !errors.Is(err, graphpipe.ErrNoFit) || !strings.Contains(err.Error(), "smallest per-device memory") {
		t.Errorf("no-fit error = %v", err)
	}
	// A disconnected op graph (an op that leads nowhere).
	w = core.NewWorkload(m, g, 512, batch, fakeDevices(2), 1)
	w.Ops[0].Deps = nil
	w.Ops = append(w.Ops[:1:1], w.Ops[1:]...)
	w.Ops[len(w.Ops)-1].Deps = []int{len(w.Ops) - 2}
	dangling := core.OpInfo{Index: len(w.Ops), Name: "dangling"}
	w.Ops = append(w.Ops[:len(w.Ops)-1], dangling, w.Ops[len(w.Ops)-1])
	_, err = (&graphpipe.Scheduler{Graph: true}).Schedule(t.Context(), w)
	if err == nil || !strings.Contains(err.Error(), "disconnected") {
		t.Errorf("disconnected graph error = %v", err)
	}
}
