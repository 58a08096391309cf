// Package cpu is gnnkit's CPU backend: core.Backend, core.Device and
// core.Kernels in Go with SIMD kernels chosen at run time (no cgo),
// registered as "cpu".
//
// # Devices
//
// New exposes BackendOptions.Devices logical devices, cpu:0, cpu:1, …,
// on the one machine. Each has its own thread budget (Threads, default
// max(1, NumCPU/Devices)) served by its own worker pool, and its own
// memory cap (MemCap, 0 = none) enforced by a core.MemAccountant,
// so multi-device schedulers can be exercised on a laptop. There are at
// most MaxDevices (64) of them. Whatever their caps, they share one more
// accountant (Device.HostMem) holding them together to the memory the
// machine had available when the backend opened (HostMemory): an
// allocation past it fails with an error wrapping *core.OOMError instead
// of the Go runtime's fatal "out of memory". Tensors live
// in Go memory (*core.HostMem with Dev set to the device id); streams run
// work synchronously in the caller. Freed buffers of 32 KiB or more are
// kept by size and reused by Alloc, cleared over the device's threads
// with non-temporal stores, so a training loop's steady state allocates
// nothing large (a freed tensor's buffer is detached: using it after Free
// fails instead of aliasing another tensor).
//
// NewConfig takes the backend's own options besides core's: the kernel
// variant (Config.Variant) and thread pinning (Config.Pin: each worker
// locked to an OS thread bound to its own CPU, for benchmarks on machines
// whose scheduler stacks threads on one CPU; GNN_CPU_PIN=1 turns it on
// for New, and a value that is not a boolean is an error). A backend
// starts at most MaxThreads worker threads in all (threads per device
// times devices).
//
// # Kernel variants
//
// The inner loops live in internal/kern, laid out as crypto/sha256:
// portable Go ("generic"), and avo-generated assembly for AVX2+FMA
// ("avx2") and AVX-512 ("avx512"), chosen once from cpuid
// (github.com/klauspost/cpuid/v2). The purego build tag or another GOARCH
// leaves generic alone. GNN_CPU=generic|avx2|avx512 pins a variant (a
// variant the binary lacks or the CPU cannot run falls back to the best,
// with the reason); DeviceInfo.Kernel and `gnnkit devices` say which
// variant runs and why. Variants lists the ones this machine can run, and
// every one of them passes core/backendtest (cpu_test.go).
//
// # Kernels
//
// Every kernel of core.Kernels is implemented exactly as documented there.
// Work is split by output rows (graph kernels into pieces of about equal
// edge counts, so power-law hubs do not serialise), and reductions over
// rows are computed in fixed blocks combined in order, so results are
// identical for every thread count.
//
//   - GEMM packs op(B) into panels and runs an FMA micro-kernel (avx2
//     6x16; avx512 12x32, 12x16, 8x48, whichever pads N least) over bands
//     of C, with A read in place through its strides (A^T costs nothing)
//     or copied into micro-panels when its rows alias in L1; a long k with
//     few rows (a weight gradient X^T dY) is cut into a fixed number of
//     splits summed in order. A sampled density picks the zero-skipping
//     row-update path for very sparse A and wide outputs instead.
//   - SpMM keeps a block of each output row in vector registers across
//     the row's edges (128 columns in one pass with AVX-512), prefetching
//     the row 16 edges ahead into L2; weights read through edge ids (the
//     reverse graph of a backward pass) are gathered into CSR order once
//     and reused while the weights are unchanged.
//   - Dropout hashes 8 or 16 keys per vector (core.DropoutKeep's SplitMix64
//     draw, bit for bit); LogSoftmax, its backward, ReLU, bias rows, the
//     row sums of Reduce and the Alloc clears are vector kernels too.
//
// Kernels also implements FusedAggregator, an optional fast path for a
// GCN layer's aggregate + bias + ReLU in one pass over the output.
//
// # Measuring
//
// PeakFLOPS and CopyBandwidth measure the machine; `gnnkit bench kernels`
// and `gnnkit bench epoch` report the kernels and training epochs against
// them, and bench/torch_compare.sh runs them side by side with PyTorch.
package cpu
