package cpu

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/gnnkit/gnnkit/backends/cpu/internal/kern"
	"github.com/gnnkit/gnnkit/core"
)

// Kernels are a device's arithmetic: core.Kernels in portable Go, split
// over the device's worker pool. Every kernel partitions its output (by
// rows, or by fixed blocks for reductions combined in order), so results
// do not depend on the thread count.
type Kernels struct {
	dev     *Device
	v       kern.Variant
	ewCache atomic.Pointer[edgeWeights] // SpMM's weights in CSR order
}

// Variant is the name of the inner-loop implementation in use.
func (k *Kernels) Variant() string { return k.v.Name }

func shapeErr(op, format string, args ...any) error {
	return fmt.Errorf("%w: cpu: %s: %s", core.ErrShape, op, fmt.Sprintf(format, args...))
}

// wrap prefixes an error of a core argument check (core.CheckGEMM, ...)
// with the backend's name.
func wrap(err error) error {
	return fmt.Errorf("cpu: %w", err)
}

// scratch pools float32 buffers for kernels that need temporary space (a
// packed operand, per-split partial sums), by power-of-two size class so
// a warm pool always has a buffer of the right size.
var scratch [48]sync.Pool

func getScratch(n int) *[]float32 {
	c := bits.Len(uint(max(n, 1) - 1))
	if p, ok := scratch[c].Get().(*[]float32); ok {
		*p = (*p)[:n]
		return p
	}
	s := make([]float32, n, 1<<c)
	return &s
}

func putScratch(p *[]float32) {
	c := bits.Len(uint(cap(*p)) - 1)
	if cap(*p) != 1<<c {
		return
	}
	scratch[c].Put(p)
}

// scratch64 is scratch's float64 twin (Reduce's per-block sums).
var scratch64 [48]sync.Pool

func getScratch64(n int) *[]float64 {
	c := bits.Len(uint(max(n, 1) - 1))
	if p, ok := scratch64[c].Get().(*[]float64); ok {
		*p = (*p)[:n]
		return p
	}
	s := make([]float64, n, 1<<c)
	return &s
}

func putScratch64(p *[]float64) {
	c := bits.Len(uint(cap(*p)) - 1)
	if cap(*p) == 1<<c {
		scratch64[c].Put(p)
	}
}

// rowBounds splits the n rows of g into about k pieces of roughly equal
// cost, a row costing its edge count plus one; it returns the k+1 row
// bounds (degree-aware splitting, so a hub row does not stall a piece).
func rowBounds(g *core.Graph, k int, buf []int) []int {
	n := g.NumDst
	k = max(1, min(k, n))
	b := append(buf[:0], 0)
	total := g.Offsets[n] + int64(n)
	lo := 0
	for c := 1; c < k; c++ {
		target := total * int64(c) / int64(k)
		// smallest row r >= lo with cost(r) = Offsets[r]+r >= target
		l, h := lo, n
		for l < h {
			m := int(uint(l+h) >> 1)
			if g.Offsets[m]+int64(m) < target {
				l = m + 1
			} else {
				h = m
			}
		}
		if l > lo && l < n {
			b = append(b, l)
			lo = l
		}
	}
	return append(b, n)
}
