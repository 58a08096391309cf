// Package ptx holds the CUDA backend's kernels as PTX, embedded in the
// binary, with the list of entry points the backend loads and small
// parsers for PTX headers and entry signatures.
//
// The kernels are CUDA C in ../kernels/*.cu; `go generate` (see gen.go)
// runs nvcc -ptx -arch=sm_80 on each file and the results are committed
// here, so a gnnkit build needs no CUDA toolkit, and a GPU host needs only
// the NVIDIA driver, which JIT-compiles the sm_80 PTX for its GPU (sm_90
// on H100/H200) on first load and caches the result.
//
// The package is deliberately free of cgo and build tags: it builds and
// tests on any machine, so CI checks without a GPU that the PTX is
// present, targets sm_80, declares a .version, defines every entry in
// Kernels (the exact list backends/cuda loads) and matches its sources.
// backends/cuda (build tag cuda) loads each module with cuModuleLoadData,
// looks up every name in Kernels once per device, and checks each
// launch's arguments against the entry's parameters from Params.
package ptx
