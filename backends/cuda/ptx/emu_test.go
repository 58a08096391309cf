package ptx

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

// TestKernelsEmulated runs the CUDA kernels on the CPU: it builds
// ../kernels/emu/check.cpp (the kernels' sources included in a small
// emulation of the CUDA execution model, see cuemu.h) with a C++20
// compiler ($CXX, else g++) and runs each part of it against float64
// references; dropout masks are compared with core.DropoutKeep bit for
// bit. It starts hundreds of threads and takes minutes, so it runs only
// with GNNKIT_CUDA_EMU=1; no GPU or CUDA toolkit is needed.
func TestKernelsEmulated(t *testing.T) {
	if os.Getenv("GNNKIT_CUDA_EMU") != "1" {
		t.Skip("set GNNKIT_CUDA_EMU=1 to run the kernels on the CPU emulator (minutes)")
	}
	cxx := os.Getenv("CXX")
	if cxx == "" {
		cxx = "g++"
	}
	if _, err := exec.LookPath(cxx); err != nil {
		t.Skipf("no C++ compiler: %v", err)
	}
	dir := t.TempDir()
	if err := writeDropoutCases(filepath.Join(dir, "dropout.txt")); err != nil {
		t.Fatal(err)
	}
	emu, err := filepath.Abs(filepath.Join("..", "kernels", "emu"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "check")
	build := exec.Command(cxx, "-std=c++20", "-O1", "-pthread", "-I"+filepath.Join(emu, "fake"), "-I"+emu,
		filepath.Join(emu, "check.cpp"), "-o", bin)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", build.Args, err, out)
	}
	for _, part := range []string{"dropout", "elem", "sddmm", "gemm", "spmm"} {
		t.Run(part, func(t *testing.T) {
			cmd := exec.Command(bin, part)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			t.Logf("%s", out)
			if err != nil {
				t.Errorf("%s: %v", part, err)
			}
		})
	}
}

// writeDropoutCases writes the dropout cases check.cpp reads: per case a
// line "seed p C hasRows n", a line of the R = n/C row ids, and a line of
// n keep bits from core.DropoutKeep(seed, id(r)*C + c, p).
func writeDropoutCases(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, rc := range []struct{ r, c int }{{1, 1}, {37, 29}, {211, 97}} {
		for _, p := range []float32{0, 0.1, 0.5, 0.9, 1} {
			for _, seed := range []uint64{1, 0xdeadbeef, 1<<63 + 12345} {
				for hasRows := range 2 {
					n := rc.r * rc.c
					fmt.Fprintf(w, "%d %v %d %d %d\n", seed, p, rc.c, hasRows, n)
					rows := make([]int, rc.r)
					for r := range rows {
						rows[r] = r
						if hasRows == 1 {
							rows[r] = (r*7919 + 13) % 100003
						}
						fmt.Fprintf(w, "%d ", rows[r])
					}
					fmt.Fprintln(w)
					for i := range n {
						keep := 0
						if core.DropoutKeep(seed, uint64(rows[i/rc.c])*uint64(rc.c)+uint64(i%rc.c), p) {
							keep = 1
						}
						fmt.Fprintf(w, "%d ", keep)
					}
					fmt.Fprintln(w)
				}
			}
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
