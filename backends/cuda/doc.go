// Package cuda is gnnkit's CUDA backend: core.Backend, core.Device and
// core.Kernels on NVIDIA GPUs of compute capability 8.0 or newer (A100,
// H100, H200, ...), registered as "cuda". It uses the driver API through
// gorgonia.org/cu and kernels of its own; it needs no CUDA runtime, no
// cuBLAS and no toolkit on the GPU host, only the NVIDIA driver.
//
// # Building
//
// Everything but this file needs the build tag cuda and cgo:
//
//	CGO_ENABLED=1 go build -tags cuda ./...
//
// The build machine needs cuda.h and libcuda.so (the stub in the CUDA
// toolkit will do; on Debian, nvidia-cuda-dev); gorgonia.org/cu's cgo
// flags look in /usr/include, /usr/local/cuda and the usual library
// directories, and CGO_CFLAGS=-I... / CGO_LDFLAGS=-L... point elsewhere.
// The kernels are not compiled at build time: they are CUDA C in
// kernels/*.cu, compiled by nvcc into PTX for sm_80 with
//
//	go generate ./backends/cuda/ptx
//
// and the PTX is committed and embedded by package
// github.com/gnnkit/gnnkit/backends/cuda/ptx (untagged and cgo-free, so
// its tests check the PTX on any machine). The driver JIT-compiles the
// PTX for the GPU at first load and caches it (~/.nv/ComputeCache).
//
// Without the tag the package is this documentation only: importing
// gorgonia.org/cu makes a binary exit at start-up on a machine without a
// GPU (its package init calls cuInit and exits on failure), so the
// gnnkit binary never links it; CUDA devices are served by a worker
// process built with -tags cuda (see docs/design.md, issue 9).
//
// # Testing on a GPU host
//
// Build the test binary where the toolkit headers are, copy it to the GPU
// host (which needs only libcuda.so.1 from the driver, and glibc 2.34 or
// newer) and run it there:
//
//	CGO_ENABLED=1 go test -c -tags cuda -o cuda.test ./backends/cuda
//	./cuda.test -test.v                    # conformance and the rest
//	GNNKIT_GPU_BENCH=1 GNNKIT_BENCH_OUT=gpu.md ./cuda.test -test.v -test.run TestThroughput
//	./cuda.test -test.run '^$' -test.bench .   # benchmarks
//
// TestConformance runs core/backendtest on every device; variants run it
// with each SpMM kernel forced (the balanced one with chunks of 7 items, to
// exercise its carry fix-up) and on two logical devices.
//
// # Devices, streams and memory
//
// New opens BackendOptions.Devices logical devices cuda:0, cuda:1, ...
// on the GPUs round robin (0: one per GPU). Each has a goroutine locked
// to an OS thread with the GPU's primary context current, which runs every
// driver call for the device; one driver stream, on which all its
// kernels, copies and fills run in order; the loaded kernels; and a
// core.MemAccountant capped at MemCap (0: the GPU's memory). Alloc
// charges the accountant first, then takes device memory and queues a
// zero fill; over the cap, or when the GPU itself is out of memory, it
// returns an *core.OOMError. Freed memory is kept in a per-device cache
// by size class and reused by later allocations (the stream's order makes
// that safe without synchronisation), so Free never waits for the GPU.
// Upload queues a copy (the call returns once the driver has taken the
// data); Download waits for the work queued before it on the calling
// goroutine, then copies. Streams are views of the device's stream
// (core.Kernels carries no stream): Record records a driver event, Wait
// queues cuStreamWaitEvent for another CUDA device's event, Sync waits
// for the device. Graph structure is uploaded once per device and graph
// (keyed weakly by the *core.Graph, released when it is collected) and
// checked first, so a malformed graph is an ErrInvalidGraph error, not a
// fault that would break the context; host index arrays are checked and
// uploaded per call.
//
// # Kernels
//
// GEMM is exact fp32 by default: shared-memory tiles of 32x32, 64x64 or
// 128x128 with 2x2 to 8x8 outputs per thread, picked by the shape. With
// Config.TF32, GNN_CUDA_TF32=1 or Device.SetTF32 it runs on tensor cores
// (WMMA, TF32 inputs, fp32 accumulation). SpMM computes a row per warp
// with float4 loads when the width allows (SpMMWarp), or splits rows and
// entries together into equal chunks along the merge path, one per warp,
// and adds the partial sums of rows cut by chunk boundaries in a
// deterministic fix-up pass (SpMMBalanced); SpMMAuto takes the balanced
// kernel when the longest row dwarfs an even share of the entries
// (GNN_CUDA_SPMM pins one).
// Kernels.SpMMBiasAct (FusedAggregator) adds a bias and a ReLU in the
// SpMM epilogue, bit for bit what SpMM, Map(MapAdd) and Map(MapReLU)
// give. SDDMM, edge softmax and its backward, log-softmax and its
// backward use warps and shuffle reductions; the rest are grid-stride
// elementwise kernels. Dropout uses core.DropoutKeep's hash in 64-bit
// integer arithmetic, so its masks equal the CPU backend's bit for bit.
// Every kernel except ScatterAdd (atomic adds) computes each output in a
// fixed order, so results repeat bit for bit; NLLLoss sums the picked
// values on the host in float64.
package cuda
