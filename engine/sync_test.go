package engine_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/schedulers/sequential"
)

// countingDevice is a CPU device whose streams count Sync calls: what an
// asynchronous device (OpenCL, CUDA) is asked to finish its kernels.
type countingDevice struct {
	core.Device
	syncs *atomic.Int64
}

func (d countingDevice) NewStream() core.Stream {
	return countingStream{d.Device.NewStream(), d.syncs}
}

type countingStream struct {
	core.Stream
	syncs *atomic.Int64
}

func (s countingStream) Sync() error {
	s.syncs.Add(1)
	return s.Stream.Sync()
}

// TestRunWaitsForItsDevices: an iteration waits for its device to finish
// the kernels queued on it before it ends (Trace.Wall), and under
// OpTrace after every op and the optimizer step too, so that op events
// time the work rather than its queueing.
func TestRunWaitsForItsDevices(t *testing.T) {
	f := schedtest.NewFixture(100, 3, 8, 3, 5)
	b, err := cpu.New(core.BackendOptions{Devices: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var syncs atomic.Int64
	dev := countingDevice{b.Devices()[0], &syncs}
	m, err := core.BuildModel("gcn", core.ModelConfig{InDim: f.FeatureDim, Hidden: 8, Classes: f.Classes})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := engine.New(engine.Config{Model: m, Devices: []core.Device{dev}, Seed: 3,
		Data: engine.Data{Graph: f.Graph, Features: f.Features, FeatureDim: f.FeatureDim, Labels: f.Labels}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	bt := tr.FullBatch(batch(100))
	w, err := tr.Workload(bt, []core.DeviceInfo{dev.Info()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := (&sequential.Scheduler{}).Schedule(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		trace bool
		want  int64 // at least
	}{
		{false, 1},                          // the iteration's end
		{true, 1 + 2*int64(len(m.Ops)) + 1}, // and every op both ways, and the step
	} {
		syncs.Store(0)
		if _, err := tr.Run(context.Background(), p, bt, engine.RunOptions{OpTrace: c.trace}); err != nil {
			t.Fatal(err)
		}
		if got := syncs.Load(); got < c.want {
			t.Errorf("OpTrace %v: %d waits for the device, want at least %d", c.trace, got, c.want)
		}
	}
}
