// Elementwise and row kernels: Map (core.MapOp with its broadcasting
// rule), Reduce, Dropout, Gather, ScatterAdd, and copies.
#include "common.cuh"

// Map: out[k] = f(a[k], B(i,j), alpha) for k = i*C + j < n = R*C, where
// b is BR x BC with BR in {R, 1} and BC dividing C, and
// B(i,j) = b[(BR == 1 ? 0 : i) * BC + j / (C/BC)]; BC == 0 means b is not
// read (unary ops). a is not read for MAP_FILL and MAP_BROADCAST. out may
// alias a (each element is read then written by the same thread). The
// expressions are the OpenCL backend's, which pass the conformance suite.
extern "C" __global__ void map_op(const int op, const i64 n, const int C, const int BR, const int BC,
                                  const float alpha, const float *a, const float *b, float *out) {
	const int per = BC > 0 ? C / BC : 1;
	for (i64 k = thread_id(); k < n; k += thread_count()) {
		float av = 0.0f, bv = 0.0f;
		if (op != MAP_FILL && op != MAP_BROADCAST)
			av = a[k];
		if (BC > 0) {
			const i64 i = k / C;
			const int j = (int)(k - i * C);
			bv = b[(BR == 1 ? 0 : i) * BC + j / per];
		}
		float r;
		switch (op) {
		case MAP_COPY: r = av; break;
		case MAP_FILL: r = alpha; break;
		case MAP_SCALE: r = alpha * av; break;
		case MAP_ADD: r = av + bv; break;
		case MAP_SUB: r = av - bv; break;
		case MAP_MUL: r = av * bv; break;
		case MAP_AXPY: r = fmaf(alpha, bv, av); break;
		case MAP_BROADCAST: r = bv; break;
		case MAP_RELU: r = av < 0.0f ? 0.0f : av; break;
		case MAP_RELU_GRAD: r = bv > 0.0f ? av : 0.0f; break;
		case MAP_LEAKY_RELU: r = av > 0.0f ? av : alpha * av; break;
		case MAP_LEAKY_RELU_GRAD: r = bv > 0.0f ? av : av * alpha; break;
		case MAP_ELU: r = av > 0.0f ? av : alpha * expm1f(av); break;
		case MAP_ELU_GRAD: r = bv > 0.0f ? av : av * alpha * expf(bv); break;
		case MAP_SIGMOID: r = 1.0f / (1.0f + expf(-av)); break;
		case MAP_SIGMOID_GRAD: r = av * bv * (1.0f - bv); break;
		case MAP_TANH: r = tanhf(av); break;
		case MAP_TANH_GRAD: r = av * (1.0f - bv * bv); break;
		case MAP_EXP: r = expf(av); break;
		default: r = __int_as_float(0x7fc00000); break; // NaN: the host rejects unknown ops
		}
		out[k] = r;
	}
}

// Reduce over rows, stage 1: part[blk, c] = sum of a[r, c] over the RB
// rows of block blk, in row order. Grid (ceil(C/blockDim.x), blocks); a
// block's threads take consecutive columns (coalesced).
extern "C" __global__ void reduce_rows_part(const int R, const int C, const int RB, const float *a, float *part) {
	const int blk = blockIdx.y;
	const i64 r0 = (i64)blk * RB;
	const i64 r1 = min((i64)R, r0 + RB);
	for (i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x; c < C; c += (i64)gridDim.x * blockDim.x) {
		float acc = 0.0f;
		for (i64 r = r0; r < r1; r++)
			acc += a[r * C + c];
		part[(i64)blk * C + c] = acc;
	}
}

// Reduce over rows, stage 2: out[c] = sum of the blocks' partial sums, in
// block order.
extern "C" __global__ void reduce_rows_final(const int blocks, const int C, const float *part, float *out) {
	for (i64 c = thread_id(); c < C; c += thread_count()) {
		float acc = 0.0f;
		for (int blk = 0; blk < blocks; blk++)
			acc += part[(i64)blk * C + c];
		out[c] = acc;
	}
}

// Reduce over groups of columns: out[i, g] = sum of a[i, g*W .. g*W+W),
// one thread per output; n = R*G.
extern "C" __global__ void reduce_cols(const i64 n, const int G, const int W, const float *a, float *out) {
	for (i64 k = thread_id(); k < n; k += thread_count()) {
		const float *ar = a + k * W; // row i, group g starts at (i*G + g)*W
		float acc = 0.0f;
		for (int q = 0; q < W; q++)
			acc += ar[q];
		out[k] = acc;
	}
}

// Dropout with core.DropoutKeep's counter hash: SplitMix64 of
// seed + (key+1)*golden, the top 24 bits as u in [0,1), kept when u >= p.
// The arithmetic is exact in both languages (uint64 wrap-around; a 24-bit
// integer to float and a multiply by 2^-24), so masks equal the CPU
// backend's bit for bit. Element k = r*C + c is keyed by id(r)*C + c,
// id(r) = rows[r] when rows is not null, else r. out may alias x; mask
// (may be null) gets scale or 0.
extern "C" __global__ void dropout(const i64 n, const int C, const unsigned long long seed, const float p,
                                   const float scale, const int *rows, const float *x, float *out,
                                   float *mask) {
	for (i64 k = thread_id(); k < n; k += thread_count()) {
		unsigned long long key = (unsigned long long)k;
		if (rows) {
			const i64 r = k / C;
			key = (unsigned long long)rows[r] * (unsigned long long)C + (unsigned long long)(k - r * C);
		}
		unsigned long long z = seed + (key + 1ULL) * 0x9E3779B97F4A7C15ULL;
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
		z ^= z >> 31;
		const float u = (float)(unsigned int)(z >> 40) * 5.9604644775390625e-8f; // 2^-24
		const bool keep = u >= p;
		out[k] = keep ? x[k] * scale : 0.0f;
		if (mask)
			mask[k] = keep ? scale : 0.0f;
	}
}

// Gather: out[q, c] = x[idx[q], c]; n = len(idx)*C.
extern "C" __global__ void gather(const i64 n, const int C, const int *idx, const float *x, float *out) {
	for (i64 k = thread_id(); k < n; k += thread_count()) {
		const i64 q = k / C;
		const int c = (int)(k - q * C);
		out[k] = x[(i64)idx[q] * C + c];
	}
}

// ScatterAdd: out[idx[q], c] += x[q, c] with atomicAdd; n = len(idx)*C.
// Correct with repeated indices; the order of the adds (and so the last
// bits of a repeated row's sum) may vary between runs.
extern "C" __global__ void scatter_add(const i64 n, const int C, const int *idx, const float *x, float *out) {
	for (i64 k = thread_id(); k < n; k += thread_count()) {
		const i64 q = k / C;
		const int c = (int)(k - q * C);
		atomicAdd(out + (i64)idx[q] * C + c, x[k]);
	}
}

// grad[pos[k]] = val[k] for distinct positions; n entries.
extern "C" __global__ void scatter_set(const i64 n, const i64 *pos, const float *val, float *grad) {
	for (i64 k = thread_id(); k < n; k += thread_count())
		grad[pos[k]] = val[k];
}

// dst[k] = src[k] for k < n, in float4 units where both are 16-byte
// aligned (device allocations are): the copy-bandwidth probe of the
// throughput test.
extern "C" __global__ void copy_f32(const i64 n, const float *src, float *dst) {
	const i64 n4 = n / 4;
	const float4 *s4 = reinterpret_cast<const float4 *>(src);
	float4 *d4 = reinterpret_cast<float4 *>(dst);
	for (i64 k = thread_id(); k < n4; k += thread_count())
		d4[k] = s4[k];
	for (i64 k = n4 * 4 + thread_id(); k < n; k += thread_count())
		dst[k] = src[k];
}
