// Package cpu is gnnkit's portable CPU backend: core.Backend, core.Device
// and core.Kernels in pure Go (no cgo), registered as "cpu".
//
// # Devices
//
// New exposes BackendOptions.Devices logical devices, cpu:0, cpu:1, …,
// on the one machine. Each has its own thread budget (Threads, default
// max(1, NumCPU/Devices)) served by its own worker pool, and its own
// memory cap (MemCap, 0 = unlimited) enforced by a core.MemAccountant,
// so multi-device schedulers can be exercised on a laptop. Tensors live
// in Go memory (*core.HostMem with Dev set to the device id); streams run
// work synchronously in the caller.
//
// # Kernels
//
// Every kernel of core.Kernels is implemented exactly as documented there.
// Work is split by output rows (graph kernels split rows into pieces of
// about equal edge counts), and reductions over rows are computed in fixed
// blocks combined in order, so results are identical for every thread
// count. GEMM is cache-blocked, row-parallel and skips zero elements of A
// (as reference BLAS does), which is what makes sparse bag-of-words
// features cheap; A^T*B walks A in place.
//
// # Inner loops and SIMD
//
// The hot loops over float32 rows (axpy, add, dot, scale) live in
// internal/kern, with a registry of variants in the style of
// crypto/sha256: only the portable "generic" variant exists today. The
// environment variable GNN_CPU pins a variant (GNN_CPU=generic); the
// choice and its reason appear in DeviceInfo.Kernel.
package cpu
