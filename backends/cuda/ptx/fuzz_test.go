package ptx

import (
	"bytes"
	"testing"
)

// FuzzParsers feeds arbitrary text to the PTX parsers: they must not
// panic, every entry they report must be an identifier declared in the
// text, and Params of a reported entry must give scalar sizes.
func FuzzParsers(f *testing.F) {
	for _, n := range Names() {
		src := Module(n)
		f.Add(src[:min(len(src), 4096)])
	}
	f.Add([]byte(".version 7.8\n.target sm_80\n.visible .entry k(\n.param .u32 k_param_0\n)\n"))
	f.Add([]byte(".entry k(.param .u64 a, .param .f32 b)"))
	f.Add([]byte(".visible .entry (\n"))
	f.Add([]byte(".entry k(\n.param .align 4 .b8 p[8]\n"))
	f.Add([]byte(".target\n.version\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		_ = ParseTarget(src)
		_ = ParseVersion(src)
		for _, name := range ParseEntries(src) {
			if !isIdent(name) {
				t.Fatalf("entry %q is not an identifier", name)
			}
			if !bytes.Contains(src, []byte(name)) {
				t.Fatalf("entry %q does not occur in the input", name)
			}
			ps, err := Params(src, name)
			if err != nil {
				continue
			}
			for _, p := range ps {
				switch p.Size {
				case 1, 2, 4, 8:
				default:
					t.Fatalf("entry %s: parameter %+v", name, p)
				}
			}
		}
	})
}
