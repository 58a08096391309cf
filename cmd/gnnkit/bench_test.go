package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestBenchEpochJSON(t *testing.T) {
	out, err := run(t, "bench", "epoch", "--json", "--epochs", "2", "--warmup", "1", "--models", "gcn,sage", "--variant", "generic")
	if err != nil {
		t.Fatalf("bench epoch: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines, got %q", out)
	}
	for _, l := range lines {
		var r epochResult
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if r.Data != "cora" || r.Epochs != 2 || r.EpochMsMedian <= 0 || r.Variant != "generic" || r.Machine.Threads < 1 {
			t.Errorf("result %+v", r)
		}
	}
}

func TestBenchKernelsJSON(t *testing.T) {
	out, err := run(t, "bench", "kernels", "--json", "--reps", "1", "--copy-mib", "4", "--gemm-rows", "500",
		"--width", "32", "--gemm-cube", "64", "--graph", "synthetic:rmat,nodes=500,edges=3000,feat=0", "--variant", "all")
	if err != nil {
		t.Fatalf("bench kernels: %v\n%s", err, out)
	}
	var r kernelsReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Copy.GBsBest <= 0 || len(r.Peak) == 0 || len(r.GEMM) == 0 || len(r.SpMM) == 0 {
		t.Fatalf("report %+v", r)
	}
	for _, s := range r.SpMM {
		if s.MsMedian <= 0 || s.NoReuseFloorMs <= 0 || s.FloorFraction <= 0 {
			t.Errorf("spmm %+v", s)
		}
	}
	if _, err := run(t, "bench", "kernels", "--variant", "avx9000"); err == nil {
		t.Error("unknown variant accepted")
	}
}
