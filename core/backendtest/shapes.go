package backendtest

import (
	"errors"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

// testShapes calls every kernel with tensors that do not fit and checks
// for an error wrapping core.ErrShape, and no panic.
func testShapes(t *testing.T, b core.Backend) {
	e := newEnv(t, b.Devices()[0], 31)
	k := e.k
	m := func(r, c int) *core.Tensor { return e.fill(1, r, c) }
	g, err := core.FromEdges(4, 6, []int32{0, 1, 5, 2, 3}, []int32{0, 0, 1, 3, 3})
	if err != nil {
		t.Fatal(err)
	}
	const E = 5
	cases := []struct {
		name string
		fn   func() error
	}{
		{"GEMM/inner", func() error { return k.GEMM(false, false, 1, m(3, 4), m(5, 2), 0, m(3, 2)) }},
		{"GEMM/inner-transA", func() error { return k.GEMM(true, false, 1, m(3, 4), m(4, 2), 0, m(4, 2)) }},
		{"GEMM/inner-transB", func() error { return k.GEMM(false, true, 1, m(3, 4), m(4, 2), 0, m(3, 4)) }},
		{"GEMM/c-rows", func() error { return k.GEMM(false, false, 1, m(3, 4), m(4, 2), 0, m(2, 2)) }},
		{"GEMM/c-cols", func() error { return k.GEMM(false, false, 1, m(3, 4), m(4, 2), 0, m(3, 3)) }},
		{"GEMM/nil-c", func() error { return k.GEMM(false, false, 1, m(3, 4), m(4, 2), 0, nil) }},
		{"GEMM/nil-a", func() error { return k.GEMM(false, false, 1, nil, m(4, 2), 0, m(3, 2)) }},
		{"SpMM/x-rows", func() error { return k.SpMM(g, core.ReduceSum, nil, m(4, 3), m(4, 3)) }},
		{"SpMM/out-rows", func() error { return k.SpMM(g, core.ReduceSum, nil, m(6, 3), m(6, 3)) }},
		{"SpMM/out-cols", func() error { return k.SpMM(g, core.ReduceSum, nil, m(6, 3), m(4, 2)) }},
		{"SpMM/w-rows", func() error { return k.SpMM(g, core.ReduceSum, m(E-1, 1), m(6, 3), m(4, 3)) }},
		{"SpMM/w-heads", func() error { return k.SpMM(g, core.ReduceMean, m(E, 2), m(6, 3), m(4, 3)) }},
		{"SpMM/nil-x", func() error { return k.SpMM(g, core.ReduceSum, nil, nil, m(4, 3)) }},
		{"SDDMM/a-rows", func() error { return k.SDDMM(g, core.EdgeAdd, m(6, 2), m(6, 2), m(E, 2)) }},
		{"SDDMM/b-rows", func() error { return k.SDDMM(g, core.EdgeAdd, m(4, 2), m(4, 2), m(E, 2)) }},
		{"SDDMM/add-heads", func() error { return k.SDDMM(g, core.EdgeAdd, m(4, 2), m(6, 2), m(E, 3)) }},
		{"SDDMM/dot-heads", func() error { return k.SDDMM(g, core.EdgeDot, m(4, 6), m(6, 6), m(E, 4)) }},
		{"SDDMM/a-b-cols", func() error { return k.SDDMM(g, core.EdgeDot, m(4, 6), m(6, 4), m(E, 2)) }},
		{"SDDMM/out-rows", func() error { return k.SDDMM(g, core.EdgeDot, m(4, 6), m(6, 6), m(E-2, 2)) }},
		{"EdgeSoftmax/rows", func() error { return k.EdgeSoftmax(g, m(E-1, 2), m(E-1, 2)) }},
		{"EdgeSoftmax/out", func() error { return k.EdgeSoftmax(g, m(E, 2), m(E, 1)) }},
		{"EdgeSoftmaxBackward/dy", func() error { return k.EdgeSoftmaxBackward(g, m(E, 2), m(E, 1), m(E, 2)) }},
		{"EdgeSoftmaxBackward/dx", func() error { return k.EdgeSoftmaxBackward(g, m(E, 2), m(E, 2), m(E+1, 2)) }},
		{"Gather/out-rows", func() error { return k.Gather(m(5, 3), []int32{0, 1}, m(3, 3)) }},
		{"Gather/out-cols", func() error { return k.Gather(m(5, 3), []int32{0, 1}, m(2, 2)) }},
		{"ScatterAdd/x-rows", func() error { return k.ScatterAdd(m(3, 3), []int32{0, 1}, m(5, 3)) }},
		{"ScatterAdd/cols", func() error { return k.ScatterAdd(m(2, 3), []int32{0, 1}, m(5, 4)) }},
		{"Map/a-out", func() error { return k.Map(core.MapAdd, m(3, 4), m(3, 4), 0, m(4, 3)) }},
		{"Map/b-rows", func() error { return k.Map(core.MapAdd, m(3, 4), m(2, 4), 0, m(3, 4)) }},
		{"Map/b-cols", func() error { return k.Map(core.MapMul, m(3, 6), m(3, 4), 0, m(3, 6)) }},
		{"Map/nil-b", func() error { return k.Map(core.MapSub, m(3, 4), nil, 0, m(3, 4)) }},
		{"Map/nil-a", func() error { return k.Map(core.MapReLU, nil, nil, 0, m(3, 4)) }},
		{"Map/unary-shape", func() error { return k.Map(core.MapExp, m(3, 4), nil, 0, m(3, 5)) }},
		{"Reduce/rows", func() error { return k.Reduce(core.AxisRows, m(3, 4), m(1, 3)) }},
		{"Reduce/rows-out", func() error { return k.Reduce(core.AxisRows, m(3, 4), m(3, 4)) }},
		{"Reduce/cols-groups", func() error { return k.Reduce(core.AxisCols, m(3, 6), m(3, 4)) }},
		{"Reduce/cols-rows", func() error { return k.Reduce(core.AxisCols, m(3, 6), m(2, 3)) }},
		{"LogSoftmax", func() error { return k.LogSoftmax(m(3, 4), m(3, 5)) }},
		{"LogSoftmaxBackward", func() error { return k.LogSoftmaxBackward(m(3, 4), m(3, 4), m(4, 4)) }},
		{"NLLLoss/grad", func() error {
			_, err := k.NLLLoss(m(3, 4), []int32{0, 1, 2}, []int32{0}, 1, m(3, 3))
			return err
		}},
		{"Dropout/out", func() error { return k.Dropout(m(3, 4), 0.5, 1, nil, m(4, 3), m(3, 4)) }},
		{"Dropout/mask", func() error { return k.Dropout(m(3, 4), 0.5, 1, nil, m(3, 4), m(3, 5)) }},
		{"Adam/g", func() error {
			return k.Adam(m(3, 4), m(3, 5), m(3, 4), m(3, 4), core.AdamParams{LR: 1, Beta1: 0.9, Beta2: 0.99, Step: 1})
		}},
		{"Adam/v", func() error {
			return k.Adam(m(3, 4), m(3, 4), m(3, 4), m(4, 3), core.AdamParams{LR: 1, Beta1: 0.9, Beta2: 0.99, Step: 1})
		}},
		{"SGD/g", func() error { return k.SGD(m(3, 4), m(4, 4), nil, core.SGDParams{LR: 1, Step: 1}) }},
		{"SGD/mom", func() error { return k.SGD(m(3, 4), m(3, 4), m(3, 2), core.SGDParams{LR: 1, Momentum: 0.9, Step: 1}) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := call(t, tc.name, tc.fn)
			if err == nil {
				t.Fatalf("%s succeeded, want an error wrapping core.ErrShape", tc.name)
			}
			if !errors.Is(err, core.ErrShape) {
				t.Errorf("%s: %v; want an error wrapping core.ErrShape", tc.name, err)
			}
		})
	}
}
