// Shared definitions for gnnkit's CUDA kernels (backends/cuda).
//
// The kernels are compiled ahead of time to PTX for sm_80 by
// `go generate ./backends/cuda/ptx` (nvcc -ptx -arch=sm_80 -O3), and the
// driver JIT-compiles that PTX for the GPU it runs on (sm_90 on H100/H200).
// Every kernel is extern "C", so its PTX entry name is the name the Go
// side loads (ptx.Kernels lists them all).
//
// Conventions:
//   - tensors are row-major float matrices; element offsets are 64-bit
//     (i64), so a tensor may exceed 2^31 elements; row and column counts
//     are int.
//   - graph offsets are int64 (core.Graph's own array, uploaded as is),
//     source indices and edge ids int32; a null eid pointer means the
//     graph has no edge ids (the id of entry e is e).
//   - every kernel is a grid-stride loop, so any grid size is correct and
//     the host caps grids; warp-level kernels keep their loops uniform
//     across the warp, so every __shfl_*_sync runs with all 32 lanes.
//   - the host never launches a kernel with nothing to do; it handles
//     zero-sized tensors itself.
//   - kernel parameters are int (4 bytes), long long (8), float (4),
//     unsigned long long (8) or pointers (8); the Go side checks its
//     argument list against the PTX's .param list before every launch.
#pragma once

typedef long long i64;

#define FULL_MASK 0xffffffffu

// core.MapOp values (core/kernels.go). ptx.TestMapOpValues checks them
// against the Go constants, so the two cannot drift apart.
#define MAP_COPY 0
#define MAP_FILL 1
#define MAP_SCALE 2
#define MAP_ADD 3
#define MAP_SUB 4
#define MAP_MUL 5
#define MAP_AXPY 6
#define MAP_BROADCAST 7
#define MAP_RELU 8
#define MAP_RELU_GRAD 9
#define MAP_LEAKY_RELU 10
#define MAP_LEAKY_RELU_GRAD 11
#define MAP_ELU 12
#define MAP_ELU_GRAD 13
#define MAP_SIGMOID 14
#define MAP_SIGMOID_GRAD 15
#define MAP_TANH 16
#define MAP_TANH_GRAD 17
#define MAP_EXP 18

// Activations of the fused SpMM epilogue (cuda.Activation).
#define ACT_NONE 0
#define ACT_RELU 1

// Index of this thread in the grid, and the grid's thread count.
__device__ __forceinline__ i64 thread_id() {
	return (i64)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ i64 thread_count() {
	return (i64)gridDim.x * blockDim.x;
}

// Warp of this thread in the grid, and the grid's warp count (blockDim.x
// is a multiple of 32 for every warp-level kernel).
__device__ __forceinline__ i64 warp_id() { return thread_id() >> 5; }
__device__ __forceinline__ i64 warp_count() { return thread_count() >> 5; }
__device__ __forceinline__ int lane_id() { return threadIdx.x & 31; }

// Sum and maximum over the 32 lanes of a warp (every lane gets the
// result). The butterfly order is fixed, so results are repeatable.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
	for (int s = 16; s > 0; s >>= 1)
		v += __shfl_xor_sync(FULL_MASK, v, s);
	return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
	for (int s = 16; s > 0; s >>= 1)
		v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, s));
	return v;
}

// -infinity as a float (the identity of max).
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// Edge id of the e-th CSR entry.
__device__ __forceinline__ i64 edge_id(const int *eid, i64 e) {
	return eid ? (i64)eid[e] : e;
}
