package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	if err := WriteBytes(path, []byte("old\n")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := os.Create(filepath.Join(t.TempDir(), "ref"))
	if err != nil {
		t.Fatal(err)
	}
	ref.Close()
	rst, _ := os.Stat(ref.Name())
	if st.Mode().Perm() != rst.Mode().Perm() {
		t.Errorf("mode %v, want %v as os.Create gives (os.CreateTemp gives 0600)", st.Mode().Perm(), rst.Mode().Perm())
	}
	tests := []struct {
		name  string
		write func(io.Writer) error
		want  string
		err   bool
	}{
		{"replaces", func(w io.Writer) error { _, err := fmt.Fprint(w, "new\n"); return err }, "new\n", false},
		{"fails half way", func(w io.Writer) error {
			fmt.Fprint(w, "partial")
			return errors.New("disk full")
		}, "new\n", true},
		{"large", func(w io.Writer) error { _, err := w.Write(make([]byte, 3<<20)); return err }, string(make([]byte, 3<<20)), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Write(path, tc.write)
			if (err != nil) != tc.err {
				t.Fatalf("err %v, want error %v", err, tc.err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("file holds %d bytes %.20q, want %d bytes %.20q", len(b), b, len(tc.want), tc.want)
			}
			ents, _ := os.ReadDir(dir)
			if len(ents) != 1 {
				t.Errorf("%d entries in the folder, want only the file (temporary left behind?)", len(ents))
			}
		})
	}
}

// TestWritePanics: a panic in write leaves the old file and no temporary.
func TestWritePanics(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	if err := WriteBytes(path, []byte("old\n")); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not propagate")
			}
		}()
		Write(path, func(w io.Writer) error {
			fmt.Fprint(w, "partial")
			panic("encoder bug")
		})
	}()
	if b, _ := os.ReadFile(path); string(b) != "old\n" {
		t.Errorf("file holds %q, want the old contents", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries in the folder, want only the file", len(ents))
	}
}

// TestWriteKeepsMode: replacing a file keeps its mode.
func TestWriteKeepsMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteBytes(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v (%v), want 0600 kept", st.Mode().Perm(), err)
	}
}

func TestWriteNoFolder(t *testing.T) {
	err := WriteBytes(filepath.Join(t.TempDir(), "missing", "out.txt"), nil)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err %v, want one that is os.ErrNotExist", err)
	}
}

func ExampleWriteBytes() {
	dir, _ := os.MkdirTemp("", "atomicfile")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "result.json")
	if err := WriteBytes(path, []byte(`{"ok": true}`+"\n")); err != nil {
		fmt.Println(err)
		return
	}
	b, _ := os.ReadFile(path)
	fmt.Print(string(b))
	// Output: {"ok": true}
}

func TestWriteTo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.txt")
	if err := WriteTo(path, strings.NewReader("rendered\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "rendered\n" {
		t.Errorf("file holds %q", b)
	}
}

// TestBadPath: a missing folder or a folder given as the file is named in
// the error (not the temporary file), by Check before a run and by Write,
// and nothing is left behind.
func TestBadPath(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		path, want string
		notExist   bool
	}{
		{filepath.Join(dir, "missing", "out.json"), "cannot write " + filepath.Join(dir, "missing", "out.json") + ": folder " + filepath.Join(dir, "missing") + " does not exist", true},
		{dir, "cannot write " + dir + ": it is a folder; name a file", false},
	} {
		for name, f := range map[string]func(string) error{"Check": Check, "Write": func(p string) error { return WriteBytes(p, []byte("x")) }} {
			err := f(c.path)
			if err == nil || err.Error() != c.want && !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("%s(%s) = %v, want %q", name, c.path, err, c.want)
			}
			if errors.Is(err, os.ErrNotExist) != c.notExist {
				t.Errorf("%s(%s): errors.Is(err, os.ErrNotExist) = %v", name, c.path, !c.notExist)
			}
		}
	}
	if err := Check(filepath.Join(dir, "ok.json")); err != nil {
		t.Errorf("Check of a writable path: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}
