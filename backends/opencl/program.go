package opencl

import (
	"embed"
	"fmt"
	"math"
	"runtime"
	"strings"
	"unsafe"

	"github.com/gnnkit/gnnkit/core"
)

// kernelFS holds the OpenCL C sources, built at run time by the driver
// (there is no offline compiler step: OpenCL takes source).
//
//go:embed kernels/*.cl
var kernelFS embed.FS

// kernelFiles is the order the sources are concatenated in (common.cl
// first); TestKernelFilesListed checks it names every file.
var kernelFiles = []string{"common.cl", "gemm.cl", "graph.cl", "elem.cl", "loss.cl", "optim.cl"}

// maxElems bounds tensor sizes: kernels index with int.
const maxElems = math.MaxInt32

// programSource concatenates the kernel files with #line markers, so
// build logs name the file and line.
func programSource() string {
	var sb strings.Builder
	for _, f := range kernelFiles {
		src, err := kernelFS.ReadFile("kernels/" + f)
		if err != nil {
			panic("opencl: embedded kernel source missing: " + f) // a build of this package is broken
		}
		fmt.Fprintf(&sb, "#line 1 \"%s\"\n", f)
		sb.Write(src)
		sb.WriteString("\n")
	}
	return sb.String()
}

// mapDefine is the preprocessor name of a core.MapOp: MAP_RELU_GRAD.
func mapDefine(op core.MapOp) string { return "MAP_" + strings.ToUpper(op.String()) }

// buildOptions are the compiler options for a device: the GEMM tilings,
// the core.MapOp values (so kernels and core cannot drift apart) and
// fp64.
func buildOptions(small, large tile, fp64 bool) string {
	opts := []string{"-cl-std=CL1.2",
		fmt.Sprintf("-DGEMM_TS_S=%d -DGEMM_WPT_S=%d", small.ts, small.wpt),
		fmt.Sprintf("-DGEMM_TS_L=%d -DGEMM_WPT_L=%d", large.ts, large.wpt)}
	if fp64 {
		opts = append(opts, "-DGNN_FP64")
	}
	for op := core.MapOp(0); op < core.NumMapOps; op++ {
		opts = append(opts, fmt.Sprintf("-D%s=%d", mapDefine(op), op))
	}
	return strings.Join(opts, " ")
}

// BuildError is a failed clBuildProgram, with the compiler's log.
type BuildError struct {
	Device  core.DeviceID
	Name    string // the device's name
	Options string
	Log     string
	Err     error // the *Error of clBuildProgram
}

func (e *BuildError) Error() string {
	return fmt.Sprintf("opencl: building kernels for %s (%s): %v\nbuild options: %s\nbuild log:\n%s",
		e.Device, e.Name, e.Err, e.Options, strings.TrimSpace(e.Log))
}

func (e *BuildError) Unwrap() error { return e.Err }

// build compiles the program for the device once; kernel objects are
// created on first use and cached.
func (d *Device) build() error {
	return d.buildSource(programSource(), buildOptions(d.small, d.large, d.phys.fp64))
}

func (d *Device) buildSource(src, opts string) error {
	csrc := append([]byte(src), 0)
	ptrs := []*byte{&csrc[0]}
	lens := []uintptr{uintptr(len(src))}
	var code int32
	p := clCreateProgramWithSource(d.ctx, 1, unsafe.Pointer(&ptrs[0]), &lens[0], &code)
	runtime.KeepAlive(csrc)
	runtime.KeepAlive(ptrs)
	if err := check("clCreateProgramWithSource", code); err != nil {
		return fmt.Errorf("opencl: %s: %w", d.id, err)
	}
	if code := clBuildProgram(p, 1, &d.phys.id, opts, 0, 0); code != clSuccess {
		log := programLog(p, d.phys.id)
		clReleaseProgram(p)
		return &BuildError{Device: d.id, Name: d.phys.name, Options: opts, Log: log, Err: check("clBuildProgram", code)}
	}
	d.prog = p
	return nil
}

func programLog(p clProgram, dev clDeviceID) string {
	var n uintptr
	if clGetProgramBuildInfo(p, dev, clProgramBuildLog, 0, nil, &n) != clSuccess || n == 0 {
		return ""
	}
	buf := make([]byte, n)
	if clGetProgramBuildInfo(p, dev, clProgramBuildLog, n, unsafe.Pointer(&buf[0]), nil) != clSuccess {
		return ""
	}
	return strings.TrimRight(string(buf), "\x00")
}

// kernel returns the cached kernel object for name (launchMu held).
func (d *Device) kernel(name string) (clKernel, error) {
	if k, ok := d.kernels[name]; ok {
		return k, nil
	}
	var code int32
	k := clCreateKernel(d.prog, name, &code)
	if err := check("clCreateKernel", code); err != nil {
		return 0, fmt.Errorf("opencl: %s: kernel %s: %w", d.id, name, err)
	}
	d.kernels[name] = k
	return k, nil
}

// grid is an NDRange: global sizes per dimension (1 or 2 used) and an
// optional work-group size (0: the driver's choice).
type grid struct {
	global [2]int
	dims   int
	local  [2]int
}

func grid1(n int) grid    { return grid{global: [2]int{n, 1}, dims: 1} }
func grid2(x, y int) grid { return grid{global: [2]int{x, y}, dims: 2} }

// launch sets the kernel's arguments and enqueues it. Arguments are int
// (passed as cl_int), int32, uint32, float32, uint64 (cl_ulong), bool
// (cl_int 0/1), clMem or *Buffer. A grid with no work enqueues nothing.
func (d *Device) launch(name string, g grid, args ...any) error {
	for i := range g.dims {
		if g.global[i] <= 0 {
			return nil
		}
	}
	d.launchMu.Lock()
	defer d.launchMu.Unlock()
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return errClosed
	}
	k, err := d.kernel(name)
	if err != nil {
		return err
	}
	for i, a := range args {
		if err := setArg(k, uint32(i), a); err != nil {
			return fmt.Errorf("opencl: %s: kernel %s argument %d: %w", d.id, name, i, err)
		}
	}
	var gws, lws [2]uintptr
	var lp *uintptr
	for i := range g.dims {
		n := g.global[i]
		if l := g.local[i]; l > 0 {
			n = (n + l - 1) / l * l
			lws[i] = uintptr(l)
			lp = &lws[0]
		}
		gws[i] = uintptr(n)
	}
	if err := check("clEnqueueNDRangeKernel", clEnqueueNDRangeKernel(d.q, k, uint32(g.dims), nil, &gws[0], lp, 0, nil, nil)); err != nil {
		return fmt.Errorf("opencl: %s: kernel %s: %w", d.id, name, err)
	}
	return nil
}

func setArg(k clKernel, i uint32, a any) error {
	switch v := a.(type) {
	case int:
		if v < math.MinInt32 || v > math.MaxInt32 {
			return fmt.Errorf("%d does not fit a cl_int", v)
		}
		x := int32(v)
		return check("clSetKernelArg", clSetKernelArg(k, i, 4, unsafe.Pointer(&x)))
	case bool:
		var x int32
		if v {
			x = 1
		}
		return check("clSetKernelArg", clSetKernelArg(k, i, 4, unsafe.Pointer(&x)))
	case int32:
		return check("clSetKernelArg", clSetKernelArg(k, i, 4, unsafe.Pointer(&v)))
	case uint32:
		return check("clSetKernelArg", clSetKernelArg(k, i, 4, unsafe.Pointer(&v)))
	case float32:
		return check("clSetKernelArg", clSetKernelArg(k, i, 4, unsafe.Pointer(&v)))
	case uint64:
		return check("clSetKernelArg", clSetKernelArg(k, i, 8, unsafe.Pointer(&v)))
	case clMem:
		return check("clSetKernelArg", clSetKernelArg(k, i, unsafe.Sizeof(v), unsafe.Pointer(&v)))
	case *Buffer:
		m := v.mem
		return check("clSetKernelArg", clSetKernelArg(k, i, unsafe.Sizeof(m), unsafe.Pointer(&m)))
	}
	return fmt.Errorf("unsupported argument type %T", a)
}

// temp is a short-lived device buffer (host index arrays, partial sums),
// charged to the accountant while the kernel call that made it runs.
// OpenCL defers the release of a buffer until the work queued on it is
// done, so it can be freed right after the enqueue.
type temp struct {
	mem   clMem
	bytes int64
}

// tempInt32 uploads host int32s (copied at creation, no queue involved).
func (d *Device) tempInt32(what string, v []int32) (temp, error) {
	var p unsafe.Pointer
	if len(v) > 0 {
		p = unsafe.Pointer(&v[0])
	}
	t, err := d.newTemp(what, int64(len(v))*4, p)
	runtime.KeepAlive(v)
	return t, err
}

func (d *Device) newTemp(what string, bytes int64, host unsafe.Pointer) (temp, error) {
	if err := d.mem.Reserve(bytes, what); err != nil {
		return temp{}, fmt.Errorf("opencl: %s: %w", what, err)
	}
	flags := clMemReadWrite
	if host != nil {
		flags = clMemReadOnly
	}
	m, err := d.createBuffer(flags, bytes, host)
	if err != nil {
		d.mem.Release(bytes)
		return temp{}, err
	}
	return temp{mem: m, bytes: bytes}, nil
}

func (d *Device) freeTemp(t temp) {
	if t.mem != 0 {
		clReleaseMemObject(t.mem)
		d.mem.Release(t.bytes)
	}
}

// fill sets every element of b to v.
func (d *Device) fill(b *Buffer, v float32) error {
	if b.n == 0 {
		return nil
	}
	return check("clEnqueueFillBuffer", clEnqueueFillBuffer(d.q, b.mem, unsafe.Pointer(&v), 4, 0, uintptr(b.bytes), 0, nil, nil))
}
