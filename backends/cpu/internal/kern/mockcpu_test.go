package kern

import (
	"strings"
	"testing"
)

// TestChooseMockCPU checks dispatch against mocked feature sets: the
// registry as compiled on amd64 (avx512, avx2, generic), whatever this
// machine is.
func TestChooseMockCPU(t *testing.T) {
	reg := []Variant{
		{Name: "avx512", requires: func(f Features) (bool, string) {
			return f.AVX512F && f.AVX512DQ && f.AVX2 && f.FMA3 && f.BMI2, "AVX-512F"
		}},
		{Name: "avx2", requires: func(f Features) (bool, string) { return f.AVX2 && f.FMA3, "AVX2+FMA3" }},
		Generic,
	}
	zen3 := Features{AVX2: true, FMA3: true, BMI2: true}
	zen4 := Features{AVX2: true, FMA3: true, BMI2: true, AVX512F: true, AVX512DQ: true}
	old := Features{} // e.g. a pre-Haswell x86 or a VM hiding AVX
	noFMA := Features{AVX2: true}
	for _, tc := range []struct {
		name   string
		f      Features
		pin    string
		want   string
		reason string
	}{
		{"zen4 best", zen4, "", "avx512", "best of avx512, avx2, generic"},
		{"zen3 best", zen3, "", "avx2", "avx512 needs AVX-512F"},
		{"no avx", old, "", "generic", "avx2 needs AVX2+FMA3"},
		{"avx2 without fma", noFMA, "", "generic", "avx2 needs"},
		{"zen4 pin avx2", zen4, "avx2", "avx2", "pinned by GNN_CPU"},
		{"zen4 pin generic", zen4, " Generic ", "generic", "pinned by GNN_CPU"},
		{"zen3 pin avx512", zen3, "avx512", "avx2", "GNN_CPU=avx512 is not supported by this CPU: it lacks AVX-512F"},
		{"old pin avx2", old, "avx2", "generic", "GNN_CPU=avx2 is not supported"},
		{"unknown pin", zen4, "avx9000", "avx512", "GNN_CPU=avx9000 is not built into this binary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, why := choose(tc.pin, tc.f, reg, EnvVar)
			if v.Name != tc.want || !strings.Contains(why, tc.reason) || !strings.HasPrefix(why, tc.want+" (") {
				t.Errorf("choose(%q) = %s, %q; want %s, ...%s...", tc.pin, v.Name, why, tc.want, tc.reason)
			}
		})
	}
	// purego / non-amd64 builds register generic alone
	v, why := choose("", zen4, []Variant{Generic}, EnvVar)
	if v.Name != "generic" || !strings.Contains(why, "generic (") {
		t.Errorf("generic-only registry: %s, %q", v.Name, why)
	}
}

// TestRegistry checks the compiled-in registry: generic is last and
// always usable, names are unique, and the variant Choose("", "") picks is
// usable on this machine.
func TestRegistry(t *testing.T) {
	vs := Variants()
	if last := vs[len(vs)-1]; last.Name != "generic" || !last.Usable() {
		t.Fatalf("last variant %q, want a usable generic", last.Name)
	}
	seen := map[string]bool{}
	for _, v := range vs {
		if seen[v.Name] {
			t.Errorf("duplicate variant %q", v.Name)
		}
		seen[v.Name] = true
		if got, ok := Lookup(v.Name); !ok || got.Name != v.Name {
			t.Errorf("Lookup(%q) failed", v.Name)
		}
	}
	best, why := Choose("", "")
	if !best.Usable() {
		t.Errorf("Choose picked %s (%s), which this CPU cannot run", best.Name, why)
	}
	t.Logf("this machine: %s; features %+v", why, HostFeatures())
	for _, v := range vs {
		got, why := Choose(v.Name, "")
		if v.Usable() && got.Name != v.Name {
			t.Errorf("Choose(%q) = %s (%s)", v.Name, got.Name, why)
		}
	}
}
