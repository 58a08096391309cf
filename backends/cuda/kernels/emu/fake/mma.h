// Emulated nvcuda::wmma for what gemm.cu uses (m16n16k8, TF32 inputs,
// fp32 accumulators): every thread holds a full copy of each fragment,
// mma_sync multiplies them, lane 0 stores. load_matrix_sync checks the
// 32-byte alignment and ldm rules of the real API.
#pragma once
namespace nvcuda {
namespace wmma {
struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
namespace precision { struct tf32 {}; }
enum layout_t { mem_row_major, mem_col_major };
template <class Use, int M, int N, int K, class T, class L = void> struct fragment {
	static constexpr int rows = std::is_same<Use, matrix_a>::value ? M : std::is_same<Use, matrix_b>::value ? K : M;
	static constexpr int cols = std::is_same<Use, matrix_a>::value ? K : N;
	static constexpr int num_elements = rows * cols;
	float x[rows * cols];
};
template <class U, int M, int N, int K, class T, class L> inline void fill_fragment(fragment<U, M, N, K, T, L> &f, float v) {
	for (int i = 0; i < f.num_elements; i++) f.x[i] = v;
}
template <class U, int M, int N, int K, class T, class L> inline void load_matrix_sync(fragment<U, M, N, K, T, L> &f, const float *p, unsigned ldm) {
	if (((uintptr_t)p) % 32 != 0) { fprintf(stderr, "load_matrix_sync: pointer not 32-byte aligned\n"); abort(); }
	if (ldm % 4 != 0) { fprintf(stderr, "ldm\n"); abort(); }
	for (int i = 0; i < f.rows; i++)
		for (int j = 0; j < f.cols; j++) f.x[i * f.cols + j] = p[i * ldm + j];
}
template <int M, int N, int K, class TA, class LA, class TB, class LB>
inline void mma_sync(fragment<accumulator, M, N, K, float> &d, const fragment<matrix_a, M, N, K, TA, LA> &a,
                     const fragment<matrix_b, M, N, K, TB, LB> &b, const fragment<accumulator, M, N, K, float> &c) {
	float r[M * N];
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			float s = c.x[i * N + j];
			for (int k = 0; k < K; k++) s += a.x[i * K + k] * b.x[k * N + j];
			r[i * N + j] = s;
		}
	for (int i = 0; i < M * N; i++) d.x[i] = r[i];
}
template <int M, int N, int K> inline void store_matrix_sync(float *p, const fragment<accumulator, M, N, K, float> &f, unsigned ldm, layout_t) {
	if (emu_lane != 0) return;
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) p[i * ldm + j] = f.x[i * N + j];
}
inline float __float_to_tf32(float v) {
	uint32_t b; memcpy(&b, &v, 4);
	if ((b & 0x7f800000u) != 0x7f800000u) { b += 0x1000u; b &= ~0x1fffu; }
	memcpy(&v, &b, 4);
	return v;
}
} // namespace wmma
} // namespace nvcuda
