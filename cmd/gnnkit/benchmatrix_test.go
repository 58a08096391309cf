package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// benchMatrixRoot stands in for `gnnkit bench` until the lead attaches
// the two subcommands to it.
func benchMatrixRoot() *cobra.Command {
	root := &cobra.Command{Use: "bench", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newBenchRunCmd(), newBenchReportCmd())
	return root
}

func TestBenchMatrixCLI(t *testing.T) {
	dir := t.TempDir()
	suite := filepath.Join(dir, "tiny.json")
	// The plugin cell's binary does not exist yet: the cell is skipped,
	// and retried by each later run until it launches.
	plugin := filepath.Join(dir, "bin", "seq")
	sched, _ := json.Marshal("plugin:" + plugin)
	os.WriteFile(suite, []byte(`{"name":"tiny","version":1,"epochs":2,"warmup":1,"groups":[
	 {"backends":["cpu"],"devices":[1],"schedulers":["sequential","cherry",`+string(sched)+`],"models":["gcn"],"datasets":["cora"]}]}`), 0o644)
	out := filepath.Join(dir, "r.json")
	run := func(args ...string) (string, error) {
		var buf bytes.Buffer
		root := benchMatrixRoot()
		root.SetOut(&buf)
		root.SetErr(&buf)
		root.SetArgs(args)
		err := root.ExecuteContext(context.Background())
		return buf.String(), err
	}
	for _, step := range []struct {
		name  string
		build bool // build the plugin before this run
		want  []string
		not   []string
	}{
		{name: "first", want: []string{"3 cells: 1 ran, 2 skipped, 0 failed, 0 kept", "1 skipped because the plugin did not launch", "running the same command again retries them"},
			not: []string{"retried:"}},
		{name: "plugin-still-missing", want: []string{"3 cells: 0 ran, 1 skipped, 0 failed, 2 kept", "1 of them retried", "1 skipped because the plugin did not launch"}},
		{name: "plugin-built", build: true, want: []string{"3 cells: 1 ran, 0 skipped, 0 failed, 2 kept", "1 of them retried"},
			not: []string{"did not launch"}},
		{name: "all-finished", want: []string{"3 cells: 0 ran, 0 skipped, 0 failed, 3 kept"}, not: []string{"retried", "did not launch"}},
	} {
		if step.build {
			os.MkdirAll(filepath.Dir(plugin), 0o755)
			servePlugin(t, filepath.Dir(plugin), "seq", "sequential")
		}
		got, err := run("run", "--suite", suite, "--out", out, "-q", "--label", "box")
		if err != nil {
			t.Fatalf("%s run: %v\n%s", step.name, err, got)
		}
		for _, w := range step.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s run: output lacks %q:\n%s", step.name, w, got)
			}
		}
		for _, w := range step.not {
			if strings.Contains(got, w) {
				t.Errorf("%s run: output says %q:\n%s", step.name, w, got)
			}
		}
		if step.name == "first" {
			got, err = run("report", out, "--out", filepath.Join(dir, "rep"))
			if err != nil || !strings.Contains(got, "report.md") || !strings.Contains(got, "epoch-time-gcn-on-cora.png") {
				t.Errorf("report: %v %s", err, got)
			}
			md, _ := os.ReadFile(filepath.Join(dir, "rep", "report.md"))
			for _, want := range []string{"| box |", "cherry needs a device memory cap", "plugin did not launch"} {
				if !strings.Contains(string(md), want) {
					t.Errorf("report.md lacks %q", want)
				}
			}
		}
	}

	// --only matching no cell is an error that names the pattern and
	// lists the cells; nothing is written.
	none := filepath.Join(dir, "none.json")
	_, err := run("run", "--suite", suite, "--out", none, "-q", "--only", "scheduler=nosuch")
	for _, w := range []string{`--only "scheduler=nosuch" matches none of suite tiny's 3 cells`, "backend=cpu/devices=1/scheduler=sequential/", "scheduler=cherry"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("--only matching nothing: %v, want %q in it", err, w)
		}
	}
	if _, serr := os.Stat(none); !errors.Is(serr, fs.ErrNotExist) {
		t.Errorf("--only matching nothing wrote %s (%v)", none, serr)
	}

	os.WriteFile(out, []byte(`{"schema":"gnnkit-bench-results/v1"`), 0o644)
	if _, err := run("report", out, "--out", filepath.Join(dir, "rep2")); err == nil || !strings.Contains(err.Error(), "corrupt results file") {
		t.Errorf("corrupt file: %v", err)
	}
	if _, err := run("report", out, "--baseline", "colour=red"); err == nil {
		t.Error("bad --baseline accepted")
	}
}

// TestBenchMatrixHelper runs `gnnkit bench ARGS...` for real when
// GNNKIT_BENCHMATRIX_ARGS is set (space-separated), with Ctrl-C
// cancelling like the real binary's, e.g.
//
//	go test -c -o /tmp/gb ./cmd/gnnkit && GNNKIT_BENCHMATRIX_ARGS="run --suite smoke --out results/h.json" /tmp/gb -test.run BenchMatrixHelper
func TestBenchMatrixHelper(t *testing.T) {
	args := os.Getenv("GNNKIT_BENCHMATRIX_ARGS")
	if args == "" {
		t.Skip("set GNNKIT_BENCHMATRIX_ARGS to run the bench matrix commands")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	root := benchMatrixRoot()
	root.SetArgs(strings.Fields(args))
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestBenchReportOut: --out must name a folder; a file or nothing is
// refused naming the flag before the results are read ("mkdir outfile:
// not a directory", "mkdir : no such file or directory").
func TestBenchReportOut(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "outfile")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, out, want string
	}{
		{"file", file, "--out " + file + " is a file, not a folder"},
		{"empty", "", "--out is empty: name the folder"},
		{"blank", "  ", "--out is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := benchMatrixRoot()
			var buf bytes.Buffer
			root.SetOut(&buf)
			root.SetErr(&buf)
			root.SetArgs([]string{"report", filepath.Join(dir, "no-such-results.json"), "--out", c.out})
			err := root.ExecuteContext(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want it to say %q", err, c.want)
			}
		})
	}
}
