package graphpipe

import (
	"slices"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// TestBucketOps: a stage's ops go into buckets for its last backward,
// the latest ops first, each closed once the parameters its ops read
// (each counted in the first bucket reading it) reach the cap; the
// buckets partition the ops; one bucket is none.
func TestBucketOps(t *testing.T) {
	// Ops 0-5; op o reads parameter o/2 (two ops share each, 10 bytes).
	opPar := [][]int32{{0}, {0}, {1}, {1}, {2}, {2}}
	bytes := []float64{10, 10, 10}
	ops := []int{0, 1, 2, 3, 4, 5}
	for _, c := range []struct {
		cap  float64
		want [][]int
	}{
		{1, [][]int{{5}, {3, 4}, {1, 2}, {0}}},
		{10, [][]int{{5}, {3, 4}, {1, 2}, {0}}},
		{20, [][]int{{3, 4, 5}, {0, 1, 2}}},
		{30, [][]int{{1, 2, 3, 4, 5}, {0}}},
		{100, nil}, // one bucket
	} {
		got := bucketOps(ops, opPar, bytes, c.cap)
		if !slices.EqualFunc(got, c.want, slices.Equal[[]int]) {
			t.Errorf("cap %v: buckets %v, want %v", c.cap, got, c.want)
		}
		var all []int
		for _, b := range got {
			all = append(all, b...)
		}
		slices.Sort(all)
		if got != nil && !slices.Equal(all, ops) {
			t.Errorf("cap %v: buckets %v do not partition the ops", c.cap, got)
		}
	}
}

// TestBucketedPlan: with buckets, each replica of a replicated stage runs
// its last micro-batch's backward as one task per bucket, latest ops
// first, each after the one before, and each reduction of a bucket's
// parameters waits for that bucket rather than the whole backward; the
// plan is valid. Without replicas nothing is split.
func TestBucketedPlan(t *testing.T) {
	w, _ := unoWorkload(t, core.ModelConfig{InDim: 64, Hidden: 32, Classes: 2, Layers: 2, Branches: 2}, 256, 4)
	part := Partition{StageOf: make([]int, len(w.Ops)), Devices: [][]core.DeviceID{{w.Devices[0].ID, w.Devices[1].ID, w.Devices[2].ID, w.Devices[3].ID}}}
	for _, bucket := range []int64{0, 1} {
		opts := PlanOptions{Step: StepOwners, BucketBytes: bucket}
		p, err := BuildPlanOpts(w, part, 8, OneFOneB, opts, "bucketed")
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(w); err != nil {
			t.Fatalf("bucket %d: %v", bucket, err)
		}
		perDev := map[core.DeviceID]int{}
		for _, task := range p.Tasks {
			if task.Kind == core.TaskBackward {
				perDev[task.Device]++
			}
		}
		for d, n := range perDev {
			// 8 micro-batches over 4 replicas: 2 backward tasks each, the
			// last one split when bucketed.
			if bucket == 0 && n != 2 || bucket == 1 && n <= 2 {
				t.Errorf("bucket %d: %s runs %d backward tasks", bucket, d, n)
			}
		}
		if bucket == 0 {
			continue
		}
		for _, task := range p.Tasks {
			if task.Kind != core.TaskReduceGrads {
				continue
			}
			// Its Deps: the source's backward tasks reading what it moves;
			// at least one is a bucket (fewer ops than the stage).
			bucketed := false
			for _, d := range task.Deps {
				bucketed = bucketed || len(p.Tasks[d].OpIndices()) < len(w.Ops)
			}
			if !bucketed {
				t.Errorf("reduction %d from %s waits for whole backwards only (deps %v)", task.ID, task.From, task.Deps)
			}
		}
	}
}

// unoWorkload is uno of cfg over n devices of the pcie-a100 preset, one
// iteration of samples rows.
func unoWorkload(t *testing.T, cfg core.ModelConfig, samples, n int) (*core.Workload, *sim.Cluster) {
	t.Helper()
	return presetWorkload(t, "uno", cfg, samples, n)
}

// presetWorkload is model of cfg over n devices of the pcie-a100
// preset, one iteration of samples rows.
func presetWorkload(t testing.TB, model string, cfg core.ModelConfig, samples, n int) (*core.Workload, *sim.Cluster) {
	t.Helper()
	cl, err := sim.Preset("pcie-a100", n)
	if err != nil {
		t.Fatal(err)
	}
	return workloadOn(t, model, cfg, samples, cl.Infos()), cl
}

// rooflineWorkload is presetWorkload with the roofline profile of the
// preset's device.
func rooflineWorkload(t *testing.T, model string, cfg core.ModelConfig, samples, n int) (*core.Workload, *sim.Cluster, *sim.Profile) {
	t.Helper()
	w, cl := presetWorkload(t, model, cfg, samples, n)
	prof, err := sim.Roofline(w, cl.Devices[0])
	if err != nil {
		t.Fatal(err)
	}
	return w, cl, prof
}

// costModelOf is the simulator's cost model of w on cl with prof, and
// w's device IDs: what evalM and newCosts take.
func costModelOf(t *testing.T, w *core.Workload, prof *sim.Profile, cl *sim.Cluster) (*sim.CostModel, []core.DeviceID) {
	t.Helper()
	cm, err := sim.NewCostModel(w, prof, cl)
	if err != nil {
		t.Fatal(err)
	}
	var devs []core.DeviceID
	for _, d := range w.Devices {
		devs = append(devs, d.ID)
	}
	return cm, devs
}

// workloadOn is model of cfg over devs, one iteration of samples rows.
func workloadOn(t testing.TB, model string, cfg core.ModelConfig, samples int, devs []core.DeviceInfo) *core.Workload {
	t.Helper()
	mod, err := core.BuildModel(model, cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := core.Undirected(samples, nil, nil)
	batch := make([]int32, samples)
	for i := range batch {
		batch[i] = int32(i)
	}
	return core.NewWorkload(mod, g, cfg.InDim, batch, devs, 1)
}
