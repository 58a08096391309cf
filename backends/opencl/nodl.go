//go:build !((linux || darwin || freebsd || netbsd) && !android && !faketime && (amd64 || arm64))

package opencl

import (
	"fmt"
	"runtime"
)

// loadLibrary reports that this platform has no run-time loader for
// libOpenCL (purego's dlopen is available on linux, darwin, freebsd and
// netbsd, amd64 and arm64).
func loadLibrary() (string, error) {
	return "", fmt.Errorf("%w: loading libOpenCL at run time is not supported on %s/%s", ErrUnavailable, runtime.GOOS, runtime.GOARCH)
}
