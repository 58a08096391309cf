package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
	"github.com/gnnkit/gnnkit/sim"
)

// plannerCosts is what a pipeline scheduler plans with when measured on
// this machine (design-log.md, "Planning on measured costs").
type plannerCosts struct {
	prof    *sim.Profile
	cluster *sim.Cluster // nil: keep the scheduler's
	// hostCores says how the cluster's host cores were measured;
	// clusterNote why the cluster was not measured.
	hostCores, clusterNote string
	took                   time.Duration
}

// describe says what the plan was priced on, for the summaries.
func (c *plannerCosts) describe() string {
	unit := "sizes"
	if len(c.prof.Setup) == 1 {
		unit = "size"
	}
	s := fmt.Sprintf("%s at %d %s in %.1f s", measuredOn(c.prof), len(c.prof.Setup), unit, c.took.Seconds())
	switch {
	case c.cluster != nil && len(c.cluster.Devices) > 1:
		s += fmt.Sprintf("; links and host cores (%.2f, %s) measured", c.cluster.HostCores, c.hostCores)
	case c.clusterNote != "":
		s += "; " + c.clusterNote
	}
	return s
}

// profTarget is where --measure profiles: the first of local devices
// (the profiling trainer's home), or, with remote, a worker's first
// device (local then holds the trainer's home on this host), or probe.
type profTarget struct {
	local  []core.Device
	remote []engine.Remote
	// probe, when set, is a twin of local[0] without its cap
	// (hostTwin) that the profile runs on instead: a cpu device's
	// --device-mem is a budget, not the host's memory, so every unit size
	// can be measured, also those whose whole model would not fit one
	// device (a pipeline's stages each hold part of it), and the no-fit
	// figure can weigh memory above the cap. The profile keeps local[0]'s
	// info, with the memory it was measured under.
	probe core.Device
}

// hostTwin opens, when dev is a cpu device with a memory cap, a cpu
// device like it (its threads) for profiling or evaluating, capped at
// half the memory the host has available (FitCap then skips the sizes
// the host could not hold, where one allocation past it would fail the
// whole profile), or at dev's cap if that is more; nil otherwise. The
// caller closes the closer.
func hostTwin(dev core.Device) (core.Device, io.Closer, error) {
	info := dev.Info()
	if info.Backend != cpu.Name || info.MemCap <= 0 {
		return nil, nil, nil
	}
	memCap := int64(0) // unknown host memory: none
	if host := cpu.HostMemory(); host > 0 {
		memCap = max(host/2, info.MemCap)
	}
	be, err := core.OpenBackend(cpu.Name, core.BackendOptions{Devices: 1, Threads: info.Threads, MemCap: memCap})
	if err != nil {
		return nil, nil, fmt.Errorf("opening a host cpu device beside the capped ones: %w", err)
	}
	return be.Devices()[0], be, nil
}

// trainer makes a trainer over the target's devices.
func (p profTarget) trainer(m *core.Model, d engine.Data, opt engine.Optimizer, seed uint64) (*engine.Trainer, error) {
	return engine.New(engine.Config{Model: m, Devices: p.local, Remote: p.remote, Seed: seed, Data: d, Optimizer: opt})
}

// measure profiles on the target with tr (made by trainer, or one homed on
// the same first local device).
func (p profTarget) measure(ctx context.Context, tr *engine.Trainer, o sim.MeasureOptions) (*sim.Profile, error) {
	switch {
	case len(p.remote) > 0:
		return sim.MeasureRemote(ctx, tr, p.remote[0].Devices()[0], o)
	case p.probe != nil:
		prof, err := sim.MeasureWith(ctx, tr, p.probe, o)
		if err != nil {
			return nil, err
		}
		prof.Device = p.local[0].Info()
		prof.Device.MemCap = p.probe.Info().MemCap
		return prof, nil
	}
	return sim.MeasureWith(ctx, tr, p.local[0], o)
}

// profiler makes the trainer the profile runs with: over the probe when
// there is one, else trainer's.
func (p profTarget) profiler(m *core.Model, d engine.Data, opt engine.Optimizer, seed uint64) (*engine.Trainer, error) {
	if p.probe != nil {
		return engine.New(engine.Config{Model: m, Devices: []core.Device{p.probe}, Seed: seed, Data: d, Optimizer: opt})
	}
	return p.trainer(m, d, opt, seed)
}

// measurePlannerCosts profiles model m for gp on target: logical CPU
// devices from train, one device of any backend from plan
// --measure-backend. With no cluster given to gp and local devices,
// sim.CPUCluster first measures them, their links and the host's cores,
// before any trainer holds memory under a cap (if even that does not fit,
// gp keeps its default cluster). Then a trainer of its own (profiling
// takes optimizer steps, which must not move the weights being trained)
// profiles at the unit sizes gp may make for a batch of samples targets
// drawn from pool (the training nodes; sizes are kept below the pool's
// count so that each is a subgraph unit, as gp's are, unless the pool is
// one node), skipping sizes that would not fit the memory it profiles
// under (the probe's, with one: half the host's). In
// full-graph training (whole) with several devices and a measured
// cluster, MeasureConcurrency on the model's own iteration gives the
// host's cores instead of a GEMM's, unless it runs out of memory. The
// trainer is closed before it returns.
func measurePlannerCosts(ctx context.Context, gp *graphpipe.Scheduler, m *core.Model, d engine.Data, opt engine.Optimizer, target profTarget, pool []int32, samples int, whole bool, reps int, seed uint64) (*plannerCosts, error) {
	t0 := time.Now()
	c := &plannerCosts{hostCores: "a GEMM on every device at once"}
	devs := target.local
	if gp.Cluster == nil && len(target.remote) == 0 {
		cl, err := sim.CPUCluster(ctx, devs)
		switch {
		case errors.Is(err, core.ErrOutOfMemory):
			c.clusterNote = "links and host cores not measured (out of memory): assumed"
		case err != nil:
			return nil, fmt.Errorf("measuring the devices for the planner: %w", err)
		default:
			c.cluster = cl
		}
	}
	tr, err := target.profiler(m, d, opt, seed)
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	var sizes []int
	for _, n := range gp.UnitSizes(samples) {
		if len(pool) > 1 {
			n = min(n, len(pool)-1)
		}
		if !slices.Contains(sizes, n) {
			sizes = append(sizes, n)
		}
	}
	prof, err := target.measure(ctx, tr, sim.MeasureOptions{Ladder: sizes, Reps: reps, Nodes: pool, FitCap: true})
	if err != nil {
		return nil, fmt.Errorf("measuring op costs for the planner: %w", err)
	}
	c.prof = prof
	if whole && c.cluster != nil && len(devs) > 1 {
		k, err := measureConcurrency(ctx, target, tr, m, d, opt, seed, reps)
		switch {
		case err == nil:
			c.cluster.HostCores, c.hostCores = k, "the model on every device at once"
		case !errors.Is(err, core.ErrOutOfMemory):
			return nil, fmt.Errorf("measuring the devices for the planner: %w", err)
		}
	}
	c.took = time.Since(t0)
	return c, nil
}

// use hands the measured costs to gp.
func (c *plannerCosts) use(gp *graphpipe.Scheduler) {
	gp.Profile = c.prof
	if c.cluster != nil {
		gp.Cluster = c.cluster
	}
}

// measureConcurrency runs sim.MeasureConcurrency on target's local
// devices, with tr or, when tr runs on the probe, a trainer of their own.
func measureConcurrency(ctx context.Context, target profTarget, tr *engine.Trainer, m *core.Model, d engine.Data, opt engine.Optimizer, seed uint64, reps int) (float64, error) {
	if target.probe != nil {
		ctr, err := target.trainer(m, d, opt, seed)
		if err != nil {
			return 0, err
		}
		defer ctr.Close()
		tr = ctr
	}
	return sim.MeasureConcurrency(ctx, tr, target.local, reps)
}
