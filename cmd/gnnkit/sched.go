package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
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

// piperBar shows a progress bar on stderr while Piper's DP runs (a
// pipeline scheduler with dp=piper, which can take minutes): one bar per
// run of the DP, over the pairs of nested downsets it prices, cleared
// when the run ends. The returned func ends the last one and detaches.
// Nothing for other schedulers, or when !show.
func piperBar(s core.Scheduler, show bool) (done func()) {
	gs, ok := s.(*graphpipe.Scheduler)
	if !ok || gs.ChainDP != graphpipe.ChainPiper || !show {
		return func() {}
	}
	var mu sync.Mutex
	var bar *progressbar.ProgressBar
	runs := 0
	gs.Progress = func(d, total int64) {
		mu.Lock()
		defer mu.Unlock()
		if d == 0 || bar == nil {
			if bar != nil {
				_ = bar.Finish()
			}
			runs++
			bar = progressbar.NewOptions64(total,
				progressbar.OptionSetWriter(os.Stderr),
				progressbar.OptionSetDescription(fmt.Sprintf("Piper's DP, run %d: stage pairs", runs)),
				progressbar.OptionShowCount(),
				progressbar.OptionSetWidth(24),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionClearOnFinish())
		}
		_ = bar.Set64(d)
		if d >= total { // this run is over: clear its line for what follows
			_ = bar.Finish()
			bar = nil
		}
	}
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if bar != nil {
			_ = bar.Finish()
		}
		gs.Progress = nil
	}
}
