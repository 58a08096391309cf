// Graph kernels over a CSR graph by destination: row i lists, in
// idx[off[i] .. off[i+1]), the sources of its edges; an edge's values
// (weights, attention) are read at its id (edge_id(eid, e)).
//
// SpMM has two variants, both deterministic (a fixed summation order for
// a given graph, width and chunk size, no atomics):
//
//   spmm_warp      one warp per row (grid-stride over rows).
//   spmm_balanced  merge path: one warp per chunk of T consecutive items of
//                  the merged sequence of row ends and entries, so a hub
//                  row is spread over many warps and no warp gets more
//                  than T rows either; rows cut by a chunk boundary leave
//                  partial sums in a carry buffer that spmm_fixup adds up
//                  in chunk order (a deterministic carry-out, no atomics).
//
// In both, a warp computes one row's vector of C floats in float4 units
// when V = 4 (the host picks V = 4 when C % 4 == 0 and, for per-head
// weights, F % 4 == 0, so the 4 columns of a unit share a head), else in
// floats. With CV = C / V units and L = min(32, next power of two >= CV)
// lanes per row, the warp's 32 / L lane groups take every (32/L)-th edge
// of the row and are summed by a shuffle tree at the end; when CV > 32
// the row is done in passes of 32 units. The loop over passes is uniform
// across the warp, so all lanes reach every shuffle.
//
// The epilogue (mean scaling, bias, ReLU) is shared by SpMM and the fused
// aggregate (cuda.FusedAggregator) and uses __fmul_rn/__fadd_rn, so the
// fused result equals SpMM + Map(add) + Map(relu) bit for bit.
#include "common.cuh"

// Arguments shared by the SpMM kernels.
struct SpmmArgs {
	const i64 *off;    // R+1 row offsets
	const int *idx;    // source of each entry
	const int *eid;    // edge id of each entry, or null
	const float *w;    // weights read at edge id: wmode 1: [ids], 2: [ids, H]
	int wmode;         // 0: none (all ones), 1: one per edge, 2: one per head
	int H, F;          // heads, and columns per head (C = H*F when wmode == 2)
	const float *x;    // NumSrc x C
	int C;             // columns
	int mean;          // divide by the row's degree
	const float *bias; // 1 x C, or null
	int act;           // ACT_NONE or ACT_RELU
	float *out;        // NumDst x C
};

__device__ __forceinline__ void vzero(float &a) { a = 0.0f; }
__device__ __forceinline__ void vzero(float4 &a) { a = make_float4(0.0f, 0.0f, 0.0f, 0.0f); }
__device__ __forceinline__ void vload(float &d, const float *p) { d = *p; }
__device__ __forceinline__ void vload(float4 &d, const float *p) {
	d = *reinterpret_cast<const float4 *>(p);
}
__device__ __forceinline__ void vstore(float *p, const float &v) { *p = v; }
__device__ __forceinline__ void vstore(float *p, const float4 &v) {
	*reinterpret_cast<float4 *>(p) = v;
}
__device__ __forceinline__ void vadd(float &a, const float &x) { a += x; }
__device__ __forceinline__ void vadd(float4 &a, const float4 &x) {
	a.x += x.x;
	a.y += x.y;
	a.z += x.z;
	a.w += x.w;
}
__device__ __forceinline__ void vfma(float &a, float w, const float &x) { a = fmaf(w, x, a); }
__device__ __forceinline__ void vfma(float4 &a, float w, const float4 &x) {
	a.x = fmaf(w, x.x, a.x);
	a.y = fmaf(w, x.y, a.y);
	a.z = fmaf(w, x.z, a.z);
	a.w = fmaf(w, x.w, a.w);
}
// a += the value of lane (this lane + s).
__device__ __forceinline__ void vshfl_down_add(float &a, int s) {
	a += __shfl_down_sync(FULL_MASK, a, s);
}
__device__ __forceinline__ void vshfl_down_add(float4 &a, int s) {
	a.x += __shfl_down_sync(FULL_MASK, a.x, s);
	a.y += __shfl_down_sync(FULL_MASK, a.y, s);
	a.z += __shfl_down_sync(FULL_MASK, a.z, s);
	a.w += __shfl_down_sync(FULL_MASK, a.w, s);
}

// One output value after the epilogue: the mean's scaling (as
// Map(MapScale) would: one rounded multiply by 1/deg), the bias (one
// rounded add) and the activation.
__device__ __forceinline__ float spmm_epi(const SpmmArgs &a, float s, float inv, int col) {
	if (a.mean)
		s = __fmul_rn(s, inv);
	if (a.bias)
		s = __fadd_rn(s, a.bias[col]);
	if (a.act == ACT_RELU)
		s = s < 0.0f ? 0.0f : s;
	return s;
}

// Stores unit v of a row (deg entries) into orow after the epilogue.
__device__ __forceinline__ void spmm_store(const SpmmArgs &a, float *orow, int v, float acc, i64 deg) {
	const float inv = deg > 0 ? 1.0f / (float)deg : 1.0f;
	orow[v] = spmm_epi(a, acc, inv, v);
}
__device__ __forceinline__ void spmm_store(const SpmmArgs &a, float *orow, int v, float4 acc, i64 deg) {
	const float inv = deg > 0 ? 1.0f / (float)deg : 1.0f;
	const int c = v * 4;
	float4 r;
	r.x = spmm_epi(a, acc.x, inv, c);
	r.y = spmm_epi(a, acc.y, inv, c + 1);
	r.z = spmm_epi(a, acc.z, inv, c + 2);
	r.w = spmm_epi(a, acc.w, inv, c + 3);
	vstore(orow + c, r);
}

// Sum over the entries [e0, e1) of w(e) * x[src(e), unit v]: lane group g
// (of G = 32/L) takes entries e0+g, e0+g+G, ...; the groups are then
// summed by a shuffle tree, so lanes of group 0 (lane < L) hold the
// result. Every lane of the warp must call it (inactive lanes too).
template <typename T>
__device__ __forceinline__ T spmm_sum(const SpmmArgs &a, i64 e0, i64 e1, int v, int g, int G, int L, bool active) {
	T acc;
	vzero(acc);
	if (active) {
		const int V = sizeof(T) / sizeof(float);
		const int col = v * V;
		const float *xc = a.x + col;
		if (a.wmode == 0) {
#pragma unroll 4
			for (i64 e = e0 + g; e < e1; e += G) {
				T xv;
				vload(xv, xc + (i64)a.idx[e] * a.C);
				vadd(acc, xv);
			}
		} else {
			const int h = a.wmode == 2 ? col / a.F : 0;
			const float *wh = a.w + h;
#pragma unroll 4
			for (i64 e = e0 + g; e < e1; e += G) {
				T xv;
				vload(xv, xc + (i64)a.idx[e] * a.C);
				vfma(acc, wh[edge_id(a.eid, e) * a.H], xv);
			}
		}
	}
	for (int s = 16; s >= L; s >>= 1)
		vshfl_down_add(acc, s);
	return acc;
}

template <typename T>
__device__ __forceinline__ void spmm_warp_body(const SpmmArgs &a, int R, int L) {
	const int V = sizeof(T) / sizeof(float);
	const int CV = a.C / V;
	const int lane = lane_id(), G = 32 / L, g = lane / L;
	for (i64 r = warp_id(); r < R; r += warp_count()) {
		const i64 e0 = a.off[r], e1 = a.off[r + 1];
		float *orow = a.out + r * a.C;
		for (int vb = 0; vb < CV; vb += L) {
			const int v = vb + (lane & (L - 1));
			const bool active = v < CV;
			const T acc = spmm_sum<T>(a, e0, e1, v, g, G, L, active);
			if (g == 0 && active)
				spmm_store(a, orow, v, acc, e1 - e0);
		}
	}
}

#define SPMM_PARAMS                                                              \
	const int R, const int C, const i64 *off, const int *idx, const int *eid, \
	    const float *w, const int wmode, const int H, const int F,            \
	    const int mean, const float *x, const float *bias, const int act,     \
	    float *out, const int L
#define SPMM_ARGS                                               \
	SpmmArgs a;                                                 \
	a.off = off;                                                \
	a.idx = idx;                                                \
	a.eid = eid;                                                \
	a.w = w;                                                    \
	a.wmode = wmode;                                            \
	a.H = H;                                                    \
	a.F = F;                                                    \
	a.x = x;                                                    \
	a.C = C;                                                    \
	a.mean = mean;                                              \
	a.bias = bias;                                              \
	a.act = act;                                                \
	a.out = out;

// SpMM, one warp per row, in floats. Block size a multiple of 32.
extern "C" __global__ void spmm_warp(SPMM_PARAMS) {
	SPMM_ARGS
	spmm_warp_body<float>(a, R, L);
}

// SpMM, one warp per row, in float4 units (C % 4 == 0).
extern "C" __global__ void spmm_warp_vec4(SPMM_PARAMS) {
	SPMM_ARGS
	spmm_warp_body<float4>(a, R, L);
}

// Balanced SpMM, a merge-path split: the R row ends and nnz entries are
// merged into one path (entry j of row r at position j + r, row r's end
// at off[r+1] + r, right after its last entry) and warp k of nchunks
// takes the positions [k*T, min((k+1)*T, R+nnz)), so every warp gets at
// most T rows and entries together, however the degrees are spread
// (hubs, long runs of empty rows). chunk_row[k] is the number of row ends
// before position k*T (chunk_row[nchunks] = R); the chunk starts at row
// i0 = chunk_row[k], entry j0 = k*T - i0, and ends at (i1, j1) likewise.
// It writes the rows whose entries and end all lie inside it; the row it
// starts in the middle of (i0, when off[i0] < j0) leaves the sum of its
// entries in [j0, j1) in carry slot 2k ("head", possibly empty); the row
// that starts in it and ends later (i1) leaves its partial sum in slot
// 2k+1 ("tail"). spmm_fixup completes those rows. carry is
// 2*nchunks x C floats.
template <typename T>
__device__ __forceinline__ void spmm_balanced_body(const SpmmArgs &a, int R, int L, i64 nnz, i64 T_, i64 nchunks,
                                                   const int *chunk_row, float *carry) {
	const int V = sizeof(T) / sizeof(float);
	const int CV = a.C / V;
	const int lane = lane_id(), G = 32 / L, g = lane / L;
	for (i64 k = warp_id(); k < nchunks; k += warp_count()) {
		const i64 d0 = k * T_;
		const i64 d1 = min(d0 + T_, (i64)R + nnz);
		const int i0 = chunk_row[k], i1 = chunk_row[k + 1];
		const i64 j0 = d0 - i0, j1 = d1 - i1;
		const bool head = i0 < R && a.off[i0] < j0;
		if (head) {
			float *dst = carry + (2 * k) * a.C;
			const i64 he = min(a.off[i0 + 1], j1);
			for (int vb = 0; vb < CV; vb += L) {
				const int v = vb + (lane & (L - 1));
				const bool active = v < CV;
				const T acc = spmm_sum<T>(a, j0, he, v, g, G, L, active);
				if (g == 0 && active)
					vstore(dst + v * V, acc);
			}
		}
		for (int r = head ? i0 + 1 : i0; r < i1; r++) {
			const i64 e0 = a.off[r], e1 = a.off[r + 1];
			float *orow = a.out + (i64)r * a.C;
			for (int vb = 0; vb < CV; vb += L) {
				const int v = vb + (lane & (L - 1));
				const bool active = v < CV;
				const T acc = spmm_sum<T>(a, e0, e1, v, g, G, L, active);
				if (g == 0 && active)
					spmm_store(a, orow, v, acc, e1 - e0);
			}
		}
		if (i1 < R && !(head && i1 == i0) && a.off[i1] < j1) {
			float *dst = carry + (2 * k + 1) * a.C;
			const i64 e0 = a.off[i1];
			for (int vb = 0; vb < CV; vb += L) {
				const int v = vb + (lane & (L - 1));
				const bool active = v < CV;
				const T acc = spmm_sum<T>(a, e0, j1, v, g, G, L, active);
				if (g == 0 && active)
					vstore(dst + v * V, acc);
			}
		}
	}
}

#define SPMM_BAL_PARAMS \
	SPMM_PARAMS, const i64 nnz, const i64 T_, const i64 nchunks, const int *chunk_row, float *carry

// Balanced SpMM in floats (see spmm_balanced_body).
extern "C" __global__ void spmm_balanced(SPMM_BAL_PARAMS) {
	SPMM_ARGS
	spmm_balanced_body<float>(a, R, L, nnz, T_, nchunks, chunk_row, carry);
}

// Balanced SpMM in float4 units.
extern "C" __global__ void spmm_balanced_vec4(SPMM_BAL_PARAMS) {
	SPMM_ARGS
	spmm_balanced_body<float4>(a, R, L, nnz, T_, nchunks, chunk_row, carry);
}

// The rows fix_rows[0..nfix) have entries in a chunk before the one that
// holds their end: row r's first entry is in chunk kF = (off[r] + r)/T,
// which left its partial in tail slot 2kF+1, and every later chunk up to
// kE = (off[r+1] + r)/T left the row's entries inside it (maybe none) in
// head slot 2k. Sums them in chunk order and stores the row after the
// epilogue. One warp per row, lanes over units.
template <typename T>
__device__ __forceinline__ void spmm_fixup_body(const SpmmArgs &a, int nfix, const int *fix_rows, i64 T_,
                                                const float *carry) {
	const int V = sizeof(T) / sizeof(float);
	const int CV = a.C / V;
	const int lane = lane_id();
	for (i64 q = warp_id(); q < nfix; q += warp_count()) {
		const int r = fix_rows[q];
		const i64 e0 = a.off[r], e1 = a.off[r + 1];
		const i64 kF = (e0 + r) / T_, kE = (e1 + r) / T_;
		float *orow = a.out + (i64)r * a.C;
		for (int v = lane; v < CV; v += 32) {
			T acc, h;
			vload(acc, carry + (2 * kF + 1) * a.C + v * V);
			for (i64 k = kF + 1; k <= kE; k++) {
				vload(h, carry + (2 * k) * a.C + v * V);
				vadd(acc, h);
			}
			spmm_store(a, orow, v, acc, e1 - e0);
		}
	}
}

#define SPMM_FIX_PARAMS \
	SPMM_PARAMS, const int nfix, const int *fix_rows, const i64 T_, const float *carry

// Carry fix-up of the balanced SpMM, in floats.
extern "C" __global__ void spmm_fixup(SPMM_FIX_PARAMS) {
	SPMM_ARGS
	spmm_fixup_body<float>(a, nfix, fix_rows, T_, carry);
}

// Carry fix-up of the balanced SpMM, in float4 units.
extern "C" __global__ void spmm_fixup_vec4(SPMM_FIX_PARAMS) {
	SPMM_ARGS
	spmm_fixup_body<float4>(a, nfix, fix_rows, T_, carry);
}

// rows[e] = the row of entry e (the COO form SDDMM reads). One warp per row.
extern "C" __global__ void csr_rows(const int R, const i64 *off, int *rows) {
	const int lane = lane_id();
	for (i64 r = warp_id(); r < R; r += warp_count())
		for (i64 e = off[r] + lane; e < off[r + 1]; e += 32)
			rows[e] = (int)r;
}

// SDDMM add: out[id(e), h] = a[row(e), h] + b[src(e), h] (a, b have H
// columns). One thread per (entry, head); n = E*H.
extern "C" __global__ void sddmm_add(const i64 n, const int H, const int *rows, const int *idx, const int *eid,
                                     const float *a, const float *b, float *out) {
	for (i64 k = thread_id(); k < n; k += thread_count()) {
		const i64 e = k / H;
		const int h = (int)(k - e * H);
		const i64 i = rows[e], j = idx[e];
		out[edge_id(eid, e) * H + h] = a[i * H + h] + b[j * H + h];
	}
}

// SDDMM dot: out[id(e), h] = sum over f < F of a[row(e), h*F+f] *
// b[src(e), h*F+f]. Groups of L lanes (L = min(32, next power of two >=
// F)) take one (entry, head) item each, lanes striding over f, and sum by
// an xor-shuffle tree inside the group; n = E*H items. The loop over
// items is uniform across the warp.
extern "C" __global__ void sddmm_dot(const i64 n, const int H, const int F, const int L, const int *rows,
                                     const int *idx, const int *eid, const float *a, const float *b,
                                     float *out) {
	const int lane = lane_id(), G = 32 / L, g = lane / L, l = lane & (L - 1);
	const i64 cols = (i64)H * F;
	for (i64 base = warp_id() * G; base < n; base += warp_count() * G) {
		const i64 item = base + g;
		const bool active = item < n;
		i64 e = 0;
		int h = 0;
		float acc = 0.0f;
		if (active) {
			e = item / H;
			h = (int)(item - e * H);
			const float *ar = a + (i64)rows[e] * cols + (i64)h * F;
			const float *br = b + (i64)idx[e] * cols + (i64)h * F;
			for (int f = l; f < F; f += L)
				acc = fmaf(ar[f], br[f], acc);
		}
		for (int s = L >> 1; s > 0; s >>= 1)
			acc += __shfl_xor_sync(FULL_MASK, acc, s);
		if (active && l == 0)
			out[edge_id(eid, e) * H + h] = acc;
	}
}

// Edge softmax: for row i and head h, out[q] = exp(s[q] - m) / sum over
// the row of exp(s[q'] - m), q = id(e)*H + h, m the row's maximum. One
// warp per (row, head) item, n = R*H; lanes stride over the row's
// entries. out may alias s: each lane reads then writes its own q, after
// the warp has finished both reductions. Empty rows write nothing.
extern "C" __global__ void edge_softmax(const i64 n, const int H, const i64 *off, const int *eid, const float *s,
                                        float *out) {
	const int lane = lane_id();
	for (i64 item = warp_id(); item < n; item += warp_count()) {
		const i64 i = item / H;
		const int h = (int)(item - i * H);
		const i64 e0 = off[i], e1 = off[i + 1];
		if (e0 == e1)
			continue;
		float m = neg_inf();
		for (i64 e = e0 + lane; e < e1; e += 32)
			m = fmaxf(m, s[edge_id(eid, e) * H + h]);
		m = warp_max(m);
		float sum = 0.0f;
		for (i64 e = e0 + lane; e < e1; e += 32)
			sum += expf(s[edge_id(eid, e) * H + h] - m);
		sum = warp_sum(sum);
		for (i64 e = e0 + lane; e < e1; e += 32) {
			const i64 q = edge_id(eid, e) * H + h;
			out[q] = expf(s[q] - m) / sum;
		}
	}
}

// Edge softmax backward: dx[q] = y[q] * (dy[q] - sum over the row of
// y*dy). One warp per (row, head); dx may alias dy (each lane reads then
// writes its own q, after the reduction).
extern "C" __global__ void edge_softmax_backward(const i64 n, const int H, const i64 *off, const int *eid,
                                                 const float *y, const float *dy, float *dx) {
	const int lane = lane_id();
	for (i64 item = warp_id(); item < n; item += warp_count()) {
		const i64 i = item / H;
		const int h = (int)(item - i * H);
		const i64 e0 = off[i], e1 = off[i + 1];
		if (e0 == e1)
			continue;
		float sum = 0.0f;
		for (i64 e = e0 + lane; e < e1; e += 32) {
			const i64 q = edge_id(eid, e) * H + h;
			sum = fmaf(y[q], dy[q], sum);
		}
		sum = warp_sum(sum);
		for (i64 e = e0 + lane; e < e1; e += 32) {
			const i64 q = edge_id(eid, e) * H + h;
			dx[q] = y[q] * (dy[q] - sum);
		}
	}
}
