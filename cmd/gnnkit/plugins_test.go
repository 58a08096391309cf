package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/bench"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/plugins/host"
	"github.com/gnnkit/gnnkit/plugins/plugintest"
	"github.com/gnnkit/gnnkit/plugins/sdk"
	"github.com/gnnkit/gnnkit/schedulers/sequential"
)

// TestHelperServe is not a test: run by a wrapper script with
// GNNKIT_TEST_SERVE=NAME, the test binary becomes `gnnkit plugins serve
// NAME ARGS...` (the TestHelperProcess idiom), so the CLI tests need no
// gnnkit binary.
func TestHelperServe(t *testing.T) {
	name := os.Getenv("GNNKIT_TEST_SERVE")
	if name == "" {
		t.Skip("helper process for the plugin tests")
	}
	switch name {
	case "hang": // a plugin whose Schedule never answers
		sdk.Serve(hangScheduler{})
		os.Exit(0)
	case "move-home": // a plugin whose Observe moves the home device
		sdk.Serve(&moveHome{})
		os.Exit(0)
	}
	args := []string{"plugins", "serve", name}
	for i, a := range os.Args {
		if a == "--" {
			args = append(args, os.Args[i+1:]...)
			break
		}
	}
	root := newRoot()
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// hangScheduler never answers Schedule and ignores its context.
type hangScheduler struct{}

func (hangScheduler) Name() string { return "hang" }
func (hangScheduler) Schedule(context.Context, *core.Workload) (*core.Plan, error) {
	time.Sleep(time.Hour)
	return nil, errors.New("unreachable")
}

// moveHome is sequential on the first device; after an iteration, its
// Observe moves everything, home included, to the last device.
type moveHome struct{ sequential.Scheduler }

func (*moveHome) Name() string { return "move-home" }
func (*moveHome) Observe(ctx context.Context, w *core.Workload, _ *core.Trace) (*core.Plan, error) {
	s := &sequential.Scheduler{Device: w.Devices[len(w.Devices)-1].ID}
	return s.Schedule(ctx, w)
}

// servePlugin writes a wrapper script into dir that serves the built-in
// scheduler name as a plugin, the way the help text tells users to.
func servePlugin(t *testing.T, dir, file, name string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("wrapper scripts need /bin/sh")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, file)
	script := fmt.Sprintf("#!/bin/sh\nGNNKIT_TEST_SERVE=%s exec %q -test.run='^TestHelperServe$' -- \"$@\"\n", name, self)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTrainWithPlugin trains with the built-in sequential scheduler and
// with the same scheduler served as a plugin: the results are identical,
// and --sched-opt reaches the plugin.
func TestTrainWithPlugin(t *testing.T) {
	wrapper := servePlugin(t, t.TempDir(), "seq", "sequential")
	for _, devs := range [][]string{nil, {"--devices", "cpu:0,cpu:1", "--sched-opt", "device=cpu:1"}} {
		args := append([]string{"--epochs", "3"}, devs...)
		want := trainJSON(t, append(args, "--scheduler", "sequential")...)
		got := trainJSON(t, append(args, "--scheduler", "plugin:"+wrapper)...)
		if got.Scheduler != "sequential" || got.FinalLoss != want.FinalLoss || got.TestAcc != want.TestAcc || got.ValAcc != want.ValAcc {
			t.Errorf("%v: plugin %+v, built-in %+v", devs, got, want)
		}
		if devs != nil && (got.PeakMemBytes["cpu:1"] == 0 || got.PeakMemBytes["cpu:0"] != 0) {
			t.Errorf("device=cpu:1 did not reach the plugin: peak memory %v", got.PeakMemBytes)
		}
	}
}

func TestPluginsListAndNames(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GNNKIT_PLUGIN_DIR", dir)
	out, err := run(t, "plugins", "list")
	if err != nil || !strings.Contains(out, "no plugins") {
		t.Fatalf("empty folder: %q, %v", out, err)
	}
	seq := servePlugin(t, dir, "seq", "sequential")
	sum, err := host.Checksum(seq)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seq+".sha256", []byte(sum+"  seq\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken"), []byte("#!/bin/sh\necho oops >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Two entries that cannot start: each is listed with its own error,
	// and neither hides the others.
	if err := os.WriteFile(filepath.Join(dir, "noexec"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badpin := servePlugin(t, dir, "badpin", "sequential")
	if err := os.WriteFile(badpin+".sha256", []byte("xyz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "plugins", "list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Dir     string         `json:"dir"`
		Plugins []pluginReport `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if doc.Dir != dir || len(doc.Plugins) != 3 {
		t.Fatalf("list: %+v; want badpin, broken and seq (a file without an execute bit is no plugin)", doc)
	}
	bp, b, s := doc.Plugins[0], doc.Plugins[1], doc.Plugins[2]
	if b.Name != "broken" || !strings.Contains(b.Error, "oops") {
		t.Errorf("broken plugin: %+v", b)
	}
	if bp.Name != "badpin" || bp.Pinned || bp.SHA256 == "" || !strings.Contains(bp.Error, `pin file`) || !strings.Contains(bp.Error, "sha256sum badpin > badpin.sha256") {
		t.Errorf("plugin with a malformed pin: %+v", bp)
	}
	if s.Name != "seq" || s.Scheduler != "sequential" || s.Protocol != host.ProtocolVersion || s.SHA256 != sum || !s.Pinned || s.Error != "" {
		t.Errorf("seq plugin: %+v", s)
	}
	out, err = run(t, "plugins", "list")
	if err != nil || !strings.Contains(out, sum) || !strings.Contains(out, "sequential") {
		t.Errorf("table: %q, %v", out, err)
	}

	out, err = run(t, "plugins", "list")
	if err != nil || strings.Contains(out, "noexec") || !strings.Contains(out, "error: pin file") {
		t.Errorf("table: %q, %v", out, err)
	}

	// plugin:NAME finds it in the folder; its pin is checked.
	trainJSON(t, "--epochs", "1", "--scheduler", "plugin:seq")
	_, err = run(t, "train", "--epochs", "1", "-q", "--scheduler", "plugin:nope")
	if err == nil || !strings.Contains(err.Error(), `no plugin "nope"`) || !strings.Contains(err.Error(), "badpin, broken, seq)") {
		t.Errorf("unknown name: %v", err)
	}
	for _, c := range []struct{ name, want string }{
		{"noexec", "not executable; make it so with chmod +x"},
		{"badpin", `badpin.sha256: "xyz" is not a SHA-256`},
	} {
		_, err = run(t, "train", "--epochs", "1", "-q", "--scheduler", "plugin:"+c.name)
		if !errors.Is(err, host.ErrLaunch) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("plugin:%s: %v, want host.ErrLaunch saying %q", c.name, err, c.want)
		}
	}
	if err := os.WriteFile(seq+".sha256", []byte(strings.Repeat("0", 64)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = run(t, "train", "--epochs", "1", "-q", "--scheduler", "plugin:seq")
	if !errors.Is(err, host.ErrChecksum) {
		t.Errorf("wrong pin: %v, want host.ErrChecksum", err)
	}
	_, err = run(t, "train", "--epochs", "1", "-q", "--scheduler", "plugin:"+seq+"@sha256:"+sum)
	if err != nil {
		t.Errorf("explicit pin: %v", err)
	}
}

// TestPluginTimeoutEnv: train and bench run read $GNNKIT_PLUGIN_TIMEOUT
// the same way: a bad value is an error in both, a good one bounds each
// plugin call in both.
func TestPluginTimeoutEnv(t *testing.T) {
	dir := t.TempDir()
	hang := servePlugin(t, dir, "hang", "hang")
	suite := filepath.Join(dir, "hang.json")
	sched, _ := json.Marshal("plugin:" + hang)
	if err := os.WriteFile(suite, []byte(`{"name":"hang","version":1,"epochs":1,"warmup":0,"groups":[
	 {"backends":["cpu"],"devices":[1],"schedulers":[`+string(sched)+`],"models":["gcn"],"datasets":["cora"]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmds := map[string][]string{
		"train":     {"train", "--epochs", "1", "-q", "--scheduler", "plugin:" + hang},
		"bench-run": {"bench", "run", "--suite", suite, "-q"},
	}
	for _, c := range []struct{ env, want string }{
		{"soon", `GNNKIT_PLUGIN_TIMEOUT="soon": want a positive duration such as 30s or 2m`},
		{"-1s", `GNNKIT_PLUGIN_TIMEOUT="-1s": want a positive duration`},
		{"0", `GNNKIT_PLUGIN_TIMEOUT="0": want a positive duration`},
		{"300ms", "Schedule did not answer within 300ms"},
	} {
		for _, name := range []string{"train", "bench-run"} {
			t.Run("env="+c.env+"/cmd="+name, func(t *testing.T) {
				t.Setenv("GNNKIT_PLUGIN_TIMEOUT", c.env)
				out := filepath.Join(t.TempDir(), "r.json")
				args := cmds[name]
				if name == "bench-run" {
					args = append(args, "--out", out)
				}
				start := time.Now()
				got, err := run(t, args...)
				msg := fmt.Sprint(err)
				if name == "bench-run" && err != nil && strings.Contains(msg, "cell(s) failed") {
					f, rerr := bench.ReadFile(out)
					if rerr != nil || len(f.Cells) != 1 {
						t.Fatalf("results: %v, %+v", rerr, f)
					}
					msg = f.Cells[0].Reason
				}
				if err == nil || !strings.Contains(msg, c.want) {
					t.Errorf("%v: %s (output %q), want %q", args, msg, got, c.want)
				}
				if took := time.Since(start); took > 15*time.Second {
					t.Errorf("took %v; the timeout was not applied", took)
				}
			})
		}
	}
}

// TestObserveMovesHome: a feedback plugin whose Observe moves the home
// device is refused with an error that names the plugin.
func TestObserveMovesHome(t *testing.T) {
	p := servePlugin(t, t.TempDir(), "mover", "move-home")
	_, err := run(t, "train", "--epochs", "2", "-q", "--devices", "cpu:0,cpu:1", "--scheduler", "plugin:"+p)
	want := "plugin move-home (" + p + "): Observe moved the plan's home from cpu:0 to cpu:1; a plan from Observe must keep the first plan's home"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want %q", err, want)
	}
}

func TestPluginSpecErrors(t *testing.T) {
	for _, c := range []struct{ spec, want string }{
		{"plugin:", "needs a path or a name"},
		{"plugin:./x@sha256:abc", "not a SHA-256"},
		{"plugin:./does/not/exist", "no such file"},
	} {
		_, err := run(t, "train", "--epochs", "1", "-q", "--scheduler", c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.spec, err, c.want)
		}
	}
	_, err := run(t, "plugins", "serve", "sequential")
	if err == nil || !strings.Contains(err.Error(), "started by a gnnkit host") {
		t.Errorf("serve by hand: %v", err)
	}
	_, err = run(t, "plugins", "serve", "nosuch")
	if err == nil || !strings.Contains(err.Error(), "unknown scheduler") {
		t.Errorf("serve unknown: %v", err)
	}
}

// inProcessOnly are the built-in schedulers that need the in-process
// workload (not its plain data) and say so over the wire.
var inProcessOnly = map[string]string{
	"cherry": "cannot run over a plugin connection", // needs Workload.Estimator
}

// TestBuiltinsOverTheWire runs every registered scheduler through the
// plugin protocol: over an in-memory gRPC connection, and as a real
// `gnnkit plugins serve NAME` process, through the conformance suite and
// the exactness oracle.
func TestBuiltinsOverTheWire(t *testing.T) {
	dir := t.TempDir()
	for _, name := range core.Schedulers() {
		t.Run("sched="+name, func(t *testing.T) {
			newIn := func(t *testing.T) core.Scheduler {
				s, err := core.NewScheduler(name, nil)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			var sub core.Scheduler
			ways := []struct {
				name string
				new  func(t *testing.T) core.Scheduler
			}{
				{"way=grpc", func(t *testing.T) core.Scheduler { return plugintest.InMemory(t, newIn(t)) }},
				{"way=subprocess", func(*testing.T) core.Scheduler {
					if sub == nil {
						s, c, err := host.Launch(context.Background(), servePlugin(t, dir, name, name), host.Options{})
						if err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { c.Close() })
						sub = s
					}
					return sub
				}},
			}
			if want, ok := inProcessOnly[name]; ok {
				for _, way := range ways {
					w := &core.Workload{Devices: []core.DeviceInfo{{ID: "cpu:0"}}, Ops: []core.OpInfo{{Name: "op"}}, Batch: []int32{0}}
					_, err := way.new(t).Schedule(context.Background(), w)
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("%s: %v, want an error saying it %s", way.name, err, want)
					}
				}
				return
			}
			for _, way := range ways {
				t.Run(way.name, func(t *testing.T) {
					schedtest.Run(t, way.new)
					schedtest.Oracle(t, way.new(t), schedtest.OracleOptions{Devices: 2})
				})
			}
		})
	}
}

// TestPluginDirNotAFolder: GNNKIT_PLUGIN_DIR naming a file is an error
// naming the variable, for plugins list and plugin:NAME alike (it said
// "plugin folder: open …: not a directory"); a missing folder has no
// plugins.
func TestPluginDirNotAFolder(t *testing.T) {
	file := filepath.Join(t.TempDir(), "afile")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, dir string
		args      []string
		want      string // "" : no error
	}{
		{"list, a file", file, []string{"plugins", "list"}, "GNNKIT_PLUGIN_DIR=" + file + " is a file, not a folder"},
		{"by name, a file", file, []string{"train", "-q", "--epochs", "1", "--scheduler", "plugin:foo"}, "GNNKIT_PLUGIN_DIR=" + file + " is a file, not a folder"},
		{"list, missing", filepath.Join(file+"-missing", "x"), []string{"plugins", "list"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GNNKIT_PLUGIN_DIR", c.dir)
			out, err := run(t, c.args...)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%v: %v\n%s", c.args, err, out)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("%v: err = %v, want it to say %q", c.args, err, c.want)
			}
		})
	}
}
