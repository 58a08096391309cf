package bench

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestResolveSchedulerStartTimeout: bench run launches plugins under
// $GNNKIT_PLUGIN_START_TIMEOUT as train does (a plugin that would sleep
// 3 s before any handshake is killed after 500 ms).
func TestResolveSchedulerStartTimeout(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the slow plugin is a /bin/sh script")
	}
	slow := filepath.Join(t.TempDir(), "slow")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nexec sleep 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GNNKIT_PLUGIN_START_TIMEOUT", "500ms")
	start := time.Now()
	_, _, err := resolveScheduler(context.Background(), "plugin:"+slow, nil)
	if err == nil || !strings.Contains(err.Error(), "no handshake within 500ms") {
		t.Errorf("err = %v, want no handshake within 500ms", err)
	}
	if took := time.Since(start); took > 2500*time.Millisecond {
		t.Errorf("took %v: the start limit was not applied", took)
	}
}
