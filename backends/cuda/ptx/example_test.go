package ptx_test

import (
	"fmt"

	"github.com/gnnkit/gnnkit/backends/cuda/ptx"
)

// The optimizer module's kernels, its target and one kernel's signature.
func Example() {
	fmt.Println(ptx.Entries("optim"), ptx.TargetOf("optim"))
	m, _ := ptx.Find("sgd")
	ps, _ := ptx.Params(ptx.Module(m), "sgd")
	for _, p := range ps {
		fmt.Print(p.Type, " ")
	}
	fmt.Println()
	// Output:
	// [adam sgd] sm_80
	// u64 f32 f32 f32 u32 u32 u64 u64 u64
}
