package core

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// DeviceID names a device: "cpu:0", "cuda:1", "opencl:0".
type DeviceID string

// HostDevice is the pseudo-device of plain Go memory (loaded datasets).
const HostDevice DeviceID = "host"

// ParseDeviceID splits "cpu:1" into ("cpu", 1).
func ParseDeviceID(s string) (backend string, index int, err error) {
	b, i, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || b == "" {
		return "", 0, fmt.Errorf("core: device %q: want BACKEND:INDEX, e.g. cpu:0", s)
	}
	n, err := strconv.Atoi(i)
	if err != nil || n < 0 {
		return "", 0, fmt.Errorf("core: device %q: index %q is not a non-negative integer", s, i)
	}
	if c := strconv.Itoa(n); c != i {
		// cuda:01 or cuda:+1 would name cuda:1 under another id
		return "", 0, fmt.Errorf("core: device %q: write the index as %s", s, c)
	}
	return b, n, nil
}

// Backend is a provider of devices (CPU, OpenCL, CUDA). Register a factory
// with RegisterBackend; library users may also call a backend's New.
type Backend interface {
	Name() string
	Devices() []Device
	Close() error
}

// BackendOptions configures a backend; the zero value is useful.
type BackendOptions struct {
	// Devices is the number of logical devices to expose (0: backend default).
	Devices int
	// Threads is the worker threads per device for host backends (0: all cores / Devices).
	Threads int
	// MemCap caps each device's memory in bytes (0: physical or unlimited).
	MemCap int64
}

// DeviceInfo describes a device for schedulers and users.
type DeviceInfo struct {
	ID       DeviceID `json:"id"`
	Backend  string   `json:"backend"`
	Name     string   `json:"name"`
	MemCap   int64    `json:"mem_cap_bytes"`   // the enforced cap (0 = unlimited)
	MemTotal int64    `json:"mem_total_bytes"` // physical memory, if known
	Threads  int      `json:"threads,omitempty"`
	Features []string `json:"features,omitempty"`
	Kernel   string   `json:"kernel_variant,omitempty"` // e.g. "generic", "avx2"
	GFLOPS   float64  `json:"gflops,omitempty"`         // measured GEMM speed, when known
	MemGBps  float64  `json:"mem_gbps,omitempty"`       // measured bandwidth, when known
}

// Device is one compute device with its own memory and kernels.
type Device interface {
	ID() DeviceID
	Info() DeviceInfo
	Kernels() Kernels
	// Alloc returns a zero-filled tensor on the device, charged to its
	// memory accountant. Over the cap it returns an *OOMError.
	Alloc(shape ...int) (*Tensor, error)
	// Free returns a tensor's memory. Freeing nil or a foreign tensor is a no-op.
	Free(t *Tensor)
	// Upload copies host data into t (len(src) == t.Len()).
	Upload(t *Tensor, src []float32) error
	// Download copies t into dst (len(dst) == t.Len()).
	Download(dst []float32, t *Tensor) error
	// NewStream returns an in-order work queue on the device.
	NewStream() Stream
	// Mem reports memory use under the cap.
	Mem() *MemAccountant
}

// UninitAllocator is an optional Device method: a tensor charged like
// Alloc but with unspecified contents, for callers that overwrite every
// element (gathered inputs), saving the zero fill.
type UninitAllocator interface {
	AllocUninit(shape ...int) (*Tensor, error)
}

// Event marks a point in a stream; Wait blocks until it has passed.
type Event interface {
	Wait()
}

// Stream is an in-order queue of work on one device. Host backends run work
// synchronously in the calling goroutine and return completed events.
type Stream interface {
	Record() Event
	Wait(e Event)
	Sync() error
}

// DoneEvent is an Event that has already happened.
type DoneEvent struct{}

func (DoneEvent) Wait() {}

// MemStats is a snapshot of a device's memory accounting.
type MemStats struct {
	Cap, Used, Peak int64
}

// MemAccountant enforces a device memory cap and records the peak. Every
// backend charges every allocation to one; it is safe for concurrent use.
type MemAccountant struct {
	dev             DeviceID
	mu              sync.Mutex
	cap, used, peak int64
}

// NewMemAccountant returns an accountant for dev; cap <= 0 means unlimited.
func NewMemAccountant(dev DeviceID, cap int64) *MemAccountant {
	return &MemAccountant{dev: dev, cap: cap}
}

// Reserve charges n bytes, or returns an *OOMError if that would pass the cap.
func (m *MemAccountant) Reserve(n int64, what string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cap > 0 && n > m.cap-m.used { // (m.used+n could overflow)
		return &OOMError{Device: m.dev, Need: n, Free: m.cap - m.used, Cap: m.cap, Used: m.used, What: what}
	}
	m.used += n
	if m.used > m.peak {
		m.peak = m.used
	}
	return nil
}

// ReserveTensor is Reserve for a tensor of the given shape, its
// description ("tensor [2 3]") formatted only when it does not fit: a
// training step allocates hundreds of tensors.
func (m *MemAccountant) ReserveTensor(n int64, shape []int) error {
	err := m.Reserve(n, "")
	var oom *OOMError
	if errors.As(err, &oom) {
		oom.What = fmt.Sprintf("tensor %v", shape)
	}
	return err
}

// Release returns n bytes.
func (m *MemAccountant) Release(n int64) {
	m.mu.Lock()
	m.used -= n
	if m.used < 0 {
		m.used = 0
	}
	m.mu.Unlock()
}

// Stats returns cap, bytes in use, and the peak since the last ResetPeak.
func (m *MemAccountant) Stats() MemStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return MemStats{Cap: m.cap, Used: m.used, Peak: m.peak}
}

// ResetPeak sets the peak to the bytes now in use.
func (m *MemAccountant) ResetPeak() {
	m.mu.Lock()
	m.peak = m.used
	m.mu.Unlock()
}

// SetCap changes the cap (<= 0: unlimited).
func (m *MemAccountant) SetCap(c int64) {
	m.mu.Lock()
	m.cap = c
	m.mu.Unlock()
}
