package kern

// AxpyGeneric computes y[i] += alpha * x[i] for i < min(len(x), len(y)).
//
// Reference loop (what every SIMD variant must match, up to rounding of
// fused multiply-add):
//
//	for i := range y {
//		y[i] += alpha * x[i]
//	}
func AxpyGeneric(alpha float32, x, y []float32) {
	n := min(len(x), len(y))
	x, y = x[:n], y[:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		xs, ys := x[i:i+8:i+8], y[i:i+8:i+8]
		ys[0] += alpha * xs[0]
		ys[1] += alpha * xs[1]
		ys[2] += alpha * xs[2]
		ys[3] += alpha * xs[3]
		ys[4] += alpha * xs[4]
		ys[5] += alpha * xs[5]
		ys[6] += alpha * xs[6]
		ys[7] += alpha * xs[7]
	}
	for ; i < n; i++ {
		y[i] += alpha * x[i]
	}
}

// AddGeneric computes y[i] += x[i] for i < min(len(x), len(y)).
//
// Reference loop:
//
//	for i := range y {
//		y[i] += x[i]
//	}
func AddGeneric(x, y []float32) {
	n := min(len(x), len(y))
	x, y = x[:n], y[:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		xs, ys := x[i:i+8:i+8], y[i:i+8:i+8]
		ys[0] += xs[0]
		ys[1] += xs[1]
		ys[2] += xs[2]
		ys[3] += xs[3]
		ys[4] += xs[4]
		ys[5] += xs[5]
		ys[6] += xs[6]
		ys[7] += xs[7]
	}
	for ; i < n; i++ {
		y[i] += x[i]
	}
}

// DotGeneric returns sum_i x[i]*y[i] over i < min(len(x), len(y)), with
// four partial sums combined as (s0+s1)+(s2+s3) and the tail added last.
//
// Reference loop (a variant may associate the sum differently):
//
//	var s float32
//	for i := range x {
//		s += x[i] * y[i]
//	}
//	return s
func DotGeneric(x, y []float32) float32 {
	n := min(len(x), len(y))
	x, y = x[:n], y[:n]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= n; i += 4 {
		xs, ys := x[i:i+4:i+4], y[i:i+4:i+4]
		s0 += xs[0] * ys[0]
		s1 += xs[1] * ys[1]
		s2 += xs[2] * ys[2]
		s3 += xs[3] * ys[3]
	}
	s := (s0 + s1) + (s2 + s3)
	for ; i < n; i++ {
		s += x[i] * y[i]
	}
	return s
}

// ScalGeneric computes x[i] *= alpha.
//
// Reference loop:
//
//	for i := range x {
//		x[i] *= alpha
//	}
func ScalGeneric(alpha float32, x []float32) {
	i := 0
	n := len(x)
	for ; i+8 <= n; i += 8 {
		xs := x[i : i+8 : i+8]
		xs[0] *= alpha
		xs[1] *= alpha
		xs[2] *= alpha
		xs[3] *= alpha
		xs[4] *= alpha
		xs[5] *= alpha
		xs[6] *= alpha
		xs[7] *= alpha
	}
	for ; i < n; i++ {
		x[i] *= alpha
	}
}

// Axpy4Generic computes four rank-1 updates of y in one pass. Every x must
// be at least as long as y.
//
// Reference loop:
//
//	for i := range y {
//		y[i] += (a0*x0[i] + a1*x1[i]) + (a2*x2[i] + a3*x3[i])
//	}
func Axpy4Generic(a0, a1, a2, a3 float32, x0, x1, x2, x3, y []float32) {
	n := len(y)
	x0, x1, x2, x3 = x0[:n], x1[:n], x2[:n], x3[:n]
	for i := range y {
		y[i] += (a0*x0[i] + a1*x1[i]) + (a2*x2[i] + a3*x3[i])
	}
}

// Add4Generic adds four rows into y in one pass. Every x must be at least
// as long as y.
//
// Reference loop:
//
//	for i := range y {
//		y[i] += (x0[i] + x1[i]) + (x2[i] + x3[i])
//	}
func Add4Generic(x0, x1, x2, x3, y []float32) {
	n := len(y)
	x0, x1, x2, x3 = x0[:n], x1[:n], x2[:n], x3[:n]
	for i := range y {
		y[i] += (x0[i] + x1[i]) + (x2[i] + x3[i])
	}
}
