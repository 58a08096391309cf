package graphpipe

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

// TestSearchMemo: a search that shares its costs, estimates and chain
// read-outs between its walks (searchMemo) and estimates side by side
// (estimateAll) chooses what a search keeping nothing does, metric for
// metric and task for task, with m searched (GraphPipe's walk, then each
// chain baseline's: chainWalks) and fixed; the baselines' walks find the
// read-outs GraphPipe's made; and every candidate's kept estimate is what
// a fresh costs, one estimate at a time, gives.
func TestSearchMemo(t *testing.T) {
	cfg := core.ModelConfig{InDim: 256, Hidden: 512, Classes: 2, Layers: 3, Branches: 3}
	_, cl, prof := rooflineWorkload(t, "uno", cfg, 1024, 8)
	for i := range cl.Devices {
		cl.Devices[i].MemBytes = 28 << 20 // tight: the walks cross counts where little fits
	}
	w := workloadOn(t, "uno", cfg, 1024, cl.Infos())
	cm, devs := costModelOf(t, w, prof, cl)
	plan := func(p *core.Plan) string {
		var b []byte
		for _, k := range slices.Sorted(maps.Keys(p.Metrics)) {
			b = fmt.Appendf(b, "%s=%v\n", k, p.Metrics[k])
		}
		for _, tk := range p.Tasks {
			b = fmt.Appendf(b, "%v %v %v %v %v\n", tk.Kind, tk.Device, tk.Unit, tk.Ops, tk.Deps)
		}
		return string(b)
	}
	for _, s := range []*Scheduler{
		{Graph: true, Kind: OneFOneB, Cluster: cl, Profile: prof},
		{Graph: true, Kind: OneFOneB, Cluster: cl, Profile: prof, GPipeOrder: true},
		{Graph: true, Kind: OneFOneB, Cluster: cl, Profile: prof, MicroBatches: 8},
		{Graph: true, Kind: OneFOneB, Cluster: cl, Profile: prof, ChainDP: ChainPiper},
		{Kind: OneFOneB, Cluster: cl, Profile: prof},
	} {
		name := fmt.Sprintf("%s gpipe=%v m=%d dp=%v", s.Name(), s.GPipeOrder, s.MicroBatches, s.ChainDP)
		plain := *s
		want, err := plain.search(t.Context(), w, cm, devs)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		kept := *s
		kept.memo = &searchMemo{}
		got, err := kept.search(t.Context(), w, cm, devs)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if plan(got) != plan(want) {
			t.Errorf("%s: the plan differs with the memo:\n%s\nwithout:\n%s", name, plan(got), plan(want))
		}
		var hits, preds int64
		for _, c := range kept.memo.costs {
			hits += c.memo.hits.Load()
			preds += int64(len(c.memo.preds))
		}
		if preds == 0 {
			t.Errorf("%s: no estimate kept", name)
		}
		if s.Graph && s.MicroBatches == 0 && hits == 0 {
			t.Errorf("%s: the chain baselines' walks looked nothing up", name)
		}
		t.Logf("%s: %.3f ms at m = %v, peak %.0f MiB; %d counts, %d estimates kept, %d lookups answered", name, got.Metrics["simulated_iteration_ms"], got.Metrics["micro_batches"], got.Metrics["predicted_peak_bytes"]/(1<<20), len(kept.memo.costs), preds, hits)
	}
	// Every candidate's estimate, made side by side and kept, then
	// looked up in a second run, is a fresh costs' own, one at a time.
	s := &Scheduler{Graph: true, Kind: OneFOneB, Cluster: cl, Profile: prof, GPipeOrder: true, memo: &searchMemo{}}
	for run := range 2 {
		e, err := s.evalM(t.Context(), w, cm, devs, 8, nil)
		if err != nil {
			t.Fatal(err)
		}
		fresh := newCosts(cm, w, devs, 8, s.Step)
		fresh.bucket = float64(s.planOptions().BucketBytes)
		n := 0
		for _, pool := range e.pools {
			for _, cd := range pool {
				n++
				if want := fresh.price(cd.part, cd.kind); cd.pred != want {
					t.Fatalf("run %d: %s (%s): estimate %+v, fresh %+v", run, describe(cd), cd.kind, cd.pred, want)
				}
			}
		}
		if n < 20 {
			t.Errorf("run %d: only %d candidates", run, n)
		}
		if hits := e.c.memo.hits.Load(); (run == 0) != (hits < int64(n)) {
			t.Errorf("run %d: %d lookups answered for %d candidates", run, hits, n)
		}
	}
}
