package opencl

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"
	"weak"

	"github.com/gnnkit/gnnkit/core"
)

// The interfaces this package implements.
var (
	_ core.Backend = (*Backend)(nil)
	_ core.Device  = (*Device)(nil)
	_ core.Kernels = (*Kernels)(nil)
	_ core.Stream  = (*Stream)(nil)
	_ core.Event   = (*Event)(nil)
	_ core.Buffer  = (*Buffer)(nil)
	// TODO: core.FusedAttentioner, core.PeerCopier once core defines them.
)

// Name is the backend's registry name.
const Name = "opencl"

func init() {
	core.RegisterBackend(Name, func(opts core.BackendOptions) (core.Backend, error) {
		b, err := New(opts)
		if err != nil {
			return nil, err
		}
		return b, nil
	})
}

// errClosed is returned by a device used after its backend was closed.
var errClosed = errors.New("opencl: device closed")

// Backend is the set of OpenCL devices found at run time.
type Backend struct {
	lib       string
	devs      []*Device
	closeOnce sync.Once
}

// MaxDevices is the most logical devices a backend opens: opencl:0 to
// opencl:63, spread round-robin over the physical devices. Each has an
// OpenCL context, queue and compiled program of its own (about 2 MB and
// 25 ms apiece on PoCL), so a mistyped index (opencl:100000) would open
// that many contexts until the host ran out of memory instead of
// failing. 64 matches the cpu backend's cpu.MaxDevices.
const MaxDevices = 64

// New loads libOpenCL (libOpenCL.so.1, or the file GNN_OPENCL_LIB
// names), lists the platforms' devices that support OpenCL C 1.2, GPUs
// and accelerators first, and opens opts.Devices logical devices on them
// round robin (0: one per physical device; at most MaxDevices). Each logical device has its
// own context, in-order queue, compiled program and memory accountant
// capped at opts.MemCap bytes (0: the device's global memory size).
// opts.Threads does not apply to OpenCL devices and is ignored.
//
// Without a usable OpenCL implementation New returns an error wrapping
// ErrUnavailable.
func New(opts core.BackendOptions) (*Backend, error) {
	if opts.Devices < 0 || opts.Threads < 0 || opts.MemCap < 0 {
		return nil, fmt.Errorf("opencl: negative option (devices %d, threads %d, mem cap %d)", opts.Devices, opts.Threads, opts.MemCap)
	}
	if opts.Devices > MaxDevices {
		return nil, fmt.Errorf("opencl: %d logical devices asked for; the opencl backend has at most %d (opencl:0 to opencl:%d)", opts.Devices, MaxDevices, MaxDevices-1)
	}
	lib, err := loadLibrary()
	if err != nil {
		return nil, err
	}
	phys, err := discover()
	if err != nil {
		return nil, err
	}
	n := opts.Devices
	if n == 0 {
		n = len(phys)
	}
	b := &Backend{lib: lib}
	for i := range n {
		d, err := openDevice(i, phys[i%len(phys)], opts.MemCap)
		if err != nil {
			b.Close()
			return nil, err
		}
		b.devs = append(b.devs, d)
	}
	return b, nil
}

// Name returns "opencl".
func (b *Backend) Name() string { return Name }

// Library is the OpenCL library the backend loaded.
func (b *Backend) Library() string { return b.lib }

// Devices returns opencl:0, opencl:1, ...
func (b *Backend) Devices() []core.Device {
	out := make([]core.Device, len(b.devs))
	for i, d := range b.devs {
		out[i] = d
	}
	return out
}

// Device returns the concrete device i.
func (b *Backend) Device(i int) *Device { return b.devs[i] }

// Close waits for queued work and releases every OpenCL object: buffers
// not yet freed, cached graphs, kernels, programs, queues and contexts.
// Devices return an error when used afterwards.
func (b *Backend) Close() error {
	var err error
	b.closeOnce.Do(func() {
		for _, d := range b.devs {
			err = errors.Join(err, d.close())
		}
	})
	return err
}

// physDevice is one OpenCL device as discovered.
type physDevice struct {
	plat                 clPlatformID
	id                   clDeviceID
	platName, name       string
	version, cVersion    string
	driver               string
	typ                  uint64
	computeUnits         uint32
	maxWorkGroup         uintptr
	maxAlloc, global     uint64
	localMem             uint64
	fp64                 bool
	available, compiler  bool
	cMajor, cMinor       int
	platVendor, platVers string
}

// discover lists the usable devices of every platform, GPUs and
// accelerators first.
func discover() ([]physDevice, error) {
	var np uint32
	code := clGetPlatformIDs(0, nil, &np)
	if code == clPlatformNotFoundKHR || (code == clSuccess && np == 0) {
		return nil, fmt.Errorf("%w: the OpenCL loader lists no platforms (install an ICD such as pocl-opencl-icd)", ErrUnavailable)
	}
	if err := check("clGetPlatformIDs", code); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	plats := make([]clPlatformID, np)
	if err := check("clGetPlatformIDs", clGetPlatformIDs(np, &plats[0], &np)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	var out []physDevice
	var skipped []string
	for _, p := range plats[:np] {
		pname := platformString(p, clPlatformName)
		var nd uint32
		code := clGetDeviceIDs(p, clDeviceTypeAll, 0, nil, &nd)
		if code == clDeviceNotFound || nd == 0 {
			continue
		}
		if code != clSuccess {
			skipped = append(skipped, fmt.Sprintf("%s: %v", pname, check("clGetDeviceIDs", code)))
			continue
		}
		ids := make([]clDeviceID, nd)
		if err := check("clGetDeviceIDs", clGetDeviceIDs(p, clDeviceTypeAll, nd, &ids[0], &nd)); err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", pname, err))
			continue
		}
		for _, id := range ids[:nd] {
			pd := physDevice{
				plat: p, id: id, platName: pname,
				platVendor:   platformString(p, clPlatformVendor),
				platVers:     platformString(p, clPlatformVersion),
				name:         deviceString(id, clDeviceName),
				version:      deviceString(id, clDeviceVersion),
				cVersion:     deviceString(id, clDeviceOpenCLCVersion),
				driver:       deviceString(id, clDriverVersion),
				typ:          deviceScalar[uint64](id, clDeviceType),
				computeUnits: deviceScalar[uint32](id, clDeviceMaxComputeUnits),
				maxWorkGroup: deviceScalar[uintptr](id, clDeviceMaxWorkGroupSize),
				maxAlloc:     deviceScalar[uint64](id, clDeviceMaxMemAllocSize),
				global:       deviceScalar[uint64](id, clDeviceGlobalMemSize),
				localMem:     deviceScalar[uint64](id, clDeviceLocalMemSize),
				available:    deviceScalar[uint32](id, clDeviceAvailable) != 0,
				compiler:     deviceScalar[uint32](id, clDeviceCompilerAvailable) != 0,
			}
			pd.fp64 = hasExtension(deviceString(id, clDeviceExtensions), "cl_khr_fp64")
			pd.cMajor, pd.cMinor = parseCVersion(pd.cVersion)
			switch {
			case !pd.available:
				skipped = append(skipped, pd.name+": not available")
			case !pd.compiler:
				skipped = append(skipped, pd.name+": no OpenCL C compiler")
			case pd.cMajor*10+pd.cMinor < 12:
				skipped = append(skipped, fmt.Sprintf("%s: %q, OpenCL C 1.2 needed", pd.name, pd.cVersion))
			default:
				out = append(out, pd)
			}
		}
	}
	if len(out) == 0 {
		why := "no devices"
		if len(skipped) > 0 {
			why = "no usable device (" + strings.Join(skipped, "; ") + ")"
		}
		return nil, fmt.Errorf("%w: %d platform(s), %s", ErrUnavailable, np, why)
	}
	rank := func(t uint64) int {
		if t&(clDeviceTypeGPU|clDeviceTypeAccelerator) != 0 {
			return 0
		}
		return 1
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i].typ) < rank(out[j].typ) })
	return out, nil
}

// parseCVersion reads "OpenCL C 1.2 ..." into (1, 2).
func parseCVersion(s string) (major, minor int) {
	rest, ok := strings.CutPrefix(s, "OpenCL C ")
	if !ok {
		return 0, 0
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return 0, 0
	}
	a, b, _ := strings.Cut(f[0], ".")
	major, _ = strconv.Atoi(a)
	minor, _ = strconv.Atoi(b)
	return major, minor
}

func hasExtension(list, ext string) bool {
	for _, e := range strings.Fields(list) {
		if e == ext {
			return true
		}
	}
	return false
}

func platformString(p clPlatformID, param uint32) string {
	var n uintptr
	if clGetPlatformInfo(p, param, 0, nil, &n) != clSuccess || n == 0 {
		return ""
	}
	buf := make([]byte, n)
	if clGetPlatformInfo(p, param, n, unsafe.Pointer(&buf[0]), nil) != clSuccess {
		return ""
	}
	return strings.TrimSpace(strings.TrimRight(string(buf), "\x00"))
}

func deviceString(d clDeviceID, param uint32) string {
	var n uintptr
	if clGetDeviceInfo(d, param, 0, nil, &n) != clSuccess || n == 0 {
		return ""
	}
	buf := make([]byte, n)
	if clGetDeviceInfo(d, param, n, unsafe.Pointer(&buf[0]), nil) != clSuccess {
		return ""
	}
	return strings.TrimSpace(strings.TrimRight(string(buf), "\x00"))
}

// deviceScalar reads a fixed-size device parameter; T must have the C
// type's size (cl_uint: uint32, cl_ulong and bitfields: uint64, size_t:
// uintptr). A failed query gives 0.
func deviceScalar[T uint32 | uint64 | uintptr](d clDeviceID, param uint32) T {
	var v T
	if clGetDeviceInfo(d, param, unsafe.Sizeof(v), unsafe.Pointer(&v), nil) != clSuccess {
		var zero T
		return zero
	}
	return v
}

// Device is one logical OpenCL device: a context with one in-order
// command queue on a physical device, the compiled kernels, a memory
// accountant, and the device copies of the graphs kernels have used.
type Device struct {
	id   core.DeviceID
	phys physDevice
	ctx  clContext
	q    clQueue
	prog clProgram
	mem  *core.MemAccountant
	k    *Kernels
	info core.DeviceInfo
	// GEMM tilings: small for narrow products, large for big ones.
	small, large tile

	// launchMu serialises setting kernel arguments and enqueueing them
	// (kernel objects are shared, clSetKernelArg is not thread-safe on
	// one kernel) and guards kernels.
	launchMu sync.Mutex
	kernels  map[string]clKernel

	mu     sync.Mutex
	closed bool
	live   map[*Buffer]struct{}
	graphs map[weak.Pointer[core.Graph]]*graphBufs
}

func openDevice(i int, pd physDevice, memCap int64) (*Device, error) {
	id := core.DeviceID(Name + ":" + strconv.Itoa(i))
	d := &Device{id: id, phys: pd, live: map[*Buffer]struct{}{},
		graphs: map[weak.Pointer[core.Graph]]*graphBufs{}, kernels: map[string]clKernel{}}
	props := []uintptr{clContextPlatform, uintptr(pd.plat), 0}
	var code int32
	d.ctx = clCreateContext(&props[0], 1, &pd.id, 0, 0, &code)
	runtime.KeepAlive(props)
	if err := check("clCreateContext", code); err != nil {
		return nil, fmt.Errorf("opencl: %s (%s): %w", id, pd.name, err)
	}
	d.q = clCreateCommandQueue(d.ctx, pd.id, 0, &code)
	if err := check("clCreateCommandQueue", code); err != nil {
		clReleaseContext(d.ctx)
		return nil, fmt.Errorf("opencl: %s (%s): %w", id, pd.name, err)
	}
	d.small, d.large = gemmTiles(pd)
	if err := d.build(); err != nil {
		clReleaseCommandQueue(d.q)
		clReleaseContext(d.ctx)
		return nil, err
	}
	c := memCap
	if c == 0 {
		c = int64(pd.global)
	}
	d.mem = core.NewMemAccountant(id, c)
	d.k = &Kernels{d: d}
	feats := []string{pd.version, fmt.Sprintf("OpenCL C %d.%d", pd.cMajor, pd.cMinor),
		"compute-units=" + strconv.Itoa(int(pd.computeUnits)),
		"local-mem=" + core.FormatBytes(int64(pd.localMem)), "driver=" + pd.driver}
	acc := "f32"
	if pd.fp64 {
		feats = append(feats, "fp64")
		acc = "f64"
	}
	d.info = core.DeviceInfo{
		ID: id, Backend: Name,
		Name:     fmt.Sprintf("%s (%s)", pd.name, pd.platName),
		MemCap:   c,
		MemTotal: int64(pd.global),
		Features: feats,
		Kernel:   fmt.Sprintf("opencl-c, gemm tiles %v %v, %s softmax sums", d.small, d.large, acc),
	}
	return d, nil
}

// ID returns "opencl:N".
func (d *Device) ID() core.DeviceID { return d.id }

// Info describes the device: its name and platform, memory, OpenCL C
// version, compute units and the kernel configuration. MemCap is the
// accountant's current cap.
func (d *Device) Info() core.DeviceInfo {
	in := d.info
	in.Features = append([]string(nil), d.info.Features...)
	in.MemCap = d.mem.Stats().Cap
	return in
}

// Kernels returns the device's kernels.
func (d *Device) Kernels() core.Kernels { return d.k }

// Mem returns the device's memory accountant.
func (d *Device) Mem() *core.MemAccountant { return d.mem }

// Buffer is device memory behind a tensor: an OpenCL buffer object of
// at least one element (zero-length tensors get a 4-byte placeholder),
// charged to its device's accountant for the tensor's bytes.
type Buffer struct {
	dev   *Device
	mem   clMem
	n     int
	bytes int64
}

// Device returns the id of the buffer's device.
func (b *Buffer) Device() core.DeviceID { return b.dev.id }

// Len is the number of float32 elements.
func (b *Buffer) Len() int { return b.n }

// createBuffer makes a buffer object of max(bytes, 4) bytes, filled from
// host (copied at creation) when host is not nil.
func (d *Device) createBuffer(flags uint64, bytes int64, host unsafe.Pointer) (clMem, error) {
	if bytes < 4 {
		bytes, host = 4, nil
	}
	if uint64(bytes) > d.phys.maxAlloc && d.phys.maxAlloc > 0 {
		return 0, fmt.Errorf("opencl: %s: one buffer of %s exceeds the device's largest allocation (%s)",
			d.id, core.FormatBytes(bytes), core.FormatBytes(int64(d.phys.maxAlloc)))
	}
	if host != nil {
		flags |= clMemCopyHostPtr
	}
	var code int32
	m := clCreateBuffer(d.ctx, flags, uintptr(bytes), host, &code)
	if err := check("clCreateBuffer", code); err != nil {
		return 0, fmt.Errorf("opencl: %s: %s buffer: %w", d.id, core.FormatBytes(bytes), err)
	}
	return m, nil
}

// Alloc returns a zero-filled tensor on the device, charged to its
// accountant; over the cap it returns an *core.OOMError.
func (d *Device) Alloc(shape ...int) (*core.Tensor, error) {
	for _, s := range shape {
		if s < 0 {
			return nil, fmt.Errorf("%w: opencl: alloc on %s: negative dimension in %v", core.ErrShape, d.id, shape)
		}
	}
	n := core.NumElems(shape)
	if n > maxElems {
		return nil, fmt.Errorf("opencl: alloc %v: %d elements, kernels index at most %d: %w", shape, n, maxElems, core.ErrUnsupported)
	}
	bytes := int64(n) * int64(core.Float32.Size())
	if err := d.mem.ReserveTensor(bytes, shape); err != nil {
		return nil, fmt.Errorf("opencl: alloc %v: %w", shape, err)
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		d.mem.Release(bytes)
		return nil, errClosed
	}
	m, err := d.createBuffer(clMemReadWrite, bytes, nil)
	if err != nil {
		d.mem.Release(bytes)
		return nil, err
	}
	var zero float32
	if err := check("clEnqueueFillBuffer", clEnqueueFillBuffer(d.q, m, unsafe.Pointer(&zero), 4, 0, uintptr(max(bytes, 4)), 0, nil, nil)); err != nil {
		clReleaseMemObject(m)
		d.mem.Release(bytes)
		return nil, fmt.Errorf("opencl: alloc %v: %w", shape, err)
	}
	b := &Buffer{dev: d, mem: m, n: n, bytes: bytes}
	d.mu.Lock()
	d.live[b] = struct{}{}
	d.mu.Unlock()
	return &core.Tensor{Shape: append([]int(nil), shape...), DType: core.Float32, Buf: b}, nil
}

// Free releases t's buffer and returns its bytes to the accountant.
// Freeing nil, a tensor of another device or one already freed is a
// no-op. Work already queued on the buffer completes first (OpenCL
// defers the release).
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
	if ok {
		clReleaseMemObject(b.mem)
		d.mem.Release(b.bytes)
	}
}

// buffer returns t's buffer if it is a live buffer of d with t's size.
func (d *Device) buffer(op, name string, t *core.Tensor) (*Buffer, error) {
	if t == nil {
		return nil, fmt.Errorf("%w: opencl: %s: %s is nil", core.ErrShape, op, name)
	}
	if t.Buf == nil {
		return nil, fmt.Errorf("%w: opencl: %s: %s has no buffer", core.ErrShape, op, name)
	}
	b, ok := t.Buf.(*Buffer)
	if !ok || b.dev != d {
		return nil, fmt.Errorf("opencl: %s: %s is on %s, not %s: %w", op, name, t.Device(), d.id, core.ErrUnsupported)
	}
	if b.n != t.Len() {
		return nil, fmt.Errorf("%w: opencl: %s: %s has shape %v (%d elements) but its buffer holds %d", core.ErrShape, op, name, t.Shape, t.Len(), b.n)
	}
	d.mu.Lock()
	_, live := d.live[b]
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	if !live {
		return nil, fmt.Errorf("opencl: %s: %s was freed", op, name)
	}
	return b, nil
}

// Upload copies src into t (a blocking write: it returns once the data
// is on the device, after the work queued before it).
func (d *Device) Upload(t *core.Tensor, src []float32) error {
	b, err := d.buffer("upload", "t", t)
	if err != nil {
		return err
	}
	if len(src) != b.n {
		return fmt.Errorf("%w: opencl: upload of %d values into %v", core.ErrShape, len(src), t)
	}
	if b.n == 0 {
		return nil
	}
	err = check("clEnqueueWriteBuffer", clEnqueueWriteBuffer(d.q, b.mem, clTrue, 0, uintptr(b.bytes), unsafe.Pointer(&src[0]), 0, nil, nil))
	runtime.KeepAlive(src)
	if err != nil {
		return fmt.Errorf("opencl: upload to %s: %w", d.id, err)
	}
	return nil
}

// Download copies t into dst. The read is blocking and the queue is in
// order, so it sees every kernel enqueued on the device before it.
func (d *Device) Download(dst []float32, t *core.Tensor) error {
	b, err := d.buffer("download", "t", t)
	if err != nil {
		return err
	}
	if len(dst) != b.n {
		return fmt.Errorf("%w: opencl: download of %v into %d values", core.ErrShape, t, len(dst))
	}
	if b.n == 0 {
		return nil
	}
	err = d.read(b.mem, unsafe.Pointer(&dst[0]), b.bytes)
	runtime.KeepAlive(dst)
	if err != nil {
		return fmt.Errorf("opencl: download from %s: %w", d.id, err)
	}
	return nil
}

func (d *Device) read(m clMem, dst unsafe.Pointer, bytes int64) error {
	return check("clEnqueueReadBuffer", clEnqueueReadBuffer(d.q, m, clTrue, 0, uintptr(bytes), dst, 0, nil, nil))
}

// close releases the device's OpenCL objects.
func (d *Device) close() error {
	d.launchMu.Lock()
	defer d.launchMu.Unlock()
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	live, graphs := d.live, d.graphs
	d.live, d.graphs = map[*Buffer]struct{}{}, map[weak.Pointer[core.Graph]]*graphBufs{}
	d.mu.Unlock()
	err := check("clFinish", clFinish(d.q))
	for b := range live {
		clReleaseMemObject(b.mem)
		d.mem.Release(b.bytes)
	}
	for _, gb := range graphs {
		gb.release(d)
	}
	for _, k := range d.kernels {
		clReleaseKernel(k)
	}
	clear(d.kernels)
	clReleaseProgram(d.prog)
	clReleaseCommandQueue(d.q)
	clReleaseContext(d.ctx)
	if err != nil {
		return fmt.Errorf("opencl: closing %s: %w", d.id, err)
	}
	return nil
}

// NewStream returns a stream on the device. core.Kernels calls carry no
// stream, so every stream of a device shares its in-order queue: work
// runs in the order it is enqueued, events are markers on that queue.
func (d *Device) NewStream() core.Stream { return &Stream{d: d} }

// Stream is an in-order view of the device's command queue.
type Stream struct{ d *Device }

// Record enqueues a marker and returns an event that passes once all
// work enqueued on the device before it has completed.
func (s *Stream) Record() core.Event {
	s.d.mu.Lock()
	closed := s.d.closed
	s.d.mu.Unlock()
	if closed {
		return core.DoneEvent{}
	}
	var ev clEvent
	if clEnqueueMarkerWithWaitList(s.d.q, 0, nil, &ev) != clSuccess {
		clFinish(s.d.q)
		return core.DoneEvent{}
	}
	h := &eventHandle{ev: ev}
	e := &Event{d: s.d, h: h}
	runtime.AddCleanup(e, (*eventHandle).release, h)
	return e
}

// Wait makes later work on the stream wait for e: a barrier on the
// queue for an event of this device, a host wait for any other.
func (s *Stream) Wait(e core.Event) {
	if oe, ok := e.(*Event); ok && oe.d == s.d {
		oe.h.mu.Lock()
		if oe.h.ev != 0 {
			clEnqueueBarrierWithWaitList(s.d.q, 1, &oe.h.ev, nil)
		}
		oe.h.mu.Unlock()
		return
	}
	if e != nil {
		e.Wait()
	}
}

// Sync blocks until all work enqueued on the device has completed.
func (s *Stream) Sync() error {
	s.d.mu.Lock()
	closed := s.d.closed
	s.d.mu.Unlock()
	if closed {
		return nil
	}
	return check("clFinish", clFinish(s.d.q))
}

// Event is a marker on a device's queue.
type Event struct {
	d *Device
	h *eventHandle
}

type eventHandle struct {
	mu sync.Mutex
	ev clEvent
}

func (h *eventHandle) release() {
	h.mu.Lock()
	if h.ev != 0 {
		clReleaseEvent(h.ev)
		h.ev = 0
	}
	h.mu.Unlock()
}

// Wait blocks until the marker has passed.
func (e *Event) Wait() {
	e.h.mu.Lock()
	if e.h.ev != 0 {
		clWaitForEvents(1, &e.h.ev)
		clReleaseEvent(e.h.ev)
		e.h.ev = 0
	}
	e.h.mu.Unlock()
}

// tile is a GEMM tiling: ts x ts tiles of C per work-group of
// (ts/wpt)^2 work-items, each computing wpt x wpt elements.
type tile struct{ ts, wpt int }

func (t tile) rts() int { return t.ts / t.wpt }

func (t tile) String() string { return fmt.Sprintf("%d/%d", t.ts, t.wpt) }

// fits reports whether the device can run the tiling: its work-group
// size and its two ts x ts float tiles of local memory.
func (t tile) fits(pd physDevice) bool {
	return uintptr(t.rts()*t.rts()) <= pd.maxWorkGroup && uint64(2*t.ts*t.ts*4) <= pd.localMem
}

// gemmTiles picks the small (16/2) and large (64/8) GEMM tilings,
// falling back to smaller ones on devices with small work-groups or
// little local memory.
func gemmTiles(pd physDevice) (small, large tile) {
	pick := func(cands ...tile) tile {
		for _, t := range cands {
			if t.fits(pd) {
				return t
			}
		}
		return tile{4, 1}
	}
	return pick(tile{16, 2}, tile{8, 1}), pick(tile{64, 8}, tile{32, 4}, tile{16, 2}, tile{8, 1})
}
