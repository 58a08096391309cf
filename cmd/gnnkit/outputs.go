package main

import (
	"fmt"
	"path/filepath"

	"github.com/gnnkit/gnnkit/internal/atomicfile"
)

// checkOutputs checks, before any work, that each output file named by a
// flag (flag name -> path; empty: not asked for) can be written, so a
// long run does not end in "cannot write" with nothing saved, and that
// no two flags name one file (the last written would replace the other:
// plan --trace x --cpuprofile x left a CPU profile where the trace was).
func checkOutputs(outputs ...[2]string) error {
	by := map[string]string{} // cleaned absolute path -> flag
	for _, o := range outputs {
		if o[1] == "" {
			continue
		}
		if err := atomicfile.Check(o[1]); err != nil {
			return fmt.Errorf("--%s: %w", o[0], err)
		}
		p, err := filepath.Abs(o[1])
		if err != nil {
			p = filepath.Clean(o[1])
		}
		if other, ok := by[p]; ok {
			return fmt.Errorf("--%s and --%s both write %s: give each its own file", other, o[0], o[1])
		}
		by[p] = o[0]
	}
	return nil
}
