package cpu_test

import (
	"fmt"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
)

// Mean aggregation over a 3-node path graph, then a dense layer.
func Example() {
	b, err := cpu.New(core.BackendOptions{Devices: 1, Threads: 2})
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
	if err := k.SpMM(g, core.ReduceMean, nil, x, h); err != nil {
		panic(err)
	}
	w, _ := dev.Alloc(2, 1)
	_ = dev.Upload(w, []float32{1, 0.1})
	y, _ := dev.Alloc(3, 1)
	if err := k.GEMM(false, false, 1, h, w, 0, y); err != nil {
		panic(err)
	}
	out := make([]float32, 3)
	_ = dev.Download(out, y)
	fmt.Println(dev.ID(), out)
	fmt.Println(dev.Mem().Stats().Used, "bytes in use")
	// Output:
	// cpu:0 [4 4 4]
	// 68 bytes in use
}

// A backend pinned to a kernel variant (here the portable one; Variants
// lists those this machine runs), as benchmarks compare them.
func ExampleNewConfig() {
	b, err := cpu.NewConfig(cpu.Config{BackendOptions: core.BackendOptions{Threads: 1}, Variant: "generic"})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	fmt.Println(b.Device(0).Info().Kernel)
	fmt.Println(cpu.Variants()[len(cpu.Variants())-1])
	// Output:
	// generic (pinned by Config.Variant)
	// generic
}
