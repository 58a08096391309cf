package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
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

// TestBenchKernelsBadInput: bad sizes and thread counts are refused up
// front naming the flag (they panicked in makeslice, overflowed
// --copy-mib<<20, ran out of memory, or passed Go's 10,000-thread limit),
// and a bad --graph before any measuring (it took about 4 s).
func TestBenchKernelsBadInput(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"rows overflow", []string{"--gemm-rows", "9223372036854775807"}, []string{"--gemm-rows 9223372036854775807 with --width 128", "8.0 EiB"}},
		{"width overflow", []string{"--width", "9223372036854775807"}, []string{"--width 9223372036854775807", "8.0 EiB"}},
		{"copy overflow", []string{"--copy-mib", "9223372036854775807"}, []string{"--copy-mib 9223372036854775807", "8.0 EiB"}},
		// (Sizes past any machine's memory, so that the test holds on
		// large hosts too.)
		{"rows 2e10", []string{"--gemm-rows", "20000000000"}, []string{"--gemm-rows 20000000000", "18.6 TiB", "use a smaller --gemm-rows"}},
		{"width 1e8", []string{"--width", "100000000"}, []string{"--width 100000000", "35.6 PiB"}},
		{"cube 1e6", []string{"--gemm-cube", "1000000"}, []string{"--gemm-cube 1000000", "10.9 TiB"}},
		{"copy 1e8 MiB", []string{"--copy-mib", "100000000"}, []string{"--copy-mib 100000000", "190.7 TiB"}},
		{"negative cube", []string{"--gemm-cube", "-1"}, []string{"--gemm-cube -1", "or 0 for no"}},
		{"zero width", []string{"--width", "0"}, []string{"--width 0: must be positive"}},
		{"reps", []string{"--reps", "9223372036854775807"}, []string{"--reps 9223372036854775807", "at most 1000000"}},
		{"negative threads", []string{"--threads", "-1"}, []string{"--threads -1: want >= 1"}},
		{"pinned threads", []string{"--threads", "12000", "--pin"}, []string{"--threads 12000", "at most 4096 worker threads"}},
		{"bad graph", []string{"--graph", "no-such-graph"}, []string{"--graph no-such-graph", "not a dataset name"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			out, err := run(t, append([]string{"bench", "kernels"}, c.args...)...)
			if err == nil {
				t.Fatalf("bench kernels %v: no error\n%s", c.args, out)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("bench kernels %v: %v\nwant it to say %q", c.args, err, w)
				}
			}
			if el := time.Since(start); el > 2*time.Second {
				t.Errorf("bench kernels %v took %v to refuse, want no measuring first", c.args, el)
			}
		})
	}
}

func TestCheckKernelSizes(t *testing.T) {
	const gib = 1 << 30
	cases := []struct {
		name                   string
		width, reps, rows, cub int
		copyMiB, avail         int64
		want                   string // "" : accepted
	}{
		{"defaults", 128, 10, 100000, 1024, 1024, 16 * gib, ""},
		{"defaults, memory unknown", 128, 10, 100000, 1024, 1024, 0, ""},
		{"no cube", 128, 10, 100000, 0, 1024, 16 * gib, ""},
		{"copy over", 128, 10, 100000, 0, 1024, gib, "--copy-mib 1024: the copy measurement's two buffers need 2.0 GiB, over the 1.0 GiB"},
		{"copy fits", 128, 10, 100000, 0, 511, gib, ""},
		{"gemm over", 1024, 10, 1 << 20, 0, 1, 4 * gib, "--gemm-rows 1048576 with --width 1024: the GEMM operands ([N x W] input and output, [W x W] weights) need 8.0 GiB"},
		{"cube over", 128, 10, 1, 32768, 1, 4 * gib, "--gemm-cube 32768: the S x S x S GEMM's three S x S operands need 12.0 GiB"},
		{"overflow, memory unknown", 1 << 40, 10, 1 << 40, 0, 1, 0, "8.0 EiB, more than any machine has"},
		{"copy overflow, memory unknown", 1, 1, 1, 0, math.MaxInt64, 0, "--copy-mib 9223372036854775807"},
		{"negative cube", 1, 1, 1, -5, 1, 0, "--gemm-cube -5"},
		{"zero rows", 1, 1, 0, 0, 1, 0, "--gemm-rows 0: must be positive"},
		{"negative copy", 1, 1, 1, 0, -1, 0, "--copy-mib -1: must be positive"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkKernelSizes(c.width, c.reps, c.rows, c.cub, c.copyMiB, c.avail)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("err = %v, want it to say %q", err, c.want)
			}
		})
	}
	g, err := core.Undirected(1000, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkSpMMSize("g", g, 1<<20, 4*gib); err == nil || !strings.Contains(err.Error(), "--width 1048576 on --graph g (1000 nodes): the SpMM operands need 7.8 GiB, over the 4.0 GiB") {
		t.Errorf("SpMM over: err = %v", err)
	}
	if err := checkSpMMSize("g", g, 128, 4*gib); err != nil {
		t.Errorf("SpMM fits: %v", err)
	}
}
