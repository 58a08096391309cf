package main

import (
	"context"
	"io"
	"strings"

	"github.com/gnnkit/gnnkit/core"
)

// resolveScheduler turns a --scheduler value into a scheduler. The closer
// (never nil) releases whatever the scheduler holds (a plugin process).
//
// "plugin:SPEC" launches a scheduler plugin (see launchPlugin in
// plugins.go); any other value names a registered scheduler.
func resolveScheduler(ctx context.Context, name string, opts map[string]string) (core.Scheduler, io.Closer, error) {
	if spec, ok := strings.CutPrefix(name, "plugin:"); ok {
		return launchPlugin(ctx, spec, opts)
	}
	s, err := core.NewScheduler(name, opts)
	if err != nil {
		return nil, nil, err
	}
	return s, nopCloser{}, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
