// Shared definitions for gnnkit's OpenCL kernels (OpenCL C 1.2).
//
// The host builds every file of this directory as one program, with
// -DGEMM_TS_S/-DGEMM_WPT_S and -DGEMM_TS_L/-DGEMM_WPT_L (the GEMM
// tilings), -DMAP_<OP>=<n> for each core.MapOp, and -DGNN_FP64 when the
// device has cl_khr_fp64.
//
// Conventions: tensors are row-major float matrices; sizes are int
// (the host rejects tensors of 2^31 elements or more); element offsets
// are computed in long. Work-items past the end return at once, since
// global sizes may be rounded up to the work-group size.

#ifdef GNN_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
// acc_t accumulates the sums of softmax and log-softmax, in double where
// the device has it (as the CPU backend does).
typedef double acc_t;
#else
typedef float acc_t;
#endif

// Edge id of the e-th CSR entry.
#define EDGE_ID(e) (has_eid ? eid[(e)] : (e))
