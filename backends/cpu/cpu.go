package cpu

import (
	"bufio"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/gnnkit/gnnkit/backends/cpu/internal/kern"
	"github.com/gnnkit/gnnkit/core"
	"github.com/klauspost/cpuid/v2"
)

// The interfaces this package implements.
var (
	_ core.Backend = (*Backend)(nil)
	_ core.Device  = (*Device)(nil)
	_ core.Kernels = (*Kernels)(nil)
	_ core.Stream  = (*Stream)(nil)
	// TODO: core.FusedAttentioner, core.PeerCopier once core defines them.
)

// Name is the backend's registry name.
const Name = "cpu"

func init() {
	core.RegisterBackend(Name, func(opts core.BackendOptions) (core.Backend, error) {
		b, err := New(opts)
		if err != nil {
			return nil, err
		}
		return b, nil
	})
}

// Backend is a set of logical CPU devices sharing the host's cores and
// memory. Each device has its own worker pool and memory cap, so one
// machine can stand in for several devices under a multi-device scheduler.
type Backend struct {
	devs      []*Device
	host      *core.MemAccountant // the devices' allocations together, against the machine's memory
	closeOnce sync.Once
}

// MaxDevices is the most logical devices a backend opens: cpu:0 to
// cpu:63. They share one machine's cores and memory, each with a worker
// pool and a buffer cache of its own; past this many a device gets a
// sliver of a core, and a mistyped index (cpu:999, cpu:99999999999) would
// open that many pools instead of failing.
const MaxDevices = 64

// MaxThreads is the most worker threads a backend starts in all: its
// logical devices times the threads of each. Pinned, every worker is an
// OS thread of its own, and past 10,000 the Go runtime kills the process
// ("program exceeds 10000-thread limit"); unpinned, workers are
// goroutines, but a kernel call is split into as many pieces as the
// device has threads, so thousands of threads on a machine's few cores
// only slow the kernels down (and 64 devices of 100,000 threads would
// start 6.4 million goroutines). No machine has the cores to use more.
const MaxThreads = 4096

// PinEnvVar turns on thread pinning for backends opened with New (and so
// through the registry): GNN_CPU_PIN=1. Its value is a boolean as
// strconv.ParseBool reads it (1, t, true, 0, f, false, any case); unset
// or empty means no pinning, and anything else is an error.
const PinEnvVar = "GNN_CPU_PIN"

// PinFromEnv reads PinEnvVar: false when unset or empty, an error naming
// the variable when its value is not a boolean.
func PinFromEnv() (bool, error) {
	v := os.Getenv(PinEnvVar)
	if strings.TrimSpace(v) == "" {
		return false, nil
	}
	pin, err := strconv.ParseBool(strings.TrimSpace(v))
	if err != nil {
		return false, fmt.Errorf("cpu: %s=%q: want 1 or true to pin worker threads to their own CPUs, 0 or false (or unset) not to", PinEnvVar, v)
	}
	return pin, nil
}

// Config is the CPU backend's full set of options: core's, plus the
// kernel variant and thread pinning. The zero value gives New's defaults.
type Config struct {
	core.BackendOptions
	// Variant names the kernel variant ("generic", "avx2", "avx512"; see
	// Variants). "" uses GNN_CPU if set, else the best the CPU supports.
	// Unlike GNN_CPU, which falls back with a reason, a variant this
	// binary lacks or this CPU cannot run is an error.
	Variant string
	// Pin binds each worker thread to its own CPU (device i's workers to
	// the allowed CPUs i*Threads, i*Threads+1, …, wrapping around) and
	// lets only those threads run kernels, for stable benchmarks on
	// machines whose scheduler stacks threads on one CPU. New turns it on
	// when GNN_CPU_PIN=1.
	Pin bool
}

// New opens a CPU backend with opts.Devices logical devices (default 1,
// at most MaxDevices), each with opts.Threads workers (default max(1,
// NumCPU/Devices); at most MaxThreads in all) and a memory cap of opts.MemCap bytes (0: none of its
// own), using the kernel variant Select picks (GNN_CPU, else the best for
// this CPU) and pinning threads if GNN_CPU_PIN=1 (a value that is not a
// boolean is an error). Whatever the caps, the devices together allocate
// at most the memory the machine had available when the backend opened
// (HostMemory): past it Alloc fails with an error wrapping
// *core.OOMError instead of the Go runtime dying.
func New(opts core.BackendOptions) (*Backend, error) {
	pin, err := PinFromEnv()
	if err != nil {
		return nil, err
	}
	return NewConfig(Config{BackendOptions: opts, Pin: pin})
}

// VariantEnvVar pins the kernel variant of backends opened without
// Config.Variant: GNN_CPU=generic|avx2|avx512 (see Variants).
const VariantEnvVar = kern.EnvVar

// EnvVariantFallback says why GNN_CPU is not followed: "" when it is
// unset or names a variant this binary has and this CPU runs, else the
// variant used instead with the reason, as DeviceInfo.Kernel shows it
// (e.g. "avx2 (GNN_CPU=bogus is not built into this binary)").
func EnvVariantFallback() string {
	pin := strings.ToLower(strings.TrimSpace(os.Getenv(kern.EnvVar)))
	if pin == "" {
		return ""
	}
	v, why := kern.Select()
	if v.Name == pin {
		return ""
	}
	return why
}

// Variants returns the names of the kernel variants compiled into this
// binary that this CPU can run, best first ("generic" is always last).
func Variants() []string {
	var out []string
	for _, v := range kern.Variants() {
		if v.Usable() {
			out = append(out, v.Name)
		}
	}
	return out
}

// NewConfig opens a CPU backend as New does, with cfg's variant and
// pinning.
func NewConfig(cfg Config) (*Backend, error) {
	opts := cfg.BackendOptions
	if opts.Devices < 0 || opts.Threads < 0 || opts.MemCap < 0 {
		return nil, fmt.Errorf("cpu: negative option (devices %d, threads %d, mem cap %d)", opts.Devices, opts.Threads, opts.MemCap)
	}
	if opts.Devices > MaxDevices {
		return nil, fmt.Errorf("cpu: %d logical devices asked for; the cpu backend has at most %d (cpu:0 to cpu:%d)", opts.Devices, MaxDevices, MaxDevices-1)
	}
	n := opts.Devices
	if n == 0 {
		n = 1
	}
	if opts.Threads > MaxThreads/n {
		return nil, fmt.Errorf("cpu: %d threads on each of %d logical devices: the cpu backend starts at most %d worker threads in all (threads per device times devices); use at most %d threads per device",
			opts.Threads, n, MaxThreads, MaxThreads/n)
	}
	threads := opts.Threads
	if threads == 0 {
		threads = max(1, min(runtime.NumCPU(), MaxThreads)/n)
	}
	variant, why := kern.Select()
	if cfg.Variant != "" {
		v, ok := kern.Lookup(strings.ToLower(cfg.Variant))
		switch {
		case !ok:
			return nil, fmt.Errorf("cpu: kernel variant %q is not built into this binary (have %s)", cfg.Variant, strings.Join(Variants(), ", "))
		case !v.Usable():
			_, why := kern.Choose(v.Name, "Config.Variant")
			return nil, fmt.Errorf("cpu: kernel variant %q cannot run here: %s", cfg.Variant, why)
		}
		variant, why = v, v.Name+" (pinned by Config.Variant)"
	}
	var cpus []int
	if cfg.Pin {
		if cpus = allowedCPUs(); len(cpus) == 0 {
			return nil, errors.New("cpu: cannot pin threads: no CPU list")
		}
	}
	b := &Backend{host: core.NewMemAccountant(Name, hostMemory())}
	for i := range n {
		id := core.DeviceID(Name + ":" + strconv.Itoa(i))
		var mine []int
		for t := range threads {
			if cpus != nil {
				mine = append(mine, cpus[(i*threads+t)%len(cpus)])
			}
		}
		kw := why
		if mine != nil {
			kw += "; threads pinned to CPUs " + intList(mine)
		}
		d := &Device{
			id:      id,
			threads: threads,
			mem:     core.NewMemAccountant(id, opts.MemCap),
			host:    b.host,
			pool:    newPool(threads, mine),
			live:    map[*core.HostMem]int64{},
			kernWhy: kw,
			cache:   newBufCache(opts.MemCap, n),
		}
		d.k = &Kernels{dev: d, v: variant}
		b.devs = append(b.devs, d)
	}
	return b, nil
}

func intList(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// Name returns "cpu".
func (b *Backend) Name() string { return Name }

// Devices returns the logical devices cpu:0, cpu:1, ...
func (b *Backend) Devices() []core.Device {
	out := make([]core.Device, len(b.devs))
	for i, d := range b.devs {
		out[i] = d
	}
	return out
}

// Device returns the concrete device i.
func (b *Backend) Device(i int) *Device { return b.devs[i] }

// Close stops the devices' worker pools. Kernels still work after Close,
// single-threaded.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		for _, d := range b.devs {
			d.pool.close()
			d.cache.drop()
			d.k.ewCache.Store(nil)
		}
	})
	return nil
}

// Device is one logical CPU device: a thread budget, a memory cap and
// the kernels that run within them.
type Device struct {
	id      core.DeviceID
	threads int
	mem     *core.MemAccountant
	host    *core.MemAccountant // shared by the backend's devices
	pool    *pool
	k       *Kernels
	kernWhy string
	cache   *bufCache

	mu   sync.Mutex
	live map[*core.HostMem]int64 // allocations not yet freed, with their bytes
}

// ID returns "cpu:N".
func (d *Device) ID() core.DeviceID { return d.id }

// Threads is the device's thread budget.
func (d *Device) Threads() int { return d.threads }

// Info describes the device: the CPU brand, memory, thread budget, CPU
// features and the kernel variant in use.
func (d *Device) Info() core.DeviceInfo {
	name := strings.TrimSpace(cpuid.CPU.BrandName)
	if name == "" {
		name = runtime.GOARCH + " cpu"
	}
	return core.DeviceInfo{
		ID:       d.id,
		Backend:  Name,
		Name:     name,
		MemCap:   d.mem.Stats().Cap,
		MemTotal: memTotal(),
		Threads:  d.threads,
		Features: cpuid.CPU.FeatureSet(),
		Kernel:   d.kernWhy,
	}
}

// Kernels returns the device's kernels.
func (d *Device) Kernels() core.Kernels { return d.k }

// Alloc returns a zero-filled tensor in host memory, charged to the
// device's accountant.
func (d *Device) Alloc(shape ...int) (*core.Tensor, error) {
	return d.alloc(shape, true)
}

// AllocUninit is Alloc without the zero fill: the contents are whatever the
// recycled buffer held (core.UninitAllocator).
func (d *Device) AllocUninit(shape ...int) (*core.Tensor, error) {
	return d.alloc(shape, false)
}

func (d *Device) alloc(shape []int, zero bool) (*core.Tensor, error) {
	for _, s := range shape {
		if s < 0 {
			return nil, fmt.Errorf("%w: cpu: alloc on %s: negative dimension in %v", core.ErrShape, d.id, shape)
		}
	}
	n, ok := elems(shape)
	if !ok {
		return nil, fmt.Errorf("cpu: alloc %v on %s: %w: the tensor needs over 256 TiB, more than a Go program can allocate; use a smaller model (--hidden, --layers, --branches) or dataset", shape, d.id, core.ErrOutOfMemory)
	}
	bytes := int64(n) * int64(core.Float32.Size())
	// The machine's memory first, so that a tensor it cannot hold leaves
	// the device's peak as it was.
	if err := d.host.Reserve(bytes, ""); err != nil {
		var oom *core.OOMError
		if errors.As(err, &oom) {
			oom.Device, oom.What = d.id, fmt.Sprintf("tensor %v", shape)
			err = &hostOOMError{oom}
		}
		return nil, fmt.Errorf("cpu: alloc %v: %w", shape, err)
	}
	if err := d.mem.ReserveTensor(bytes, shape); err != nil {
		d.host.Release(bytes)
		return nil, fmt.Errorf("cpu: alloc %v: %w", shape, err)
	}
	data := d.cache.take(n)
	switch {
	case data != nil:
		if zero {
			d.k.zero(data) // over the device's threads, non-temporal when large
		}
	case 4*int64(n) >= cacheMinBytes:
		data = make([]float32, n, sizeClass(n)) // cacheable once freed
	default:
		data = make([]float32, n)
	}
	h := &core.HostMem{Data: data, Dev: d.id}
	d.mu.Lock()
	d.live[h] = bytes
	d.mu.Unlock()
	return &core.Tensor{Shape: append([]int(nil), shape...), DType: core.Float32, Buf: h}, nil
}

// maxAllocBytes is the largest allocation Go's runtime makes (its heap
// addresses span 2^48 bytes): a larger make panics whatever memory is
// free.
const maxAllocBytes = 1 << 48

// elems is the element count of shape, false when its byte size (4 per
// element) passes maxAllocBytes.
func elems(shape []int) (int, bool) {
	const most = maxAllocBytes / 4
	n := 1
	for _, s := range shape {
		if s != 0 && n > most/s {
			return 0, false
		}
		n *= s
	}
	return n, true
}

// Free returns t's bytes to the accountant. Freeing nil, a tensor of
// another device or a tensor already freed is a no-op.
func (d *Device) Free(t *core.Tensor) {
	if t == nil {
		return
	}
	h, ok := t.Buf.(*core.HostMem)
	if !ok || h.Dev != d.id {
		return
	}
	d.mu.Lock()
	bytes, ok := d.live[h]
	delete(d.live, h)
	d.mu.Unlock()
	if ok {
		d.mem.Release(bytes)
		d.host.Release(bytes)
		// The buffer may now back another tensor: a use of t after
		// Free fails loudly (an empty buffer) instead of aliasing.
		d.cache.put(h.Data)
		h.Data = nil
	}
}

// bufCache keeps freed buffers of cacheMinBytes or more, by length, for
// Alloc to reuse: clearing a reused buffer over the device's threads is
// cheaper than a fresh one from the Go heap, which is zeroed on one
// thread (and faulted in page by page, about 2 GB/s on the VMs measured,
// when the runtime has returned it to the OS), and it keeps a training
// loop's steady state free of large allocations. Cached bytes are not
// charged to the memory cap; at most limit bytes are kept.
type bufCache struct {
	mu    sync.Mutex
	free  map[int][][]float32
	bytes int64
	limit int64
}

// cacheMinBytes is the smallest buffer kept. Above Go's small-object
// limit (32 KiB) a buffer gets pages of its own, and while the heap grows
// (the first hundreds of iterations after setup) those are fresh pages,
// faulted in on first touch. With two devices' goroutines in one process
// each fault also flushes the other CPU's TLB (an IPI, slow on a VM) and
// contends on the page-table lock: a DLRM embedding table's 64000-byte
// gradient, made by every backward on every device, took 200-400 µs
// instead of 5 when uncached. Below it, reuse spares the allocator and
// the collector: on iterations of a few hundred µs (DLRM, uno on Cora's
// training nodes) keeping buffers from 1 KiB took 4-6% off the CPU time
// and 3-5% off the iteration.
const cacheMinBytes = 1 << 10

func newBufCache(memCap int64, devices int) *bufCache {
	limit := memTotal() / 4
	if limit <= 0 {
		limit = 1 << 30
	}
	// The backend's devices share the machine: their caches together
	// hold at most a quarter of its memory.
	limit /= int64(max(devices, 1))
	if memCap > 0 {
		limit = min(limit, max(memCap, 256<<20))
	}
	return &bufCache{free: map[int][][]float32{}, limit: limit}
}

// sizeClass is the capacity a cacheable buffer of n elements gets: n
// rounded up to a multiple of 2^k with n in [4·2^k, 8·2^k), four classes
// per doubling, at most 25% over. Buffers freed at one size then serve
// the nearby sizes of the next iteration (sampled mini-batches differ in
// every iteration: cached by exact length, they were never reused, and
// training on Cora in mini-batches of 32 held 1.5 GB).
func sizeClass(n int) int {
	k := bits.Len(uint(n)) - 3
	if k <= 0 {
		return n
	}
	return (n + 1<<k - 1) >> k << k
}

// take returns a cached buffer for n elements (length n, capacity its
// size class), or nil.
func (c *bufCache) take(n int) []float32 {
	if 4*int64(n) < cacheMinBytes {
		return nil
	}
	k := sizeClass(n)
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.free[k]
	if len(l) == 0 {
		return nil
	}
	b := l[len(l)-1]
	l[len(l)-1] = nil
	c.free[k] = l[:len(l)-1]
	c.bytes -= 4 * int64(k)
	return b[:n]
}

// put keeps b for reuse if its capacity is a size class. A full cache is
// emptied first: what it holds then is mostly sizes no longer asked for.
func (c *bufCache) put(b []float32) {
	k := cap(b)
	size := 4 * int64(k)
	if size < cacheMinBytes || sizeClass(k) != k || size > c.limit {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bytes+size > c.limit {
		c.free, c.bytes = map[int][][]float32{}, 0
	}
	c.free[k] = append(c.free[k], b[:k])
	c.bytes += size
}

// drop empties the cache (Backend.Close).
func (c *bufCache) drop() {
	c.mu.Lock()
	c.free, c.bytes = map[int][][]float32{}, 0
	c.mu.Unlock()
}

// Upload copies src into t.
func (d *Device) Upload(t *core.Tensor, src []float32) error {
	dst, err := hostData("upload", "t", t)
	if err != nil {
		return err
	}
	if len(src) != len(dst) {
		return fmt.Errorf("%w: cpu: upload of %d values into %v", core.ErrShape, len(src), t)
	}
	d.k.copy(dst, src)
	return nil
}

// Download copies t into dst.
func (d *Device) Download(dst []float32, t *core.Tensor) error {
	src, err := hostData("download", "t", t)
	if err != nil {
		return err
	}
	if len(src) != len(dst) {
		return fmt.Errorf("%w: cpu: download of %v into %d values", core.ErrShape, t, len(dst))
	}
	d.k.copy(dst, src)
	return nil
}

// NewStream returns a stream that runs work synchronously.
func (d *Device) NewStream() core.Stream { return &Stream{} }

// Mem returns the device's memory accountant.
func (d *Device) Mem() *core.MemAccountant { return d.mem }

// HostMem returns the accountant the backend's devices share: every
// allocation is charged to it as well as to the device's own, and its cap
// is the machine's memory (HostMemory) when the backend opened.
func (d *Device) HostMem() *core.MemAccountant { return d.host }

// Stream is the CPU's in-order queue: work runs in the caller, so every
// event has already passed when it is recorded.
type Stream struct{}

// Record returns a completed event.
func (*Stream) Record() core.Event { return core.DoneEvent{} }

// Wait returns at once: CPU work is synchronous.
func (*Stream) Wait(core.Event) {}

// Sync returns nil.
func (*Stream) Sync() error { return nil }

// hostOOMError is an allocation past the memory the machine had for the
// backend's devices together (HostMemory). It unwraps to the
// *core.OOMError, whose Cap is that memory, so errors.Is(err,
// core.ErrOutOfMemory) holds; its message does not suggest raising
// --device-mem, which cannot help.
type hostOOMError struct{ oom *core.OOMError }

func (e *hostOOMError) Error() string {
	o := e.oom
	return fmt.Sprintf("%s: out of memory: allocating %s for %s, but the cpu devices share this machine's memory and only %s of the %s available to them is free (%s in use); "+
		"use a smaller model (--hidden, --layers, --branches) or dataset, or train in micro-batches with --scheduler cherry and a --device-mem below the machine's free memory",
		o.Device, core.FormatBytes(o.Need), o.What, core.FormatBytes(o.Free), core.FormatBytes(o.Cap), core.FormatBytes(o.Used))
}

func (e *hostOOMError) Unwrap() error { return e.oom }

// HostMemory is the most memory a backend opened now lets its devices
// allocate together: MemAvailable from /proc/meminfo (the memory the
// kernel can hand out without swapping, page cache included), else
// MemTotal, else 0 (no limit: the figure is unknown off Linux).
//
// MemAvailable rather than MemTotal: a machine is shared (with the OS,
// other jobs, this process's dataset), and an allocation past what is
// available does not fail in Go: it pages the machine to a halt or gets
// a process OOM-killed. The figure is taken once, when the backend opens.
func HostMemory() int64 { return hostMemory() }

// hostMemory is HostMemory; tests replace it.
var hostMemory = func() int64 {
	if n := meminfo("MemAvailable:"); n > 0 {
		return n
	}
	return memTotal()
}

var (
	memTotalOnce sync.Once
	memTotalVal  int64
)

// MemTotal is the machine's memory, MemTotal in /proc/meminfo (0 where
// there is none), read once.
func MemTotal() int64 { return memTotal() }

// memTotal is MemTotal.
func memTotal() int64 {
	memTotalOnce.Do(func() { memTotalVal = meminfo("MemTotal:") })
	return memTotalVal
}

// meminfo reads the line key (e.g. "MemTotal:") of /proc/meminfo in
// bytes (0 when unknown).
func meminfo(key string) int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), key)
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0
		}
		return kb * 1024
	}
	return 0
}

// hostData returns t's elements, checking that t is host resident and
// that its buffer holds exactly its shape's elements.
func hostData(op, name string, t *core.Tensor) ([]float32, error) {
	if t == nil {
		return nil, fmt.Errorf("%w: cpu: %s: %s is nil", core.ErrShape, op, name)
	}
	if t.Buf == nil {
		return nil, fmt.Errorf("%w: cpu: %s: %s has no buffer", core.ErrShape, op, name)
	}
	h, ok := t.Buf.(core.HostBuffer)
	if !ok {
		return nil, fmt.Errorf("cpu: %s: %s is on %s, not in host memory: %w", op, name, t.Device(), core.ErrUnsupported)
	}
	data := h.Float32s()
	if len(data) != t.Len() {
		return nil, fmt.Errorf("%w: cpu: %s: %s has shape %v (%d elements) but its buffer holds %d", core.ErrShape, op, name, t.Shape, t.Len(), len(data))
	}
	return data, nil
}
