// Package opencl is gnnkit's OpenCL backend: core.Backend, core.Device
// and core.Kernels on any OpenCL 1.2 device (GPUs, and CPUs through
// PoCL), registered as "opencl".
//
// # Finding OpenCL at run time
//
// The package has no cgo. It loads libOpenCL.so.1 (the ICD loader; set
// GNN_OPENCL_LIB to use another file) with github.com/ebitengine/purego
// when a backend is first opened, so the default CGO_ENABLED=0 gnnkit
// binary uses OpenCL where it is installed and runs everywhere else.
// Without the library, or when the loader finds no platform with a
// device supporting OpenCL C 1.2, New returns an error wrapping
// ErrUnavailable ("opencl: unavailable (no OpenCL ICD found)"), which
// `gnnkit devices` prints and tests skip on. On Debian and Ubuntu,
// `apt-get install pocl-opencl-icd ocl-icd-libopencl1` provides a CPU
// device (`make deps` does this); GPU vendors ship their own ICDs.
//
// The binding (cl.go) is a table of the 26 OpenCL 1.2 entry points used,
// each with its C prototype; a test checks every Go signature against
// the prototype (cl_bitfield is 64-bit, cl_bool 32-bit, size_t
// pointer-sized). Failed calls return an *Error with the status code,
// and a failed program build a *BuildError carrying the compiler log.
//
// # Devices
//
// New lists every platform's devices, GPUs and accelerators first, and
// exposes BackendOptions.Devices logical devices opencl:0, opencl:1, …
// on them round robin (0: one per physical device; at most MaxDevices,
// 64), so a multi-device scheduler can be exercised on a single device.
// Each logical device has its own context, one in-order command queue,
// its own build of the kernels and a core.MemAccountant capped at MemCap
// (0: the device's global memory). Tensors live in OpenCL buffers (*Buffer); Upload and
// Download are blocking transfers on the queue, so a Download sees every
// kernel enqueued before it. BackendOptions.Threads does not apply.
//
// Streams: core.Kernels carries no stream, so all streams of a device
// share its in-order queue. Stream.Record enqueues a marker (an *Event,
// waited on with clWaitForEvents), Stream.Wait enqueues a barrier on an
// event of the same device and waits on the host for any other, and
// Stream.Sync is clFinish.
//
// # Kernels
//
// The kernels are OpenCL C in kernels/*.cl, embedded in the binary and
// built once per device (the driver compiles source; PoCL caches the
// result under ~/.cache/pocl); kernel objects are cached. GEMM is tiled
// in local memory with register blocking, one kernel per transpose
// combination in two tilings: 16x16 tiles of C with 2x2 elements per
// work-item for narrow products (a layer's N x F_in x F_out), 64x64 with
// 8x8 for large ones (smaller on devices with small work-groups or local
// memory); DeviceInfo.Kernel names them. SpMM, SDDMM and the edge softmax
// read the graph's CSR arrays, which are uploaded once per device and
// graph (keyed weakly by the *core.Graph, which is immutable), charged
// to the accountant and released when the graph is collected or the
// backend closed. ScatterAdd groups positions by target row on the host
// and adds them in index order, so it needs no atomics and is
// deterministic; NLLLoss sums on the host in float64. Dropout uses
// core.DropoutKeep's hash in 64-bit integer arithmetic, so masks match
// the CPU backend bit for bit. Softmax sums accumulate in double where
// the device has cl_khr_fp64. Index arrays passed by the host (Gather,
// ScatterAdd, NLLLoss) are uploaded for each call.
package opencl
