package engine

import (
	"sync"

	"github.com/gnnkit/gnnkit/core"
)

// MoveTensor copies src, on device from, into dst, on device to (same
// number of values). When either side is host-resident (core.HostBuffer:
// the CPU backend) it is one copy, to or from that memory directly;
// otherwise the values go through a pooled host staging buffer. Every
// transfer between devices in the executor goes through it, and so does
// the simulator's link measurement (sim.MeasureLink).
func MoveTensor(from, to core.Device, src, dst *core.Tensor) error {
	if s := src.F32(); s != nil {
		return to.Upload(dst, s)
	}
	if d := dst.F32(); d != nil {
		return from.Download(d, src)
	}
	bp := staging(src.Len())
	defer stagingPool.Put(bp)
	if err := from.Download(*bp, src); err != nil {
		return err
	}
	return to.Upload(dst, *bp)
}

var stagingPool sync.Pool // *[]float32

// staging returns a pooled buffer of exactly n values.
func staging(n int) *[]float32 {
	if bp, ok := stagingPool.Get().(*[]float32); ok && cap(*bp) >= n {
		*bp = (*bp)[:n]
		return bp
	}
	b := make([]float32, n)
	return &b
}
