//go:build !unix

package graphpipe_test

import "time"

// cpuTime is not measured here: the search-time checks use wall time.
func cpuTime() time.Duration { return 0 }
