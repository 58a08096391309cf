package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteThroughLink: a symbolic link stays a link, and the file it
// leads to gets the bytes (a rename would have replaced the link); a link
// to a device (/dev/null here, as /dev/stdout is one) leaves the device
// node alone. Check accepts both.
func TestWriteThroughLink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "results-7.json")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{"latest.json": target, "null": os.DevNull, "new.json": filepath.Join(dir, "not-yet.json")}
	for name, to := range links {
		link := filepath.Join(dir, name)
		if err := os.Symlink(to, link); err != nil {
			t.Skipf("no symbolic links here: %v", err)
		}
		if err := Check(link); err != nil {
			t.Errorf("Check(%s -> %s): %v", name, to, err)
		}
		if err := WriteBytes(link, []byte("new")); err != nil {
			t.Fatalf("through %s -> %s: %v", name, to, err)
		}
		if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a link: %v, %v", name, st.Mode(), err)
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
}
