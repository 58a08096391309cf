// GEMM: C = alpha * op(A) * op(B) + beta * C, tiled in local memory with
// register blocking.
//
// A work-group of RTS x RTS work-items (RTS = TS / WPT) computes one
// TS x TS tile of C; each work-item computes WPT x WPT elements of it,
// strided by RTS so that neighbouring work-items touch neighbouring
// columns. Each step over K loads a TS x TS tile of op(A) and of op(B)
// into local memory, every work-item loading WPT^2 elements of each.
//
// Two tilings are built: gemm_*_s with GEMM_TS_S/GEMM_WPT_S (16/2 by
// default: narrow products such as a layer's N x F_in x F_out) and
// gemm_*_l with GEMM_TS_L/GEMM_WPT_L (64/8: large products); the host
// picks one per call. The four kernels of each differ only in how op(A)
// and op(B) are read (the t variants read the stored matrix transposed).
// Reference loop:
//
//	for i < M, j < N: s = 0; for k < K: s += opA(i,k)*opB(k,j)
//	                  C[i,j] = beta == 0 ? alpha*s : alpha*s + beta*C[i,j]
//
// With beta == 0, C is not read (it may hold NaN). The host handles
// alpha == 0 and K == 0 without these kernels.

#ifndef GEMM_TS_S
#define GEMM_TS_S 16
#define GEMM_WPT_S 2
#endif
#ifndef GEMM_TS_L
#define GEMM_TS_L 64
#define GEMM_WPT_L 8
#endif

#define A_N(i, k) ((long)(i) * K + (k)) // A is M x K
#define A_T(i, k) ((long)(k) * M + (i)) // A is K x M
#define B_N(k, j) ((long)(k) * N + (j)) // B is K x N
#define B_T(k, j) ((long)(j) * K + (k)) // B is N x K

#define GEMM_KERNEL(NAME, TS, WPT, AIDX, BIDX)                                 \
	__kernel __attribute__((reqd_work_group_size(TS / WPT, TS / WPT, 1))) void \
	NAME(const int M, const int N, const int K, const float alpha,            \
	     __global const float *A, __global const float *B, const float beta, \
	     __global float *C) {                                                 \
		const int RTS = TS / WPT;                                               \
		__local float As[TS][TS];                                               \
		__local float Bs[TS][TS];                                               \
		const int lc = get_local_id(0), lr = get_local_id(1);                  \
		const int col0 = get_group_id(0) * TS;                                 \
		const int row0 = get_group_id(1) * TS;                                 \
		float acc[WPT][WPT];                                                   \
		for (int wi = 0; wi < WPT; wi++)                                       \
			for (int wj = 0; wj < WPT; wj++)                                     \
				acc[wi][wj] = 0.0f;                                                \
		for (int t = 0; t < K; t += TS) {                                      \
			for (int wi = 0; wi < WPT; wi++) {                                   \
				const int r = lr + wi * RTS;                                       \
				for (int wj = 0; wj < WPT; wj++) {                                 \
					const int c = lc + wj * RTS;                                     \
					const int ai = row0 + r, ak = t + c;                             \
					As[r][c] = (ai < M && ak < K) ? A[AIDX(ai, ak)] : 0.0f;          \
					const int bk = t + r, bj = col0 + c;                             \
					Bs[r][c] = (bk < K && bj < N) ? B[BIDX(bk, bj)] : 0.0f;          \
				}                                                                  \
			}                                                                    \
			barrier(CLK_LOCAL_MEM_FENCE);                                        \
			for (int k = 0; k < TS; k++) {                                       \
				float bv[WPT];                                                     \
				for (int wj = 0; wj < WPT; wj++)                                   \
					bv[wj] = Bs[k][lc + wj * RTS];                                   \
				for (int wi = 0; wi < WPT; wi++) {                                 \
					const float av = As[lr + wi * RTS][k];                           \
					for (int wj = 0; wj < WPT; wj++)                                 \
						acc[wi][wj] = fma(av, bv[wj], acc[wi][wj]);                    \
				}                                                                  \
			}                                                                    \
			barrier(CLK_LOCAL_MEM_FENCE);                                        \
		}                                                                      \
		for (int wi = 0; wi < WPT; wi++) {                                     \
			const int i = row0 + lr + wi * RTS;                                  \
			for (int wj = 0; wj < WPT; wj++) {                                   \
				const int j = col0 + lc + wj * RTS;                                \
				if (i < M && j < N) {                                              \
					const long ci = (long)i * N + j;                                 \
					const float s = alpha * acc[wi][wj];                             \
					C[ci] = beta == 0.0f ? s : s + beta * C[ci];                     \
				}                                                                  \
			}                                                                    \
		}                                                                      \
	}

GEMM_KERNEL(gemm_nn_s, GEMM_TS_S, GEMM_WPT_S, A_N, B_N)
GEMM_KERNEL(gemm_nt_s, GEMM_TS_S, GEMM_WPT_S, A_N, B_T)
GEMM_KERNEL(gemm_tn_s, GEMM_TS_S, GEMM_WPT_S, A_T, B_N)
GEMM_KERNEL(gemm_tt_s, GEMM_TS_S, GEMM_WPT_S, A_T, B_T)
GEMM_KERNEL(gemm_nn_l, GEMM_TS_L, GEMM_WPT_L, A_N, B_N)
GEMM_KERNEL(gemm_nt_l, GEMM_TS_L, GEMM_WPT_L, A_N, B_T)
GEMM_KERNEL(gemm_tn_l, GEMM_TS_L, GEMM_WPT_L, A_T, B_N)
GEMM_KERNEL(gemm_tt_l, GEMM_TS_L, GEMM_WPT_L, A_T, B_T)
