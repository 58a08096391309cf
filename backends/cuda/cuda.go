//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"weak"

	"gorgonia.org/cu"

	"github.com/gnnkit/gnnkit/backends/cuda/ptx"
	"github.com/gnnkit/gnnkit/core"
)

// The interfaces this package implements.
var (
	_ core.Backend    = (*Backend)(nil)
	_ core.Device     = (*Device)(nil)
	_ core.Kernels    = (*Kernels)(nil)
	_ core.Stream     = (*Stream)(nil)
	_ core.Event      = (*Event)(nil)
	_ core.Buffer     = (*Buffer)(nil)
	_ FusedAggregator = (*Kernels)(nil)
	// TODO: core.FusedAttentioner, core.PeerCopier once core defines them.
)

// Name is the backend's registry name.
const Name = "cuda"

func init() {
	core.RegisterBackend(Name, func(opts core.BackendOptions) (core.Backend, error) {
		b, err := New(opts)
		if err != nil {
			return nil, err
		}
		return b, nil
	})
}

// SpMMVariant selects the SpMM kernel.
type SpMMVariant int32

const (
	// SpMMAuto picks per graph: balanced when the longest row would keep
	// one warp busy far longer than an even share of the entries, else
	// warp-per-row.
	SpMMAuto SpMMVariant = iota
	// SpMMWarp is one warp per row.
	SpMMWarp
	// SpMMBalanced splits rows and entries together into equal chunks,
	// one warp each (merge path).
	SpMMBalanced
)

func (v SpMMVariant) String() string {
	switch v {
	case SpMMAuto:
		return "auto"
	case SpMMWarp:
		return "warp"
	case SpMMBalanced:
		return "balanced"
	}
	return "SpMMVariant(" + strconv.Itoa(int(v)) + ")"
}

// ParseSpMMVariant reads "auto", "warp" or "balanced".
func ParseSpMMVariant(s string) (SpMMVariant, error) {
	for _, v := range []SpMMVariant{SpMMAuto, SpMMWarp, SpMMBalanced} {
		if strings.EqualFold(strings.TrimSpace(s), v.String()) {
			return v, nil
		}
	}
	return 0, fmt.Errorf("cuda: unknown SpMM variant %q (want auto, warp or balanced)", s)
}

// Config configures NewConfig; the zero value is useful.
type Config struct {
	core.BackendOptions
	// TF32 makes GEMM run on tensor cores with TF32 inputs (about 10
	// mantissa bits; fp32 accumulation): several times faster on large
	// products, but not exact fp32, so it is off by default and the
	// conformance suite runs without it. Device.SetTF32 changes it later.
	TF32 bool
	// SpMM pins the SpMM kernel variant (default SpMMAuto).
	SpMM SpMMVariant
	// Chunk is the balanced SpMM's rows plus entries per warp (0: about
	// (rows + nnz) / (128 * SMs), at least 32). Small values exercise its
	// carry fix-up in tests.
	Chunk int
}

// ConfigFromEnv is the Config New uses: opts, with TF32 from
// GNN_CUDA_TF32=1 and the SpMM variant from GNN_CUDA_SPMM
// (auto|warp|balanced).
func ConfigFromEnv(opts core.BackendOptions) (Config, error) {
	cfg := Config{BackendOptions: opts}
	if v := os.Getenv("GNN_CUDA_TF32"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("cuda: GNN_CUDA_TF32=%q: %w", v, err)
		}
		cfg.TF32 = on
	}
	if v := os.Getenv("GNN_CUDA_SPMM"); v != "" {
		s, err := ParseSpMMVariant(v)
		if err != nil {
			return cfg, err
		}
		cfg.SpMM = s
	}
	return cfg, nil
}

// errNoDevice is returned by New when the driver lists no GPU.
var errNoDevice = errors.New("cuda: no CUDA device")

// Backend is the set of CUDA devices opened by New.
type Backend struct {
	devs      []*Device
	closeOnce sync.Once
	closeErr  error
}

// New opens opts.Devices logical devices on the GPUs round robin (0: one
// per GPU), with ConfigFromEnv's settings. Each logical device has its
// own thread holding the GPU's primary context, its own stream, loaded
// kernels and memory accountant capped at opts.MemCap (0: the GPU's
// memory). opts.Threads does not apply to GPUs and is ignored.
//
// Importing this package (build tag cuda) already needs a working driver
// and GPU: gorgonia.org/cu calls cuInit in its package init and exits the
// process when that fails.
func New(opts core.BackendOptions) (*Backend, error) {
	cfg, err := ConfigFromEnv(opts)
	if err != nil {
		return nil, err
	}
	return NewConfig(cfg)
}

// NewConfig is New with explicit settings.
func NewConfig(cfg Config) (*Backend, error) {
	opts := cfg.BackendOptions
	if opts.Devices < 0 || opts.Threads < 0 || opts.MemCap < 0 || cfg.Chunk < 0 {
		return nil, fmt.Errorf("cuda: negative option (devices %d, threads %d, mem cap %d, chunk %d)", opts.Devices, opts.Threads, opts.MemCap, cfg.Chunk)
	}
	if cfg.SpMM < SpMMAuto || cfg.SpMM > SpMMBalanced {
		return nil, fmt.Errorf("cuda: unknown SpMM variant %v", cfg.SpMM)
	}
	nphys, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: counting devices: %w", err)
	}
	if nphys == 0 {
		return nil, errNoDevice
	}
	n := opts.Devices
	if n == 0 {
		n = nphys
	}
	b := &Backend{}
	for i := range n {
		d, err := openDevice(i, i%nphys, cfg)
		if err != nil {
			b.Close()
			return nil, err
		}
		b.devs = append(b.devs, d)
	}
	return b, nil
}

// Name returns "cuda".
func (b *Backend) Name() string { return Name }

// Devices returns cuda:0, cuda:1, ...
func (b *Backend) Devices() []core.Device {
	out := make([]core.Device, len(b.devs))
	for i, d := range b.devs {
		out[i] = d
	}
	return out
}

// Device returns the concrete device i.
func (b *Backend) Device(i int) *Device { return b.devs[i] }

// Close waits for each device's queued work and releases everything:
// tensors not yet freed, cached graphs, cached memory, events, the
// stream, modules and the primary context reference. Devices return an
// error when used afterwards; a second Close does nothing.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		for _, d := range b.devs {
			b.closeErr = errors.Join(b.closeErr, d.close())
		}
	})
	return b.closeErr
}

// Device is one logical CUDA device: a thread with the GPU's primary
// context current (all driver calls go through it), one stream all its
// work is queued on in order, the loaded kernels, a memory accountant,
// a cache of freed device memory and the device copies of the graphs
// kernels have used.
type Device struct {
	id      core.DeviceID
	ordinal int
	dev     cu.Device
	w       *worker
	stream  cu.Stream
	mods    []cu.Module
	fns     map[string]*kernelFn
	mem     *core.MemAccountant
	k       *Kernels
	info    core.DeviceInfo
	sms     int
	ccMajor int
	ccMinor int
	chunk   int

	tf32 atomic.Bool
	spmm atomic.Int32 // SpMMVariant

	// pool is the cache of freed device memory (worker thread only).
	pool *memPool

	mu     sync.Mutex // guards live, graphs and events
	live   map[*Buffer]struct{}
	graphs map[weak.Pointer[core.Graph]]*graphBufs
	events map[*eventHandle]struct{}
}

// openDevice opens logical device i on GPU ordinal.
func openDevice(i, ordinal int, cfg Config) (*Device, error) {
	id := core.DeviceID(Name + ":" + strconv.Itoa(i))
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: GPU %d: %w", id, ordinal, err)
	}
	name, err := dev.Name()
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: GPU %d: name: %w", id, ordinal, err)
	}
	total, err := dev.TotalMem()
	if err != nil {
		return nil, fmt.Errorf("cuda: %s (%s): total memory: %w", id, name, err)
	}
	attrs, err := dev.Attributes(cu.ComputeCapabilityMajor, cu.ComputeCapabilityMinor, cu.MultiprocessorCount)
	if err != nil {
		return nil, fmt.Errorf("cuda: %s (%s): attributes: %w", id, name, err)
	}
	d := &Device{id: id, ordinal: ordinal, dev: dev, ccMajor: attrs[0], ccMinor: attrs[1], sms: max(attrs[2], 1),
		chunk: cfg.Chunk, pool: newMemPool(), fns: map[string]*kernelFn{},
		live: map[*Buffer]struct{}{}, graphs: map[weak.Pointer[core.Graph]]*graphBufs{}, events: map[*eventHandle]struct{}{}}
	if d.ccMajor*10+d.ccMinor < 80 {
		return nil, fmt.Errorf("cuda: %s (%s) has compute capability %d.%d; the kernels are %s PTX and need 8.0 or newer: %w",
			id, name, d.ccMajor, d.ccMinor, ptx.Target, core.ErrUnsupported)
	}
	d.tf32.Store(cfg.TF32)
	d.spmm.Store(int32(cfg.SpMM))
	if d.w, err = startWorker(dev); err != nil {
		return nil, fmt.Errorf("cuda: %s (%s): primary context: %w", id, name, err)
	}
	if err := d.w.do(func() error {
		s, err := cu.MakeStream(cu.DefaultStream)
		if err != nil {
			return fmt.Errorf("creating the stream: %w", err)
		}
		d.stream = s
		return d.loadKernels()
	}); err != nil {
		d.w.close(d.teardown)
		return nil, fmt.Errorf("cuda: %s (%s): %w", id, name, err)
	}
	c := cfg.MemCap
	if c == 0 {
		c = total
	}
	d.mem = core.NewMemAccountant(id, c)
	d.k = &Kernels{d: d}
	feats := []string{
		fmt.Sprintf("sm_%d%d", d.ccMajor, d.ccMinor),
		fmt.Sprintf("compute-capability=%d.%d", d.ccMajor, d.ccMinor),
		"sms=" + strconv.Itoa(d.sms),
		"tensor-cores", "tf32",
		"ptx=" + ptx.Target,
		"driver=" + driverVersion(),
	}
	d.info = core.DeviceInfo{
		ID: id, Backend: Name,
		Name:     fmt.Sprintf("%s (GPU %d)", name, ordinal),
		MemCap:   c,
		MemTotal: total,
		Features: feats,
	}
	return d, nil
}

// driverVersion renders cuDriverGetVersion's 12020 as "12.2".
func driverVersion() string {
	v := cu.Version()
	if v <= 0 {
		return "unknown"
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

// ID returns "cuda:N".
func (d *Device) ID() core.DeviceID { return d.id }

// Info describes the device: the GPU's name and memory, its compute
// capability and SM count, and the kernel configuration (GEMM path and
// SpMM variant). MemCap is the accountant's current cap. GFLOPS and
// MemGBps are left 0 (TestThroughput measures them).
func (d *Device) Info() core.DeviceInfo {
	in := d.info
	in.Features = append([]string(nil), d.info.Features...)
	in.MemCap = d.mem.Stats().Cap
	gemm := "fp32 tiles"
	if d.tf32.Load() {
		gemm = "tf32 tensor cores"
	}
	in.Kernel = fmt.Sprintf("%s PTX JIT for sm_%d%d, gemm %s, spmm %v", ptx.Target, d.ccMajor, d.ccMinor, gemm, SpMMVariant(d.spmm.Load()))
	return in
}

// Kernels returns the device's kernels.
func (d *Device) Kernels() core.Kernels { return d.k }

// CUDAKernels returns the device's kernels as their concrete type, with
// the methods beyond core.Kernels (SpMMBiasAct).
func (d *Device) CUDAKernels() *Kernels { return d.k }

// Mem returns the device's memory accountant.
func (d *Device) Mem() *core.MemAccountant { return d.mem }

// SetTF32 switches GEMM between exact fp32 tiles (false, the default)
// and TF32 tensor cores (true) for later calls.
func (d *Device) SetTF32(on bool) { d.tf32.Store(on) }

// TF32 reports whether GEMM uses TF32 tensor cores.
func (d *Device) TF32() bool { return d.tf32.Load() }

// SetSpMMVariant pins the SpMM kernel for later calls (SpMMAuto: choose
// per graph).
func (d *Device) SetSpMMVariant(v SpMMVariant) { d.spmm.Store(int32(v)) }

// SMs is the GPU's multiprocessor count.
func (d *Device) SMs() int { return d.sms }

// close releases the device (see Backend.Close).
func (d *Device) close() error {
	if d.w == nil {
		return nil
	}
	var err error
	_, err = d.w.close(d.teardown)
	if err != nil {
		return fmt.Errorf("cuda: closing %s: %w", d.id, err)
	}
	return nil
}

// teardown runs on the worker as its last closure: it waits for the
// stream, then frees every buffer, graph copy, cached block and event
// and releases the stream, the modules and the primary context.
func (d *Device) teardown() error {
	var errs []error
	if d.stream != (cu.Stream{}) {
		errs = append(errs, d.stream.Synchronize())
	}
	d.mu.Lock()
	live, graphs, events := d.live, d.graphs, d.events
	d.live, d.graphs, d.events = map[*Buffer]struct{}{}, map[weak.Pointer[core.Graph]]*graphBufs{}, map[*eventHandle]struct{}{}
	d.mu.Unlock()
	for b := range live {
		if b.ptr != 0 {
			errs = append(errs, cu.MemFree(b.ptr))
		}
		if d.mem != nil {
			d.mem.Release(b.bytes)
		}
	}
	for _, gb := range graphs {
		gb.releaseOnWorker(d)
	}
	for h := range events {
		h.mu.Lock()
		h.destroyOnWorker()
		h.mu.Unlock()
	}
	errs = append(errs, d.pool.trim())
	if d.stream != (cu.Stream{}) {
		errs = append(errs, d.stream.Destroy())
	}
	for _, m := range d.mods {
		errs = append(errs, m.Unload())
	}
	d.mods = nil
	errs = append(errs, d.dev.ReleasePrimaryCtx())
	return errors.Join(errs...)
}
