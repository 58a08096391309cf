package host_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/core/schedtest"
	"github.com/gnnkit/gnnkit/plugins/host"
	"github.com/gnnkit/gnnkit/plugins/plugintest"
	"github.com/gnnkit/gnnkit/schedulers/sequential"
)

var tagSeq atomic.Int64

// launch starts the test binary as the helper plugin kind. Every process
// gets a unique tag in its environment, so leftover can find it.
func launch(t testing.TB, kind string, o host.Options) (*host.Plugin, string, error) {
	t.Helper()
	return launchCtx(context.Background(), t, kind, o)
}

// launchCtx is launch under ctx.
func launchCtx(ctx context.Context, t testing.TB, kind string, o host.Options) (*host.Plugin, string, error) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("%d-%d", os.Getpid(), tagSeq.Add(1))
	o.Env = append(o.Env, kindEnv+"="+kind, "GNNKIT_TEST_TAG="+tag)
	p, err := host.Start(ctx, self, o)
	return p, tag, err
}

func mustLaunch(t testing.TB, kind string, o host.Options) *host.Plugin {
	t.Helper()
	p, _, err := launch(t, kind, o)
	if err != nil {
		t.Fatalf("launch %s: %v", kind, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// leftover returns the pids of running processes with the tag (Linux; on
// other systems it returns nil).
func leftover(tag string) []int {
	if runtime.GOOS != "linux" {
		return nil
	}
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && strings.Contains(string(env), "GNNKIT_TEST_TAG="+tag+"\x00") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func checkGone(t *testing.T, pid int, tag string) {
	t.Helper()
	if pid > 0 {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("plugin process %d is still there (kill -0: %v)", pid, err)
		}
	}
	if pids := leftover(tag); len(pids) > 0 {
		t.Errorf("processes left behind: %v", pids)
	}
}

// stillWorks is the "host keeps working" check: a fresh plugin schedules.
func stillWorks(t *testing.T) {
	t.Helper()
	p := mustLaunch(t, "split", host.Options{})
	w := testWorkload()
	if _, err := p.Scheduler().Schedule(context.Background(), w); err != nil {
		t.Fatalf("the next plugin fails: %v", err)
	}
	p.Close()
}

// ways returns the scheduler three ways: in process, over an in-memory
// gRPC connection, and from a real plugin subprocess (launched once and
// shared by the subtests).
func ways(t *testing.T, kind string, inproc func() core.Scheduler) []struct {
	name string
	new  func(t *testing.T) core.Scheduler
} {
	var sub core.Scheduler
	return []struct {
		name string
		new  func(t *testing.T) core.Scheduler
	}{
		{"way=inprocess", func(*testing.T) core.Scheduler { return inproc() }},
		{"way=grpc", func(t *testing.T) core.Scheduler { return plugintest.InMemory(t, inproc()) }},
		{"way=subprocess", func(*testing.T) core.Scheduler {
			if sub == nil {
				sub = mustLaunch(t, kind, host.Options{}).Scheduler()
			}
			return sub
		}},
	}
}

func TestConformance(t *testing.T) {
	for _, c := range []struct {
		kind   string
		inproc func() core.Scheduler
	}{
		{"split", func() core.Scheduler { return schedtest.Split{K: 3} }},
		{"sequential", func() core.Scheduler { return &sequential.Scheduler{} }},
	} {
		t.Run("sched="+c.kind, func(t *testing.T) {
			for _, way := range ways(t, c.kind, c.inproc) {
				t.Run(way.name, func(t *testing.T) { schedtest.Run(t, way.new) })
			}
		})
	}
}

func TestOracle(t *testing.T) {
	for _, way := range ways(t, "split", func() core.Scheduler { return schedtest.Split{K: 3} }) {
		t.Run(way.name, func(t *testing.T) {
			schedtest.Oracle(t, way.new(t), schedtest.OracleOptions{Devices: 2})
		})
	}
}

// TestFaults runs each misbehaving plugin as a real subprocess: each fault
// gives a clear error, leaves no process behind, and the next plugin works.
func TestFaults(t *testing.T) {
	for _, c := range []struct {
		kind    string
		opts    host.Options
		atStart bool // the failure comes from Start, not Schedule
		is      []error
		msg     []string
		not     []string // the message must not say these
	}{
		{kind: "crash", is: []error{host.ErrExited}, msg: []string{"plugin faulty", "Schedule", "exited", "exit status 2", "simulated crash in Schedule"}},
		{kind: "exit", is: []error{host.ErrExited}, msg: []string{"Schedule", "exit status 3"}},
		{kind: "hang", opts: host.Options{Timeout: 300 * time.Millisecond}, is: []error{context.DeadlineExceeded, host.ErrExited},
			msg: []string{"Schedule did not answer within 300ms", "killed"}},
		{kind: "hang-info", opts: host.Options{Timeout: 300 * time.Millisecond}, atStart: true, is: []error{context.DeadlineExceeded, host.ErrExited},
			msg: []string{"GetInfo did not answer within 300ms", "killed"}},
		{kind: "invalid", is: []error{core.ErrInvalidPlan}, msg: []string{"plugin faulty", "returned an invalid plan", "more than one unit", "in no unit"}},
		{kind: "version", atStart: true, is: []error{host.ErrLaunch, host.ErrIncompatible}, msg: []string{"speaks scheduler protocol 99", "this gnnkit speaks 1"}},
		{kind: "garbage", atStart: true, is: []error{host.ErrLaunch}, msg: []string{"not a gnnkit scheduler plugin", `"hello from a program that is not a plugin"`}},
		{kind: "not-a-plugin", atStart: true, is: []error{host.ErrLaunch},
			msg: []string{": its stderr: usage: not-a-plugin FILE; it exited", "exit status 1"}, not: []string{"sdk.Serve"}},
		{kind: "silent-exit", atStart: true, is: []error{host.ErrLaunch}, msg: []string{"exited without a handshake (exit status 1)", "sdk.Serve"}},
		{kind: "checksum", opts: host.Options{SHA256: make([]byte, 32)}, atStart: true, is: []error{host.ErrLaunch, host.ErrChecksum},
			msg: []string{"SHA-256 is", "is pinned"}},
	} {
		t.Run("fault="+c.kind, func(t *testing.T) {
			kind := c.kind
			if kind == "checksum" {
				kind = "split"
			}
			start := time.Now()
			p, tag, err := launch(t, kind, c.opts)
			pid := 0
			if err == nil {
				defer p.Close()
				pid = p.Info().Pid
				if c.atStart {
					t.Fatalf("launch succeeded, want a launch error")
				}
				_, err = p.Scheduler().Schedule(context.Background(), testWorkload())
			}
			if err == nil {
				t.Fatal("no error")
			}
			t.Logf("error (after %v): %v", time.Since(start).Round(time.Millisecond), err)
			for _, want := range c.is {
				if !errors.Is(err, want) {
					t.Errorf("errors.Is(err, %v) = false", want)
				}
			}
			for _, s := range c.msg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error lacks %q", s)
				}
			}
			for _, s := range c.not {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error says %q", s)
				}
			}
			if p != nil && kind != "invalid" {
				// The plugin is gone: later calls fail fast.
				_, err := p.Scheduler().Schedule(context.Background(), testWorkload())
				if !errors.Is(err, host.ErrExited) {
					t.Errorf("call after the fault: %v, want ErrExited", err)
				}
				checkGone(t, pid, tag)
			}
			if p != nil {
				p.Close()
			}
			checkGone(t, pid, tag)
			stillWorks(t)
		})
	}
}

// TestStartInterrupted: the caller's context ending while a plugin starts
// (before its handshake, or in its first call) kills it and returns the
// context's error at once, not after the start limit.
func TestStartInterrupted(t *testing.T) {
	for _, c := range []struct {
		name, kind string
		ctx        func() (context.Context, context.CancelFunc)
		is         error
		msg        string
	}{
		{"cancel-before-handshake", "hang-start", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(300*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled, "stopped waiting for its handshake: context canceled"},
		{"deadline-before-handshake", "hang-start", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 300*time.Millisecond)
		}, context.DeadlineExceeded, "stopped waiting for its handshake: context deadline exceeded"},
		{"cancel-in-getinfo", "hang-info", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(500*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled, "GetInfo: context canceled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := c.ctx()
			defer cancel()
			start := time.Now()
			p, tag, err := launchCtx(ctx, t, c.kind, host.Options{StartTimeout: 20 * time.Second})
			took := time.Since(start)
			if err == nil {
				p.Close()
				t.Fatal("Start succeeded")
			}
			t.Logf("error (after %v): %v", took.Round(time.Millisecond), err)
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("err = %v, want %v saying %q", err, c.is, c.msg)
			}
			if took > 5*time.Second {
				t.Errorf("Start returned after %v; the context ended after 0.5 s at most", took)
			}
			checkGone(t, 0, tag)
		})
	}
	stillWorks(t)
}

func TestMissingBinary(t *testing.T) {
	for _, path := range []string{filepath.Join(t.TempDir(), "nope"), t.TempDir()} {
		_, _, err := host.Launch(context.Background(), path, host.Options{})
		if !errors.Is(err, host.ErrLaunch) || !strings.Contains(err.Error(), path) {
			t.Errorf("Launch(%s): %v", path, err)
		}
	}
	_, _, err := host.Launch(context.Background(), filepath.Join(t.TempDir(), "nope"), host.Options{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
	notExec := filepath.Join(t.TempDir(), "plain")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)
	if _, _, err := host.Launch(context.Background(), notExec, host.Options{}); err == nil || !strings.Contains(err.Error(), "not executable") {
		t.Errorf("non-executable file: %v", err)
	}
}

func TestChecksumPin(t *testing.T) {
	self, _ := os.Executable()
	sum, err := host.Checksum(self)
	if err != nil {
		t.Fatal(err)
	}
	pin, err := host.ParseSHA256(sum)
	if err != nil {
		t.Fatal(err)
	}
	p := mustLaunch(t, "split", host.Options{SHA256: pin})
	if _, err := p.Scheduler().Schedule(context.Background(), testWorkload()); err != nil {
		t.Fatal(err)
	}
}

// TestCallerCancel: the caller's own cancellation reaches the plugin as a
// context error and does not kill it; Close does.
func TestCallerCancel(t *testing.T) {
	p, tag, err := launch(t, "hang", host.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = p.Scheduler().Schedule(ctx, testWorkload())
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, host.ErrExited) {
		t.Errorf("err = %v, want the caller's deadline and no exit", err)
	}
	if p.Exited() {
		t.Errorf("the caller's deadline killed the plugin")
	}
	pid := p.Info().Pid
	p.Close()
	checkGone(t, pid, tag)
	if _, err := p.Scheduler().Schedule(context.Background(), testWorkload()); !errors.Is(err, host.ErrExited) {
		t.Errorf("call after Close: %v, want ErrExited", err)
	}
}

// TestPanicIsAnError: the SDK turns a panic into an error; the plugin
// lives on.
func TestPanicIsAnError(t *testing.T) {
	p := mustLaunch(t, "panic", host.Options{})
	for i := 0; i < 2; i++ {
		_, err := p.Scheduler().Schedule(context.Background(), testWorkload())
		if err == nil || !strings.Contains(err.Error(), "panicked in Schedule: simulated bug") {
			t.Fatalf("err = %v", err)
		}
	}
	if p.Exited() {
		t.Error("the plugin exited")
	}
}

// TestErrors checks errors.Is and errors.As across the boundary, over the
// in-memory connection and (for one) a real process.
func TestErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		is   []error
	}{
		{"oom", testOOM, []error{core.ErrOutOfMemory}},
		{"unsupported", fmt.Errorf("mysched: no fp16: %w", core.ErrUnsupported), []error{core.ErrUnsupported, errors.ErrUnsupported}},
		{"plain-unsupported", fmt.Errorf("mysched: %w", errors.ErrUnsupported), []error{core.ErrUnsupported, errors.ErrUnsupported}},
		{"invalid-plan", fmt.Errorf("mysched: %w: cycle", core.ErrInvalidPlan), []error{core.ErrInvalidPlan}},
		{"canceled", fmt.Errorf("mysched: %w", context.Canceled), []error{context.Canceled}},
		{"deadline", context.DeadlineExceeded, []error{context.DeadlineExceeded}},
		{"unknown-model", fmt.Errorf("%w %q", core.ErrUnknownModel, "gin"), []error{core.ErrUnknownModel}},
		{"other", errors.New("mysched: the moon is in the wrong phase"), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := plugintest.InMemory(t, faulty{schedule: func() (*core.Plan, error) { return nil, c.err }})
			_, err := s.Schedule(context.Background(), testWorkload())
			if err == nil || !strings.Contains(err.Error(), c.err.Error()) {
				t.Fatalf("err = %v, want the plugin's message %q", err, c.err)
			}
			for _, want := range c.is {
				if !errors.Is(err, want) {
					t.Errorf("errors.Is(%v, %v) = false", err, want)
				}
			}
		})
	}
	t.Run("oom-subprocess", func(t *testing.T) {
		p := mustLaunch(t, "oom", host.Options{})
		_, err := p.Scheduler().Schedule(context.Background(), testWorkload())
		var oom *core.OOMError
		if !errors.As(err, &oom) || *oom != *testOOM {
			t.Fatalf("err = %v, want %#v", err, testOOM)
		}
		if !errors.Is(err, core.ErrOutOfMemory) {
			t.Error("errors.Is(err, core.ErrOutOfMemory) = false")
		}
	})
}

// TestFeedback: the host's scheduler has Observe exactly when the
// plugin's does, and what Observe returns is validated too.
func TestFeedback(t *testing.T) {
	p := mustLaunch(t, "feedback", host.Options{})
	if !p.Info().Feedback {
		t.Fatal("Info().Feedback = false")
	}
	fb, ok := p.Scheduler().(core.SchedulerWithFeedback)
	if !ok {
		t.Fatalf("%T does not implement core.SchedulerWithFeedback", p.Scheduler())
	}
	w := testWorkload()
	np, err := fb.Observe(context.Background(), w, &core.Trace{})
	if err != nil || np != nil {
		t.Errorf("Observe(empty trace) = %v, %v; want no new plan", np, err)
	}
	tr := &core.Trace{Events: []core.TraceEvent{{Name: "fwd", Cat: "forward", Device: "cpu:0", Unit: 0, Dur: time.Millisecond}},
		PeakMem: map[core.DeviceID]int64{"cpu:0": 1 << 20}, Wall: 2 * time.Millisecond}
	np, err = fb.Observe(context.Background(), w, tr)
	if err != nil || np == nil || np.Home != "cpu:1" {
		t.Errorf("Observe = %+v, %v; want a plan on cpu:1", np, err)
	}
	plain := mustLaunch(t, "split", host.Options{})
	if _, ok := plain.Scheduler().(core.SchedulerWithFeedback); ok || plain.Info().Feedback {
		t.Error("a plugin without Observe looks like one with feedback")
	}
}

func TestInfo(t *testing.T) {
	p := mustLaunch(t, "sequential", host.Options{})
	i := p.Info()
	if i.Name != "sequential" || i.ProtocolVersion != host.ProtocolVersion || i.Pid <= 0 || i.SDKVersion == "" {
		t.Errorf("Info = %+v", i)
	}
	if p.Scheduler().Name() != "sequential" {
		t.Errorf("Name = %q", p.Scheduler().Name())
	}
}

func TestDiscovery(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("zeta", 0o755, "#!/bin/sh\n")
	write("alpha", 0o755, "#!/bin/sh\n")
	write("alpha.sha256", 0o644, strings.Repeat("ab", 32)+"  alpha\n")
	write(".hidden", 0o755, "")
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	es, err := host.Find(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Name != "alpha" || es[1].Name != "zeta" || es[0].Err != nil || es[1].Err != nil {
		t.Fatalf("Find = %+v", es)
	}
	if len(es[0].Pin) != 32 || es[0].Pin[0] != 0xab || es[1].Pin != nil {
		t.Errorf("pins: %x, %x", es[0].Pin, es[1].Pin)
	}
	if _, err := host.Lookup(dir, "beta"); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "alpha, zeta") {
		t.Errorf("Lookup(beta) = %v", err)
	}
	if es, err := host.Find(filepath.Join(dir, "missing")); err != nil || es != nil {
		t.Errorf("Find(missing) = %v, %v", es, err)
	}
	t.Setenv("GNNKIT_PLUGIN_DIR", dir)
	if d, _ := host.Dir(); d != dir {
		t.Errorf("Dir = %q with GNNKIT_PLUGIN_DIR set", d)
	}
}

// TestDiscoveryBadEntries: a file that cannot be launched as it is gets
// its own error; the folder's other plugins are still found.
func TestDiscoveryBadEntries(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no executable bit on Windows")
	}
	for _, c := range []struct {
		name string
		mode os.FileMode
		pin  string // NAME.sha256's content; "" writes none
		want []string
	}{
		{name: "noexec", mode: 0o644, want: []string{"noexec: not executable", "chmod +x"}},
		{name: "badpin", mode: 0o755, pin: "xyz", want: []string{"badpin.sha256", `"xyz" is not a SHA-256`, "sha256sum badpin > badpin.sha256", "or remove it"}},
		{name: "emptypin", mode: 0o755, pin: " \n", want: []string{"emptypin.sha256 is empty", "sha256sum emptypin > emptypin.sha256"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []struct {
				name, body string
				mode       os.FileMode
			}{{"good", "#!/bin/sh\n", 0o755}, {c.name, "#!/bin/sh\n", c.mode}} {
				if err := os.WriteFile(filepath.Join(dir, f.name), []byte(f.body), f.mode); err != nil {
					t.Fatal(err)
				}
			}
			if c.pin != "" {
				if err := os.WriteFile(filepath.Join(dir, c.name+host.PinSuffix), []byte(c.pin), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			es, err := host.Find(dir)
			if err != nil {
				t.Fatalf("Find: %v; one bad entry must not fail the folder", err)
			}
			byName := map[string]host.Entry{}
			for _, e := range es {
				byName[e.Name] = e
			}
			listed := c.mode&0o111 != 0 // a file without an execute bit (a README) is no plugin
			switch {
			case !listed && (len(es) != 1 || byName["good"].Err != nil):
				t.Fatalf("Find = %+v; want good alone (no error)", es)
			case listed && (len(es) != 2 || byName["good"].Err != nil || byName[c.name].Err == nil || byName[c.name].Pin != nil):
				t.Fatalf("Find = %+v; want good (no error) and %s (with its error, no pin)", es, c.name)
			}
			if e, err := host.Lookup(dir, "good"); err != nil || e.Name != "good" {
				t.Errorf("Lookup(good) = %+v, %v", e, err)
			}
			_, err = host.Lookup(dir, c.name)
			if !errors.Is(err, host.ErrLaunch) {
				t.Errorf("Lookup(%s) = %v, want host.ErrLaunch", c.name, err)
			}
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("Lookup(%s) = %v, want %q in it", c.name, err, w)
				}
			}
			have := "(it has good)"
			if listed {
				names := []string{"good", c.name}
				sort.Strings(names)
				have = "(it has " + strings.Join(names, ", ") + ")"
			}
			if _, err := host.Lookup(dir, "nope"); err == nil || !strings.Contains(err.Error(), have) {
				t.Errorf("Lookup(nope) = %v, want the folder's names", err)
			}
		})
	}
}

// TestResolveSpec: a path or a folder name, an explicit pin standing in
// for a malformed pin file, sorted KEY=VALUE arguments, the call and start
// timeouts from the environment, and an empty spec refused.
func TestResolveSpec(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no executable bit on Windows")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p"+host.PinSuffix), []byte("xyz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(host.TimeoutEnv, "7s")
	t.Setenv(host.StartTimeoutEnv, "9s")
	in := func() (string, error) { return dir, nil }
	pin := strings.Repeat("ab", 32)
	path, o, err := host.ResolveSpec("p@sha256:"+pin, map[string]string{"m": "8", "k": "1"}, in)
	if err != nil || path != filepath.Join(dir, "p") || hex.EncodeToString(o.SHA256) != pin || o.Timeout != 7*time.Second || o.StartTimeout != 9*time.Second || strings.Join(o.Args, " ") != "k=1 m=8" {
		t.Errorf("explicit pin over a malformed pin file: %q, %+v, %v", path, o, err)
	}
	if _, _, err := host.ResolveSpec("p", nil, in); err == nil || !strings.Contains(err.Error(), "p.sha256") {
		t.Errorf("the malformed pin file alone: %v, want its error", err)
	}
	if path, _, err := host.ResolveSpec("./bin/x", nil, in); err != nil || path != "./bin/x" {
		t.Errorf("a path: %q, %v", path, err)
	}
	if _, _, err := host.ResolveSpec("@sha256:"+pin, nil, in); err == nil || !strings.Contains(err.Error(), "needs a path or a name") {
		t.Errorf("no path: %v", err)
	}
}
