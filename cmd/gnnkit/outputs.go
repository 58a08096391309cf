package main

import (
	"fmt"

	"github.com/gnnkit/gnnkit/internal/atomicfile"
)

// checkOutputs checks, before any work, that each output file named by a
// flag (flag name -> path; empty: not asked for) can be written, so a
// long run does not end in "cannot write" with nothing saved.
func checkOutputs(outputs ...[2]string) error {
	for _, o := range outputs {
		if o[1] == "" {
			continue
		}
		if err := atomicfile.Check(o[1]); err != nil {
			return fmt.Errorf("--%s: %w", o[0], err)
		}
	}
	return nil
}
