package proc

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTail(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"last four", "a\nb\n\nc\nd\ne\n", "; its stderr ended with: b | c | d | e"},
		{"json logs dropped", `{"@level":"debug","@message":"x"}` + "\nreal error\n", "; its stderr ended with: real error"},
		{"panic first", "noise\npanic: boom\n\ngoroutine 1\nmain.f()\n\tf.go:3\nmore\n", "; its stderr ended with: panic: boom | goroutine 1 | main.f() | f.go:3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tw := &Tail{Max: 1 << 10}
			if _, err := tw.Write([]byte(c.in)); err != nil {
				t.Fatal(err)
			}
			if got := tw.LastLines(); got != c.want {
				t.Errorf("LastLines = %q, want %q", got, c.want)
			}
		})
	}
	tw := &Tail{Max: 4}
	tw.Write([]byte("abcdefgh"))
	if got := tw.Lines(); len(got) != 1 || got[0] != "efgh" {
		t.Errorf("over Max: %q, want the last 4 bytes", got)
	}
}

func TestExecutable(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "tool")
	plain := filepath.Join(dir, "data")
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(plain, []byte("x"), 0o644)
	if got, err := Executable(exe, "worker"); err != nil || got != exe {
		t.Errorf("Executable(tool) = %q, %v", got, err)
	}
	for _, c := range []struct {
		path, want string
	}{{filepath.Join(dir, "missing"), "does not exist"}, {dir, "folder, not a worker binary"}, {plain, "not executable"}} {
		if _, err := Executable(c.path, "worker"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Executable(%s) = %v, want an error saying %q", c.path, err, c.want)
		}
	}
	if _, err := Executable(filepath.Join(dir, "missing"), "plugin"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing binary: %v, want fs.ErrNotExist", err)
	}
}

func TestCall(t *testing.T) {
	bg := context.Background()
	boom := errors.New("boom")
	wait := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	short, stop := context.WithTimeout(bg, 10*time.Millisecond)
	defer stop()
	cases := []struct {
		name    string
		ctx     context.Context
		timeout time.Duration
		f       func(context.Context) error
		want    Outcome
	}{
		{"ok", bg, time.Second, func(context.Context) error { return nil }, OK},
		{"failed", bg, time.Second, func(context.Context) error { return boom }, Failed},
		{"our timeout", bg, 10 * time.Millisecond, wait, TimedOut},
		{"caller cancelled", cancelled, time.Second, wait, CallerDone},
		{"caller's deadline first", short, time.Second, wait, CallerDone},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Call(c.ctx, c.timeout, c.f)
			if got != c.want {
				t.Errorf("outcome %d (%v), want %d", got, err, c.want)
			}
			if c.want == Failed && !errors.Is(err, boom) {
				t.Errorf("err %v, want f's error", err)
			}
		})
	}
}
