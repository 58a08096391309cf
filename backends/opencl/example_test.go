package opencl_test

import (
	"errors"
	"fmt"

	"github.com/gnnkit/gnnkit/backends/opencl"
	"github.com/gnnkit/gnnkit/core"
)

// Mean aggregation over a 3-node path graph, then a dense layer, on the
// first OpenCL device. The example has no Output line, so `go test`
// compiles it but does not run it: its output depends on the machine
// having OpenCL (TestExampleFlow runs the same steps where it does).
func Example() {
	b, err := opencl.New(core.BackendOptions{})
	if errors.Is(err, opencl.ErrUnavailable) {
		fmt.Println(err) // opencl: unavailable (no OpenCL ICD found): ...
		return
	}
	if err != nil {
		panic(err)
	}
	defer b.Close()
	dev := b.Devices()[0]
	k := dev.Kernels()

	g, _ := core.Undirected(3, []int32{0, 1}, []int32{1, 2}) // 0 - 1 - 2
	x, _ := dev.Alloc(3, 2)
	_ = dev.Upload(x, []float32{1, 10, 2, 20, 3, 30})
	h, _ := dev.Alloc(3, 2)
	if err := k.SpMM(g, core.ReduceMean, nil, x, h); err != nil { // uploads g once
		panic(err)
	}
	w, _ := dev.Alloc(2, 1)
	_ = dev.Upload(w, []float32{1, 0.1})
	y, _ := dev.Alloc(3, 1)
	if err := k.GEMM(false, false, 1, h, w, 0, y); err != nil {
		panic(err)
	}
	out := make([]float32, 3)
	_ = dev.Download(out, y) // blocking: sees both kernels
	fmt.Println(dev.ID(), out)
	// opencl:0 [4 4 4]
}
