//go:build unix

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHelperMain is not a test: with GNNKIT_TEST_MAIN=1 the test binary
// becomes gnnkit itself (main, with its signal handling) run with the
// arguments after "--".
func TestHelperMain(t *testing.T) {
	if os.Getenv("GNNKIT_TEST_MAIN") == "" {
		t.Skip("helper process for the signal tests")
	}
	for i, a := range os.Args {
		if a == "--" {
			os.Args = append([]string{"gnnkit"}, os.Args[i+1:]...)
			break
		}
	}
	main()
	os.Exit(0)
}

// TestSignalKillsPlugin sends a stop signal to a gnnkit process (only to
// it, not its process group) while its plugin starts or trains, and checks
// that gnnkit ends the run and the plugin process is gone.
func TestSignalKillsPlugin(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT} {
		for _, c := range []struct {
			name   string
			script string // the plugin; it writes its pid to $PIDFILE first
		}{
			// Never reaches its handshake.
			{"before-handshake", "exec sleep 3600\n"},
			// The built-in sequential scheduler, in a long training run.
			{"training", fmt.Sprintf("GNNKIT_TEST_SERVE=sequential exec %q -test.run='^TestHelperServe$' -- \"$@\"\n", self)},
		} {
			t.Run(fmt.Sprintf("signal=%s/plugin=%s", sig, c.name), func(t *testing.T) {
				dir := t.TempDir()
				pidFile := filepath.Join(dir, "pid")
				plugin := filepath.Join(dir, "plugin")
				script := fmt.Sprintf("#!/bin/sh\necho $$ > %q\n%s", pidFile, c.script)
				if err := os.WriteFile(plugin, []byte(script), 0o755); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command(self, "-test.run=^TestHelperMain$", "--",
					"train", "--epochs", "1000000", "-q", "--scheduler", "plugin:"+plugin)
				cmd.Env = append(os.Environ(), "GNNKIT_TEST_MAIN=1")
				var stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stderr, &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				defer func() { // never leave either behind, whatever failed
					_ = cmd.Process.Kill()
					<-done
				}()
				pid := waitPid(t, pidFile, 10*time.Second)
				defer syscall.Kill(pid, syscall.SIGKILL)
				if c.name == "training" {
					time.Sleep(time.Second) // past the handshake, into the epochs
				}
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				select {
				case err = <-done:
					done <- err // for the deferred Wait
				case <-time.After(10 * time.Second):
					t.Fatalf("gnnkit still runs 10 s after %s; output: %s", sig, stderr.String())
				}
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "gnnkit: interrupted by a signal, stopped: ") || !strings.Contains(stderr.String(), "context canceled") {
					t.Errorf("gnnkit after %s: %v, output %q; want exit status 1, interrupted and context canceled", sig, err, stderr.String())
				}
				deadline := time.Now().Add(5 * time.Second)
				for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
					time.Sleep(50 * time.Millisecond)
				}
				if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
					t.Errorf("the plugin process %d outlived gnnkit's %s (kill -0: %v)", pid, sig, err)
				}
			})
		}
	}
}

// waitPid waits for the plugin to write its pid.
func waitPid(t *testing.T, path string, limit time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(path)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && pid > 0 {
			return pid
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the plugin wrote no pid to %s within %v", path, limit)
	return 0
}
