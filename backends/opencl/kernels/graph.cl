// Graph kernels over a CSR graph by destination: row i lists, in
// idx[off[i] .. off[i+1]), the sources of its edges; an edge's values are
// read at its id (eid[e] when has_eid, else e). rows[e] is the row of
// the e-th entry (the COO form, built once per graph by the host).

// SpMM: out[i,c] = red over edges e of row i of w(e,h(c)) * x[src(e),c].
// wmode 0: no weights; 1: one weight per edge (H == 1); 2: H weights per
// edge, head h = c / F scaling columns [h*F, (h+1)*F). Global size
// (C, ndst).
__kernel void spmm(const int ndst, const int C, __global const int *off,
                   __global const int *idx, __global const int *eid,
                   const int has_eid, __global const float *w, const int wmode,
                   const int H, const int F, const int mean,
                   __global const float *x, __global float *out) {
	const int c = get_global_id(0), i = get_global_id(1);
	if (c >= C || i >= ndst)
		return;
	const int e0 = off[i], e1 = off[i + 1];
	const int h = wmode == 2 ? c / F : 0;
	float acc = 0.0f;
	if (wmode == 0) {
		for (int e = e0; e < e1; e++)
			acc += x[(long)idx[e] * C + c];
	} else {
		for (int e = e0; e < e1; e++)
			acc = fma(w[(long)EDGE_ID(e) * H + h], x[(long)idx[e] * C + c], acc);
	}
	if (mean && e1 > e0)
		acc *= 1.0f / (float)(e1 - e0);
	out[(long)i * C + c] = acc;
}

// SDDMM over the entries: out[id(e), h] from a[rows[e]] and b[idx[e]].
// dot == 0: out = a[i,h] + b[j,h] (a, b have H columns); dot == 1: the
// dot product of head h's F columns (a, b have H*F columns). Global size
// (H, ne).
__kernel void sddmm(const int ne, const int H, const int F, const int dot,
                    __global const int *rows, __global const int *idx,
                    __global const int *eid, const int has_eid,
                    __global const float *a, __global const float *b,
                    __global float *out) {
	const int h = get_global_id(0), e = get_global_id(1);
	if (h >= H || e >= ne)
		return;
	const long i = rows[e], j = idx[e];
	const long o = (long)EDGE_ID(e) * H + h;
	if (!dot) {
		out[o] = a[i * H + h] + b[j * H + h];
		return;
	}
	const long cols = (long)H * F;
	__global const float *ar = a + i * cols + (long)h * F;
	__global const float *br = b + j * cols + (long)h * F;
	float acc = 0.0f;
	for (int f = 0; f < F; f++)
		acc = fma(ar[f], br[f], acc);
	out[o] = acc;
}

// Edge softmax per row and head; out may alias s. Global size (H, ndst).
__kernel void edge_softmax(const int ndst, const int H, __global const int *off,
                           __global const int *eid, const int has_eid,
                           __global const float *s, __global float *out) {
	const int h = get_global_id(0), i = get_global_id(1);
	if (h >= H || i >= ndst)
		return;
	const int e0 = off[i], e1 = off[i + 1];
	if (e0 == e1)
		return;
	acc_t m = -INFINITY;
	for (int e = e0; e < e1; e++)
		m = fmax(m, (acc_t)s[(long)EDGE_ID(e) * H + h]);
	acc_t sum = 0;
	for (int e = e0; e < e1; e++) {
		const long q = (long)EDGE_ID(e) * H + h;
		const acc_t ex = exp((acc_t)s[q] - m);
		sum += ex;
		out[q] = (float)ex;
	}
	const acc_t inv = 1 / sum;
	for (int e = e0; e < e1; e++) {
		const long q = (long)EDGE_ID(e) * H + h;
		out[q] = (float)((acc_t)out[q] * inv);
	}
}

// dx = y * (dy - sum over the row of y*dy); dx may alias dy. Global size
// (H, ndst).
__kernel void edge_softmax_backward(const int ndst, const int H,
                                    __global const int *off,
                                    __global const int *eid, const int has_eid,
                                    __global const float *y,
                                    __global const float *dy,
                                    __global float *dx) {
	const int h = get_global_id(0), i = get_global_id(1);
	if (h >= H || i >= ndst)
		return;
	const int e0 = off[i], e1 = off[i + 1];
	acc_t sum = 0;
	for (int e = e0; e < e1; e++) {
		const long q = (long)EDGE_ID(e) * H + h;
		sum += (acc_t)y[q] * (acc_t)dy[q];
	}
	for (int e = e0; e < e1; e++) {
		const long q = (long)EDGE_ID(e) * H + h;
		dx[q] = (float)((acc_t)y[q] * ((acc_t)dy[q] - sum));
	}
}

// Gather: out[q,c] = x[idx[q],c]. Global size (C, n).
__kernel void gather(const int n, const int C, __global const int *idx,
                     __global const float *x, __global float *out) {
	const int c = get_global_id(0), q = get_global_id(1);
	if (c >= C || q >= n)
		return;
	out[(long)q * C + c] = x[(long)idx[q] * C + c];
}

// ScatterAdd, deterministic: the host groups the positions q by target
// row (in index order), so touched row t = trow[t] adds x[list[k]] for k
// in [toff[t], toff[t+1]) in that order, as a sequential loop would.
// Global size (C, nt).
__kernel void scatter_add(const int nt, const int C, __global const int *trow,
                          __global const int *toff, __global const int *list,
                          __global const float *x, __global float *out) {
	const int c = get_global_id(0), t = get_global_id(1);
	if (c >= C || t >= nt)
		return;
	const long o = (long)trow[t] * C + c;
	float acc = out[o];
	for (int k = toff[t]; k < toff[t + 1]; k++)
		acc += x[(long)list[k] * C + c];
	out[o] = acc;
}
