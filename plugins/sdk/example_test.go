package sdk_test

import (
	"context"
	"slices"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/plugins/sdk"
)

// wholeBatch is the smallest useful scheduler: the whole batch as one
// unit on the first device (what the built-in sequential scheduler does).
type wholeBatch struct{}

func (wholeBatch) Name() string { return "whole-batch" }

func (wholeBatch) Schedule(ctx context.Context, w *core.Workload) (*core.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d, n := w.Devices[0].ID, len(w.Ops)
	return &core.Plan{
		Scheduler: "whole-batch",
		Home:      d,
		Units:     []core.Unit{{ID: 0, Targets: slices.Clone(w.Batch), LossWeight: 1}},
		Tasks: []core.Task{
			{ID: 0, Kind: core.TaskForward, Unit: 0, Device: d, OpLo: 0, OpHi: n},
			{ID: 1, Kind: core.TaskBackward, Unit: 0, Device: d, OpLo: 0, OpHi: n, Deps: []int{0}},
			{ID: 2, Kind: core.TaskStep, Unit: -1, Device: d, Deps: []int{1}},
		},
	}, nil
}

// A plugin's main is one call; build the program with go build and run it
// with gnnkit train --scheduler plugin:./PATH.
func Example() {
	sdk.Serve(wholeBatch{})
}
