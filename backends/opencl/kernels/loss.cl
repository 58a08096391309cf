// Row-wise log-softmax and the negative log-likelihood loss.

// out[i,:] = x[i,:] - log(sum_j exp(x[i,j])); out may alias x. Global
// size (R).
__kernel void log_softmax(const int R, const int C, __global const float *x,
                          __global float *out) {
	const int i = get_global_id(0);
	if (i >= R)
		return;
	__global const float *xr = x + (long)i * C;
	__global float *orow = out + (long)i * C;
	acc_t m = -INFINITY;
	for (int j = 0; j < C; j++)
		m = fmax(m, (acc_t)xr[j]);
	acc_t s = 0;
	for (int j = 0; j < C; j++)
		s += exp((acc_t)xr[j] - m);
	const acc_t lse = m + log(s);
	for (int j = 0; j < C; j++)
		orow[j] = (float)((acc_t)xr[j] - lse);
}

// dx = dy - exp(y) * rowsum(dy); dx may alias dy. Global size (R).
__kernel void log_softmax_backward(const int R, const int C,
                                   __global const float *y,
                                   __global const float *dy,
                                   __global float *dx) {
	const int i = get_global_id(0);
	if (i >= R)
		return;
	const long o = (long)i * C;
	acc_t s = 0;
	for (int j = 0; j < C; j++)
		s += (acc_t)dy[o + j];
	for (int j = 0; j < C; j++)
		dx[o + j] = (float)((acc_t)dy[o + j] - exp((acc_t)y[o + j]) * s);
}

// vals[k] = logp[pos[k]]: the log-probabilities of the listed rows'
// labels, summed by the host in float64. Global size (n).
__kernel void nll_pick(const int n, __global const int *pos,
                       __global const float *logp, __global float *vals) {
	const int k = get_global_id(0);
	if (k < n)
		vals[k] = logp[pos[k]];
}

// grad[pos[k]] = val[k] for distinct positions (grad was zero-filled).
// Global size (n).
__kernel void scatter_set(const int n, __global const int *pos,
                          __global const float *val, __global float *grad) {
	const int k = get_global_id(0);
	if (k < n)
		grad[pos[k]] = val[k];
}
