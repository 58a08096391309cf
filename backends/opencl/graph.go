package opencl

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"
	"weak"

	"github.com/gnnkit/gnnkit/core"
)

// graphBufs is a device copy of a graph's structure: CSR offsets (as
// int32), source indices, edge ids when the graph has them, and, built
// on first need, the row of each entry (the COO form SDDMM reads).
//
// A *core.Graph is immutable, so the copy is keyed by its pointer, held
// weakly: the entry is uploaded once, reused by every kernel on the
// graph, and released when the graph is garbage collected or the
// backend is closed. Its bytes are charged to the device's accountant.
type graphBufs struct {
	off, idx, eid, rows clMem
	hasEID              bool
	bytes               int64
}

func (gb *graphBufs) release(d *Device) {
	for _, m := range []clMem{gb.off, gb.idx, gb.eid, gb.rows} {
		if m != 0 {
			clReleaseMemObject(m)
		}
	}
	d.mem.Release(gb.bytes)
	gb.off, gb.idx, gb.eid, gb.rows, gb.bytes = 0, 0, 0, 0, 0
}

// graph returns the device copy of g, uploading it on first use; with
// rows it also has the per-entry rows.
func (d *Device) graph(op string, g *core.Graph, rows bool) (*graphBufs, error) {
	key := weak.Make(g)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errClosed
	}
	gb := d.graphs[key]
	if gb == nil {
		var err error
		if gb, err = d.uploadGraph(g); err != nil {
			return nil, fmt.Errorf("opencl: %s: graph structure: %w", op, err)
		}
		d.graphs[key] = gb
		runtime.AddCleanup(g, d.evictGraph, key)
	}
	if rows && gb.rows == 0 {
		r := make([]int32, g.NumEdges())
		for i := range g.NumDst {
			for e := g.Offsets[i]; e < g.Offsets[i+1]; e++ {
				r[e] = int32(i)
			}
		}
		m, n, err := d.uploadInt32s("graph rows", r)
		if err != nil {
			return nil, fmt.Errorf("opencl: %s: graph structure: %w", op, err)
		}
		gb.rows = m
		gb.bytes += n
	}
	return gb, nil
}

// evictGraph drops the copy of a graph that has been garbage collected.
func (d *Device) evictGraph(key weak.Pointer[core.Graph]) {
	d.mu.Lock()
	gb := d.graphs[key]
	delete(d.graphs, key)
	d.mu.Unlock()
	if gb != nil {
		gb.release(d)
	}
}

// uploadGraph copies g's structure to the device (d.mu held).
func (d *Device) uploadGraph(g *core.Graph) (*graphBufs, error) {
	ne := g.NumEdges()
	if ne > math.MaxInt32 || g.NumDst >= math.MaxInt32 || g.NumSrc > math.MaxInt32 {
		return nil, fmt.Errorf("%d rows, %d edges exceed the int32 range of the kernels: %w", g.NumDst, ne, core.ErrUnsupported)
	}
	if len(g.Offsets) != g.NumDst+1 || g.Offsets[g.NumDst] != int64(ne) {
		return nil, fmt.Errorf("%w: malformed CSR", core.ErrInvalidGraph)
	}
	off := make([]int32, len(g.Offsets))
	for i, o := range g.Offsets {
		off[i] = int32(o)
	}
	gb := &graphBufs{hasEID: g.EIDs != nil}
	fail := func(err error) (*graphBufs, error) {
		gb.release(d)
		return nil, err
	}
	var n int64
	var err error
	if gb.off, n, err = d.uploadInt32s("graph offsets", off); err != nil {
		return fail(err)
	}
	gb.bytes += n
	if gb.idx, n, err = d.uploadInt32s("graph indices", g.Indices); err != nil {
		return fail(err)
	}
	gb.bytes += n
	if gb.hasEID {
		if gb.eid, n, err = d.uploadInt32s("graph edge ids", g.EIDs); err != nil {
			return fail(err)
		}
		gb.bytes += n
	}
	return gb, nil
}

// uploadInt32s makes a read-only buffer holding v, charged to the
// accountant; it returns the bytes charged.
func (d *Device) uploadInt32s(what string, v []int32) (clMem, int64, error) {
	bytes := int64(len(v)) * 4
	if err := d.mem.Reserve(bytes, what); err != nil {
		return 0, 0, err
	}
	var p unsafe.Pointer
	if len(v) > 0 {
		p = unsafe.Pointer(&v[0])
	}
	m, err := d.createBuffer(clMemReadOnly, bytes, p)
	runtime.KeepAlive(v)
	if err != nil {
		d.mem.Release(bytes)
		return 0, 0, err
	}
	return m, bytes, nil
}
