// Package sequential is the reference scheduler: the whole batch as one
// unit, forward then backward then the optimizer step, on one device and
// one stream. Every other scheduler is checked against it (core/schedtest).
package sequential

import (
	"context"
	"fmt"
	"slices"

	"github.com/gnnkit/gnnkit/core"
)

var _ core.Scheduler = (*Scheduler)(nil)

func init() {
	core.RegisterScheduler("sequential", func(opts map[string]string) (core.Scheduler, error) {
		s := &Scheduler{}
		for k, v := range opts {
			switch k {
			case "device":
				s.Device = core.DeviceID(v)
			default:
				return nil, fmt.Errorf("sequential: unknown option %q (known: device)", k)
			}
		}
		return s, nil
	})
}

// Scheduler plans full-batch training on one device.
type Scheduler struct {
	// Device to run on; empty means the workload's first device.
	Device core.DeviceID
}

// Name returns "sequential".
func (s *Scheduler) Name() string { return "sequential" }

// Schedule returns the three-task plan: forward, backward, step.
func (s *Scheduler) Schedule(ctx context.Context, w *core.Workload) (*core.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(w.Devices) == 0 {
		return nil, fmt.Errorf("sequential: the workload has no devices")
	}
	dev := s.Device
	if dev == "" {
		dev = w.Devices[0].ID
	} else if _, ok := w.Device(dev); !ok {
		return nil, fmt.Errorf("sequential: device %s is not among the workload's devices", dev)
	}
	n := len(w.Ops)
	if n == 0 {
		return nil, fmt.Errorf("sequential: the workload's model has no ops")
	}
	return &core.Plan{
		Scheduler: s.Name(),
		Home:      dev,
		Units:     []core.Unit{{ID: 0, Targets: slices.Clone(w.Batch), LossWeight: 1}},
		Tasks: []core.Task{
			{ID: 0, Kind: core.TaskForward, Unit: 0, Device: dev, OpLo: 0, OpHi: n},
			{ID: 1, Kind: core.TaskBackward, Unit: 0, Device: dev, OpLo: 0, OpHi: n, Deps: []int{0}},
			{ID: 2, Kind: core.TaskStep, Unit: -1, Device: dev, Deps: []int{1}},
		},
	}, nil
}
