// Package backends is the home of gnnkit's backends, one subpackage each:
// cpu (multi-threaded Go kernels, always built), and later opencl and
// cuda. Each registers itself with core.RegisterBackend in init and
// exports New for direct use; all pass core/backendtest.
package backends
