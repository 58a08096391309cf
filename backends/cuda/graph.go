//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"unsafe"
	"weak"

	"gorgonia.org/cu"

	"github.com/gnnkit/gnnkit/core"
)

// block is one device allocation of a graph copy, from the memory pool.
type block struct {
	ptr   cu.DevicePtr
	class int64
	bytes int64
}

// graphBufs is a device copy of a graph's structure: CSR offsets (int64,
// as in core.Graph), source indices, edge ids when the graph has them
// and, built on first need, the row of each entry (SDDMM) and the
// balanced SpMM's chunk tables.
//
// A *core.Graph is immutable, so the copy is keyed by its pointer, held
// weakly: it is uploaded once, reused by every kernel on the graph, and
// released when the graph is garbage collected or the backend closed.
// Its bytes are charged to the device's accountant. The device blocks
// are read and changed only on the worker; the other fields are fixed
// at creation.
type graphBufs struct {
	numDst, numSrc int
	nnz, maxDeg    int64
	hasEID         bool

	off, idx, eid block
	rows          block // COO rows, or ptr 0 until built
	bal           *balancedTables
	bytes         int64 // charged to the accountant

	// lazy serialises building rows and bal.
	lazy sync.Mutex
}

// balancedTables are the balanced SpMM's tables for chunks of t items of
// the merge path (see buildBalanced and graph.cu): chunkRow[k] is the
// row chunk k starts in, fixRows the rows that span chunks.
type balancedTables struct {
	t, nchunks int64
	nfix       int
	chunkRow   block
	fixRows    block
}

// releaseOnWorker returns the copy's memory to the pool and its bytes to
// the accountant.
func (gb *graphBufs) releaseOnWorker(d *Device) {
	for _, b := range []*block{&gb.off, &gb.idx, &gb.eid, &gb.rows} {
		d.pool.put(b.ptr, b.class)
		*b = block{}
	}
	if gb.bal != nil {
		d.pool.put(gb.bal.chunkRow.ptr, gb.bal.chunkRow.class)
		d.pool.put(gb.bal.fixRows.ptr, gb.bal.fixRows.class)
		gb.bal = nil
	}
	d.mem.Release(gb.bytes)
	gb.bytes = 0
}

// checkGraph checks the CSR invariants kernels rely on, so a malformed
// graph (a core.Graph is a plain struct) is an error, not an illegal
// memory access that would break the device's context. It runs once per
// graph and device, before the upload.
func checkGraph(op string, g *core.Graph) error {
	if g == nil {
		return shapeErr(op, "graph is nil")
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("cuda: %s: %w: %s", op, core.ErrInvalidGraph, fmt.Sprintf(format, args...))
	}
	if g.NumDst < 0 || g.NumSrc < 0 || len(g.Offsets) != g.NumDst+1 {
		return bad("malformed CSR (%d rows, %d sources, %d offsets)", g.NumDst, g.NumSrc, len(g.Offsets))
	}
	if g.NumDst >= math.MaxInt32 || g.NumSrc > math.MaxInt32 {
		return fmt.Errorf("cuda: %s: %d x %d nodes exceed the kernels' int32 range: %w", op, g.NumDst, g.NumSrc, core.ErrUnsupported)
	}
	if g.Offsets[0] != 0 || g.Offsets[g.NumDst] != int64(len(g.Indices)) {
		return bad("offsets run %d..%d, want 0..%d", g.Offsets[0], g.Offsets[g.NumDst], len(g.Indices))
	}
	for i := range g.NumDst {
		if g.Offsets[i+1] < g.Offsets[i] {
			return bad("offsets decrease at row %d", i)
		}
	}
	var m uint32
	for _, j := range g.Indices {
		m = max(m, uint32(j))
	}
	if len(g.Indices) > 0 && int64(m) >= int64(g.NumSrc) {
		return bad("a source index is outside [0,%d)", g.NumSrc)
	}
	if g.EIDs != nil {
		if len(g.EIDs) != len(g.Indices) {
			return bad("%d edge ids for %d edges", len(g.EIDs), len(g.Indices))
		}
		for e, id := range g.EIDs {
			if id < 0 {
				return bad("edge %d has negative id %d", e, id)
			}
		}
	}
	return nil
}

// graph returns the device copy of g, uploading it on first use; with
// rows it also has the per-entry rows.
func (d *Device) graph(op string, g *core.Graph, rows bool) (*graphBufs, error) {
	if g == nil {
		return nil, shapeErr(op, "graph is nil")
	}
	key := weak.Make(g)
	d.mu.Lock()
	gb := d.graphs[key]
	d.mu.Unlock()
	if gb == nil {
		// Upload without holding d.mu (the worker's teardown takes it);
		// two first calls may race, and the loser's copy is dropped.
		var err error
		if gb, err = d.uploadGraph(op, g); err != nil {
			return nil, err
		}
		d.mu.Lock()
		if old := d.graphs[key]; old != nil {
			d.mu.Unlock()
			d.dropGraph(gb)
			gb = old
		} else {
			d.graphs[key] = gb
			d.mu.Unlock()
			runtime.AddCleanup(g, d.evictGraph, key)
		}
	}
	if rows {
		if err := d.graphRows(op, gb); err != nil {
			return nil, err
		}
	}
	return gb, nil
}

// dropGraph releases a copy that is not (or no longer) in the cache.
func (d *Device) dropGraph(gb *graphBufs) {
	_ = d.w.do(func() error {
		gb.releaseOnWorker(d)
		return nil
	})
}

// evictGraph drops the copy of a graph that has been garbage collected.
func (d *Device) evictGraph(key weak.Pointer[core.Graph]) {
	d.mu.Lock()
	gb := d.graphs[key]
	delete(d.graphs, key)
	d.mu.Unlock()
	if gb != nil {
		d.dropGraph(gb)
	}
}

// uploadGraph checks g and copies its structure to the device.
func (d *Device) uploadGraph(op string, g *core.Graph) (*graphBufs, error) {
	if err := checkGraph(op, g); err != nil {
		return nil, err
	}
	gb := &graphBufs{numDst: g.NumDst, numSrc: g.NumSrc, nnz: int64(len(g.Indices)),
		hasEID: g.EIDs != nil}
	for i := range g.NumDst {
		gb.maxDeg = max(gb.maxDeg, g.Offsets[i+1]-g.Offsets[i])
	}
	sizes := []int64{int64(len(g.Offsets)) * 8, int64(len(g.Indices)) * 4}
	if gb.hasEID {
		sizes = append(sizes, int64(len(g.EIDs))*4)
	}
	var total int64
	for _, s := range sizes {
		total += s
	}
	if err := d.mem.Reserve(total, "graph structure"); err != nil {
		return nil, fmt.Errorf("cuda: %s: graph structure: %w", op, err)
	}
	gb.bytes = total
	err := d.w.do(func() error {
		var err error
		if gb.off, err = d.uploadBlock("graph offsets", unsafe.Pointer(&g.Offsets[0]), sizes[0]); err != nil {
			return err
		}
		if gb.idx, err = d.uploadBlock("graph indices", int32Ptr(g.Indices), sizes[1]); err != nil {
			return err
		}
		if gb.hasEID {
			if gb.eid, err = d.uploadBlock("graph edge ids", int32Ptr(g.EIDs), sizes[2]); err != nil {
				return err
			}
		}
		return nil
	})
	runtime.KeepAlive(g)
	if err != nil {
		d.dropGraph(gb) // returns what was uploaded and the charge
		if err == errClosed {
			d.mem.Release(gb.bytes)
		}
		return nil, fmt.Errorf("cuda: %s: graph structure: %w", op, err)
	}
	return gb, nil
}

// uploadBlock copies bytes from host into a new pool block (worker only;
// nothing is copied when bytes is 0).
func (d *Device) uploadBlock(what string, host unsafe.Pointer, bytes int64) (block, error) {
	if bytes == 0 {
		return block{}, nil
	}
	t, err := d.newTemp(what, bytes, host)
	if err != nil {
		return block{}, err
	}
	return block{ptr: t.ptr, class: t.class, bytes: bytes}, nil
}

// graphRows builds the per-entry rows on the device (csr_rows) on first
// need.
func (d *Device) graphRows(op string, gb *graphBufs) error {
	gb.lazy.Lock()
	defer gb.lazy.Unlock()
	built := false
	_ = d.w.do(func() error { built = gb.rows.ptr != 0 || gb.nnz == 0; return nil })
	if built {
		return nil
	}
	bytes := gb.nnz * 4
	if err := d.mem.Reserve(bytes, "graph rows"); err != nil {
		return fmt.Errorf("cuda: %s: graph rows: %w", op, err)
	}
	err := d.w.do(func() error {
		t, err := d.newTemp("graph rows", bytes, nil)
		if err != nil {
			return err
		}
		if err := d.launch("csr_rows", d.warps(int64(gb.numDst)), int32(gb.numDst), gb.off.ptr, t.ptr); err != nil {
			d.freeTemp(t)
			return err
		}
		gb.rows = block{ptr: t.ptr, class: t.class, bytes: bytes}
		gb.bytes += bytes
		return nil
	})
	if err != nil {
		d.mem.Release(bytes)
		return fmt.Errorf("cuda: %s: graph rows: %w", op, err)
	}
	return nil
}

// skewed reports whether SpMMAuto takes the balanced kernel for the
// graph: when the longest row would keep one warp busy at least 8 times
// longer than an even share of the entries over the GPU's resident warps
// (64 per SM), and is long (1024+ entries) in absolute terms.
func (gb *graphBufs) skewed(sms int) bool {
	share := gb.nnz/(int64(sms)*64) + 1
	return gb.maxDeg >= 1024 && gb.maxDeg > 8*share
}

// chunkSize is the balanced SpMM's path items (rows plus entries) per
// warp for a path of n items: the configured Chunk, or about two waves of
// 64 warps per SM, at least 32.
func (d *Device) chunkSize(n int64) int64 {
	if d.chunk > 0 {
		return int64(d.chunk)
	}
	return max(32, (n+int64(d.sms)*128-1)/(int64(d.sms)*128))
}

// balancedFor returns gb's chunk tables for chunks of t path items, building
// and uploading them (once per graph and t) from g's offsets.
func (d *Device) balancedFor(op string, g *core.Graph, gb *graphBufs, t int64) (*balancedTables, error) {
	gb.lazy.Lock()
	defer gb.lazy.Unlock()
	var have *balancedTables
	_ = d.w.do(func() error { have = gb.bal; return nil })
	if have != nil && have.t == t {
		return have, nil
	}
	bt := buildBalanced(g.Offsets, t)
	chunkRow := bt.hostChunkRow
	fix := bt.hostFix
	bytes := int64(len(chunkRow))*4 + int64(len(fix))*4
	if err := d.mem.Reserve(bytes, "balanced SpMM tables"); err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", op, err)
	}
	tabs := &balancedTables{t: t, nchunks: bt.nchunks, nfix: len(fix)}
	err := d.w.do(func() error {
		var err error
		if tabs.chunkRow, err = d.uploadBlock("balanced SpMM chunk rows", int32Ptr(chunkRow), int64(len(chunkRow))*4); err != nil {
			return err
		}
		if tabs.fixRows, err = d.uploadBlock("balanced SpMM fix-up rows", int32Ptr(fix), int64(len(fix))*4); err != nil {
			d.pool.put(tabs.chunkRow.ptr, tabs.chunkRow.class)
			return err
		}
		if old := gb.bal; old != nil {
			d.pool.put(old.chunkRow.ptr, old.chunkRow.class)
			d.pool.put(old.fixRows.ptr, old.fixRows.class)
			gb.bytes -= old.chunkRow.bytes + old.fixRows.bytes
			d.mem.Release(old.chunkRow.bytes + old.fixRows.bytes)
		}
		gb.bal = tabs
		gb.bytes += bytes
		return nil
	})
	runtime.KeepAlive(chunkRow)
	runtime.KeepAlive(fix)
	if err != nil {
		d.mem.Release(bytes)
		return nil, fmt.Errorf("cuda: %s: %w", op, err)
	}
	return tabs, nil
}

// hostBalanced are the balanced SpMM's tables as built on the host.
type hostBalanced struct {
	nchunks      int64
	hostChunkRow []int32
	hostFix      []int32
}

// buildBalanced computes the balanced (merge-path) SpMM's tables for
// offsets off (R+1 entries) and chunks of t path items, where the path
// merges the R row ends and the nnz entries (entry j of row r at position
// j + r, row r's end at off[r+1] + r): chunkRow[k] = the number of row
// ends before position k*t (chunkRow[nchunks] = R), and fix = the rows
// with entries in a chunk before the one holding their end
// ((off[r]+r)/t != (off[r+1]+r)/t). See graph.cu.
func buildBalanced(off []int64, t int64) hostBalanced {
	r := len(off) - 1
	total := int64(r) + off[r]
	nchunks := (total + t - 1) / t
	chunkRow := make([]int32, nchunks+1)
	for k := range nchunks {
		d := k * t
		chunkRow[k] = int32(sort.Search(r, func(i int) bool { return off[i+1]+int64(i) >= d }))
	}
	chunkRow[nchunks] = int32(r)
	var fix []int32
	for i := range r {
		if e0, e1 := off[i], off[i+1]; e1 > e0 && (e0+int64(i))/t != (e1+int64(i))/t {
			fix = append(fix, int32(i))
		}
	}
	return hostBalanced{nchunks: nchunks, hostChunkRow: chunkRow, hostFix: fix}
}
