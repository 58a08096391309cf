package cpu

import "github.com/gnnkit/gnnkit/core"

// task is the argument bag of kernels whose pieces run a top-level
// function: the function value is static and the bag is pooled, so a
// kernel call allocates nothing (a closure handed to the worker pool
// would escape to the heap on every call). Each kernel documents which
// fields it uses.
type task struct {
	fn     func(t *task, p int)
	k      *Kernels
	pieces int

	r, c, n, w       int
	a, b, out, aux   []float32
	rows             []int32
	idx              []int32
	ps               []float64
	g                *core.Graph
	bounds           []int
	bbuf             [piecesPerThread*64 + 1]int
	alpha, beta, eps float32
	step             float32
	wd               float32
	first            bool
	op               core.MapOp
	br, bc           int
	seed             uint64
	prob             float32
}

var tasks statePool[task]

func (t *task) run(p int) { t.fn(t, p) }

// newTask returns a pooled task for fn split into pieces.
func (k *Kernels) newTask(fn func(t *task, p int), pieces int) *task {
	t := tasks.get()
	t.fn, t.k, t.pieces = fn, k, pieces
	return t
}

// runTask runs t's pieces on the device's pool and recycles t.
func (k *Kernels) runTask(t *task) {
	k.dev.pool.run(t.pieces, t)
	tasks.put(t)
}
