package core

import "fmt"

// Reduce is how SpMM combines the messages of a row's edges.
type Reduce uint8

const (
	// ReduceSum adds the messages (an empty row gives 0).
	ReduceSum Reduce = iota
	// ReduceMean divides the sum by the row's edge count (an empty row gives 0).
	ReduceMean
)

func (r Reduce) String() string {
	switch r {
	case ReduceSum:
		return "sum"
	case ReduceMean:
		return "mean"
	}
	return fmt.Sprintf("Reduce(%d)", uint8(r))
}

// EdgeOp is the binary operation of SDDMM.
type EdgeOp uint8

const (
	// EdgeAdd: out[e,h] = a[dst(e),h] + b[src(e),h]; a and b have H columns.
	EdgeAdd EdgeOp = iota
	// EdgeDot: out[e,h] = sum_f a[dst(e),h*F+f] * b[src(e),h*F+f]; a and b have H*F columns.
	EdgeDot
)

func (o EdgeOp) String() string {
	switch o {
	case EdgeAdd:
		return "add"
	case EdgeDot:
		return "dot"
	}
	return fmt.Sprintf("EdgeOp(%d)", uint8(o))
}

// MapOp is an elementwise operation for Kernels.Map.
//
// Map(op, a, b, alpha, out) computes out[i,j] = f(a[i,j], B(i,j), alpha)
// where a and out have the same shape R x C and b, when used, broadcasts:
// b is R' x C' with R' in {R, 1} and C' dividing C, and
// B(i,j) = b[i if R'==R else 0, j / (C/C')]. So b may be the same shape, a
// row vector [1,C] (bias), a per-row scalar [R,1], a per-head value [R,H]
// (C = H*F) or a scalar [1,1]. out may alias a (in place) but not b.
type MapOp uint8

const (
	MapCopy          MapOp = iota // out = a
	MapFill                       // out = alpha (a and b unused; a may be nil)
	MapScale                      // out = alpha * a
	MapAdd                        // out = a + B
	MapSub                        // out = a - B
	MapMul                        // out = a * B
	MapAxpy                       // out = a + alpha * B
	MapBroadcast                  // out = B (a unused; may be nil)
	MapReLU                       // out = max(a, 0)
	MapReLUGrad                   // out = a * (B > 0)        (a = dy, b = y or x)
	MapLeakyReLU                  // out = a if a > 0 else alpha*a
	MapLeakyReLUGrad              // out = a * (B > 0 ? 1 : alpha)   (a = dy, b = x)
	MapELU                        // out = a if a > 0 else alpha*(exp(a)-1)
	MapELUGrad                    // out = a * (B > 0 ? 1 : alpha*exp(B))  (a = dy, b = x)
	MapSigmoid                    // out = 1/(1+exp(-a))
	MapSigmoidGrad                // out = a * B * (1 - B)    (a = dy, b = y)
	MapTanh                       // out = tanh(a)
	MapTanhGrad                   // out = a * (1 - B*B)      (a = dy, b = y)
	MapExp                        // out = exp(a)
	NumMapOps
)

var mapOpNames = [...]string{"copy", "fill", "scale", "add", "sub", "mul", "axpy", "broadcast",
	"relu", "relu_grad", "leaky_relu", "leaky_relu_grad", "elu", "elu_grad",
	"sigmoid", "sigmoid_grad", "tanh", "tanh_grad", "exp"}

func (o MapOp) String() string {
	if int(o) < len(mapOpNames) {
		return mapOpNames[o]
	}
	return fmt.Sprintf("MapOp(%d)", uint8(o))
}

// Unary reports whether op reads only a (and alpha).
func (o MapOp) Unary() bool {
	switch o {
	case MapCopy, MapFill, MapScale, MapReLU, MapLeakyReLU, MapELU, MapSigmoid, MapTanh, MapExp:
		return true
	}
	return false
}

// ReduceAxis selects what Kernels.Reduce sums over.
type ReduceAxis uint8

const (
	// AxisRows sums over rows: a is R x C, out is 1 x C.
	AxisRows ReduceAxis = iota
	// AxisCols sums groups of columns: a is R x C, out is R x G with G
	// dividing C; out[i,g] = sum of a[i, g*C/G .. (g+1)*C/G).
	AxisCols
)

// AdamParams are the hyper-parameters of one Adam step (PyTorch semantics,
// L2 weight decay added to the gradient, bias correction with Step >= 1).
type AdamParams struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	Step                               int
}

// SGDParams are the hyper-parameters of one SGD step (PyTorch semantics:
// g' = g + wd*p; buf = momentum*buf + g' (buf = g' on step 1); p -= lr*buf).
type SGDParams struct {
	LR, Momentum, WeightDecay float32
	Step                      int
}

// Kernels is the arithmetic a backend provides. All tensors are float32 and
// viewed as matrices (Rows x Cols); outputs are explicit and owned by the
// caller; shapes that do not fit return an error wrapping ErrShape, never a
// panic. Graph edges are read in CSR order: row i of g lists the sources of
// destination i; an edge's values are read at index g.EdgeID(e).
//
// Gradients are not part of this interface: they are written once, in the
// model ops, in terms of these forward kernels (SpMM on g.Reverse() is the
// transpose).
type Kernels interface {
	// GEMM computes c = alpha*op(a)*op(b) + beta*c, op(x) = x or x^T.
	// With beta == 0, c is overwritten (its old contents, even NaN, ignored).
	GEMM(transA, transB bool, alpha float32, a, b *Tensor, beta float32, c *Tensor) error

	// SpMM computes out[i,:] = reduce over edges e of row i of w(e) * x[src(e),:].
	// x is g.NumSrc x C; out is g.NumDst x C (overwritten). w is nil (all
	// ones), E x 1 (one weight per edge), or E x H with C = H*F, where head h
	// scales columns [h*F, (h+1)*F). E = g.NumEdges().
	SpMM(g *Graph, red Reduce, w, x, out *Tensor) error

	// SDDMM computes, for every edge e, out[g.EdgeID(e), h] from a[dst(e)]
	// and b[src(e)] (see EdgeOp). a is NumDst rows, b is NumSrc rows, out is E x H.
	SDDMM(g *Graph, op EdgeOp, a, b, out *Tensor) error

	// EdgeSoftmax computes, for each row i and head h, the softmax of s over
	// the row's edges: out[e,h] = exp(s[e,h]-m) / sum_e' exp(s[e',h]-m). s and
	// out are E x H, indexed by edge id.
	EdgeSoftmax(g *Graph, s, out *Tensor) error
	// EdgeSoftmaxBackward computes dx[e,h] = y[e,h] * (dy[e,h] - sum_e' y[e',h]*dy[e',h])
	// over the edges e' of e's row.
	EdgeSoftmaxBackward(g *Graph, y, dy, dx *Tensor) error

	// Gather sets out[k,:] = x[idx[k],:].
	Gather(x *Tensor, idx []int32, out *Tensor) error
	// ScatterAdd adds x[k,:] into out[idx[k],:] (duplicates accumulate).
	ScatterAdd(x *Tensor, idx []int32, out *Tensor) error

	// Map applies an elementwise op (see MapOp for broadcasting).
	Map(op MapOp, a, b *Tensor, alpha float32, out *Tensor) error
	// Reduce sums a over an axis into out (overwritten).
	Reduce(axis ReduceAxis, a, out *Tensor) error

	// LogSoftmax computes out[i,:] = x[i,:] - log(sum_j exp(x[i,j])) per row.
	LogSoftmax(x, out *Tensor) error
	// LogSoftmaxBackward computes dx = dy - exp(y) * rowsum(dy), y = LogSoftmax(x).
	LogSoftmaxBackward(y, dy, dx *Tensor) error
	// NLLLoss returns scale * sum over r in rows of -logp[r, labels[r]].
	// If grad is not nil it is overwritten with that loss's gradient with
	// respect to logp (zero except -scale at (r, labels[r])).
	NLLLoss(logp *Tensor, labels, rows []int32, scale float32, grad *Tensor) (float64, error)

	// Dropout zeroes each element of x with probability p and scales the
	// rest by 1/(1-p), writing the result to out and the factor (0 or
	// 1/(1-p)) to mask (mask may be nil). Element (r, c) is kept when
	// DropoutKeep(seed, id(r)*Cols + c, p), with id(r) = rows[r], or r when
	// rows is nil: the draw depends only on the seed and the row's global
	// id, so every backend, thread count and micro-batch split of the same
	// rows gives the same mask.
	Dropout(x *Tensor, p float32, seed uint64, rows []int32, out, mask *Tensor) error

	// Adam updates p in place from gradient g and moments m, v.
	Adam(p, g, m, v *Tensor, h AdamParams) error
	// SGD updates p in place; mom may be nil when h.Momentum == 0.
	SGD(p, g, mom *Tensor, h SGDParams) error
}

// DropoutKeep reports whether element k survives dropout with probability p
// under seed: the counter-based hash every backend must use, so masks agree
// across backends and thread counts. It is SplitMix64 of seed^k*golden, and
// the top 24 bits compared with p.
func DropoutKeep(seed uint64, k uint64, p float32) bool {
	z := seed + (k+1)*0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	z ^= z >> 31
	u := float32(z>>40) / float32(1<<24)
	return u >= p
}

// CheckSDDMM checks the shapes of an SDDMM call against the contract (a
// has NumDst rows, b NumSrc, equal widths; EdgeAdd: out has as many heads
// as a has columns; EdgeDot: a's columns are a multiple of out's heads)
// and returns the head count. Backends call it so every backend rejects
// the same calls with the same ErrShape message; edge-row counts are the
// backend's own check.
func CheckSDDMM(g *Graph, op EdgeOp, a, b, out *Tensor) (heads int, err error) {
	bad := func(format string, args ...any) (int, error) {
		return 0, fmt.Errorf("%w: SDDMM: %s", ErrShape, fmt.Sprintf(format, args...))
	}
	if a.Rows() != g.NumDst {
		return bad("a has %d rows, want NumDst=%d", a.Rows(), g.NumDst)
	}
	if b.Rows() != g.NumSrc {
		return bad("b has %d rows, want NumSrc=%d", b.Rows(), g.NumSrc)
	}
	if a.Cols() != b.Cols() {
		return bad("a has %d columns but b has %d", a.Cols(), b.Cols())
	}
	heads, cols := out.Cols(), a.Cols()
	switch op {
	case EdgeAdd:
		if cols != heads {
			return bad("add: a and b have %d columns, out has %d heads", cols, heads)
		}
	case EdgeDot:
		if (heads == 0 && cols != 0) || (heads > 0 && cols%heads != 0) {
			return bad("dot: a and b have %d columns, not a multiple of out's %d heads", cols, heads)
		}
	default:
		return bad("unknown edge op %v", op)
	}
	return heads, nil
}
