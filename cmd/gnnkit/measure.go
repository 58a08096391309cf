package main

import (
	"context"
	"fmt"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
	"github.com/gnnkit/gnnkit/sim"
)

// plannerCosts is what a pipeline scheduler plans with when measured on
// this machine (design.md, Simulator: "Planning on measured costs").
type plannerCosts struct {
	prof    *sim.Profile
	cluster *sim.Cluster // nil: keep the scheduler's
	sizes   []int        // the profile's ladder, in targets (0: the whole graph)
	took    time.Duration
}

// describe says what the plan was priced on, for the summaries.
func (c *plannerCosts) describe() string {
	s := fmt.Sprintf("measured on %s (%s) at %d sizes in %.1f s", c.prof.Device.ID, c.prof.Device.Name, len(c.sizes), c.took.Seconds())
	if c.cluster != nil && c.cluster.HostCores > 0 && len(c.cluster.Devices) > 1 {
		s += fmt.Sprintf("; links and host cores (%.2f) measured", c.cluster.HostCores)
	}
	return s
}

// measurePlannerCosts profiles model m for gp on devs (logical CPU
// devices, the first one home): a trainer of its own (profiling takes
// optimizer steps, which must not move the weights being trained) runs
// sim.MeasureWith on devs[0] at the unit sizes gp may make for a batch of
// samples targets (and the whole graph when whole), and with several
// devices sim.CPUCluster measures the links and the host's cores
// (MeasureConcurrency on the model instead, when whole: what a
// full-graph iteration sees). The trainer is closed before it returns.
func measurePlannerCosts(ctx context.Context, gp *graphpipe.Scheduler, m *core.Model, d engine.Data, devs []core.Device, samples int, whole bool, reps int, seed uint64) (*plannerCosts, error) {
	t0 := time.Now()
	tr, err := engine.New(engine.Config{Model: m, Devices: devs, Seed: seed, Data: d})
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	sizes := gp.UnitSizes(samples)
	if whole {
		sizes = append(sizes, 0)
	}
	prof, err := sim.MeasureWith(ctx, tr, devs[0], sim.MeasureOptions{Ladder: sizes, Reps: reps})
	if err != nil {
		return nil, fmt.Errorf("measuring op costs for the planner (--measure=false plans on a roofline model instead): %w", err)
	}
	c := &plannerCosts{prof: prof, sizes: sizes}
	if gp.Cluster == nil {
		cl, err := sim.CPUCluster(ctx, devs)
		if err != nil {
			return nil, fmt.Errorf("measuring the devices for the planner: %w", err)
		}
		if whole && len(devs) > 1 {
			if cl.HostCores, err = sim.MeasureConcurrency(ctx, tr, devs, reps); err != nil {
				return nil, fmt.Errorf("measuring the devices for the planner: %w", err)
			}
		}
		c.cluster = cl
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
