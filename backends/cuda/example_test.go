//go:build cuda

package cuda_test

import (
	"fmt"

	"github.com/gnnkit/gnnkit/backends/cuda"
	"github.com/gnnkit/gnnkit/core"
)

// A mean aggregation over a 3-node path graph, then a linear layer, on
// the first GPU.
func Example() {
	b, err := cuda.New(core.BackendOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	dev := b.Devices()[0]
	k := dev.Kernels()
	g, _ := core.Undirected(3, []int32{0, 1}, []int32{1, 2})
	x, _ := dev.Alloc(3, 2)
	_ = dev.Upload(x, []float32{1, 10, 2, 20, 3, 30})
	h, _ := dev.Alloc(3, 2)
	_ = k.SpMM(g, core.ReduceMean, nil, x, h)
	w, _ := dev.Alloc(2, 1)
	_ = dev.Upload(w, []float32{1, 0.1})
	y, _ := dev.Alloc(3, 1)
	_ = k.GEMM(false, false, 1, h, w, 0, y)
	out := make([]float32, 3)
	_ = dev.Download(out, y)
	fmt.Println(dev.ID(), out)
	// Output: cuda:0 [4 4 4]
}
