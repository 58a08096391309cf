package cpu

import (
	"bufio"
	"fmt"
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
	closeOnce sync.Once
}

// New opens a CPU backend with opts.Devices logical devices (default 1),
// each with opts.Threads workers (default max(1, NumCPU/Devices)) and a
// memory cap of opts.MemCap bytes (0: unlimited).
func New(opts core.BackendOptions) (*Backend, error) {
	if opts.Devices < 0 || opts.Threads < 0 || opts.MemCap < 0 {
		return nil, fmt.Errorf("cpu: negative option (devices %d, threads %d, mem cap %d)", opts.Devices, opts.Threads, opts.MemCap)
	}
	n := opts.Devices
	if n == 0 {
		n = 1
	}
	threads := opts.Threads
	if threads == 0 {
		threads = max(1, runtime.NumCPU()/n)
	}
	variant, why := kern.Select()
	b := &Backend{}
	for i := range n {
		id := core.DeviceID(Name + ":" + strconv.Itoa(i))
		d := &Device{
			id:      id,
			threads: threads,
			mem:     core.NewMemAccountant(id, opts.MemCap),
			pool:    newPool(threads),
			live:    map[*core.HostMem]int64{},
			kernWhy: why,
		}
		d.k = &Kernels{dev: d, v: variant}
		b.devs = append(b.devs, d)
	}
	return b, nil
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
	pool    *pool
	k       *Kernels
	kernWhy string

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
	for _, s := range shape {
		if s < 0 {
			return nil, fmt.Errorf("%w: cpu: alloc on %s: negative dimension in %v", core.ErrShape, d.id, shape)
		}
	}
	n := core.NumElems(shape)
	bytes := int64(n) * int64(core.Float32.Size())
	if err := d.mem.Reserve(bytes, fmt.Sprintf("tensor %v", shape)); err != nil {
		return nil, fmt.Errorf("cpu: alloc %v: %w", shape, err)
	}
	h := &core.HostMem{Data: make([]float32, n), Dev: d.id}
	d.mu.Lock()
	d.live[h] = bytes
	d.mu.Unlock()
	return &core.Tensor{Shape: append([]int(nil), shape...), DType: core.Float32, Buf: h}, nil
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
	}
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
	copy(dst, src)
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
	copy(dst, src)
	return nil
}

// NewStream returns a stream that runs work synchronously.
func (d *Device) NewStream() core.Stream { return &Stream{} }

// Mem returns the device's memory accountant.
func (d *Device) Mem() *core.MemAccountant { return d.mem }

// Stream is the CPU's in-order queue: work runs in the caller, so every
// event has already passed when it is recorded.
type Stream struct{}

// Record returns a completed event.
func (*Stream) Record() core.Event { return core.DoneEvent{} }

// Wait returns at once: CPU work is synchronous.
func (*Stream) Wait(core.Event) {}

// Sync returns nil.
func (*Stream) Sync() error { return nil }

var (
	memTotalOnce sync.Once
	memTotalVal  int64
)

// memTotal reads MemTotal from /proc/meminfo (0 when unknown).
func memTotal() int64 {
	memTotalOnce.Do(func() {
		f, err := os.Open("/proc/meminfo")
		if err != nil {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
			if !ok {
				continue
			}
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				return
			}
			kb, err := strconv.ParseInt(fields[0], 10, 64)
			if err == nil {
				memTotalVal = kb * 1024
			}
			return
		}
	})
	return memTotalVal
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
