package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"runtime/pprof"

	"github.com/gnnkit/gnnkit/internal/atomicfile"
)

// withCPUProfile calls run, with a CPU profile of it written to path when
// path is not empty (--cpuprofile). The profile goes to a temporary file
// beside path that replaces path only when run succeeds
// (internal/atomicfile), so a failed run leaves an existing file as it
// was. run's own error comes back as it is; one of the profile file's
// names the flag.
func withCPUProfile(path string, run func() error) error {
	if path == "" {
		return run()
	}
	var runErr error
	err := atomicfile.Write(path, func(w io.Writer) error {
		if err := pprof.StartCPUProfile(w); err != nil {
			return err
		}
		defer pprof.StopCPUProfile() // before atomicfile flushes w
		runErr = run()
		return runErr
	})
	switch {
	case err == nil || runErr != nil:
		return err
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("--cpuprofile %s: folder %s does not exist; create it or choose another FILE", path, filepath.Dir(path))
	}
	return fmt.Errorf("--cpuprofile %s: %w", path, err)
}
