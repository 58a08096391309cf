// Optimizer steps, one work-item per parameter.

// Adam (PyTorch semantics, L2 weight decay added to the gradient). The
// host passes step = lr / (1 - beta1^t) and bc2 = sqrt(1 - beta2^t).
// Global size (n).
__kernel void adam(const int n, const float step, const float b1,
                   const float b2, const float eps, const float wd,
                   const float bc2, __global float *p, __global const float *g,
                   __global float *m, __global float *v) {
	const int i = get_global_id(0);
	if (i >= n)
		return;
	float gi = g[i];
	if (wd != 0.0f)
		gi += wd * p[i];
	const float mi = b1 * m[i] + (1.0f - b1) * gi;
	const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
	m[i] = mi;
	v[i] = vi;
	p[i] -= step * mi / (sqrt(vi) / bc2 + eps);
}

// SGD (PyTorch, no dampening or Nesterov): g' = g + wd*p;
// buf = first ? g' : mu*buf + g' (when has_mom); p -= lr*(buf or g').
// Global size (n).
__kernel void sgd(const int n, const float lr, const float mu, const float wd,
                  const int first, const int has_mom, __global float *p,
                  __global const float *g, __global float *buf) {
	const int i = get_global_id(0);
	if (i >= n)
		return;
	float gi = g[i];
	if (wd != 0.0f)
		gi += wd * p[i];
	if (has_mom) {
		gi = first ? gi : mu * buf[i] + gi;
		buf[i] = gi;
	}
	p[i] -= lr * gi;
}
