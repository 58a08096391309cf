package bench

import (
	"context"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const tinySuite = `{"name":"tiny","version":1,"epochs":2,"warmup":1,"seed":3,"groups":[
 {"backends":["cpu"],"devices":[1,2],"schedulers":["sequential","gpipe"],"models":["gcn"],"datasets":["cora"]}]}`

// TestRunResume runs a tiny suite, interrupts it after the first trained
// cell, runs it again, and checks that the second run only did the rest;
// then it corrupts the file and checks that a run refuses it.
func TestRunResume(t *testing.T) {
	s, err := ParseSuite([]byte(tinySuite))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "r.json")
	m := &Machine{Host: "test", CPU: "test cpu", LogicalCores: 2}
	ctx, cancel := context.WithCancel(context.Background())
	ran := 0
	f, err := Run(ctx, s, Options{Out: out, Machine: m, Progress: func(e Event) {
		if e.Result != nil && e.Result.Status == StatusOK {
			ran++
			cancel() // interrupt after the first trained cell
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	first, err := ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Cells) != len(f.Cells) || len(first.Cells) == 0 || len(first.Cells) >= 4 {
		t.Fatalf("after the interrupt the file holds %d cells", len(first.Cells))
	}
	kept := map[string]Result{}
	for _, r := range first.Cells {
		kept[r.ID] = r
	}

	var resumed, again []string
	f, err = Run(context.Background(), s, Options{Out: out, Machine: m, Progress: func(e Event) {
		if e.Result == nil {
			return
		}
		if e.Resumed {
			resumed = append(resumed, e.Result.ID)
		} else {
			again = append(again, e.Result.ID)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resumed) != len(kept) || len(resumed)+len(again) != 4 || len(f.Cells) != 4 {
		t.Fatalf("resumed %d, ran %d, file has %d cells; want %d + %d = 4", len(resumed), len(again), len(f.Cells), len(kept), 4-len(kept))
	}
	for _, id := range again {
		if _, ok := kept[id]; ok {
			t.Errorf("finished cell %s was run again", id)
		}
	}
	var ok, skipped int
	for _, r := range f.Cells {
		if k, was := kept[r.ID]; was && !k.At.Equal(r.At) {
			t.Errorf("%s was rewritten", r.ID)
		}
		switch r.Status {
		case StatusOK:
			ok++
			if r.EpochMsMedian <= 0 || len(r.EpochMs) != 2 || r.PeakMax() <= 0 || r.EdgesPerS <= 0 || r.TestAcc <= 0 {
				t.Errorf("%s: missing numbers: %+v", r.ID, r)
			}
			if _, ok := r.Metrics["bubble"]; !ok {
				t.Errorf("%s: no measured bubble", r.ID)
			}
		case StatusSkipped:
			skipped++
			if !strings.Contains(r.Reason, "several devices") {
				t.Errorf("%s: reason %q", r.ID, r.Reason)
			}
		default:
			t.Errorf("%s: %s: %s", r.ID, r.Status, r.Reason)
		}
	}
	if ok != 3 || skipped != 1 {
		t.Errorf("%d ok, %d skipped; want 3 and 1 (gpipe on one device)", ok, skipped)
	}
	if f.Cells[len(f.Cells)-1].Cell.Scheduler == "gpipe" && f.Cells[len(f.Cells)-1].Metrics["micro_batches"] == 0 {
		t.Error("gpipe reported no micro-batches")
	}

	// A third run has nothing to do.
	n := 0
	if _, err := Run(context.Background(), s, Options{Out: out, Machine: m, Progress: func(e Event) {
		if e.Result != nil && !e.Resumed {
			n++
		}
	}}); err != nil || n != 0 {
		t.Fatalf("third run: %v, %d cells run", err, n)
	}

	// Another machine's file is not resumed.
	if _, err := Run(context.Background(), s, Options{Out: out, Machine: &Machine{Host: "other"}}); err == nil || !strings.Contains(err.Error(), "not this machine") {
		t.Errorf("another machine's file: %v", err)
	}

	// A corrupt file is refused and left as it is.
	raw, _ := os.ReadFile(out)
	bad := raw[:len(raw)-40]
	os.WriteFile(out, bad, 0o644)
	_, err = Run(context.Background(), s, Options{Out: out, Machine: m})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), out) {
		t.Fatalf("corrupt file: %v", err)
	}
	if now, _ := os.ReadFile(out); string(now) != string(bad) {
		t.Error("the corrupt file was modified")
	}
	if _, err := LoadReport(out); !errors.Is(err, ErrCorrupt) {
		t.Errorf("report merged a corrupt file: %v", err)
	}

	// Report: the real file and a copy as a "second machine" twice as slow.
	os.WriteFile(out, raw, 0o644)
	g, _ := ReadFile(out)
	g.Label, g.Machine.Host = "slow", "slow-host"
	for i := range g.Cells {
		r := &g.Cells[i]
		for j := range r.EpochMs {
			r.EpochMs[j] *= 2
		}
		st := stats(r.EpochMs)
		r.EpochMsMedian, r.EpochMsP10, r.EpochMsP90, r.EpochMsMin, r.EpochMsMax = st.median, st.p10, st.p90, st.min, st.max
	}
	slow := filepath.Join(filepath.Dir(out), "slow.json")
	if err := g.Write(slow); err != nil {
		t.Fatal(err)
	}
	rep, err := LoadReport(out, slow)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(filepath.Dir(out), "report")
	files, err := rep.WriteDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, want := range []string{"| slow | cpu×1 sequential |", "| 2.00× | 1.00× |", "| test | cpu×1 sequential |", "| 1.00× | 1.00× |",
		"Skipped cells (1)", "test, slow", "speedup-gcn-on-cora.png", "epoch-time-gcn-on-cora.png"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "results.csv"))
	if n := strings.Count(string(csv), "\n"); n != 1+8 {
		t.Errorf("results.csv has %d lines, want 9", n)
	}
	bs, _ := os.ReadFile(filepath.Join(dir, "benchstat-slow.txt"))
	if strings.Count(string(bs), "ns/op") != 6 || !strings.Contains(string(bs), "BenchmarkMatrix/backend=cpu/devices=2/scheduler=gpipe/") {
		t.Errorf("benchstat text:\n%s", bs)
	}
	pngs := 0
	for _, p := range files {
		if filepath.Ext(p) != ".png" {
			continue
		}
		pngs++
		fh, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(fh)
		fh.Close()
		if err != nil || img.Bounds().Dx() < 100 {
			t.Errorf("%s: %v", p, err)
		}
	}
	if pngs != 2 {
		t.Errorf("%d PNGs, want 2 (epoch time, speedup; no 1-device micro-batches here)", pngs)
	}
	// An output name taken by a folder fails before anything is written
	// (the PNGs were written before report.md failed).
	for _, taken := range []string{"report.md", "results.csv", "benchstat-slow.txt", "speedup-gcn-on-cora.png"} {
		t.Run("taken "+taken, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, taken), 0o755); err != nil {
				t.Fatal(err)
			}
			files, err := rep.WriteDir(dir)
			if err == nil || !strings.Contains(err.Error(), "cannot write "+filepath.Join(dir, taken)+": it is a folder") || !strings.Contains(err.Error(), "nothing was written") {
				t.Errorf("WriteDir = %v, %v; want an error naming %s", files, err, taken)
			}
			left, _ := os.ReadDir(dir)
			if len(left) != 1 || left[0].Name() != taken {
				var names []string
				for _, e := range left {
					names = append(names, e.Name())
				}
				t.Errorf("after the failure %s holds %v, want only the folder %s", dir, names, taken)
			}
		})
	}
}
