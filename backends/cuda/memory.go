//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gnnkit/gnnkit/core"
)

// Buffer is device memory behind a tensor: a device allocation holding
// the tensor's float32 elements (none for a zero-length tensor), charged
// to its device's accountant for the tensor's bytes.
type Buffer struct {
	dev   *Device
	ptr   cu.DevicePtr
	class int64 // the allocation's size class (memPool)
	n     int
	bytes int64
}

// Device returns the id of the buffer's device.
func (b *Buffer) Device() core.DeviceID { return b.dev.id }

// Len is the number of float32 elements.
func (b *Buffer) Len() int { return b.n }

// Ptr is the buffer's device address (0 for a zero-length tensor).
func (b *Buffer) Ptr() cu.DevicePtr { return b.ptr }

// memPool caches freed device memory by size class, so a Free does not
// call cuMemFree (which waits for the whole device to go idle) and the
// next Alloc of a similar size does not call cuMemAlloc. A cached block
// is reused safely without any synchronisation because all of a device's
// work runs on its one in-order stream: every kernel that used the block
// before it was freed was queued before anything that uses it next.
// Cached bytes are not charged to the accountant (which counts tensors);
// when cuMemAlloc runs out of memory the cache is emptied and the
// allocation retried. Used on the worker thread only.
type memPool struct {
	free   map[int64][]cu.DevicePtr
	cached int64
}

func newMemPool() *memPool { return &memPool{free: map[int64][]cu.DevicePtr{}} }

// sizeClass rounds n bytes up to at most 1/8 more: a multiple of 512
// below 4 KiB, else of 2^(floor(log2 n) - 3).
func sizeClass(n int64) int64 {
	if n <= 4096 {
		return (n + 511) &^ 511
	}
	step := int64(1) << (bits.Len64(uint64(n)) - 1 - 3)
	return (n + step - 1) &^ (step - 1)
}

// get returns a block of class bytes, cached or new.
func (p *memPool) get(class int64) (cu.DevicePtr, error) {
	if l := p.free[class]; len(l) > 0 {
		ptr := l[len(l)-1]
		p.free[class] = l[:len(l)-1]
		p.cached -= class
		return ptr, nil
	}
	ptr, err := cu.MemAlloc(class)
	if errors.Is(err, cu.OutOfMemory) && p.cached > 0 {
		if terr := p.trim(); terr != nil {
			return 0, errors.Join(err, terr)
		}
		ptr, err = cu.MemAlloc(class)
	}
	return ptr, err
}

// put caches a block of class bytes.
func (p *memPool) put(ptr cu.DevicePtr, class int64) {
	if ptr == 0 {
		return
	}
	p.free[class] = append(p.free[class], ptr)
	p.cached += class
}

// trim frees every cached block (cuMemFree waits for the device).
func (p *memPool) trim() error {
	var errs []error
	for c, l := range p.free {
		for _, ptr := range l {
			errs = append(errs, cu.MemFree(ptr))
		}
		delete(p.free, c)
	}
	p.cached = 0
	return errors.Join(errs...)
}

// maxBytes bounds one tensor (and keeps element counts in int64).
const maxBytes = math.MaxInt64 / 8

// driverOOM turns the driver's out-of-memory into an *core.OOMError
// (other errors are returned wrapped). It runs on the worker.
func (d *Device) driverOOM(err error, need int64, what string) error {
	if !errors.Is(err, cu.OutOfMemory) {
		return fmt.Errorf("cuda: %s: allocating %s for %s: %w", d.id, core.FormatBytes(need), what, err)
	}
	st := d.mem.Stats()
	free, total, ierr := cu.MemInfo()
	if ierr != nil {
		free, total = 0, d.info.MemTotal
	}
	c := st.Cap
	if c <= 0 {
		c = total
	}
	return &core.OOMError{Device: d.id, Need: need, Free: free, Cap: c, Used: st.Used,
		What: fmt.Sprintf("%s (the GPU itself is out of memory: %s of %s free)", what, core.FormatBytes(free), core.FormatBytes(total))}
}

// Alloc returns a zero-filled tensor on the device, charged to its
// accountant first: over the cap it returns an *core.OOMError, and so it
// does when the GPU itself has no memory left. The fill is queued on the
// device's stream (it is done before any later work on the device).
func (d *Device) Alloc(shape ...int) (*core.Tensor, error) {
	n := int64(1)
	for _, s := range shape {
		if s < 0 {
			return nil, fmt.Errorf("%w: cuda: alloc on %s: negative dimension in %v", core.ErrShape, d.id, shape)
		}
		if s > 0 && n > maxBytes/4/int64(s) {
			return nil, fmt.Errorf("cuda: alloc %v: too many elements: %w", shape, core.ErrUnsupported)
		}
		n *= int64(s)
	}
	if n > math.MaxInt {
		return nil, fmt.Errorf("cuda: alloc %v: too many elements: %w", shape, core.ErrUnsupported)
	}
	if d.w.isClosed() {
		return nil, errClosed
	}
	bytes := n * 4
	// Described only on the error paths: a step allocates hundreds.
	what := func() string { return fmt.Sprintf("tensor %v", shape) }
	if err := d.mem.ReserveTensor(bytes, shape); err != nil {
		return nil, fmt.Errorf("cuda: alloc %v: %w", shape, err)
	}
	b := &Buffer{dev: d, n: int(n), bytes: bytes}
	if bytes > 0 {
		b.class = sizeClass(bytes)
		err := d.w.do(func() error {
			ptr, err := d.pool.get(b.class)
			if err != nil {
				return d.driverOOM(err, bytes, what())
			}
			if err := cu.MemsetD32Async(ptr, 0, n, d.stream); err != nil {
				d.pool.put(ptr, b.class)
				return fmt.Errorf("cuda: %s: clearing %s: %w", d.id, what(), err)
			}
			b.ptr = ptr
			return nil
		})
		if err != nil {
			d.mem.Release(bytes)
			return nil, err
		}
	}
	d.mu.Lock()
	d.live[b] = struct{}{}
	d.mu.Unlock()
	return &core.Tensor{Shape: append([]int(nil), shape...), DType: core.Float32, Buf: b}, nil
}

// Free returns t's memory to the device's cache and its bytes to the
// accountant. Freeing nil, a tensor of another device or one already
// freed is a no-op. Work already queued on the buffer is unaffected (the
// memory is reused only by work queued later).
func (d *Device) Free(t *core.Tensor) {
	if t == nil {
		return
	}
	b, ok := t.Buf.(*Buffer)
	if !ok || b.dev != d {
		return
	}
	d.mu.Lock()
	_, ok = d.live[b]
	delete(d.live, b)
	d.mu.Unlock()
	if !ok {
		return
	}
	if b.ptr != 0 {
		// after Close the worker refuses, and teardown freed everything
		_ = d.w.do(func() error {
			d.pool.put(b.ptr, b.class)
			return nil
		})
	}
	d.mem.Release(b.bytes)
}

// buffer returns t's buffer if it is a live buffer of d with t's size.
func (d *Device) buffer(op, name string, t *core.Tensor) (*Buffer, error) {
	if t == nil {
		return nil, fmt.Errorf("%w: cuda: %s: %s is nil", core.ErrShape, op, name)
	}
	if t.Buf == nil {
		return nil, fmt.Errorf("%w: cuda: %s: %s has no buffer", core.ErrShape, op, name)
	}
	b, ok := t.Buf.(*Buffer)
	if !ok || b.dev != d {
		return nil, fmt.Errorf("cuda: %s: %s is on %s, not %s: %w", op, name, t.Device(), d.id, core.ErrUnsupported)
	}
	if b.n != t.Len() {
		return nil, fmt.Errorf("%w: cuda: %s: %s has shape %v (%d elements) but its buffer holds %d", core.ErrShape, op, name, t.Shape, t.Len(), b.n)
	}
	if d.w.isClosed() {
		return nil, errClosed
	}
	d.mu.Lock()
	_, live := d.live[b]
	d.mu.Unlock()
	if !live {
		return nil, fmt.Errorf("cuda: %s: %s was freed", op, name)
	}
	return b, nil
}

// Upload copies src into t. The copy is queued on the device's stream
// (after the work queued before it); the call returns once the driver
// has taken src (staged), so src may be reused at once.
func (d *Device) Upload(t *core.Tensor, src []float32) error {
	b, err := d.buffer("upload", "t", t)
	if err != nil {
		return err
	}
	if len(src) != b.n {
		return fmt.Errorf("%w: cuda: upload of %d values into %v", core.ErrShape, len(src), t)
	}
	if b.n == 0 {
		return nil
	}
	err = d.w.do(func() error {
		// from pageable memory the driver stages the data (or waits)
		// before it returns, so src is not read after the call
		return cu.MemcpyHtoDAsync(b.ptr, unsafe.Pointer(&src[0]), b.bytes, d.stream)
	})
	runtime.KeepAlive(src)
	if err != nil {
		return fmt.Errorf("cuda: upload to %s: %w", d.id, err)
	}
	return nil
}

// Download copies t into dst once the work queued before it is done. It
// waits for that on the calling goroutine (an event), not on the
// device's thread, so other goroutines keep queueing work meanwhile.
func (d *Device) Download(dst []float32, t *core.Tensor) error {
	b, err := d.buffer("download", "t", t)
	if err != nil {
		return err
	}
	if len(dst) != b.n {
		return fmt.Errorf("%w: cuda: download of %v into %d values", core.ErrShape, t, len(dst))
	}
	if b.n == 0 {
		return nil
	}
	if err := d.drain(); err != nil {
		return fmt.Errorf("cuda: download from %s: %w", d.id, err)
	}
	err = d.w.do(func() error {
		// to pageable memory the driver returns only once the copy has
		// completed (the driver API's synchronisation rules)
		return cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), b.ptr, b.bytes, d.stream)
	})
	runtime.KeepAlive(dst)
	if err != nil {
		return fmt.Errorf("cuda: download from %s: %w", d.id, err)
	}
	return nil
}

// drain waits, on the calling goroutine, until the work queued on the
// device so far is done.
func (d *Device) drain() error {
	var ev cu.Event
	if err := d.w.do(func() error {
		e, err := cu.MakeEvent(cu.DisableTiming)
		if err != nil {
			return err
		}
		if err := e.Record(d.stream); err != nil {
			_ = cu.DestroyEvent(&e)
			return err
		}
		ev = e
		return nil
	}); err != nil {
		return err
	}
	err := d.w.waitOn(ev.Synchronize)
	_ = d.w.do(func() error { return cu.DestroyEvent(&ev) })
	return err
}

// temp is device memory for one kernel call (uploaded index arrays,
// partial sums), charged to the accountant while the call runs. It comes
// from and goes back to the pool on the worker, and may be returned right
// after the kernels using it are queued (see memPool).
type temp struct {
	ptr   cu.DevicePtr
	class int64
	bytes int64
}

// reserveTemps charges the accountant for temporaries of the given sizes
// and returns the release function.
func (d *Device) reserveTemps(what string, sizes ...int64) (func(), error) {
	var total int64
	for _, s := range sizes {
		total += s
	}
	if err := d.mem.Reserve(total, what); err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", what, err)
	}
	return func() { d.mem.Release(total) }, nil
}

// newTemp takes a block of at least bytes (4 at least) from the pool,
// filled from host (bytes of it) when host is not nil. Worker only.
func (d *Device) newTemp(what string, bytes int64, host unsafe.Pointer) (temp, error) {
	t := temp{bytes: bytes, class: sizeClass(max(bytes, 4))}
	ptr, err := d.pool.get(t.class)
	if err != nil {
		return temp{}, d.driverOOM(err, bytes, what)
	}
	t.ptr = ptr
	if host != nil && bytes > 0 {
		if err := cu.MemcpyHtoDAsync(ptr, host, bytes, d.stream); err != nil {
			d.pool.put(ptr, t.class)
			return temp{}, fmt.Errorf("cuda: %s: uploading %s: %w", d.id, what, err)
		}
	}
	return t, nil
}

// freeTemp returns a temporary to the pool. Worker only.
func (d *Device) freeTemp(t temp) { d.pool.put(t.ptr, t.class) }

// int32Ptr and int64Ptr are the host pointers of index slices (nil when
// empty).
func int32Ptr(v []int32) unsafe.Pointer {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Pointer(&v[0])
}

func int64Ptr(v []int64) unsafe.Pointer {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Pointer(&v[0])
}
