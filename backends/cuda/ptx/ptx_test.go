package ptx

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

// sources returns the kernel source files' base names (without .cu).
func sources(t *testing.T) []string {
	t.Helper()
	cu, err := filepath.Glob(filepath.Join("..", "kernels", "*.cu"))
	if err != nil || len(cu) == 0 {
		t.Fatalf("no ../kernels/*.cu (%v)", err)
	}
	var out []string
	for _, f := range cu {
		out = append(out, strings.TrimSuffix(filepath.Base(f), ".cu"))
	}
	slices.Sort(out)
	return out
}

// TestEmbedded checks that every kernel source has an embedded module
// and nothing else is embedded.
func TestEmbedded(t *testing.T) {
	if got, want := Names(), sources(t); !slices.Equal(got, want) {
		t.Fatalf("embedded modules %v, want one per ../kernels/*.cu: %v", got, want)
	}
	mods := Modules()
	for _, n := range Names() {
		if len(mods[n]) == 0 || !bytes.Equal(mods[n], Module(n)) {
			t.Errorf("module %s: %d bytes from Modules, %d from Module", n, len(mods[n]), len(Module(n)))
		}
	}
	if Module("nope") != nil || Entries("nope") != nil || TargetOf("nope") != "" {
		t.Error("an unknown module is not empty")
	}
}

// TestHeaders checks each module's .version, .target and address size.
func TestHeaders(t *testing.T) {
	ver := regexp.MustCompile(`^[0-9]+\.[0-9]+$`)
	for _, n := range Names() {
		src := Module(n)
		if got := TargetOf(n); got != Target {
			t.Errorf("%s.ptx: .target %q, want %q", n, got, Target)
		}
		if v := ParseVersion(src); !ver.MatchString(v) {
			t.Errorf("%s.ptx: .version %q, want N.M", n, v)
		}
		if a := directive(src, ".address_size"); a != "64" {
			t.Errorf("%s.ptx: .address_size %q, want 64", n, a)
		}
	}
}

// TestKernelsDefined checks that every kernel the backend loads is
// defined by exactly one module, and that every module entry is listed.
func TestKernelsDefined(t *testing.T) {
	where := map[string][]string{}
	for _, n := range Names() {
		for _, e := range Entries(n) {
			where[e] = append(where[e], n)
		}
	}
	seen := map[string]bool{}
	for _, k := range Kernels {
		if seen[k] {
			t.Errorf("Kernels lists %s twice", k)
		}
		seen[k] = true
		switch mods := where[k]; len(mods) {
		case 0:
			t.Errorf("kernel %s (listed in Kernels) is not defined by any module", k)
		case 1:
			if m, ok := Find(k); !ok || m != mods[0] {
				t.Errorf("Find(%s) = %q, %v; want %q", k, m, ok, mods[0])
			}
		default:
			t.Errorf("kernel %s is defined by several modules: %v", k, mods)
		}
	}
	for e, mods := range where {
		if !seen[e] {
			t.Errorf("entry %s of %v is not in Kernels (add it, or remove the kernel)", e, mods)
		}
	}
	if _, ok := Find("no_such_kernel"); ok {
		t.Error("Find found a kernel that does not exist")
	}
}

// TestParams checks that every kernel's parameters are scalars of 4 or 8
// bytes, the only kinds the backend's launcher passes.
func TestParams(t *testing.T) {
	for _, k := range Kernels {
		m, _ := Find(k)
		ps, err := Params(Module(m), k)
		if err != nil {
			t.Errorf("%s: %v", k, err)
			continue
		}
		if len(ps) == 0 {
			t.Errorf("%s: no parameters", k)
		}
		for i, p := range ps {
			if p.Size != 4 && p.Size != 8 {
				t.Errorf("%s: parameter %d (%s .%s) has %d bytes, want 4 or 8", k, i, p.Name, p.Type, p.Size)
			}
			if want := k + "_param_" + strconv.Itoa(i); p.Name != want {
				t.Errorf("%s: parameter %d is named %s, want %s", k, i, p.Name, want)
			}
		}
	}
	// a known signature: adam(i64 n, 6 floats, 4 pointers)
	ps, err := Params(Module("optim"), "adam")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, p := range ps {
		types = append(types, p.Type)
	}
	if got, want := strings.Join(types, " "), "u64 f32 f32 f32 f32 f32 f32 u64 u64 u64 u64"; got != want {
		t.Errorf("adam's parameters: %s, want %s", got, want)
	}
	if _, err := Params(Module("optim"), "no_such_kernel"); err == nil {
		t.Error("Params of a missing entry succeeded")
	}
}

// generateLine matches a directive of gen.go.
var generateLine = regexp.MustCompile(`(?m)^//go:generate nvcc -ptx -arch=(sm_[0-9]+) -O3 \.\./kernels/([a-z0-9_]+)\.cu -o ([a-z0-9_]+)\.ptx$`)

// TestSourcesHavePTX checks that gen.go compiles every kernel source, for
// the target this package declares, into the module of the same name.
func TestSourcesHavePTX(t *testing.T) {
	gen, err := os.ReadFile("gen.go")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range generateLine.FindAllStringSubmatch(string(gen), -1) {
		if m[1] != Target {
			t.Errorf("gen.go compiles %s.cu for %s, want %s", m[2], m[1], Target)
		}
		if m[2] != m[3] {
			t.Errorf("gen.go writes %s.cu to %s.ptx", m[2], m[3])
		}
		got = append(got, m[2])
	}
	slices.Sort(got)
	if want := sources(t); !slices.Equal(got, want) {
		t.Errorf("gen.go compiles %v, want every ../kernels/*.cu: %v", got, want)
	}
	if n := strings.Count(string(gen), "//go:generate"); n != len(got) {
		t.Errorf("gen.go has %d go:generate lines, %d of the expected form", n, len(got))
	}
}

// nvccRelease is the "release 11.8, V11.8.89" part of nvcc's banner and
// of the PTX header.
var nvccRelease = regexp.MustCompile(`release [0-9.]+, V[0-9.]+`)

// TestPTXUpToDate recompiles every kernel source with nvcc and compares
// the result with the committed PTX byte for byte (nvcc's PTX output is
// deterministic). It runs only when nvcc is installed and is the release
// that generated the committed files, and not with -short.
func TestPTXUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("short: not running nvcc")
	}
	nvcc, err := exec.LookPath("nvcc")
	if err != nil {
		t.Skip("nvcc not installed")
	}
	out, err := exec.Command(nvcc, "--version").CombinedOutput()
	if err != nil {
		t.Skipf("nvcc --version: %v", err)
	}
	have := nvccRelease.FindString(string(out))
	for _, n := range Names() {
		want := nvccRelease.FindString(string(Module(n)))
		if have == "" || have != want {
			t.Skipf("nvcc is %q but %s.ptx was generated by %q", have, n, want)
		}
	}
	dir := t.TempDir()
	for _, n := range Names() {
		dst := filepath.Join(dir, n+".ptx")
		cmd := exec.Command(nvcc, "-ptx", "-arch="+Target, "-O3", filepath.Join("..", "kernels", n+".cu"), "-o", dst)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
		}
		got, err := os.ReadFile(dst)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, Module(n)) {
			t.Errorf("%s.ptx is out of date with ../kernels/%s.cu: run go generate ./backends/cuda/ptx", n, n)
		}
	}
}

// TestMapOpValues checks the MAP_* constants of the kernels against
// core.MapOp, the values the backend passes.
func TestMapOpValues(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "kernels", "common.cuh"))
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^#define (MAP_[A-Z_]+) ([0-9]+)$`).FindAllStringSubmatch(string(src), -1) {
		v, _ := strconv.Atoi(m[2])
		defs[m[1]] = v
	}
	if len(defs) != int(core.NumMapOps) {
		t.Errorf("common.cuh defines %d MAP_ constants, core has %d MapOps", len(defs), core.NumMapOps)
	}
	for op := core.MapOp(0); op < core.NumMapOps; op++ {
		name := "MAP_" + strings.ToUpper(op.String())
		if v, ok := defs[name]; !ok || v != int(op) {
			t.Errorf("common.cuh: %s = %d (defined %v), core says %d", name, v, ok, op)
		}
	}
}

func TestParsers(t *testing.T) {
	src := []byte(`//
// .entry commented_out(
.version 7.8
.target sm_90, texmode_independent // comment
.address_size 64

	// .globl	k1
.visible .entry k1(
	.param .u32 k1_param_0,
	.param .f32 k1_param_1, // a float
	.param .u64 k1_param_2
)
{
	ret;
}
.entry k2(.param .s64 k2_param_0, .param .b8 k2_param_1)
.visible .entryk3(
.visible .entry 4bad(
.weak .entry k5(
	.param .align 8 .b8 k5_param_0[16]
)
.visible .entry k6
`)
	if got := ParseTarget(src); got != "sm_90" {
		t.Errorf("ParseTarget = %q, want sm_90", got)
	}
	if got := ParseVersion(src); got != "7.8" {
		t.Errorf("ParseVersion = %q, want 7.8", got)
	}
	if got, want := ParseEntries(src), []string{"k1", "k2", "k5"}; !slices.Equal(got, want) {
		t.Errorf("ParseEntries = %v, want %v", got, want)
	}
	ps, err := Params(src, "k1")
	if err != nil || len(ps) != 3 || ps[0] != (Param{"k1_param_0", "u32", 4}) || ps[1] != (Param{"k1_param_1", "f32", 4}) || ps[2] != (Param{"k1_param_2", "u64", 8}) {
		t.Errorf("Params(k1) = %+v, %v", ps, err)
	}
	ps, err = Params(src, "k2")
	if err != nil || len(ps) != 2 || ps[0].Size != 8 || ps[1].Size != 1 {
		t.Errorf("Params(k2) = %+v, %v", ps, err)
	}
	if _, err := Params(src, "k5"); err == nil {
		t.Error("Params(k5) accepted an array parameter")
	}
	if ParseTarget(nil) != "" || ParseVersion([]byte("x")) != "" || ParseEntries(nil) != nil {
		t.Error("parsers found something in nothing")
	}
}
