package cherry_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/schedulers/cherry"
	"github.com/gnnkit/gnnkit/schedulers/sequential"
)

// TestOracleReuseSynthetic: with activation reuse on, K micro-batches still
// give the sequential full-batch loss and gradients, dropout on, every model.
func TestOracleReuseSynthetic(t *testing.T) {
	for _, k := range []int{1, 2, 4, 8, 16} {
		t.Run(fmt.Sprintf("K=%d", k), func(t *testing.T) {
			schedtest.Oracle(t, &cherry.Scheduler{K: k, Reuse: true}, schedtest.OracleOptions{Devices: 1})
		})
	}
}

// TestOracleReuseSampled: the same on a sampled mini-batch.
func TestOracleReuseSampled(t *testing.T) {
	f := schedtest.NewFixture(600, 4, 16, 4, 9)
	for _, k := range []int{2, 8} {
		t.Run(fmt.Sprintf("K=%d", k), func(t *testing.T) {
			schedtest.Oracle(t, &cherry.Scheduler{K: k, Reuse: true}, schedtest.OracleOptions{Devices: 1, Fixture: f,
				Batch: []int32{5, 17, 40, 41, 99, 120, 121, 300, 301, 302, 450, 599, 2, 3, 77, 88}, Fanouts: []int{3, 2}})
		})
	}
}

// TestOracleReuseCora: K micro-batches with reuse on the embedded Cora.
func TestOracleReuseCora(t *testing.T) {
	if testing.Short() {
		t.Skip("Cora oracle: skipped with -short")
	}
	f, train := coraFixture(t)
	for _, k := range []int{1, 2, 4, 8, 16} {
		t.Run(fmt.Sprintf("K=%d", k), func(t *testing.T) {
			schedtest.Oracle(t, &cherry.Scheduler{K: k, Reuse: true}, schedtest.OracleOptions{Devices: 1, Fixture: f, Batch: train, Steps: 2})
		})
	}
}

// TestReuseEstimateMatchesMeasured: under reuse the predicted peak (the
// three phases replayed on the meta device) is the measured one within
// 10%, with the shared producers kept and recomputed.
func TestReuseEstimateMatchesMeasured(t *testing.T) {
	f := schedtest.NewFixture(500, 4, 24, 4, 4)
	for _, model := range []string{"gcn", "sage", "gat"} {
		for _, k := range []int{1, 4} {
			for _, keep := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/K=%d/keep=%v", model, k, keep), func(t *testing.T) {
					s := newSetup(t, f, model, core.ModelConfig{Hidden: 16, Heads: 2, Dropout: 0.5, AttnDropout: 0.3}, 0,
						func(tr *engine.Trainer) *engine.Batch { return tr.FullBatch(nodesUpTo(400)) })
					w, err := s.tr.Workload(s.b, infos(s.devs))
					if err != nil {
						t.Fatal(err)
					}
					p, err := (&cherry.Scheduler{K: k, Reuse: true}).Schedule(context.Background(), w)
					if err != nil {
						t.Fatal(err)
					}
					if p.Reuse == nil || (k > 1 && p.Metrics["reuse_shared"] == 0) {
						t.Fatalf("plan has no reuse section or no shared nodes: %+v %v", p.Reuse, p.Metrics)
					}
					p.Reuse.Keep = keep
					pred, err := w.PlanEstimator(p)
					if err != nil {
						t.Fatal(err)
					}
					var measured int64
					for range 2 {
						res, err := s.tr.Run(context.Background(), p, s.b, engine.RunOptions{})
						if err != nil {
							t.Fatal(err)
						}
						measured = res.Trace.PeakMem[s.devs[0].ID()]
					}
					if e := float64(pred)/float64(measured) - 1; e > 0.10 || e < -0.10 {
						t.Errorf("predicted %d, measured %d: %+.1f%%", pred, measured, 100*e)
					}
				})
			}
		}
	}
}

// TestReuseUnderCap: with a cap, cherry with reuse picks K and chunks
// whose measured peak stays under the cap, and computes less: its
// redundancy is below the plan's without reuse.
func TestReuseUnderCap(t *testing.T) {
	f := schedtest.NewFixture(2000, 6, 64, 4, 8)
	full := func(tr *engine.Trainer) *engine.Batch { return tr.FullBatch(nodesUpTo(1500)) }
	cfg := core.ModelConfig{Hidden: 64, Dropout: 0.5}
	probe := newSetup(t, f, "sage", cfg, 0, full)
	w, err := probe.tr.Workload(probe.b, infos(probe.devs))
	if err != nil {
		t.Fatal(err)
	}
	seq, err := (&sequential.Scheduler{}).Schedule(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := w.PlanEstimator(seq)
	if err != nil {
		t.Fatal(err)
	}
	memCap := whole / 3
	plain := newSetup(t, f, "sage", cfg, memCap, full)
	pp, _, err := plain.run(t, &cherry.Scheduler{})
	if err != nil {
		t.Fatal(err)
	}
	reuse := newSetup(t, f, "sage", cfg, memCap, full)
	p, peak, err := reuse.run(t, &cherry.Scheduler{Reuse: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cap %s: without reuse K=%v redundancy %.2f; with reuse K=%v chunks %v shared %v keep %v redundancy %.2f, peak %s (predicted %s)",
		core.FormatBytes(memCap), pp.Metrics["micro_batches"], pp.Metrics["redundancy"], p.Metrics["micro_batches"], p.Metrics["reuse_chunks"],
		p.Metrics["reuse_shared"], p.Metrics["reuse_keep"], p.Metrics["redundancy"], core.FormatBytes(peak), core.FormatBytes(p.MemEstimate[reuse.devs[0].ID()]))
	if peak > memCap {
		t.Errorf("measured peak %d over the cap %d", peak, memCap)
	}
	if p.Metrics["redundancy"] >= pp.Metrics["redundancy"] {
		t.Errorf("redundancy with reuse %.2f, without %.2f: reuse should gather fewer inputs", p.Metrics["redundancy"], pp.Metrics["redundancy"])
	}
}

// TestReuseBadChunks: a plan whose chunks do not cover the shared nodes is
// refused with a clear error, and leaves no gradients behind.
func TestReuseBadChunks(t *testing.T) {
	f := schedtest.NewFixture(300, 4, 16, 4, 2)
	s := newSetup(t, f, "gcn", core.ModelConfig{Hidden: 8}, 0, func(tr *engine.Trainer) *engine.Batch { return tr.FullBatch(nodesUpTo(200)) })
	w, err := s.tr.Workload(s.b, infos(s.devs))
	if err != nil {
		t.Fatal(err)
	}
	p, err := (&cherry.Scheduler{K: 4, Reuse: true}).Schedule(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	p.Reuse.Chunks = p.Reuse.Chunks[1:]
	if err := p.Validate(w); err != nil {
		t.Fatal(err)
	}
	_, err = s.tr.Run(context.Background(), p, s.b, engine.RunOptions{})
	if err == nil || !strings.Contains(err.Error(), "shared by two or more units") {
		t.Fatalf("err = %v, want the chunks-do-not-cover error", err)
	}
	p.Reuse.Boundary = "no-such-value"
	if err := p.Validate(w); err == nil || !strings.Contains(err.Error(), "no-such-value") {
		t.Fatalf("Validate = %v, want an error naming the unknown boundary", err)
	}
}
