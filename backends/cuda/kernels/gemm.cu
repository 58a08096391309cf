// GEMM: C = alpha * op(A) * op(B) + beta * C, row-major, op(X) = X or X^T.
//
// gemm_f32_<tile>_<ta><tb>: exact fp32, shared-memory tiles with register
// blocking. A block of 256 threads computes a BM x BN tile of C; each
// thread TM x TN elements of it. Per step of BK over K, the block loads
// a BM x BK tile of op(A) and a BK x BN tile of op(B) into shared memory
// (k-major, rows padded by 4 floats so neither the transposing stores nor
// the reads conflict on banks; global reads are coalesced for every
// transpose case), then every thread runs BK rank-1 updates of its
// accumulators with fmaf. Each element of C is the sequential fma chain
// over k = 0..K-1 (padding adds exact zeros), so results are repeatable
// and within the fp32 rounding of a naive loop.
//
//   s: 32x32 tiles, 2x2 per thread (narrow products, e.g. N x F_in x 16)
//   m: 64x64 tiles, 4x4 per thread
//   l: 128x128 tiles, 8x8 per thread (as 2x2 blocks of 4x4, read from
//      shared memory as float4)
//
// gemm_tf32_<ta><tb>: tensor cores (sm_80+) through WMMA m16n16k8 with
// TF32 inputs (10-bit mantissa, rounded when staged in shared memory) and
// fp32 accumulation: 128x128 tiles, 8 warps of 64x32 each. Not exact fp32
// (relative error ~1e-3), so it is opt-in.
//
// Grid: x over row tiles (ceil(M/BM), up to 2^31-1), y over column tiles
// (ceil(N/BN) <= 65535). With beta == 0, C is not read (it may hold NaN).
// The host handles M, N == 0, K == 0 and alpha == 0 without these kernels.
#include "common.cuh"
#include <mma.h>

template <int BM, int BN, int BK, int TM, int TN, bool TA, bool TB>
__device__ __forceinline__ void gemm_f32_body(const int M, const int N, const int K, const float alpha,
                                              const float *__restrict__ A, const float *__restrict__ B,
                                              const float beta, float *__restrict__ C) {
	constexpr int RT = BM / TM, CT = BN / TN, NT = RT * CT;
	// Thread (ty, tx) owns rows r(i) and columns c(j) of the tile: with
	// VEC, 4 consecutive rows/columns per group of 4 (float4 reads),
	// groups RT*4 (CT*4) apart; else rows ty + i*RT, columns tx + j*CT.
	constexpr bool VEC = TM % 4 == 0 && TN % 4 == 0;
	__shared__ __align__(16) float As[BK][BM + 4];
	__shared__ __align__(16) float Bs[BK][BN + 4];
	const int tid = threadIdx.x, tx = tid % CT, ty = tid / CT;
	const int row0 = blockIdx.x * BM, col0 = blockIdx.y * BN;
	float acc[TM][TN];
#pragma unroll
	for (int i = 0; i < TM; i++)
#pragma unroll
		for (int j = 0; j < TN; j++)
			acc[i][j] = 0.0f;
	for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
		for (int l = tid; l < BM * BK; l += NT) {
			int m, k;
			if (TA) { // A is K x M: consecutive threads, consecutive m
				m = l % BM;
				k = l / BM;
			} else { // A is M x K: consecutive threads, consecutive k
				k = l % BK;
				m = l / BK;
			}
			const int gm = row0 + m, gk = k0 + k;
			float v = 0.0f;
			if (gm < M && gk < K)
				v = TA ? A[(i64)gk * M + gm] : A[(i64)gm * K + gk];
			As[k][m] = v;
		}
#pragma unroll
		for (int l = tid; l < BK * BN; l += NT) {
			int n, k;
			if (TB) { // B is N x K
				k = l % BK;
				n = l / BK;
			} else { // B is K x N
				n = l % BN;
				k = l / BN;
			}
			const int gn = col0 + n, gk = k0 + k;
			float v = 0.0f;
			if (gn < N && gk < K)
				v = TB ? B[(i64)gn * K + gk] : B[(i64)gk * N + gn];
			Bs[k][n] = v;
		}
		__syncthreads();
#pragma unroll
		for (int k = 0; k < BK; k++) {
			float a[TM], b[TN];
			if (VEC) {
#pragma unroll
				for (int i = 0; i < TM; i += 4) {
					const float4 t = *reinterpret_cast<const float4 *>(&As[k][(i / 4) * RT * 4 + ty * 4]);
					a[i] = t.x;
					a[i + 1] = t.y;
					a[i + 2] = t.z;
					a[i + 3] = t.w;
				}
#pragma unroll
				for (int j = 0; j < TN; j += 4) {
					const float4 t = *reinterpret_cast<const float4 *>(&Bs[k][(j / 4) * CT * 4 + tx * 4]);
					b[j] = t.x;
					b[j + 1] = t.y;
					b[j + 2] = t.z;
					b[j + 3] = t.w;
				}
			} else {
#pragma unroll
				for (int i = 0; i < TM; i++)
					a[i] = As[k][ty + i * RT];
#pragma unroll
				for (int j = 0; j < TN; j++)
					b[j] = Bs[k][tx + j * CT];
			}
#pragma unroll
			for (int i = 0; i < TM; i++)
#pragma unroll
				for (int j = 0; j < TN; j++)
					acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < TM; i++) {
		const int gi = row0 + (VEC ? (i / 4) * RT * 4 + ty * 4 + i % 4 : ty + i * RT);
		if (gi >= M)
			continue;
#pragma unroll
		for (int j = 0; j < TN; j++) {
			const int gj = col0 + (VEC ? (j / 4) * CT * 4 + tx * 4 + j % 4 : tx + j * CT);
			if (gj < N) {
				const i64 o = (i64)gi * N + gj;
				const float s = alpha * acc[i][j];
				C[o] = beta == 0.0f ? s : fmaf(beta, C[o], s);
			}
		}
	}
}

#define GEMM_F32(NAME, BM, BN, BK, TM, TN, TA, TB)                                                  \
	extern "C" __global__ void __launch_bounds__(256)                                               \
	    NAME(const int M, const int N, const int K, const float alpha, const float *A, const float *B, \
	         const float beta, float *C) {                                                          \
		gemm_f32_body<BM, BN, BK, TM, TN, TA, TB>(M, N, K, alpha, A, B, beta, C);                     \
	}

GEMM_F32(gemm_f32_s_nn, 32, 32, 16, 2, 2, false, false)
GEMM_F32(gemm_f32_s_nt, 32, 32, 16, 2, 2, false, true)
GEMM_F32(gemm_f32_s_tn, 32, 32, 16, 2, 2, true, false)
GEMM_F32(gemm_f32_s_tt, 32, 32, 16, 2, 2, true, true)
GEMM_F32(gemm_f32_m_nn, 64, 64, 8, 4, 4, false, false)
GEMM_F32(gemm_f32_m_nt, 64, 64, 8, 4, 4, false, true)
GEMM_F32(gemm_f32_m_tn, 64, 64, 8, 4, 4, true, false)
GEMM_F32(gemm_f32_m_tt, 64, 64, 8, 4, 4, true, true)
GEMM_F32(gemm_f32_l_nn, 128, 128, 8, 8, 8, false, false)
GEMM_F32(gemm_f32_l_nt, 128, 128, 8, 8, 8, false, true)
GEMM_F32(gemm_f32_l_tn, 128, 128, 8, 8, 8, true, false)
GEMM_F32(gemm_f32_l_tt, 128, 128, 8, 8, 8, true, true)

// TF32 tensor-core GEMM: 128x128 tile, BK = 16 (two k8 steps), 8 warps in
// a 2 x 4 arrangement, each owning a 64x32 sub-tile = 4 x 2 fragments of
// 16x16. Tiles are staged in shared memory already rounded to TF32
// (wmma::__float_to_tf32), A as As[m][k] and B as Bs[k][n], both row
// major; rows are padded by 4 floats and every fragment pointer is 32-byte
// aligned, as load_matrix_sync requires. Results go through a per-warp
// 16x16 staging tile so the epilogue can apply alpha, beta and bounds.
template <bool TA, bool TB>
__device__ __forceinline__ void gemm_tf32_body(const int M, const int N, const int K, const float alpha,
                                               const float *__restrict__ A, const float *__restrict__ B,
                                               const float beta, float *__restrict__ C) {
	using namespace nvcuda;
	constexpr int BM = 128, BN = 128, BK = 16, NT = 256;
	constexpr int LDA = BK + 4, LDB = BN + 4;
	__shared__ __align__(32) float As[BM * LDA];
	__shared__ __align__(32) float Bs[BK * LDB];
	__shared__ __align__(32) float Cs[8][16 * 16];
	const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
	const int wm = warp / 4, wn = warp % 4; // warp's sub-tile: rows wm*64, columns wn*32
	const int row0 = blockIdx.x * BM, col0 = blockIdx.y * BN;
	wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[4][2];
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < 2; j++)
			wmma::fill_fragment(acc[i][j], 0.0f);
	for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
		for (int l = tid; l < BM * BK; l += NT) {
			int m, k;
			if (TA) {
				m = l % BM;
				k = l / BM;
			} else {
				k = l % BK;
				m = l / BK;
			}
			const int gm = row0 + m, gk = k0 + k;
			float v = 0.0f;
			if (gm < M && gk < K)
				v = TA ? A[(i64)gk * M + gm] : A[(i64)gm * K + gk];
			As[m * LDA + k] = wmma::__float_to_tf32(v);
		}
#pragma unroll
		for (int l = tid; l < BK * BN; l += NT) {
			int n, k;
			if (TB) {
				k = l % BK;
				n = l / BK;
			} else {
				n = l % BN;
				k = l / BN;
			}
			const int gn = col0 + n, gk = k0 + k;
			float v = 0.0f;
			if (gn < N && gk < K)
				v = TB ? B[(i64)gn * K + gk] : B[(i64)gk * N + gn];
			Bs[k * LDB + n] = wmma::__float_to_tf32(v);
		}
		__syncthreads();
#pragma unroll
		for (int kk = 0; kk < BK; kk += 8) {
			wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> af[4];
			wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> bf[2];
#pragma unroll
			for (int i = 0; i < 4; i++)
				wmma::load_matrix_sync(af[i], As + (wm * 64 + i * 16) * LDA + kk, LDA);
#pragma unroll
			for (int j = 0; j < 2; j++)
				wmma::load_matrix_sync(bf[j], Bs + kk * LDB + wn * 32 + j * 16, LDB);
#pragma unroll
			for (int i = 0; i < 4; i++)
#pragma unroll
				for (int j = 0; j < 2; j++)
					wmma::mma_sync(acc[i][j], af[i], bf[j], acc[i][j]);
		}
		__syncthreads();
	}
	float *cs = Cs[warp];
#pragma unroll
	for (int i = 0; i < 4; i++) {
#pragma unroll
		for (int j = 0; j < 2; j++) {
			wmma::store_matrix_sync(cs, acc[i][j], 16, wmma::mem_row_major);
			__syncwarp();
			for (int t = lane; t < 256; t += 32) {
				const int gi = row0 + wm * 64 + i * 16 + t / 16;
				const int gj = col0 + wn * 32 + j * 16 + t % 16;
				if (gi < M && gj < N) {
					const i64 o = (i64)gi * N + gj;
					const float s = alpha * cs[t];
					C[o] = beta == 0.0f ? s : fmaf(beta, C[o], s);
				}
			}
			__syncwarp();
		}
	}
}

#define GEMM_TF32(NAME, TA, TB)                                                                     \
	extern "C" __global__ void __launch_bounds__(256)                                               \
	    NAME(const int M, const int N, const int K, const float alpha, const float *A, const float *B, \
	         const float beta, float *C) {                                                          \
		gemm_tf32_body<TA, TB>(M, N, K, alpha, A, B, beta, C);                                        \
	}

GEMM_TF32(gemm_tf32_nn, false, false)
GEMM_TF32(gemm_tf32_nt, false, true)
GEMM_TF32(gemm_tf32_tn, true, false)
GEMM_TF32(gemm_tf32_tt, true, true)
