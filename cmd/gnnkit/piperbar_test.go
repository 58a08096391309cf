package main

import (
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/schedulers/graphpipe"
)

// TestPiperBar: a pipeline scheduler with dp=piper gets a progress hook
// for its DP while the bar is on (not under --json or -q), which takes
// several runs and is detached at the end; other schedulers are left
// alone.
func TestPiperBar(t *testing.T) {
	s, err := core.NewScheduler("1f1b", map[string]string{"dp": "piper"})
	if err != nil {
		t.Fatal(err)
	}
	gs := s.(*graphpipe.Scheduler)
	piperBar(s, false)()
	if gs.Progress != nil {
		t.Fatal("a hidden bar attached a progress hook")
	}
	done := piperBar(s, true)
	if gs.Progress == nil {
		t.Fatal("no progress hook for Piper's DP")
	}
	for _, total := range []int64{100, 50} { // two runs of the DP
		for _, d := range []int64{0, 40, total} {
			gs.Progress(d, total)
		}
	}
	done()
	if gs.Progress != nil {
		t.Error("the hook is still attached after the bar ended")
	}
	plain, _ := core.NewScheduler("1f1b", nil)
	piperBar(plain, true)()
	if plain.(*graphpipe.Scheduler).Progress != nil {
		t.Error("a scheduler without dp=piper got a progress hook")
	}
}
