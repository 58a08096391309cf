package opencl

import (
	"errors"
	"io/fs"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/gnnkit/gnnkit/core"
)

// cScalar maps the C scalar types of the table to the Go type each must
// be passed as (by kind, and by exact type for handles), with the C size.
var cScalar = map[string]struct {
	kind reflect.Kind
	typ  reflect.Type // exact type, for handles; nil: any type of kind
	size uintptr
}{
	"cl_int":                      {reflect.Int32, nil, 4},
	"cl_uint":                     {reflect.Uint32, nil, 4},
	"cl_bool":                     {reflect.Uint32, nil, 4}, // cl_bool is cl_uint, not C bool
	"cl_platform_info":            {reflect.Uint32, nil, 4},
	"cl_device_info":              {reflect.Uint32, nil, 4},
	"cl_program_build_info":       {reflect.Uint32, nil, 4},
	"cl_device_type":              {reflect.Uint64, nil, 8}, // cl_bitfield is cl_ulong
	"cl_mem_flags":                {reflect.Uint64, nil, 8},
	"cl_command_queue_properties": {reflect.Uint64, nil, 8},
	"cl_context_properties":       {reflect.Uintptr, nil, unsafe.Sizeof(uintptr(0))}, // intptr_t
	"size_t":                      {reflect.Uintptr, nil, unsafe.Sizeof(uintptr(0))},
	"cl_platform_id":              {reflect.Uintptr, reflect.TypeFor[clPlatformID](), unsafe.Sizeof(uintptr(0))},
	"cl_device_id":                {reflect.Uintptr, reflect.TypeFor[clDeviceID](), unsafe.Sizeof(uintptr(0))},
	"cl_context":                  {reflect.Uintptr, reflect.TypeFor[clContext](), unsafe.Sizeof(uintptr(0))},
	"cl_command_queue":            {reflect.Uintptr, reflect.TypeFor[clQueue](), unsafe.Sizeof(uintptr(0))},
	"cl_mem":                      {reflect.Uintptr, reflect.TypeFor[clMem](), unsafe.Sizeof(uintptr(0))},
	"cl_program":                  {reflect.Uintptr, reflect.TypeFor[clProgram](), unsafe.Sizeof(uintptr(0))},
	"cl_kernel":                   {reflect.Uintptr, reflect.TypeFor[clKernel](), unsafe.Sizeof(uintptr(0))},
	"cl_event":                    {reflect.Uintptr, reflect.TypeFor[clEvent](), unsafe.Sizeof(uintptr(0))},
}

// checkCType reports why Go type g cannot carry C type c ("" if it can).
func checkCType(c string, g reflect.Type) string {
	c = strings.TrimSpace(strings.ReplaceAll(c, "const ", ""))
	if base, ok := strings.CutSuffix(c, "*"); ok {
		base = strings.TrimSpace(base)
		switch {
		case base == "void":
			// data or callback pointer: unsafe.Pointer, or uintptr for
			// callbacks and user data we always pass as NULL
			if g.Kind() == reflect.UnsafePointer || g.Kind() == reflect.Uintptr {
				return ""
			}
		case base == "char":
			if g.Kind() == reflect.String {
				return ""
			}
		case strings.HasSuffix(base, "*"):
			if g.Kind() == reflect.UnsafePointer {
				return ""
			}
		default:
			if g.Kind() == reflect.Pointer {
				if why := checkCType(base, g.Elem()); why == "" {
					return ""
				}
			}
		}
		return "a pointer to " + base
	}
	s, ok := cScalar[c]
	if !ok {
		return "an unknown C type " + c
	}
	if g.Kind() != s.kind || g.Size() != s.size || (s.typ != nil && g != s.typ) {
		want := s.kind.String()
		if s.typ != nil {
			want = s.typ.String()
		}
		return want + " (" + c + ")"
	}
	return ""
}

var protoRE = regexp.MustCompile(`^(\w+)\s+(\w+)\((.*)\)$`)

// TestSignatureTable checks every Go function variable against the C
// prototype beside it: argument count, and for each argument and the
// result the Go type's kind and size (cl_bitfield is uint64, cl_bool
// uint32, size_t uintptr, handles their own named types).
func TestSignatureTable(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range clTable {
		t.Run(e.name, func(t *testing.T) {
			if seen[e.name] {
				t.Fatalf("%s listed twice", e.name)
			}
			seen[e.name] = true
			m := protoRE.FindStringSubmatch(e.proto)
			if m == nil {
				t.Fatalf("cannot parse prototype %q", e.proto)
			}
			ret, name, params := m[1], m[2], strings.Split(m[3], ",")
			if name != e.name {
				t.Errorf("prototype names %s", name)
			}
			ft := reflect.TypeOf(e.fptr).Elem()
			if ft.Kind() != reflect.Func {
				t.Fatalf("fptr is %v, want a pointer to a func", ft)
			}
			if ft.NumIn() != len(params) {
				t.Fatalf("Go function has %d arguments, C has %d", ft.NumIn(), len(params))
			}
			for i, p := range params {
				p = strings.TrimSpace(p)
				// drop the parameter name: the last identifier
				cut := strings.LastIndexFunc(p, func(r rune) bool { return r == ' ' || r == '*' })
				ctype := strings.TrimSpace(p[:cut+1])
				if why := checkCType(ctype, ft.In(i)); why != "" {
					t.Errorf("argument %d (%s): Go type %v, want %s", i, p, ft.In(i), why)
				}
			}
			if ft.NumOut() != 1 {
				t.Fatalf("Go function has %d results, want 1", ft.NumOut())
			}
			if why := checkCType(ret, ft.Out(0)); why != "" {
				t.Errorf("result: Go type %v, want %s", ft.Out(0), why)
			}
		})
	}
}

// TestCheckCType makes sure the checker itself rejects the classic
// mistakes.
func TestCheckCType(t *testing.T) {
	bad := []struct {
		c string
		g reflect.Type
	}{
		{"cl_device_type", reflect.TypeFor[uint32]()}, // cl_bitfield as 32-bit
		{"cl_mem_flags", reflect.TypeFor[uintptr]()},  // right size on 64-bit, wrong kind
		{"cl_bool", reflect.TypeFor[bool]()},
		{"size_t", reflect.TypeFor[uint32]()},
		{"cl_mem", reflect.TypeFor[clKernel]()},
		{"cl_uint *", reflect.TypeFor[*uint64]()},
		{"const char *", reflect.TypeFor[*byte]()},
		{"cl_float", reflect.TypeFor[float32]()},
	}
	for _, b := range bad {
		if checkCType(b.c, b.g) == "" {
			t.Errorf("checkCType(%q, %v) accepted a wrong type", b.c, b.g)
		}
	}
	if why := checkCType("const cl_event *", reflect.TypeFor[*clEvent]()); why != "" {
		t.Errorf("const cl_event * as *clEvent: %s", why)
	}
}

// TestLibrarySymbols checks that loading fills in every entry point.
func TestLibrarySymbols(t *testing.T) {
	if _, err := loadLibrary(); err != nil {
		t.Skip(err)
	}
	for _, e := range clTable {
		if reflect.ValueOf(e.fptr).Elem().IsNil() {
			t.Errorf("%s was not loaded", e.name)
		}
	}
}

// TestKernelFilesListed checks that kernelFiles names every embedded
// source once, and that the build options define every core.MapOp.
func TestKernelFilesListed(t *testing.T) {
	ents, err := fs.ReadDir(kernelFS, "kernels")
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, e := range ents {
		have = append(have, e.Name())
	}
	want := slices.Clone(kernelFiles)
	slices.Sort(want)
	if !slices.Equal(have, want) {
		t.Errorf("kernels/ holds %v, kernelFiles lists %v", have, kernelFiles)
	}
	src := programSource()
	opts := buildOptions(tile{16, 2}, tile{64, 8}, true)
	for op := core.MapOp(0); op < core.NumMapOps; op++ {
		def := mapDefine(op)
		if !strings.Contains(opts, "-D"+def+"=") {
			t.Errorf("build options lack %s", def)
		}
		if !strings.Contains(src, "case "+def+":") {
			t.Errorf("map_op has no case for %s", def)
		}
	}
}

func TestGroupByRow(t *testing.T) {
	for _, tc := range []struct {
		idx  []int32
		rows int
	}{
		{[]int32{4, 0, 4, 4, 1, 0, 5}, 6},
		{[]int32{3, 3, 3}, 4},
		{[]int32{9, 2, 9}, 1 << 20}, // sparse: the sorting path
		{[]int32{0}, 1},
	} {
		trow, toff, list := groupByRow(tc.idx, tc.rows)
		if len(toff) != len(trow)+1 || toff[0] != 0 || int(toff[len(trow)]) != len(tc.idx) {
			t.Fatalf("%v: offsets %v for rows %v", tc.idx, toff, trow)
		}
		var got []int32
		for k, r := range trow {
			if k > 0 && trow[k-1] >= r {
				t.Errorf("%v: rows %v not increasing", tc.idx, trow)
			}
			for q := toff[k]; q < toff[k+1]; q++ {
				p := list[q]
				if tc.idx[p] != r {
					t.Errorf("%v: position %d listed under row %d", tc.idx, p, r)
				}
				if q > toff[k] && list[q-1] >= p {
					t.Errorf("%v: positions of row %d out of order", tc.idx, r)
				}
				got = append(got, p)
			}
		}
		slices.Sort(got)
		for q := range got {
			if got[q] != int32(q) {
				t.Fatalf("%v: positions %v, want each once", tc.idx, got)
			}
		}
	}
}

func TestParseCVersion(t *testing.T) {
	for s, want := range map[string][2]int{
		"OpenCL C 1.2 PoCL": {1, 2}, "OpenCL C 3.0 ": {3, 0}, "OpenCL C 1.1": {1, 1}, "nonsense": {0, 0},
	} {
		if a, b := parseCVersion(s); a != want[0] || b != want[1] {
			t.Errorf("parseCVersion(%q) = %d.%d, want %d.%d", s, a, b, want[0], want[1])
		}
	}
}

// TestBuildErrorLog builds broken source and checks that the error
// carries the compiler's log and the CL status.
func TestBuildErrorLog(t *testing.T) {
	b, err := New(core.BackendOptions{})
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d := b.devs[0]
	prog := d.prog
	err = d.buildSource("#line 1 \"broken.cl\"\n__kernel void f(__global float *x) { x[0] = undefined_name; }\n", "-cl-std=CL1.2")
	d.prog = prog
	var be *BuildError
	if !errors.As(err, &be) {
		t.Fatalf("build of broken source: %v, want a *BuildError", err)
	}
	var ce *Error
	if !errors.As(err, &ce) || ce.Code != clBuildProgramFailure {
		t.Errorf("build error %v does not wrap CL_BUILD_PROGRAM_FAILURE", err)
	}
	if !strings.Contains(be.Log, "undefined_name") || !strings.Contains(err.Error(), "build log") {
		t.Errorf("build error lacks the compiler log: %v", err)
	}
}

// TestGraphCache checks that a graph is uploaded once per device,
// charged to the accountant, dropped when the graph is collected and
// released at Close.
func TestGraphCache(t *testing.T) {
	b, err := New(core.BackendOptions{})
	if errors.Is(err, ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	d := b.devs[0]
	x, _ := d.Alloc(100, 4)
	out, _ := d.Alloc(100, 4)
	cached := func() int {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.graphs)
	}
	base := d.mem.Stats().Used
	func() {
		g, err := core.FromEdges(100, 100, []int32{0, 1, 2, 3}, []int32{1, 2, 3, 4})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := d.k.SpMM(g, core.ReduceSum, nil, x, out); err != nil {
				t.Fatal(err)
			}
			if err := d.k.SpMM(g.Reverse(), core.ReduceSum, nil, x, out); err != nil {
				t.Fatal(err)
			}
		}
		if n := cached(); n != 2 {
			t.Errorf("%d graphs cached after kernels on g and its reverse, want 2", n)
		}
		// offsets (101) + indices (4), for g and for its reverse (+ ids)
		if used := d.mem.Stats().Used - base; used != (101+4)*4+(101+4+4)*4 {
			t.Errorf("graph structure charged %d bytes", used)
		}
	}()
	for i := 0; cached() > 0 && i < 200; i++ {
		runtimeGC()
	}
	if n := cached(); n != 0 {
		t.Errorf("%d graphs still cached after they were collected", n)
	}
	if used := d.mem.Stats().Used; used != base {
		t.Errorf("after eviction %d bytes in use, want %d", used, base)
	}
	g, _ := core.FromEdges(100, 100, []int32{5}, []int32{6})
	if err := d.k.SDDMM(g, core.EdgeAdd, x, x, x); err == nil {
		t.Error("SDDMM with a 100-row output for 1 edge succeeded")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if used := d.mem.Stats().Used; used != 0 {
		t.Errorf("after Close %d bytes in use, want 0", used)
	}
}

func runtimeGC() {
	runtime.GC()
	time.Sleep(time.Millisecond)
}
