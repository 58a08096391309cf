package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// TestSearchTableSmoke: the search table times the three partitioners on
// a small uno, reports Piper's refusal on a model of too many downsets
// (and GraphPipe's search there), and reports a search past the limit as
// stopped.
func TestSearchTableSmoke(t *testing.T) {
	c := searchConfig{
		models: []model{
			{"uno", 2, core.ModelConfig{InDim: 256, Hidden: 256, Classes: 2, Layers: 2, Branches: 2}, ""},
			{"uno", 8, core.ModelConfig{InDim: 64, Hidden: 64, Classes: 2, Layers: 3, Branches: 8}, ""},
		},
		devices: []int{4}, preset: "pcie-a100", samples: 512, m: 4, limit: time.Minute, reps: 1,
	}
	var out bytes.Buffer
	if err := searchTable(&out, c); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	var uno2, uno8 string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "| uno-2 |"):
			uno2 = l
		case strings.HasPrefix(l, "| uno-8 |"):
			uno8 = l
		}
	}
	f2, f8 := strings.Split(uno2, " | "), strings.Split(uno8, " | ")
	if len(f2) != 13 || len(f8) != 13 {
		t.Fatalf("rows %q and %q: want 13 cells each\n%s", uno2, uno8, out.String())
	}
	// uno-2 (2 layers): every search ran and every plan simulated.
	for i := 4; i < 13; i++ {
		if f2[i] == "—" || strings.Contains(f2[i], "error") || strings.Contains(f2[i], "refused") {
			t.Errorf("uno-2 cell %d is %q:\n%s", i, f2[i], out.String())
		}
	}
	if f8[2] != "too many" || f8[5] != "refused: too many downsets" || f8[6] == "—" || strings.Contains(f8[6], "error") || f8[12] != "— |" {
		t.Errorf("uno-8: downsets %q, piper %q, graphpipe %q; want Piper refused and GraphPipe timed\n%s", f8[2], f8[5], f8[6], out.String())
	}
	c.models, c.limit = c.models[:1], time.Nanosecond
	out.Reset()
	if err := searchTable(&out, c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "(stopped)") {
		t.Errorf("a search past its limit is not reported as stopped:\n%s", out.String())
	}
}
