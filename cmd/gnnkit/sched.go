package main

import (
	"context"
	"io"

	"github.com/gnnkit/gnnkit/core"
)

// resolveScheduler turns a --scheduler value into a scheduler. The closer
// (never nil) releases whatever the scheduler holds (a plugin process).
func resolveScheduler(_ context.Context, name string, opts map[string]string) (core.Scheduler, io.Closer, error) {
	s, err := core.NewScheduler(name, opts)
	if err != nil {
		return nil, nil, err
	}
	return s, nopCloser{}, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
