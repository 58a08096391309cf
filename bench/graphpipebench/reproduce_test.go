package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

// TestPlanCommandReproducesRows runs the gnnkit plan commands the
// benchmark prints (planCommand) and checks that each gives the
// iteration time of its row in both simulated tables, for every
// scheduler: the command line plans the same workload with the same
// options.
func TestPlanCommandReproducesRows(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gnnkit and plans 8 times")
	}
	c := config{
		models:  []model{{"uno", 2, core.ModelConfig{InDim: 1024, Hidden: 1024, Classes: 2, Layers: 2, Branches: 2}, ""}},
		devices: []int{4}, preset: "pcie-a100", ports: true, samples: 2048, m: 4, capFrac: 1.5,
	}
	var out bytes.Buffer
	if _, _, err := simulated(&out, c); err != nil {
		t.Fatal(err)
	}
	// The rows' iteration ms by table (0 fixed m, 1 memory-capped) and
	// scheduler, and the printed commands.
	rows := [2]map[string]string{{}, {}}
	var cmds [2]string
	table := -1
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Split(line, " | ")
		switch {
		case strings.HasPrefix(line, "| model | devices | memory cap |"):
			table++
		case len(f) == 14 && strings.HasPrefix(line, "| uno-2 | 4 |"):
			rows[table][f[3]] = f[10]
			if f[10] == "-" { // no plan: the row ends with the error
				rows[table][f[3]] = "error: " + strings.TrimSuffix(f[13], " |")
			}
		case strings.HasPrefix(line, "  uno-2: "):
			cmds[0] = strings.TrimPrefix(line, "  uno-2: ")
		case strings.HasPrefix(line, "    memory-capped: "):
			cmds[1] = strings.TrimPrefix(line, "    memory-capped: ")
		}
	}
	if table != 1 || cmds[0] == "" || cmds[1] == "" {
		t.Fatalf("want two tables and two commands, got %d tables, commands %q:\n%s", table+1, cmds, out.String())
	}
	if !strings.Contains(cmds[0], " --sched-opt m=4 ") || strings.Contains(cmds[1], "m=4") || !strings.Contains(cmds[1], "--device-mem ") {
		t.Errorf("the fixed-m command must fix m and the capped one cap memory instead: %q", cmds)
	}

	bin := filepath.Join(t.TempDir(), "gnnkit")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	gotool, err := exec.LookPath("go")
	if err != nil {
		gotool = "/usr/local/go/bin/go"
	}
	if b, err := exec.Command(gotool, "build", "-o", bin, "../../cmd/gnnkit").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	for ti, cmd := range cmds {
		for sched, extra := range map[string][]string{
			"graphpipe":          {"--scheduler", "graphpipe"},
			"1f1b":               {"--scheduler", "1f1b"},
			"gpipe":              {"--scheduler", "gpipe"},
			"graphpipe-disjoint": {"--scheduler", "graphpipe", "--sched-opt", "shared=off"},
		} {
			want, ok := rows[ti][sched]
			if !ok {
				t.Errorf("table %d has no %s row", ti, sched)
				continue
			}
			args := append(strings.Fields(strings.TrimPrefix(cmd, "gnnkit ")), "--devices", "4", "--json")
			args = append(args, extra...)
			b, err := exec.Command(bin, args...).Output()
			if msg, ok := strings.CutPrefix(want, "error: "); ok {
				// The scheduler found no plan: the command says why, alike.
				var ee *exec.ExitError
				if !errors.As(err, &ee) || !strings.Contains(string(ee.Stderr), msg) {
					t.Errorf("gnnkit %s: %v, stderr %q; want the row's error %q", strings.Join(args, " "), err, stderrOf(err), msg)
				} else {
					t.Logf("table %d, %s: the same error both: %s", ti, sched, msg)
				}
				continue
			}
			if err != nil {
				t.Errorf("gnnkit %s: %v", strings.Join(args, " "), err)
				continue
			}
			var res struct {
				Simulation struct {
					IterationNS int64 `json:"iteration_ns"`
				} `json:"simulation"`
			}
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatalf("gnnkit %s: %v", strings.Join(args, " "), err)
			}
			if got := fmt.Sprintf("%.2f", float64(res.Simulation.IterationNS)/1e6); got != want {
				t.Errorf("table %d, %s: the command simulates %s ms, the row says %s (gnnkit %s)", ti, sched, got, want, strings.Join(args, " "))
			} else {
				t.Logf("table %d, %s: %s ms both", ti, sched, got)
			}
		}
	}
}

// stderrOf is what a failed command wrote to stderr, if err carries it.
func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}
