package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/engine"
	_ "github.com/gnnkit/gnnkit/models" // gcn
	"github.com/gnnkit/gnnkit/plugins/host"
	"github.com/gnnkit/gnnkit/plugins/plugintest"
)

// bin is the plugin binary, built once by TestMain with go build.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "examplesched")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "examplesched")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	gotool, err := exec.LookPath("go")
	if err != nil {
		gotool = "/usr/local/go/bin/go"
	}
	if out, err := exec.Command(gotool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func launch(t testing.TB, args ...string) *host.Plugin {
	t.Helper()
	p, err := host.Start(context.Background(), bin, host.Options{Args: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// ways gives the scheduler in process, over in-memory gRPC, and as the
// built binary (one process per way, shared by the subtests).
func ways(t *testing.T, args ...string) []struct {
	name string
	new  func(t *testing.T) core.Scheduler
} {
	mk := func() core.Scheduler {
		s, err := Parse(args)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var sub core.Scheduler
	return []struct {
		name string
		new  func(t *testing.T) core.Scheduler
	}{
		{"way=inprocess", func(*testing.T) core.Scheduler { return mk() }},
		{"way=grpc", func(t *testing.T) core.Scheduler { return plugintest.InMemory(t, mk()) }},
		{"way=subprocess", func(*testing.T) core.Scheduler {
			if sub == nil {
				sub = launch(t, args...).Scheduler()
			}
			return sub
		}},
	}
}

func TestConformance(t *testing.T) {
	for _, args := range [][]string{nil, {"units=2"}} {
		t.Run("args="+strings.Join(args, ","), func(t *testing.T) {
			for _, w := range ways(t, args...) {
				t.Run(w.name, func(t *testing.T) { schedtest.Run(t, w.new) })
			}
		})
	}
}

func TestOracle(t *testing.T) {
	for _, c := range []struct {
		args    []string
		devices int
	}{{nil, 2}, {[]string{"units=2"}, 3}} {
		t.Run(fmt.Sprintf("args=%s/devices=%d", strings.Join(c.args, ","), c.devices), func(t *testing.T) {
			for _, w := range ways(t, c.args...) {
				t.Run(w.name, func(t *testing.T) {
					schedtest.Oracle(t, w.new(t), schedtest.OracleOptions{Devices: c.devices})
				})
			}
		})
	}
}

func devs(gflops ...float64) []core.DeviceInfo {
	out := make([]core.DeviceInfo, len(gflops))
	for i, g := range gflops {
		out[i] = core.DeviceInfo{ID: core.DeviceID(fmt.Sprintf("cpu:%d", i)), GFLOPS: g, Threads: 1 + i, MemCap: int64(i+1) << 30}
	}
	return out
}

func workload(n int, d []core.DeviceInfo) *core.Workload {
	w := &core.Workload{Devices: d, Ops: []core.OpInfo{{Index: 0, Name: "a"}, {Index: 1, Name: "b", Deps: []int{0}}}}
	for i := 0; i < n; i++ {
		w.Batch = append(w.Batch, int32(i))
	}
	return w
}

// TestShares checks the proportional split, over the real process.
func TestShares(t *testing.T) {
	for _, c := range []struct {
		args []string
		devs []core.DeviceInfo
		want map[core.DeviceID]int
		home core.DeviceID
	}{
		{nil, devs(10, 30), map[core.DeviceID]int{"cpu:0": 25, "cpu:1": 75}, "cpu:1"},
		{[]string{"by=threads"}, devs(10, 30, 0), map[core.DeviceID]int{"cpu:0": 17, "cpu:1": 33, "cpu:2": 50}, "cpu:2"},
		{nil, devs(10, 30, 0), map[core.DeviceID]int{"cpu:0": 17, "cpu:1": 33, "cpu:2": 50}, "cpu:2"}, // auto falls back to threads
		{[]string{"by=mem"}, devs(1, 1, 1, 1), map[core.DeviceID]int{"cpu:0": 10, "cpu:1": 20, "cpu:2": 30, "cpu:3": 40}, "cpu:3"},
		{[]string{"by=equal", "devices=2"}, devs(1, 1, 1), map[core.DeviceID]int{"cpu:0": 50, "cpu:1": 50}, "cpu:0"},
		{[]string{"units=4"}, devs(1, 3), map[core.DeviceID]int{"cpu:0": 25, "cpu:1": 75}, "cpu:1"},
	} {
		t.Run(strings.Join(c.args, ","), func(t *testing.T) {
			w := workload(100, c.devs)
			p, err := launch(t, c.args...).Scheduler().Schedule(context.Background(), w)
			if err != nil {
				t.Fatal(err)
			}
			got := map[core.DeviceID]int{}
			unitDev := map[int]core.DeviceID{}
			for _, task := range p.Tasks {
				if task.Kind == core.TaskForward {
					unitDev[task.Unit] = task.Device
				}
			}
			for _, u := range p.Units {
				got[unitDev[u.ID]] += len(u.Targets)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) || p.Home != c.home {
				t.Errorf("shares %v home %s, want %v home %s", got, p.Home, c.want, c.home)
			}
		})
	}
}

func TestUnsupportedWeighting(t *testing.T) {
	s := launch(t, "by=gflops").Scheduler()
	_, err := s.Schedule(context.Background(), workload(10, devs(5, 0)))
	if !errors.Is(err, core.ErrUnsupported) || !strings.Contains(err.Error(), "device cpu:1 reports 0") {
		t.Errorf("err = %v, want core.ErrUnsupported naming cpu:1", err)
	}
}

func TestBadOption(t *testing.T) {
	_, err := host.Start(context.Background(), bin, host.Options{Args: []string{"speed=fast"}})
	if !errors.Is(err, host.ErrLaunch) || !strings.Contains(err.Error(), "option speed=fast: unknown option") {
		t.Errorf("err = %v", err)
	}
}

// TestAdapt: with adapt=true, a trace in which cpu:1 took three times as
// long per node moves work to cpu:0.
func TestAdapt(t *testing.T) {
	s := launch(t, "adapt=true").Scheduler()
	fb, ok := s.(core.SchedulerWithFeedback)
	if !ok {
		t.Fatal("no feedback over the wire")
	}
	w := workload(100, devs(1, 1))
	if _, err := s.Schedule(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	ev := func(d core.DeviceID, ms int) core.TraceEvent {
		return core.TraceEvent{Cat: "forward", Device: d, Dur: time.Duration(ms) * time.Millisecond}
	}
	tr := &core.Trace{Events: []core.TraceEvent{ev("cpu:0", 10), ev("cpu:1", 30)}}
	p, err := fb.Observe(context.Background(), w, tr)
	if err != nil || p == nil {
		t.Fatalf("Observe = %v, %v; want a new plan", p, err)
	}
	// The home stays where Schedule put it (the trainer keeps its home).
	if n := len(p.Units[0].Targets); n != 75 || p.Home != "cpu:0" {
		t.Errorf("cpu:0 gets %d nodes (home %s), want 75 (home cpu:0)", n, p.Home)
	}
	// Balanced now (75 and 25 nodes in equal times): no new plan.
	tr = &core.Trace{Events: []core.TraceEvent{ev("cpu:0", 20), ev("cpu:1", 20)}}
	if p, err := fb.Observe(context.Background(), w, tr); err != nil || p != nil {
		t.Errorf("balanced Observe = %v, %v; want no new plan", p, err)
	}
	// cpu:1 is now much faster: most work moves there, but the home (the
	// master parameters) stays on cpu:0.
	tr = &core.Trace{Events: []core.TraceEvent{ev("cpu:0", 60), ev("cpu:1", 5)}}
	p, err = fb.Observe(context.Background(), w, tr)
	if err != nil || p == nil {
		t.Fatalf("Observe = %v, %v; want a new plan", p, err)
	}
	if n := len(p.Units[1].Targets); n != 80 || p.Home != "cpu:0" {
		t.Errorf("cpu:1 gets %d nodes (home %s), want 80 (home cpu:0)", n, p.Home)
	}
}

// TestAdaptTrains runs the adaptive plugin through the engine's training
// loop (Observe after every epoch, replans with no slack).
func TestAdaptTrains(t *testing.T) {
	f := schedtest.NewFixture(200, 3, 16, 4, 5)
	m, err := core.BuildModel("gcn", core.ModelConfig{InDim: f.FeatureDim, Hidden: 8, Classes: f.Classes, Layers: 2})
	if err != nil {
		t.Fatal(err)
	}
	devs := schedtest.Devices(t, 2)
	tr, err := engine.New(engine.Config{Model: m, Devices: devs, Seed: 3,
		Data: engine.Data{Graph: f.Graph, Features: f.Features, FeatureDim: f.FeatureDim, Labels: f.Labels}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	infos := []core.DeviceInfo{devs[0].Info(), devs[1].Info()}
	train := make([]int32, 150)
	for i := range train {
		train[i] = int32(i)
	}
	sum, err := engine.Train(context.Background(), tr, infos, engine.TrainOptions{Epochs: 6,
		Scheduler: launch(t, "adapt=true", "slack=0").Scheduler(), Train: train})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Scheduler != "propsplit" || math.IsNaN(sum.FinalLoss) {
		t.Errorf("summary %+v", sum)
	}
}
