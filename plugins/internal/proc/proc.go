// Package proc holds what the two go-plugin hosts (scheduler plugins,
// plugins/host, and backend workers, plugins/worker) share about the
// processes they start: checking the binary, their log level, and keeping
// the end of their output for error messages.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Executable checks that path is an executable file and returns its
// absolute path (so a bare name is not looked up in $PATH). what names
// the binary in errors ("plugin", "worker").
func Executable(path, what string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s does not exist: %w", path, err)
		}
		return "", err
	}
	if st.IsDir() {
		return "", fmt.Errorf("%s is a folder, not a %s binary", path, what)
	}
	if st.Mode().Perm()&0o111 == 0 && runtime.GOOS != "windows" {
		return "", fmt.Errorf("%s is not executable (chmod +x?)", path)
	}
	return filepath.Abs(path)
}

// Logger is go-plugin's logger for a child named name: silent unless
// $GNNKIT_PLUGIN_LOG names a level (trace, debug, info, warn, error).
func Logger(name string) hclog.Logger {
	level := hclog.LevelFromString(os.Getenv("GNNKIT_PLUGIN_LOG"))
	if level == hclog.NoLevel {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: level, Output: os.Stderr})
}

// Tail keeps the last Max bytes written to it (a child's stderr).
type Tail struct {
	Max int
	mu  sync.Mutex
	buf []byte
}

// Write keeps b, dropping the oldest bytes over Max.
func (t *Tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.Max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

// Lines returns the non-empty lines kept, without go-plugin's JSON log
// lines, from a Go panic's first line (and the top of its stack) when
// there is one.
func (t *Tail) Lines() []string {
	t.mu.Lock()
	s := string(t.buf)
	t.mu.Unlock()
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || (strings.HasPrefix(l, "{") && strings.Contains(l, `"@level"`)) {
			continue
		}
		lines = append(lines, l)
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "panic: ") || strings.HasPrefix(lines[i], "fatal error: ") {
			return lines[i:min(i+4, len(lines))]
		}
	}
	return lines
}

// LastLines returns "; its stderr ended with: a | b | c" for the last
// few lines, or "".
func (t *Tail) LastLines() string {
	l := t.Lines()
	if len(l) == 0 {
		return ""
	}
	return "; its stderr ended with: " + strings.Join(l[max(0, len(l)-4):], " | ")
}

// Outcome says how a call under Call ended.
type Outcome int

const (
	// OK: the call succeeded.
	OK Outcome = iota
	// CallerDone: the caller's context ended (cancelled or its own
	// deadline) before the call's timeout.
	CallerDone
	// TimedOut: the call's own timeout ended it.
	TimedOut
	// Failed: the call failed on its own account.
	Failed
)

var errCallTimeout = errors.New("call timed out")

// Call runs f under a context that ends after timeout or when ctx does,
// and says whose deadline ended a failed call. The server enforces the
// propagated deadline too, so its reset can arrive a moment before the
// local timer fires: deadlines are judged by the clock, not only by which
// context has ended. The error is ctx's (CallerDone) or f's.
func Call(ctx context.Context, timeout time.Duration, f func(context.Context) error) (Outcome, error) {
	ours := time.Now().Add(timeout)
	callerDL, hasDL := ctx.Deadline()
	oursBinds := !hasDL || ours.Before(callerDL)
	cctx, cancel := context.WithTimeoutCause(ctx, timeout, errCallTimeout)
	defer cancel()
	err := f(cctx)
	if err == nil {
		return OK, nil
	}
	now := time.Now()
	timedOut := oursBinds && (errors.Is(context.Cause(cctx), errCallTimeout) || !now.Before(ours))
	callerDone := ctx.Err() != nil || (hasDL && !now.Before(callerDL))
	switch {
	case callerDone && !timedOut:
		cerr := ctx.Err()
		if cerr == nil {
			cerr = context.DeadlineExceeded
		}
		return CallerDone, cerr
	case timedOut:
		return TimedOut, err
	}
	return Failed, err
}
