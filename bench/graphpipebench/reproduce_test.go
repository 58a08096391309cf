package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

// TestPlanCommandReproducesRows runs the gnnkit plan commands the
// benchmark prints (planCommand) and checks that each gives the
// iteration time of its row in both simulated tables, for every
// scheduler: the command line plans the same workload with the same
// options (slack among them: the benchmark's -slack, here 5%, which
// moves GraphPipe's fixed-m row; a command without it would miss it).
func TestPlanCommandReproducesRows(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gnnkit and plans 8 times")
	}
	c := config{
		models:  []model{{"uno", 2, core.ModelConfig{InDim: 1024, Hidden: 1024, Classes: 2, Layers: 2, Branches: 2}, ""}},
		devices: []int{4}, preset: "pcie-a100", ports: true, samples: 2048, m: 4, capFrac: 1.5, slack: 0.05,
	}
	// The rows' iteration ms by table (0 fixed m, 1 memory-capped) and
	// scheduler, and the printed commands.
	tables := func(c config) (rows [2]map[string]string, cmds [2]string) {
		t.Helper()
		var out bytes.Buffer
		if _, _, err := simulated(&out, c); err != nil {
			t.Fatal(err)
		}
		rows = [2]map[string]string{{}, {}}
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
		return rows, cmds
	}
	rows, cmds := tables(c)
	// The slack moves a row here, so a command that dropped it would
	// simulate another time than its row.
	plain := c
	plain.slack = 0
	if fast, _ := tables(plain); fmt.Sprint(fast) == fmt.Sprint(rows) {
		t.Errorf("slack %v moves no row of this cell (%v): the check below would not see a command without it", c.slack, rows)
	} else {
		t.Logf("rows at slack 0: %v; at %v: %v", fast, c.slack, rows)
	}
	if !strings.Contains(cmds[0], " --sched-opt m=4 ") || strings.Contains(cmds[1], "m=4") || !strings.Contains(cmds[1], "--device-mem ") {
		t.Errorf("the fixed-m command must fix m and the capped one cap memory instead: %q", cmds)
	}
	for _, cmd := range cmds {
		if !strings.Contains(cmd, " --sched-opt slack="+strconv.FormatFloat(c.slack, 'g', -1, 64)+" ") {
			t.Errorf("the command lacks the benchmark's slack: %q", cmd)
		}
	}

	bin := buildGnnkit(t)
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

// TestGNNTableSmoke runs the multi-branch GNN table on a small graph:
// every row has the three schedulers' cells or "does not fit", GraphPipe
// is never slower than the best chain (chainWalks: each chain family is
// its baseline's whole search), and the row's plan is the one gnnkit
// plan prints for the same command line.
func TestGNNTableSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gnnkit and plans a GNN 7 times")
	}
	c := gnnConfig{data: "synthetic:sbm,nodes=2048,feat=64,classes=4,avgdeg=8,train=256,val=0,test=0", branches: []int{3}, hidden: 64,
		devices: []int{4}, caps: []int64{1 << 30, 16 << 20}, preset: "pcie-a100"}
	var out bytes.Buffer
	if err := gnnTable(&out, c); err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "| mbgnn-3 | 4 |") {
			rows = append(rows, strings.Split(strings.Trim(line, "| "), " | "))
		}
	}
	if len(rows) != 2 || !strings.Contains(out.String(), "any row from the command line: gnnkit plan --model mbgnn") {
		t.Fatalf("want 2 rows and the command line:\n%s", out.String())
	}
	for _, r := range rows {
		if len(r) != 7 {
			t.Fatalf("row %q: %d cells, want 7", r, len(r))
		}
		if x, err := strconv.ParseFloat(strings.TrimSuffix(r[6], "x"), 64); err == nil && x < 1 {
			t.Errorf("row %q: GraphPipe slower than the best chain", r)
		}
	}
	bin := buildGnnkit(t)
	for i, mem := range []string{"1073741824", "16777216"} {
		args := []string{"plan", "--model", "mbgnn", "--branches", "3", "--hidden", "64", "--data", c.data, "--preset", "pcie-a100",
			"--device-mem", mem, "--simulate", "--devices", "4", "--scheduler", "graphpipe", "--json"}
		b, err := exec.Command(bin, args...).Output()
		if strings.HasPrefix(rows[i][3], "does not fit") {
			if err == nil {
				t.Errorf("row %q: the command planned", rows[i])
			}
			continue
		}
		var res struct {
			Simulation struct {
				IterationNS int64 `json:"iteration_ns"`
			} `json:"simulation"`
		}
		if err != nil || json.Unmarshal(b, &res) != nil {
			t.Fatalf("gnnkit %s: %v, %s", strings.Join(args, " "), err, stderrOf(err))
		}
		if got := fmt.Sprintf("%.2f ms", float64(res.Simulation.IterationNS)/1e6); !strings.HasPrefix(rows[i][3], got) {
			t.Errorf("row %q: the command simulates %s", rows[i], got)
		}
	}
}

// The gnnkit command, built once for the package's tests.
var gnnkitBin struct {
	once sync.Once
	path string
	err  error
}

// buildGnnkit builds the gnnkit command (once) and returns its path.
func buildGnnkit(t *testing.T) string {
	t.Helper()
	gnnkitBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "graphpipebench-gnnkit")
		if err != nil {
			gnnkitBin.err = err
			return
		}
		bin := filepath.Join(dir, "gnnkit")
		if runtime.GOOS == "windows" {
			bin += ".exe"
		}
		gotool, err := exec.LookPath("go")
		if err != nil {
			gotool = "/usr/local/go/bin/go"
		}
		if b, err := exec.Command(gotool, "build", "-o", bin, "../../cmd/gnnkit").CombinedOutput(); err != nil {
			gnnkitBin.err = fmt.Errorf("go build: %v\n%s", err, b)
			return
		}
		gnnkitBin.path = bin
	})
	if gnnkitBin.err != nil {
		t.Fatal(gnnkitBin.err)
	}
	return gnnkitBin.path
}

// TestMain removes the gnnkit command the tests built; run with
// GRAPHPIPEBENCH_MAIN=1 it is the benchmark's main (TestFlagsRefused).
func TestMain(m *testing.M) {
	if os.Getenv("GRAPHPIPEBENCH_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	code := m.Run()
	if gnnkitBin.path != "" {
		os.RemoveAll(filepath.Dir(gnnkitBin.path))
	}
	os.Exit(code)
}

// TestFlagsRefused runs the benchmark's main with flags it would ignore
// or cannot honour: each exits 1 before any work, saying which flag and
// why.
func TestFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-search", "-slack", "0.01"}, "-slack would be ignored"},
		{[]string{"-sweep", "4", "-slack", "0.01"}, "-slack would be ignored"},
		{[]string{"-gnn", "-slack", "0.01"}, "-slack would be ignored"},
		{[]string{"-slack", "1"}, "-slack 1: want a fraction in [0, 1)"},
		{[]string{"-slack", "NaN"}, "-slack NaN: want a fraction in [0, 1)"},
		{[]string{"-sweep", "4", "-measure-replicas", "1"}, "-measure-replicas would be ignored"},
	} {
		cmd := exec.Command(os.Args[0], tc.args...)
		cmd.Env = append(os.Environ(), "GRAPHPIPEBENCH_MAIN=1")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), tc.want) {
			t.Errorf("graphpipebench %s: %v, output %q; want exit 1 saying %q", strings.Join(tc.args, " "), err, out, tc.want)
		}
	}
}
