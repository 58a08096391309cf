package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestPluginStartTimeoutEnv: $GNNKIT_PLUGIN_START_TIMEOUT bounds a
// plugin's start in train and in plugins list (a plugin that would
// sleep 3 s before any handshake is killed after 500 ms), and a value
// that is not a positive duration is an error.
func TestPluginStartTimeoutEnv(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the slow plugin is a /bin/sh script")
	}
	dir := t.TempDir()
	// exec, so that killing the plugin ends the sleep and its pipes with
	// it (plugins/README.md: a forked child would hold them open).
	slow := filepath.Join(dir, "slow")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nexec sleep 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ env, want string }{
		{"500ms", "no handshake within 500ms"},
		{"soon", `GNNKIT_PLUGIN_START_TIMEOUT="soon": want a positive duration such as 30s or 2m`},
		{"0", `GNNKIT_PLUGIN_START_TIMEOUT="0": want a positive duration`},
	} {
		t.Run("train/env="+c.env, func(t *testing.T) {
			t.Setenv("GNNKIT_PLUGIN_START_TIMEOUT", c.env)
			start := time.Now()
			_, err := run(t, "train", "--epochs", "1", "-q", "--scheduler", "plugin:"+slow)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
			if took := time.Since(start); took > 2500*time.Millisecond {
				t.Errorf("took %v: the start limit was not applied", took)
			}
		})
	}
	t.Run("plugins-list/env=soon", func(t *testing.T) {
		t.Setenv("GNNKIT_PLUGIN_DIR", t.TempDir()) // no plugins: the value is checked all the same
		t.Setenv("GNNKIT_PLUGIN_START_TIMEOUT", "soon")
		if _, err := run(t, "plugins", "list"); err == nil || !strings.Contains(err.Error(), `GNNKIT_PLUGIN_START_TIMEOUT="soon"`) {
			t.Errorf("err = %v, want the variable's error", err)
		}
	})
	t.Run("plugins-list", func(t *testing.T) {
		t.Setenv("GNNKIT_PLUGIN_DIR", dir)
		t.Setenv("GNNKIT_PLUGIN_START_TIMEOUT", "500ms")
		out, err := run(t, "plugins", "list")
		if err != nil {
			t.Fatal(err)
		}
		var line string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "slow") {
				line = l
			}
		}
		if !strings.Contains(line, "500ms") {
			t.Errorf("plugins list: the slow plugin's line is %q, want its start cut at 500ms:\n%s", line, out)
		}
	})
}
