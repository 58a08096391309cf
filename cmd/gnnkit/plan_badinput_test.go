package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanBadInputKeepsFiles: a plan that fails leaves the files its
// --write-cluster, --dot and --trace name as they were; sizes the
// simulator cannot price are refused (before, --heads 2^62 overflowed a
// weight's shape and planned a plausible-looking model, and --device-mem
// past 1 PiB wrote a cluster file that --cluster then refused).
func TestPlanBadInputKeepsFiles(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	var outs []string
	for _, name := range []string{"write-cluster", "dot", "trace"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("keep me"), 0o644); err != nil {
			t.Fatal(err)
		}
		files[name] = p
		outs = append(outs, "--"+name, p)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no data", []string{"--data", filepath.Join(dir, "missing")}, "no such file"},
		{"no fit", []string{"--scheduler", "graphpipe", "--model", "uno", "--hidden", "64", "--preset", "pcie-a100", "--devices", "2", "--device-mem", "1"}, "model does not fit"},
		{"memory past the simulator's", []string{"--preset", "pcie-a100", "--devices", "2", "--device-mem", "2000TiB"}, "--device-mem 2000TiB: at most 1.0 PiB per device"},
		{"heads", []string{"--model", "gat", "--heads", "4611686018427387904"}, "--heads 4611686018427387904: at most 1024"},
		{"hidden", []string{"--hidden", "4611686018427387904"}, "--hidden 4611686018427387904: at most"},
		{"heads with uno", []string{"--model", "uno", "--heads", "4"}, "--heads applies to gat's attention, not uno"},
		{"reps", []string{"--measure", "--reps", "0"}, "--reps 0: want from 1 to"},
		{"reps without measure", []string{"--reps", "-5"}, "--reps -5: it sets --measure's timed runs; add --measure"},
		{"negative memory", []string{"--preset", "pcie-a100", "--devices", "2", "--device-mem", "-5MiB"}, `size "-5MiB" is negative`},
		{"a CPU profile over the trace", []string{"--cpuprofile", filepath.Join(dir, "trace")}, "--trace and --cpuprofile both write"},
		{"a model past the simulator's", []string{"--hidden", "1073741824", "--layers", "40"}, "more than the simulator prices"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := run(t, append(append([]string{"plan", "--simulate"}, c.args...), outs...)...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			for name, p := range files {
				if b, err := os.ReadFile(p); err != nil || string(b) != "keep me" {
					t.Errorf("--%s's file now holds %.40q (%v)", name, b, err)
				}
			}
		})
	}
}
