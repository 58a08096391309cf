package core

import (
	"fmt"
	"strings"
	"sync"
)

// Env is the state of one unit of work (a batch or micro-batch) on one
// device while its ops run: the values the ops read and write, their
// gradients, the bound graphs and the loss target. The executor builds one
// per unit; ops use it through its methods. An Env is used by one
// goroutine at a time, except that other goroutines of the executor may
// read its values and gradients (Value, Grad) concurrently.
type Env struct {
	Dev Device
	K   Kernels
	// Graphs binds graph names (GraphSpec.Name) to graphs.
	Graphs map[string]*Graph
	// Labels holds the class of every row of the output (-1: none).
	Labels []int32
	// Targets are the output rows the loss is taken over, LossScale its
	// factor (1/|batch| for a mean over the batch).
	Targets   []int32
	LossScale float32
	// Training enables dropout; Seed drives it (distinct per step).
	Training bool
	Seed     uint64
	// NodeIDs is the global id of each row of node-indexed tensors, and
	// EdgeIDs of each row of edge-indexed tensors (nil: the row index).
	// Random draws (dropout) key on these ids, so a unit that computes a
	// subset of the rows draws what the whole batch would for them.
	NodeIDs, EdgeIDs []int32
	// Loss is set by the loss op in Forward.
	Loss float64
	// HopRows, when set, says the rows are in hop order from the loss
	// targets: HopRows[h] rows lie within h hops of them. A layer whose
	// output is read only within h hops then computes those rows alone,
	// over the block bound as AtHop(name, h) (PyG's trim_to_layer); its
	// ops name that graph and trim row-wise inputs with RowsAt. Nil:
	// every layer computes every row.
	HopRows []int

	vals      map[string]*Tensor
	grads     map[string]*Tensor
	owned     map[*Tensor]bool
	needGrad  map[string]bool
	params    map[string]*Tensor
	paramGrad map[string]*Tensor
	gradLock  sync.Locker
	// mu guards the maps: another device's goroutine reads values and
	// gradients of this Env when a unit spans devices (pipelines).
	mu sync.Mutex
}

// SetGradLock makes AccumGrad hold l while it adds into the device's
// parameter-gradient accumulators, which units running on other streams of
// the same device share.
func (e *Env) SetGradLock(l sync.Locker) { e.gradLock = l }

// NewEnv returns an Env on dev. params are the device's parameter replica
// and paramGrads the device's gradient accumulators (both shared, not
// owned); needGrad is Model.NeedsGrad().
func NewEnv(dev Device, params, paramGrads map[string]*Tensor, needGrad map[string]bool) *Env {
	return &Env{
		Dev: dev, K: dev.Kernels(), Graphs: map[string]*Graph{},
		vals: map[string]*Tensor{}, grads: map[string]*Tensor{}, owned: map[*Tensor]bool{},
		needGrad: needGrad, params: params, paramGrad: paramGrads,
	}
}

// Alloc allocates a zeroed tensor owned by the Env (freed by Release).
func (e *Env) Alloc(shape ...int) (*Tensor, error) {
	t, err := e.Dev.Alloc(shape...)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.owned[t] = true
	e.mu.Unlock()
	return t, nil
}

// Free releases an Env-owned tensor early. Other tensors are left alone.
func (e *Env) Free(t *Tensor) {
	e.mu.Lock()
	own := t != nil && e.owned[t]
	delete(e.owned, t)
	e.mu.Unlock()
	if own {
		e.Dev.Free(t)
	}
}

// Adopt hands ownership of t (allocated on e.Dev) to the Env.
func (e *Env) Adopt(t *Tensor) {
	e.mu.Lock()
	e.owned[t] = true
	e.mu.Unlock()
}

// Value returns a bound value: a param, an input, or an op output.
func (e *Env) Value(name string) (*Tensor, error) {
	e.mu.Lock()
	t, ok := e.vals[name]
	e.mu.Unlock()
	if ok {
		return t, nil
	}
	if t, ok := e.params[name]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("core: value %q is not bound on %s", name, e.Dev.ID())
}

// SetValue binds name to t.
func (e *Env) SetValue(name string, t *Tensor) {
	e.mu.Lock()
	e.vals[name] = t
	e.mu.Unlock()
}

// Graph returns a bound graph. A name AtHop(base, h) falls back to base
// when no trimmed block is bound (rows not trimmed).
func (e *Env) Graph(name string) (*Graph, error) {
	if g, ok := e.Graphs[name]; ok {
		return g, nil
	}
	if i := strings.LastIndexByte(name, '@'); i > 0 {
		if g, ok := e.Graphs[name[:i]]; ok {
			return g, nil
		}
	}
	return nil, fmt.Errorf("core: graph %q is not bound on %s", name, e.Dev.ID())
}

// RowsAt is the number of rows within hop hops of the targets, or -1 when
// rows are not trimmed (HopRows nil, hop < 0 or beyond it).
func (e *Env) RowsAt(hop int) int {
	if hop < 0 || hop >= len(e.HopRows) {
		return -1
	}
	return e.HopRows[hop]
}

// NeedsGrad reports whether backward must produce the gradient of name.
func (e *Env) NeedsGrad(name string) bool { return e.needGrad[name] }

// Grad returns the gradient of the loss with respect to name, or nil if
// nothing has contributed to it.
func (e *Env) Grad(name string) *Tensor {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.grads[name]
}

// SetGrad seeds the gradient of name (the loss op's output).
func (e *Env) SetGrad(name string, g *Tensor) {
	e.mu.Lock()
	e.grads[name] = g
	e.mu.Unlock()
}

// AccumGrad adds g into the gradient of name and takes ownership of g. A
// parameter's gradient goes into the device's accumulator, which sums over
// all units run on the device; g is then freed.
func (e *Env) AccumGrad(name string, g *Tensor) error {
	if !e.needGrad[name] {
		e.Free(g)
		return nil
	}
	if pg, ok := e.paramGrad[name]; ok {
		if e.gradLock != nil {
			e.gradLock.Lock()
			defer e.gradLock.Unlock()
		}
		err := e.K.Map(MapAdd, pg, g, 0, pg)
		e.Free(g)
		return err
	}
	e.mu.Lock()
	cur := e.grads[name]
	if cur == nil {
		e.grads[name] = g
	}
	e.mu.Unlock()
	if cur != nil {
		err := e.K.Map(MapAdd, cur, g, 0, cur)
		e.Free(g)
		return err
	}
	return nil
}

// DropGrad frees the gradient of name once nothing needs it.
func (e *Env) DropGrad(name string) {
	e.mu.Lock()
	g := e.grads[name]
	delete(e.grads, name)
	e.mu.Unlock()
	if g != nil {
		e.Free(g)
	}
}

// ReleaseExcept frees everything the Env owns but the gradients of the
// named values (those another device has yet to fetch) and unbinds the
// rest: what a unit keeps on a device after its last backward there.
func (e *Env) ReleaseExcept(grads ...string) {
	e.mu.Lock()
	keep := map[*Tensor]bool{}
	kept := map[string]*Tensor{}
	for _, name := range grads {
		if g := e.grads[name]; g != nil {
			keep[g], kept[name] = true, g
		}
	}
	var free []*Tensor
	for t := range e.owned {
		if !keep[t] {
			free = append(free, t)
			delete(e.owned, t)
		}
	}
	clear(e.vals)
	e.grads = kept
	e.mu.Unlock()
	for _, t := range free {
		e.Dev.Free(t)
	}
}

// Release frees everything the Env owns.
func (e *Env) Release() {
	e.mu.Lock()
	owned := e.owned
	e.owned = map[*Tensor]bool{}
	clear(e.vals)
	clear(e.grads)
	e.mu.Unlock()
	for t := range owned {
		e.Dev.Free(t)
	}
}
