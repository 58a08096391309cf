package ptx

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

//go:embed *.ptx
var files embed.FS

// Target is the PTX target every module is compiled for: Ampere, which
// the driver JIT-compiles for newer GPUs (Hopper's sm_90).
const Target = "sm_80"

// Kernels is every kernel entry point backends/cuda loads, by name. The
// backend looks up exactly these (and nothing else) in the embedded
// modules, and TestKernelsDefined checks that each is defined once and
// that every entry of the modules is listed.
var Kernels = []string{
	// gemm.cu: exact fp32 tiles (small, medium, large) and TF32 tensor cores
	"gemm_f32_s_nn", "gemm_f32_s_nt", "gemm_f32_s_tn", "gemm_f32_s_tt",
	"gemm_f32_m_nn", "gemm_f32_m_nt", "gemm_f32_m_tn", "gemm_f32_m_tt",
	"gemm_f32_l_nn", "gemm_f32_l_nt", "gemm_f32_l_tn", "gemm_f32_l_tt",
	"gemm_tf32_nn", "gemm_tf32_nt", "gemm_tf32_tn", "gemm_tf32_tt",
	// graph.cu
	"spmm_warp", "spmm_warp_vec4",
	"spmm_balanced", "spmm_balanced_vec4",
	"spmm_fixup", "spmm_fixup_vec4",
	"csr_rows", "sddmm_add", "sddmm_dot",
	"edge_softmax", "edge_softmax_backward",
	// elem.cu
	"map_op", "reduce_rows_part", "reduce_rows_final", "reduce_cols",
	"dropout", "gather", "scatter_add", "scatter_set", "copy_f32",
	// loss.cu
	"log_softmax", "log_softmax_backward", "nll_pick",
	// optim.cu
	"adam", "sgd",
}

// Names returns the module names (the .ptx files without the extension),
// sorted.
func Names() []string {
	ents, err := fs.ReadDir(files, ".")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".ptx"); ok && !e.IsDir() {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Module returns the PTX text of the named module ("graph" for
// graph.ptx), or nil when there is none. The slice is shared: do not
// modify it.
func Module(name string) []byte {
	b, err := files.ReadFile(path.Clean(name) + ".ptx")
	if err != nil {
		return nil
	}
	return b
}

// Modules returns every embedded module by name. The slices are shared:
// do not modify them.
func Modules() map[string][]byte {
	m := map[string][]byte{}
	for _, n := range Names() {
		m[n] = Module(n)
	}
	return m
}

// Entries returns the kernel entry points the named module defines, in
// file order (nil for an unknown module).
func Entries(module string) []string { return ParseEntries(Module(module)) }

// TargetOf returns the .target of the named module ("" when unknown).
func TargetOf(module string) string { return ParseTarget(Module(module)) }

// Find returns the module that defines kernel entry name.
func Find(name string) (module string, ok bool) {
	for _, n := range Names() {
		for _, e := range Entries(n) {
			if e == name {
				return n, true
			}
		}
	}
	return "", false
}

// directive returns the first operand of the first line of src that
// starts (after blanks) with the directive word, e.g. ".target".
func directive(src []byte, word string) string {
	for line := range bytes.Lines(src) {
		f := strings.Fields(stripComment(string(line)))
		if len(f) >= 2 && f[0] == word {
			return strings.TrimRight(f[1], ",;")
		}
	}
	return ""
}

func stripComment(line string) string {
	if i := strings.Index(line, "//"); i >= 0 {
		return line[:i]
	}
	return line
}

// ParseTarget returns the first operand of src's .target directive
// ("sm_80"), or "" when there is none. A target list such as
// ".target sm_80, texmode_independent" gives its first entry.
func ParseTarget(src []byte) string { return directive(src, ".target") }

// ParseVersion returns the PTX ISA version of src's .version directive
// ("7.8"), or "" when there is none.
func ParseVersion(src []byte) string { return directive(src, ".version") }

// ParseEntries returns the names of the kernels src defines with
// ".visible .entry NAME(" (or ".entry NAME(" at the start of a line), in
// order. Names are PTX identifiers; a declaration cut short (no "(") is
// ignored.
func ParseEntries(src []byte) []string {
	var out []string
	for line := range bytes.Lines(src) {
		if name, ok := entryName(string(line)); ok {
			out = append(out, name)
		}
	}
	return out
}

// entryName parses one line declaring a kernel entry.
func entryName(line string) (string, bool) {
	s := strings.TrimSpace(stripComment(line))
	for _, p := range []string{".visible ", ".weak "} {
		if rest, ok := strings.CutPrefix(s, p); ok {
			s = strings.TrimSpace(rest)
			break
		}
	}
	rest, ok := strings.CutPrefix(s, ".entry")
	if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
		return "", false
	}
	rest = strings.TrimSpace(rest)
	name, _, ok := strings.Cut(rest, "(")
	name = strings.TrimSpace(name)
	if !ok || !isIdent(name) {
		return "", false
	}
	return name, true
}

// isIdent reports whether s is a PTX identifier: a letter followed by
// letters, digits, '_' or '$', or one of '_', '$', '%' followed by at
// least one of those.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	follow := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$'
	}
	c := s[0]
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
	case c == '_', c == '$', c == '%':
		if len(s) == 1 {
			return false
		}
	default:
		return false
	}
	for i := 1; i < len(s); i++ {
		if !follow(s[i]) {
			return false
		}
	}
	return true
}

// Param is one kernel parameter as PTX declares it:
// ".param .u64 NAME" is {Type: "u64", Size: 8}.
type Param struct {
	Name string
	Type string // b8..b64, s8..s64, u8..u64, f16, f32, f64
	Size int    // bytes
}

// Params returns the parameters of kernel entry name in src, in order.
// Only scalar parameters are supported (the backend passes nothing else);
// an .align/array parameter is reported as an error.
func Params(src []byte, name string) ([]Param, error) {
	lines := strings.Split(string(src), "\n")
	for i, line := range lines {
		n, ok := entryName(line)
		if !ok || n != name {
			continue
		}
		// the parameter list runs from after "(" to the matching ")"
		_, after, _ := strings.Cut(line, "(")
		text := after
		for j := i + 1; !strings.Contains(stripComment(text), ")") && j < len(lines); j++ {
			text += "\n" + lines[j]
		}
		body, _, ok := strings.Cut(stripComments(text), ")")
		if !ok {
			return nil, fmt.Errorf("ptx: entry %s: unterminated parameter list", name)
		}
		var ps []Param
		for _, decl := range strings.Split(body, ",") {
			decl = strings.TrimSpace(decl)
			if decl == "" {
				continue
			}
			p, err := parseParam(decl)
			if err != nil {
				return nil, fmt.Errorf("ptx: entry %s: %w", name, err)
			}
			ps = append(ps, p)
		}
		return ps, nil
	}
	return nil, fmt.Errorf("ptx: no entry %s", name)
}

func stripComments(text string) string {
	var sb strings.Builder
	for line := range strings.Lines(text) {
		sb.WriteString(stripComment(line))
		sb.WriteByte('\n')
	}
	return sb.String()
}

// parseParam parses ".param .u32 name".
func parseParam(decl string) (Param, error) {
	f := strings.Fields(decl)
	if len(f) != 3 || f[0] != ".param" || !strings.HasPrefix(f[1], ".") {
		return Param{}, fmt.Errorf("unsupported parameter %q", decl)
	}
	typ := f[1][1:]
	size, ok := scalarSize(typ)
	if !ok {
		return Param{}, fmt.Errorf("unsupported parameter type in %q", decl)
	}
	if !isIdent(f[2]) {
		return Param{}, fmt.Errorf("bad parameter name in %q", decl)
	}
	return Param{Name: f[2], Type: typ, Size: size}, nil
}

// scalarSize is the size in bytes of a PTX scalar type name ("u32": 4).
func scalarSize(t string) (int, bool) {
	if len(t) < 2 {
		return 0, false
	}
	switch t[0] {
	case 'b', 's', 'u', 'f':
	default:
		return 0, false
	}
	switch t[1:] {
	case "8":
		if t[0] == 'f' {
			return 0, false
		}
		return 1, true
	case "16":
		return 2, true
	case "32":
		return 4, true
	case "64":
		return 8, true
	}
	return 0, false
}
