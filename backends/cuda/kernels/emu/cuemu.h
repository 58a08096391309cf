// cuemu.h: a minimal CPU emulation of the CUDA execution model, enough to
// run gnnkit's kernels (../*.cu) compiled as C++20 by g++ or clang++:
// each block runs as blockDim OS threads (blocks one after another, so a
// __shared__ variable, emulated as a static, is the block's), barriers
// are std::barrier, and warp shuffles exchange values through a per-warp
// buffer between two warp barriers. It checks the kernels' indexing,
// bounds, shuffles, shared-memory tiling and arithmetic, not their speed
// or the memory model. Used by check.cpp (see there).
#pragma once
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>
#include <type_traits>
#include <algorithm>
#include <cstdio>
#include <cstdlib>

struct dim3 {
	unsigned x = 1, y = 1, z = 1;
	dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint3 { unsigned x, y, z; };
inline thread_local uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(x)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct float4 { float x, y, z, w; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
using std::min;
using std::max;

struct EmuWarp {
	std::barrier<> bar{32};
	float buf[32];
};
inline thread_local std::barrier<> *emu_block_bar;
inline thread_local EmuWarp *emu_warp;
inline thread_local int emu_lane;

inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp->bar.arrive_and_wait(); }
inline float emu_shfl(float v, int src, bool clamp_own) {
	EmuWarp *w = emu_warp;
	w->buf[emu_lane] = v;
	w->bar.arrive_and_wait();
	float r = (src < 0 || src >= 32) ? v : w->buf[src];
	w->bar.arrive_and_wait();
	return r;
}
inline float __shfl_xor_sync(unsigned, float v, int s) { return emu_shfl(v, emu_lane ^ s, false); }
inline float __shfl_down_sync(unsigned, float v, int s) { return emu_shfl(v, emu_lane + s, true); }
inline float atomicAdd(float *p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }

template <class F, class... A>
void emu_launch(F kernel, dim3 grid, dim3 block, A... args) {
	gridDim = grid;
	blockDim = block;
	const unsigned nt = block.x * block.y * block.z;
	for (unsigned bz = 0; bz < grid.z; bz++)
		for (unsigned by = 0; by < grid.y; by++)
			for (unsigned bx = 0; bx < grid.x; bx++) {
				std::barrier<> bar(nt);
				std::vector<EmuWarp> warps((nt + 31) / 32);
				std::vector<std::thread> ts;
				ts.reserve(nt);
				for (unsigned t = 0; t < nt; t++)
					ts.emplace_back([&, t] {
						threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
						blockIdx = {bx, by, bz};
						emu_block_bar = &bar;
						emu_warp = &warps[t / 32];
						emu_lane = t % 32;
						kernel(args...);
						bar.arrive_and_drop();
						warps[t / 32].bar.arrive_and_drop();
					});
				for (auto &t : ts)
					t.join();
			}
}
