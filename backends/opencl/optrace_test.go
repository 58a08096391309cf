package opencl_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/engine"
	_ "github.com/gnnkit/gnnkit/models"
	"github.com/gnnkit/gnnkit/schedulers/sequential"
)

// TestOpTraceTimesEachOp: an iteration on an asynchronous device ends
// when the device has run its kernels, and the executor's op trace (what the profiler
// builds op costs from) times each op on an asynchronous device, not the
// queueing of its kernels: a GCN's first linear layer (4000 x 512 x 64
// multiply-adds) takes longer than the loss (4000 x 8 log-softmax). Before
// the executor waited for each op under OpTrace, the loss, which reads its
// value back, was charged with everything queued before it.
func TestOpTraceTimesEachOp(t *testing.T) {
	b := open(t, core.BackendOptions{})
	defer b.Close()
	// The timing checks assume kernels dominate launches, as on PoCL (a
	// CPU); on a GPU a 131-MFLOP product takes microseconds, so there the
	// test only runs the iterations.
	pocl := strings.Contains(b.Devices()[0].Info().Name, "Portable Computing Language")
	f := schedtest.NewFixture(4000, 8, 512, 8, 3)
	m, err := core.BuildModel("gcn", core.ModelConfig{InDim: f.FeatureDim, Hidden: 64, Classes: f.Classes})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := engine.New(engine.Config{Model: m, Devices: b.Devices(), Seed: 1,
		Data: engine.Data{Graph: f.Graph, Features: f.Features, FeatureDim: f.FeatureDim, Labels: f.Labels}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	all := make([]int32, 4000)
	for i := range all {
		all[i] = int32(i)
	}
	batch := tr.FullBatch(all)
	w, err := tr.Workload(batch, []core.DeviceInfo{b.Devices()[0].Info()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := (&sequential.Scheduler{}).Schedule(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := tr.Run(ctx, p, batch, engine.RunOptions{}); err != nil { // warm-up: kernels built
		t.Fatal(err)
	}
	// An iteration ends when the device has run its kernels: an untraced
	// run takes about as long as one that waits for every op (it used to
	// end with the backward and the step still queued: 0.3 of it).
	var plain, traced []time.Duration
	var res *engine.Result
	for range 3 {
		r, err := tr.Run(ctx, p, batch, engine.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		plain = append(plain, r.Trace.Wall)
		if res, err = tr.Run(ctx, p, batch, engine.RunOptions{OpTrace: true}); err != nil {
			t.Fatal(err)
		}
		traced = append(traced, res.Trace.Wall)
	}
	slices.Sort(plain)
	slices.Sort(traced)
	t.Logf("iteration %v untraced, %v waiting for each op (medians of 3)", plain[1], traced[1])
	if pocl && float64(plain[1]) < 0.6*float64(traced[1]) {
		t.Errorf("an untraced iteration took %v, one waiting for each op %v: the untraced one ended before its kernels ran", plain[1], traced[1])
	}
	fwd := map[string]time.Duration{}
	for _, e := range res.Trace.Events {
		if e.Cat == "op_forward" {
			fwd[e.Name] += e.Dur
		}
	}
	lin, loss := fwd[m.Ops[1].Name()], fwd[m.Ops[len(m.Ops)-1].Name()]
	t.Logf("%s forward %v, %s forward %v", m.Ops[1].Name(), lin, m.Ops[len(m.Ops)-1].Name(), loss)
	if lin == 0 || loss == 0 || pocl && lin <= loss {
		t.Errorf("op trace: %s forward %v, %s forward %v; want the GEMM longer", m.Ops[1].Name(), lin, m.Ops[len(m.Ops)-1].Name(), loss)
	}
}
