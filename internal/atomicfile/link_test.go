package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestWriteThroughLink: a symbolic link stays a link and the file it
// leads to is replaced atomically (a failed write leaves it as it was; a
// dangling link's file is created); a link to a device (/dev/null here,
// as /dev/stdout is one) leaves the device node alone. Check follows the
// links too: a dangling one into a missing folder fails up front.
func TestWriteThroughLink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "results-7.json")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := func(name, to string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.Symlink(to, p); err != nil {
			t.Skipf("no symbolic links here: %v", err)
		}
		return p
	}
	latest := link("latest.json", "results-7.json") // relative, as ln -s makes it
	failed := Write(latest, func(w io.Writer) error {
		io.WriteString(w, "partial")
		return errors.New("failed half way")
	})
	if b, _ := os.ReadFile(target); failed == nil || string(b) != "old" {
		t.Fatalf("a failed write through the link: %v, the target holds %q", failed, b)
	}
	fresh := link("new.json", filepath.Join(dir, "not-yet.json"))
	null := link("null", os.DevNull)
	for _, p := range []string{latest, fresh, null} {
		if err := Check(p); err != nil {
			t.Errorf("Check(%s): %v", p, err)
		}
		if err := WriteBytes(p, []byte("new")); err != nil {
			t.Fatalf("through %s: %v", p, err)
		}
		if st, err := os.Lstat(p); err != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a link: %v, %v", p, st.Mode(), err)
		}
	}
	for _, f := range []string{target, filepath.Join(dir, "not-yet.json")} {
		if b, err := os.ReadFile(f); err != nil || string(b) != "new" {
			t.Errorf("%s holds %q (%v), want \"new\"", f, b, err)
		}
	}
	if st, err := os.Stat(os.DevNull); err != nil || st.Mode().IsRegular() {
		t.Errorf("%s is now %v (%v)", os.DevNull, st.Mode(), err)
	}
	if err := Check(link("lost", filepath.Join(dir, "missing", "x.json"))); err == nil {
		t.Error("Check passed a link into a missing folder")
	}
}

// TestStreams: the process's own standard output and error are written on
// their open descriptors, not reopened by name (a reopened /dev/stdout
// redirected to a file starts at offset 0, over what was printed).
func TestStreams(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no /dev/stdout")
	}
	for path, want := range map[string]*os.File{"/dev/stdout": os.Stdout, "/proc/self/fd/1": os.Stdout, "/dev/fd/2": os.Stderr, "/dev/stderr": os.Stderr, "/tmp/x": nil, "/dev/fd/3": nil} {
		if got := stream(path); got != want {
			t.Errorf("stream(%s) = %v, want %v", path, got, want)
		}
	}
}
