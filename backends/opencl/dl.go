//go:build (linux || darwin || freebsd || netbsd) && !android && !faketime && (amd64 || arm64)

package opencl

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/ebitengine/purego"
)

// libraryNames are tried in order; GNN_OPENCL_LIB overrides them.
func libraryNames() []string {
	if p := os.Getenv("GNN_OPENCL_LIB"); p != "" {
		return []string{p}
	}
	if runtime.GOOS == "darwin" {
		return []string{"/System/Library/Frameworks/OpenCL.framework/OpenCL"}
	}
	return []string{"libOpenCL.so.1", "libOpenCL.so"}
}

// loadLibrary dlopens libOpenCL once per process and fills in clTable.
// Without the library it returns an error wrapping ErrUnavailable.
var loadLibrary = sync.OnceValues(func() (string, error) {
	var errs []string
	for _, name := range libraryNames() {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		for _, e := range clTable {
			sym, err := purego.Dlsym(h, e.name)
			if err != nil || sym == 0 {
				_ = purego.Dlclose(h)
				return "", fmt.Errorf("%w: %s has no %s (OpenCL 1.2 is required)", ErrUnavailable, name, e.name)
			}
			purego.RegisterFunc(e.fptr, sym)
		}
		return name, nil
	}
	return "", fmt.Errorf("%w: %s", ErrUnavailable, strings.Join(errs, "; "))
})
