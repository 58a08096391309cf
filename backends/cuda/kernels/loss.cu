// Row-wise log-softmax and the negative log-likelihood loss.
#include "common.cuh"

// out[i,:] = x[i,:] - (m + log(sum_j exp(x[i,j] - m))), m the row's
// maximum. One warp per row, lanes striding over columns; out may alias
// x (each lane reads then writes its own columns, after the reductions).
extern "C" __global__ void log_softmax(const int R, const int C, const float *x, float *out) {
	const int lane = lane_id();
	for (i64 r = warp_id(); r < R; r += warp_count()) {
		const float *xr = x + r * C;
		float *orow = out + r * C;
		float m = neg_inf();
		for (int j = lane; j < C; j += 32)
			m = fmaxf(m, xr[j]);
		m = warp_max(m);
		float s = 0.0f;
		for (int j = lane; j < C; j += 32)
			s += expf(xr[j] - m);
		s = warp_sum(s);
		const float lse = m + logf(s);
		for (int j = lane; j < C; j += 32)
			orow[j] = xr[j] - lse;
	}
}

// dx = dy - exp(y) * rowsum(dy). One warp per row; dx may alias dy.
extern "C" __global__ void log_softmax_backward(const int R, const int C, const float *y, const float *dy,
                                                float *dx) {
	const int lane = lane_id();
	for (i64 r = warp_id(); r < R; r += warp_count()) {
		const i64 o = r * C;
		float s = 0.0f;
		for (int j = lane; j < C; j += 32)
			s += dy[o + j];
		s = warp_sum(s);
		for (int j = lane; j < C; j += 32)
			dx[o + j] = dy[o + j] - expf(y[o + j]) * s;
	}
}

// vals[k] = logp[pos[k]]: the log-probabilities of the listed rows'
// labels, which the host sums in float64.
extern "C" __global__ void nll_pick(const i64 n, const i64 *pos, const float *logp, float *vals) {
	for (i64 k = thread_id(); k < n; k += thread_count())
		vals[k] = logp[pos[k]];
}
