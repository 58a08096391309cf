// Elementwise kernels: Map (core.MapOp, with its broadcasting rule),
// Reduce and Dropout.

// Map: out[i,j] = f(a[i,j], B(i,j), alpha) over n = R*C elements, where
// b is BR x BC with BR in {R, 1} and BC dividing C, and
// B(i,j) = b[BR == 1 ? 0 : i, j / (C/BC)]. out may alias a. The MAP_*
// constants are core.MapOp's values, defined by the host at build time.
// Global size (n).
__kernel void map_op(const int op, const int n, const int C, const int BR,
                     const int BC, const float alpha, __global const float *a,
                     __global const float *b, __global float *out) {
	const int k = get_global_id(0);
	if (k >= n)
		return;
	float av = 0.0f, bv = 0.0f;
	if (op != MAP_FILL && op != MAP_BROADCAST)
		av = a[k];
	if (BC > 0) {
		const int i = k / C, j = k - i * C;
		bv = b[(long)(BR == 1 ? 0 : i) * BC + j / (C / BC)];
	}
	float r;
	switch (op) {
	case MAP_COPY: r = av; break;
	case MAP_FILL: r = alpha; break;
	case MAP_SCALE: r = alpha * av; break;
	case MAP_ADD: r = av + bv; break;
	case MAP_SUB: r = av - bv; break;
	case MAP_MUL: r = av * bv; break;
	case MAP_AXPY: r = av + alpha * bv; break;
	case MAP_BROADCAST: r = bv; break;
	case MAP_RELU: r = av < 0.0f ? 0.0f : av; break;
	case MAP_RELU_GRAD: r = bv > 0.0f ? av : 0.0f; break;
	case MAP_LEAKY_RELU: r = av > 0.0f ? av : alpha * av; break;
	case MAP_LEAKY_RELU_GRAD: r = bv > 0.0f ? av : av * alpha; break;
	case MAP_ELU: r = av > 0.0f ? av : alpha * expm1(av); break;
	case MAP_ELU_GRAD: r = bv > 0.0f ? av : av * alpha * exp(bv); break;
	case MAP_SIGMOID: r = 1.0f / (1.0f + exp(-av)); break;
	case MAP_SIGMOID_GRAD: r = av * bv * (1.0f - bv); break;
	case MAP_TANH: r = tanh(av); break;
	case MAP_TANH_GRAD: r = av * (1.0f - bv * bv); break;
	case MAP_EXP: r = exp(av); break;
	default: r = NAN; break;
	}
	out[k] = r;
}

// Reduce over rows, stage 1: part[blk, c] = sum of a[r, c] for r in the
// block's REDUCE_BLOCK rows, in order. Global size (C, blocks).
#define REDUCE_BLOCK 256
__kernel void reduce_rows_part(const int R, const int C, const int blocks,
                               __global const float *a, __global float *part) {
	const int c = get_global_id(0), blk = get_global_id(1);
	if (c >= C || blk >= blocks)
		return;
	const int r1 = min(R, (blk + 1) * REDUCE_BLOCK);
	float acc = 0.0f;
	for (int r = blk * REDUCE_BLOCK; r < r1; r++)
		acc += a[(long)r * C + c];
	part[(long)blk * C + c] = acc;
}

// Reduce over rows, stage 2: out[c] = sum of the blocks' partial sums,
// in block order. Global size (C).
__kernel void reduce_rows_final(const int blocks, const int C,
                                __global const float *part,
                                __global float *out) {
	const int c = get_global_id(0);
	if (c >= C)
		return;
	float acc = 0.0f;
	for (int blk = 0; blk < blocks; blk++)
		acc += part[(long)blk * C + c];
	out[c] = acc;
}

// Reduce over groups of columns: out[i,g] = sum of a[i, g*W .. g*W+W).
// Global size (G, R).
__kernel void reduce_cols(const int R, const int G, const int W,
                          __global const float *a, __global float *out) {
	const int g = get_global_id(0), i = get_global_id(1);
	if (g >= G || i >= R)
		return;
	__global const float *ar = a + (long)i * G * W + (long)g * W;
	float acc = 0.0f;
	for (int q = 0; q < W; q++)
		acc += ar[q];
	out[(long)i * G + g] = acc;
}

// Dropout with core.DropoutKeep's counter hash (SplitMix64 of
// seed + (key+1)*golden, top 24 bits against p), so the mask is the CPU
// backend's bit for bit. Element (r, c) is keyed by id(r)*C + c, where
// id(r) = rows[r] when has_rows (global row ids), else r. out may alias
// x; mask is written when has_mask. Global size (n).
__kernel void dropout(const int n, const int C, const ulong seed,
                      const float p, const float scale, const int has_rows,
                      __global const int *rows, const int has_mask,
                      __global const float *x, __global float *out,
                      __global float *mask) {
	const int k = get_global_id(0);
	if (k >= n)
		return;
	ulong key = (ulong)k;
	if (has_rows) {
		const int r = k / C;
		key = (ulong)rows[r] * (ulong)C + (ulong)(k - r * C);
	}
	ulong z = seed + (key + 1UL) * 0x9E3779B97F4A7C15UL;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9UL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBUL;
	z ^= z >> 31;
	const float u = (float)(uint)(z >> 40) * 0x1.0p-24f;
	const bool keep = u >= p;
	out[k] = keep ? x[k] * scale : 0.0f;
	if (has_mask)
		mask[k] = keep ? scale : 0.0f;
}
