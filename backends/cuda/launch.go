//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gnnkit/gnnkit/backends/cuda/ptx"
)

// kernelFn is a loaded kernel with its PTX parameter list.
type kernelFn struct {
	name   string
	fn     cu.Function
	params []ptx.Param
}

// loadKernels loads every embedded PTX module (the driver JIT-compiles
// sm_80 PTX for the device, caching the result on disk) and looks up
// exactly the kernels ptx.Kernels lists. Worker only.
func (d *Device) loadKernels() error {
	mods := map[string]cu.Module{}
	for _, name := range ptx.Names() {
		src := ptx.Module(name)
		log := &cu.JITErrorLogBuffer{Buffer: make([]byte, 1<<14)}
		m, err := cu.LoadDataEx(string(src), log)
		if err != nil {
			msg := strings.TrimRight(string(log.Buffer), "\x00")
			return fmt.Errorf("loading PTX module %s (%s, JIT for sm_%d%d): %w\n%s", name, ptx.TargetOf(name), d.ccMajor, d.ccMinor, err, msg)
		}
		d.mods = append(d.mods, m)
		mods[name] = m
	}
	for _, k := range ptx.Kernels {
		mod, ok := ptx.Find(k)
		if !ok {
			return fmt.Errorf("kernel %s is in no embedded PTX module", k)
		}
		fn, err := mods[mod].Function(k)
		if err != nil {
			return fmt.Errorf("kernel %s of module %s: %w", k, mod, err)
		}
		ps, err := ptx.Params(ptx.Module(mod), k)
		if err != nil {
			return err
		}
		d.fns[k] = &kernelFn{name: k, fn: fn, params: ps}
	}
	return nil
}

// dim is a launch geometry: grid (x, y) blocks of block threads (1-D
// blocks; every kernel is written for blockDim.y == blockDim.z == 1).
type dim struct {
	gx, gy int
	block  int
}

// maxGrid caps grid-stride launches at 32 blocks of 256 per SM: enough
// to fill the GPU several times over (every such kernel loops).
func (d *Device) maxGrid() int64 { return int64(d.sms) * 32 }

// threads is a grid-stride launch of n threads in blocks of 256.
func (d *Device) threads(n int64) dim {
	return dim{gx: int(min((n+255)/256, d.maxGrid())), gy: 1, block: 256}
}

// warps is a grid-stride launch of n warps, 8 per block of 256.
func (d *Device) warps(n int64) dim {
	return dim{gx: int(min((n+7)/8, d.maxGrid())), gy: 1, block: 256}
}

// errArgs reports a launch whose arguments do not match the kernel's
// parameters: a bug in this package, never the caller's input.
var errArgs = errors.New("cuda: kernel arguments do not match the PTX parameters")

// packArg converts one launch argument into the 8-byte slot the driver
// reads it from (cu.Function.Launch reads 8 bytes per argument; the
// driver then takes the parameter's size from the slot's start, which on
// little-endian machines is the value). It checks the Go type against the
// PTX parameter: int32/uint32 for .u32/.s32, int64/uint64 and device
// pointers (cu.DevicePtr, *Buffer, temp) for .u64/.s64, float32 for .f32.
func packArg(a any, p ptx.Param) (uint64, error) {
	bad := func() (uint64, error) {
		return 0, fmt.Errorf("%w: %T for .%s %s", errArgs, a, p.Type, p.Name)
	}
	switch v := a.(type) {
	case int32:
		if p.Type != "u32" && p.Type != "s32" {
			return bad()
		}
		return uint64(uint32(v)), nil
	case uint32:
		if p.Type != "u32" && p.Type != "s32" {
			return bad()
		}
		return uint64(v), nil
	case float32:
		if p.Type != "f32" {
			return bad()
		}
		return uint64(math.Float32bits(v)), nil
	case int64:
		if p.Type != "u64" && p.Type != "s64" {
			return bad()
		}
		return uint64(v), nil
	case uint64:
		if p.Type != "u64" && p.Type != "s64" {
			return bad()
		}
		return v, nil
	case cu.DevicePtr:
		if p.Type != "u64" {
			return bad()
		}
		return uint64(v), nil
	case *Buffer:
		if p.Type != "u64" {
			return bad()
		}
		if v == nil {
			return 0, nil
		}
		return uint64(v.ptr), nil
	case temp:
		if p.Type != "u64" {
			return bad()
		}
		return uint64(v.ptr), nil
	}
	return bad()
}

// launch queues kernel name on the device's stream (worker only). A
// geometry with no blocks queues nothing.
func (d *Device) launch(name string, g dim, args ...any) error {
	if g.gx <= 0 || g.gy <= 0 || g.block <= 0 {
		return nil
	}
	k := d.fns[name]
	if k == nil {
		return fmt.Errorf("cuda: %s: kernel %s is not loaded", d.id, name)
	}
	if len(args) != len(k.params) {
		return fmt.Errorf("%w: %s takes %d arguments, got %d", errArgs, name, len(k.params), len(args))
	}
	slots := make([]uint64, len(args))
	ptrs := make([]unsafe.Pointer, len(args))
	for i, a := range args {
		v, err := packArg(a, k.params[i])
		if err != nil {
			return fmt.Errorf("cuda: %s: kernel %s argument %d: %w", d.id, name, i, err)
		}
		slots[i] = v
		ptrs[i] = unsafe.Pointer(&slots[i])
	}
	if err := k.fn.Launch(g.gx, g.gy, 1, g.block, 1, 1, 0, d.stream, ptrs); err != nil {
		return fmt.Errorf("cuda: %s: kernel %s (grid %dx%d, block %d): %w", d.id, name, g.gx, g.gy, g.block, err)
	}
	return nil
}
