// Optimizer steps, one thread per parameter (grid-stride).
#include "common.cuh"

// Adam (PyTorch semantics, L2 weight decay added to the gradient). The
// host passes step = lr / (1 - beta1^t) and bc2 = sqrt(1 - beta2^t), both
// computed in float64, so p -= lr * m_hat / (sqrt(v_hat) + eps).
extern "C" __global__ void adam(const i64 n, const float step, const float b1, const float b2, const float eps,
                                const float wd, const float bc2, float *p, const float *g, float *m, float *v) {
	for (i64 i = thread_id(); i < n; i += thread_count()) {
		float gi = g[i];
		if (wd != 0.0f)
			gi = fmaf(wd, p[i], gi);
		const float mi = b1 * m[i] + (1.0f - b1) * gi;
		const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
		m[i] = mi;
		v[i] = vi;
		p[i] -= step * mi / (sqrtf(vi) / bc2 + eps);
	}
}

// SGD (PyTorch, no dampening or Nesterov): g' = g + wd*p; with momentum
// buf = first ? g' : mu*buf + g' and p -= lr*buf, else p -= lr*g'.
extern "C" __global__ void sgd(const i64 n, const float lr, const float mu, const float wd, const int first,
                               const int has_mom, float *p, const float *g, float *buf) {
	for (i64 i = thread_id(); i < n; i += thread_count()) {
		float gi = g[i];
		if (wd != 0.0f)
			gi = fmaf(wd, p[i], gi);
		if (has_mom) {
			gi = first ? gi : fmaf(mu, buf[i], gi);
			buf[i] = gi;
		}
		p[i] -= lr * gi;
	}
}
