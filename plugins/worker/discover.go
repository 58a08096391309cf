package worker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/gnnkit/gnnkit/plugins/host"
)

// NotFoundError reports a worker binary found nowhere Find looks.
type NotFoundError struct {
	Name   string
	Looked []string // the places searched, in order
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("%s not found (looked %s)", e.Name, strings.Join(e.Looked, ", "))
}

// Unwrap makes errors.Is(err, fs.ErrNotExist) hold.
func (e *NotFoundError) Unwrap() error { return fs.ErrNotExist }

// Find looks for the worker binary name (e.g. "gnnkit-cuda"): next to the
// running executable, then in the plugin folder ($GNNKIT_PLUGIN_DIR, else
// gnnkit/plugins under the user's config folder, see plugins/host.Dir),
// then on $PATH. It returns the first executable file found, or a
// *NotFoundError that lists where it looked.
func Find(name string) (string, error) {
	nf := &NotFoundError{Name: name}
	var dirs []string
	if self, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(self); err == nil {
			self = real
		}
		dirs = append(dirs, filepath.Dir(self))
		nf.Looked = append(nf.Looked, "next to "+filepath.Base(self)+" in "+filepath.Dir(self))
	}
	if d, err := host.Dir(); err == nil {
		dirs = append(dirs, d)
		nf.Looked = append(nf.Looked, "in the plugin folder "+d+" ($GNNKIT_PLUGIN_DIR)")
	}
	for i, d := range dirs {
		p := filepath.Join(d, name)
		if isExec(p) {
			if i == 0 || filepath.IsAbs(p) {
				return p, nil
			}
			return filepath.Abs(p)
		}
	}
	nf.Looked = append(nf.Looked, "on $PATH")
	p, err := exec.LookPath(name)
	if err == nil {
		return filepath.Abs(p)
	}
	if !errors.Is(err, exec.ErrNotFound) && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("worker: looking for %s on $PATH: %w", name, err)
	}
	return "", nf
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}
