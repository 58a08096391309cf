package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
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

// schedOptUsage is the --sched-opt flag's help, shared by train and plan.
const schedOptUsage = "scheduler option key=value (repeat the flag, or key=value,key=value; a value keeps its commas unless every comma-separated piece is key=value: profile=a,b.json is one option)"

// parseSchedOpts turns the --sched-opt values into the options map. A
// value is split on its commas only where every piece is key=value
// (m=8,simulate=16), so a path with a comma (profile=runs/a,b.json)
// stays whole; one whose later pieces hold an '=' (profile=a,b=c.json)
// cannot be told from two options and splits. Keys and values are
// trimmed of spaces (m=8, dp=piper). A key given twice with different
// values is an error: which one was meant is not ours to guess.
func parseSchedOpts(vals []string) (map[string]string, error) {
	opts := map[string]string{}
	for _, val := range vals {
		kvs := []string{val}
		parts := strings.Split(val, ",")
		if len(parts) > 1 && !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(p, "=") }) {
			kvs = parts
		}
		for _, kv := range kvs {
			k, v, ok := strings.Cut(kv, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !ok || k == "" {
				return nil, fmt.Errorf("--sched-opt %q: want key=value", kv)
			}
			if old, seen := opts[k]; seen && old != v {
				return nil, fmt.Errorf("--sched-opt %s given twice, as %q and as %q: give it once", k, old, v)
			}
			opts[k] = v
		}
	}
	return opts, nil
}
