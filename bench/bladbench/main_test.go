package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// TestSmoke runs the whole benchmark on a tiny dataset: every scheduler
// measured and simulated, the report printed.
func TestSmoke(t *testing.T) {
	c := config{Data: "synthetic:dsbm,nodes=300,snapshots=12,edges=40,skew=20,trend=grow", Model: "tgcn", Window: 3, Hidden: 8,
		Rounds: 1, Warmup: 1, Pin: "off", Schedulers: "esdg,blad-1stream,blad,vertexpart", GPUs: "4", Preset: "nvlink-h100", Overlap: 0.5, Seed: 1,
		SimData: "synthetic:dsbm,nodes=600,snapshots=12,edges=60,skew=20,trend=bitcoin"}
	rep, err := run(context.Background(), c, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Measured) != 4 {
		t.Fatalf("%d measured rows", len(rep.Measured))
	}
	for _, m := range rep.Measured {
		if m.MedianMs <= 0 || m.SimMs <= 0 {
			t.Errorf("%s: median %v ms, simulated %v ms", m.Scheduler, m.MedianMs, m.SimMs)
		}
	}
	// 1 count x (roofline, measured) x 2 overlaps x 4 on the data, plus
	// roofline x 2 overlaps x 4 on the simulation-only data.
	if len(rep.Sim) != 16+8 {
		t.Errorf("%d simulated rows", len(rep.Sim))
	}
	for _, s := range rep.Sim {
		if s.Error != "" || s.EpochMs <= 0 {
			t.Errorf("%+v", s)
		}
	}
	var b bytes.Buffer
	rep.markdown(&b)
	for _, want := range []string{"### Measured", "### Simulated", "vertexpart", "trend=bitcoin"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if _, err := variants("blad,esdg"); err == nil {
		t.Error("esdg not first: want an error")
	}
}
