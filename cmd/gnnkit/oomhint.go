package main

import (
	"errors"
	"slices"
	"strings"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
)

// pipelineOOMHint is what a pipeline that ran out of memory can do.
const pipelineOOMHint = "raise --device-mem, or hold less per device: more micro-batches (--sched-opt m=N) or more devices (--devices)"

// oomHint gives an out-of-memory error from training under scheduler
// the advice that fits it: a pipeline holds less with more micro-batches
// or more devices, where core.OOMHint sends the user to cherry. The
// error still wraps err.
func oomHint(err error, scheduler string) error {
	if !slices.Contains(graphpipe.Names(), scheduler) || !errors.Is(err, core.ErrOutOfMemory) || !strings.Contains(err.Error(), core.OOMHint) {
		return err
	}
	return &hinted{err, strings.Replace(err.Error(), core.OOMHint, pipelineOOMHint, 1)}
}

// hinted is err shown with another message.
type hinted struct {
	err error
	msg string
}

func (h *hinted) Error() string { return h.msg }
func (h *hinted) Unwrap() error { return h.err }
