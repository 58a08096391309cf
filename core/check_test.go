package core

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// mat is a tensor of shape r x c without a buffer: the checks read only
// shapes.
func mat(r, c int) *Tensor { return &Tensor{Shape: []int{r, c}} }

// checkCase is one call of a check: want is nil (accepted) or the
// sentinel the error must wrap, and msg a piece of the message.
type checkCase struct {
	name string
	fn   func() error
	want error
	msg  string
}

func runChecks(t *testing.T, cases []checkCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked: %v", r)
					}
				}()
				err = tc.fn()
			}()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("rejected a valid call: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want one wrapping %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
		})
	}
}

// testGraphs returns a 4 x 6 graph of 5 edges without edge ids and a
// 2 x 3 graph of 2 edges whose ids (3 and 0) need 4 rows.
func testGraphs(t *testing.T) (g, sub *Graph) {
	t.Helper()
	g, err := FromEdges(4, 6, []int32{0, 1, 5, 2, 3}, []int32{0, 0, 1, 3, 3})
	if err != nil {
		t.Fatal(err)
	}
	sub = &Graph{NumDst: 2, NumSrc: 3, Offsets: []int64{0, 1, 2}, Indices: []int32{0, 1}, EIDs: []int32{3, 0}}
	return g, sub
}

func TestCheckGraphAndEdgeRows(t *testing.T) {
	g, sub := testGraphs(t)
	const E = 5
	runChecks(t, []checkCase{
		{"graph/ok", func() error { return CheckGraph("SpMM", g) }, nil, ""},
		{"graph/nil", func() error { return CheckGraph("SpMM", nil) }, ErrShape, "SpMM: graph is nil"},
		{"graph/short-offsets", func() error {
			return CheckGraph("SpMM", &Graph{NumDst: 2, Offsets: []int64{0, 1}, Indices: []int32{0}})
		}, ErrInvalidGraph, "SpMM: malformed CSR"},
		{"graph/last-offset", func() error {
			return CheckGraph("SpMM", &Graph{NumDst: 1, Offsets: []int64{0, 2}, Indices: []int32{0}})
		}, ErrInvalidGraph, "malformed CSR"},
		{"edge/ok", func() error { return CheckEdgeRows("op", "w", g, mat(E, 2), 2) }, nil, ""},
		{"edge/any-cols", func() error { return CheckEdgeRows("op", "w", g, mat(E, 7), -1) }, nil, ""},
		{"edge/nil-graph", func() error { return CheckEdgeRows("op", "w", nil, mat(E, 2), 2) }, ErrShape, "graph is nil"},
		{"edge/nil", func() error { return CheckEdgeRows("op", "w", g, nil, 2) }, ErrShape, "op: w is nil"},
		{"edge/cols", func() error { return CheckEdgeRows("op", "w", g, mat(E, 3), 2) }, ErrShape, "w has 3 columns, want 2"},
		{"edge/rows", func() error { return CheckEdgeRows("op", "w", g, mat(E+1, 2), 2) }, ErrShape, "w has 6 rows, want one per edge (5)"},
		{"edge/eids-ok", func() error { return CheckEdgeRows("op", "s", sub, mat(4, 1), -1) }, nil, ""},
		{"edge/eids-more", func() error { return CheckEdgeRows("op", "s", sub, mat(9, 1), -1) }, nil, ""},
		{"edge/eids-few", func() error { return CheckEdgeRows("op", "s", sub, mat(3, 1), -1) }, ErrShape, "s has 3 rows, but the graph's edge ids need 4"},
	})
}

func TestCheckGEMM(t *testing.T) {
	runChecks(t, []checkCase{
		{"ok", func() error { _, _, _, err := CheckGEMM(false, false, mat(3, 4), mat(4, 2), mat(3, 2)); return err }, nil, ""},
		{"ok-tt", func() error { _, _, _, err := CheckGEMM(true, true, mat(4, 3), mat(2, 4), mat(3, 2)); return err }, nil, ""},
		{"inner", func() error { _, _, _, err := CheckGEMM(false, false, mat(3, 4), mat(5, 2), mat(3, 2)); return err },
			ErrShape, "GEMM: op(a) is 3x4 but op(b) is 5x2 (transA=false, transB=false)"},
		{"inner-transA", func() error { _, _, _, err := CheckGEMM(true, false, mat(3, 4), mat(4, 2), mat(4, 2)); return err },
			ErrShape, "op(a) is 4x3 but op(b) is 4x2 (transA=true, transB=false)"},
		{"c-rows", func() error { _, _, _, err := CheckGEMM(false, false, mat(3, 4), mat(4, 2), mat(2, 2)); return err },
			ErrShape, "GEMM: c is 2x2, want 3x2"},
		{"c-cols-transB", func() error { _, _, _, err := CheckGEMM(false, true, mat(3, 4), mat(2, 4), mat(3, 4)); return err },
			ErrShape, "c is 3x4, want 3x2"},
		{"nil-a", func() error { _, _, _, err := CheckGEMM(false, false, nil, mat(4, 2), mat(3, 2)); return err }, ErrShape, "GEMM: a is nil"},
		{"nil-c", func() error { _, _, _, err := CheckGEMM(false, false, mat(3, 4), mat(4, 2), nil); return err }, ErrShape, "GEMM: c is nil"},
	})
	for _, tc := range []struct {
		ta, tb  bool
		a, b    *Tensor
		m, n, k int
	}{
		{false, false, mat(3, 4), mat(4, 2), 3, 2, 4},
		{true, false, mat(4, 3), mat(4, 2), 3, 2, 4},
		{false, true, mat(3, 4), mat(2, 4), 3, 2, 4},
		{true, true, mat(4, 3), mat(2, 4), 3, 2, 4},
		{false, false, mat(0, 5), mat(5, 0), 0, 0, 5},
	} {
		m, n, k, err := CheckGEMM(tc.ta, tc.tb, tc.a, tc.b, mat(tc.m, tc.n))
		if err != nil || m != tc.m || n != tc.n || k != tc.k {
			t.Errorf("CheckGEMM(%v, %v, %v, %v) = %d, %d, %d, %v; want %d, %d, %d", tc.ta, tc.tb, tc.a.Shape, tc.b.Shape, m, n, k, err, tc.m, tc.n, tc.k)
		}
	}
}

func TestCheckSpMM(t *testing.T) {
	g, sub := testGraphs(t)
	const E = 5
	spmm := func(g *Graph, red Reduce, w, x, out *Tensor) func() error {
		return func() error { _, err := CheckSpMM("SpMM", g, red, w, x, out); return err }
	}
	runChecks(t, []checkCase{
		{"ok", spmm(g, ReduceSum, nil, mat(6, 3), mat(4, 3)), nil, ""},
		{"ok-w", spmm(g, ReduceMean, mat(E, 1), mat(6, 3), mat(4, 3)), nil, ""},
		{"ok-heads", spmm(g, ReduceSum, mat(E, 2), mat(6, 4), mat(4, 4)), nil, ""},
		{"ok-eids", spmm(sub, ReduceSum, mat(4, 1), mat(3, 2), mat(2, 2)), nil, ""},
		{"nil-graph", spmm(nil, ReduceSum, nil, mat(6, 3), mat(4, 3)), ErrShape, "SpMM: graph is nil"},
		{"reduce", spmm(g, Reduce(9), nil, mat(6, 3), mat(4, 3)), ErrShape, "SpMM: unknown reduce Reduce(9)"},
		{"nil-x", spmm(g, ReduceSum, nil, nil, mat(4, 3)), ErrShape, "SpMM: x is nil"},
		{"nil-out", spmm(g, ReduceSum, nil, mat(6, 3), nil), ErrShape, "SpMM: out is nil"},
		{"x-rows", spmm(g, ReduceSum, nil, mat(4, 3), mat(4, 3)), ErrShape, "SpMM: x has 4 rows, want NumSrc=6"},
		{"out-rows", spmm(g, ReduceSum, nil, mat(6, 3), mat(6, 3)), ErrShape, "SpMM: out is 6x3, want 4x3"},
		{"out-cols", spmm(g, ReduceSum, nil, mat(6, 3), mat(4, 2)), ErrShape, "out is 4x2, want 4x3"},
		{"w-rows", spmm(g, ReduceSum, mat(E-1, 1), mat(6, 3), mat(4, 3)), ErrShape, "SpMM: w has 4 rows, want one per edge (5)"},
		{"w-heads", spmm(g, ReduceMean, mat(E, 2), mat(6, 3), mat(4, 3)), ErrShape, "SpMM: w has 2 columns (heads), which do not divide x's 3"},
		{"w-no-heads", spmm(g, ReduceSum, mat(E, 0), mat(6, 3), mat(4, 3)), ErrShape, "w has 0 columns (heads)"},
		{"w-eids-few", spmm(sub, ReduceSum, mat(2, 1), mat(3, 2), mat(2, 2)), ErrShape, "w has 2 rows, but the graph's edge ids need 4"},
	})
	if h, err := CheckSpMM("SpMMBiasAct", g, ReduceSum, nil, mat(6, 3), mat(4, 3)); h != 1 || err != nil {
		t.Errorf("without w: %d heads, %v; want 1", h, err)
	}
	if h, err := CheckSpMM("SpMM", g, ReduceSum, mat(E, 2), mat(6, 4), mat(4, 4)); h != 2 || err != nil {
		t.Errorf("with 2-column w: %d heads, %v; want 2", h, err)
	}
	if _, err := CheckSpMM("SpMMBiasAct", g, ReduceSum, nil, mat(5, 3), mat(4, 3)); err == nil || !strings.Contains(err.Error(), "SpMMBiasAct: x has") {
		t.Errorf("error %v does not name the caller's op", err)
	}
}

func TestCheckEdgeSoftmax(t *testing.T) {
	g, sub := testGraphs(t)
	const E = 5
	runChecks(t, []checkCase{
		{"ok", func() error { return CheckEdgeSoftmax(g, mat(E, 2), mat(E, 2)) }, nil, ""},
		{"ok-eids", func() error { return CheckEdgeSoftmax(sub, mat(5, 2), mat(5, 2)) }, nil, ""},
		{"nil-graph", func() error { return CheckEdgeSoftmax(nil, mat(E, 2), mat(E, 2)) }, ErrShape, "EdgeSoftmax: graph is nil"},
		{"nil-s", func() error { return CheckEdgeSoftmax(g, nil, mat(E, 2)) }, ErrShape, "EdgeSoftmax: s is nil"},
		{"nil-out", func() error { return CheckEdgeSoftmax(g, mat(E, 2), nil) }, ErrShape, "EdgeSoftmax: out is nil"},
		{"rows", func() error { return CheckEdgeSoftmax(g, mat(E-1, 2), mat(E-1, 2)) }, ErrShape, "s has 4 rows, want one per edge (5)"},
		{"out-cols", func() error { return CheckEdgeSoftmax(g, mat(E, 2), mat(E, 1)) }, ErrShape, "out has 1 columns, want 2"},
		{"eids-unequal", func() error { return CheckEdgeSoftmax(sub, mat(4, 2), mat(5, 2)) }, ErrShape, "EdgeSoftmax: s is 4x2 but out is 5x2"},
		{"back/ok", func() error { return CheckEdgeSoftmaxBackward(g, mat(E, 2), mat(E, 2), mat(E, 2)) }, nil, ""},
		{"back/nil-dy", func() error { return CheckEdgeSoftmaxBackward(g, mat(E, 2), nil, mat(E, 2)) }, ErrShape, "EdgeSoftmaxBackward: dy is nil"},
		{"back/y-rows", func() error { return CheckEdgeSoftmaxBackward(g, mat(E+1, 2), mat(E+1, 2), mat(E+1, 2)) }, ErrShape, "y has 6 rows"},
		{"back/dy", func() error { return CheckEdgeSoftmaxBackward(g, mat(E, 2), mat(E, 1), mat(E, 2)) }, ErrShape,
			"EdgeSoftmaxBackward: y is 5x2, dy 5x1, dx 5x2; want all equal"},
		{"back/dx", func() error { return CheckEdgeSoftmaxBackward(g, mat(E, 2), mat(E, 2), mat(E+1, 2)) }, ErrShape, "dx 6x2; want all equal"},
	})
}

func TestCheckGatherScatter(t *testing.T) {
	runChecks(t, []checkCase{
		{"gather/ok", func() error { return CheckGather(mat(5, 3), []int32{4, 0, 4}, mat(3, 3)) }, nil, ""},
		{"gather/empty", func() error { return CheckGather(mat(0, 3), nil, mat(0, 3)) }, nil, ""},
		{"gather/nil-x", func() error { return CheckGather(nil, []int32{0}, mat(1, 3)) }, ErrShape, "Gather: x is nil"},
		{"gather/out-rows", func() error { return CheckGather(mat(5, 3), []int32{0, 1}, mat(3, 3)) }, ErrShape, "Gather: out is 3x3, want 2x3"},
		{"gather/out-cols", func() error { return CheckGather(mat(5, 3), []int32{0, 1}, mat(2, 2)) }, ErrShape, "out is 2x2, want 2x3"},
		{"gather/high", func() error { return CheckGather(mat(5, 3), []int32{0, 5}, mat(2, 3)) }, ErrShape, "Gather: index 5 at position 1 is outside [0,5)"},
		{"gather/negative", func() error { return CheckGather(mat(5, 3), []int32{-1}, mat(1, 3)) }, ErrShape, "index -1 at position 0 is outside [0,5)"},
		{"scatter/ok", func() error { return CheckScatterAdd(mat(3, 2), []int32{1, 1, 0}, mat(2, 2)) }, nil, ""},
		{"scatter/nil-out", func() error { return CheckScatterAdd(mat(3, 2), []int32{1, 1, 0}, nil) }, ErrShape, "ScatterAdd: out is nil"},
		{"scatter/x-rows", func() error { return CheckScatterAdd(mat(3, 3), []int32{0, 1}, mat(5, 3)) }, ErrShape,
			"ScatterAdd: x is 3x3 and out is 5x3, want 2xC and ?xC"},
		{"scatter/cols", func() error { return CheckScatterAdd(mat(2, 3), []int32{0, 1}, mat(5, 4)) }, ErrShape, "x is 2x3 and out is 5x4"},
		{"scatter/high", func() error { return CheckScatterAdd(mat(2, 3), []int32{0, 6}, mat(6, 3)) }, ErrShape, "ScatterAdd: index 6 at position 1 is outside [0,6)"},
	})
}

func TestCheckMap(t *testing.T) {
	mapc := func(op MapOp, a, b, out *Tensor) func() error {
		return func() error { _, _, err := CheckMap(op, a, b, out); return err }
	}
	runChecks(t, []checkCase{
		{"same", mapc(MapAdd, mat(3, 4), mat(3, 4), mat(3, 4)), nil, ""},
		{"bias-row", mapc(MapAdd, mat(3, 4), mat(1, 4), mat(3, 4)), nil, ""},
		{"per-row", mapc(MapMul, mat(3, 4), mat(3, 1), mat(3, 4)), nil, ""},
		{"per-head", mapc(MapMul, mat(3, 6), mat(3, 2), mat(3, 6)), nil, ""},
		{"scalar", mapc(MapSub, mat(3, 4), mat(1, 1), mat(3, 4)), nil, ""},
		{"fill-no-a", mapc(MapFill, nil, nil, mat(3, 4)), nil, ""},
		{"broadcast-no-a", mapc(MapBroadcast, nil, mat(1, 4), mat(3, 4)), nil, ""},
		{"unary-no-b", mapc(MapReLU, mat(3, 4), nil, mat(3, 4)), nil, ""},
		{"empty", mapc(MapAdd, mat(0, 0), mat(0, 0), mat(0, 0)), nil, ""},
		{"unknown", mapc(NumMapOps, mat(3, 4), mat(3, 4), mat(3, 4)), ErrShape, "Map: unknown op MapOp(19)"},
		{"nil-out", mapc(MapAdd, mat(3, 4), mat(3, 4), nil), ErrShape, "Map: out is nil"},
		{"nil-a", mapc(MapReLU, nil, nil, mat(3, 4)), ErrShape, "Map: a is nil"},
		{"nil-b", mapc(MapSub, mat(3, 4), nil, mat(3, 4)), ErrShape, "Map: b is nil"},
		{"a-out", mapc(MapAdd, mat(3, 4), mat(3, 4), mat(4, 3)), ErrShape, "Map: add: a is 3x4 but out is 4x3"},
		{"unary-shape", mapc(MapExp, mat(3, 4), nil, mat(3, 5)), ErrShape, "exp: a is 3x4 but out is 3x5"},
		{"b-rows", mapc(MapAdd, mat(3, 4), mat(2, 4), mat(3, 4)), ErrShape, "Map: add: b has 2 rows, want 3 or 1"},
		{"b-cols", mapc(MapMul, mat(3, 6), mat(3, 4), mat(3, 6)), ErrShape, "Map: mul: b has 4 columns, which do not divide out's 6"},
		{"b-no-cols", mapc(MapMul, mat(3, 6), mat(3, 0), mat(3, 6)), ErrShape, "b has 0 columns"},
	})
	for _, tc := range []struct {
		op          MapOp
		b           *Tensor
		wantR, want int
	}{
		{MapAdd, mat(1, 2), 1, 2},
		{MapAxpy, mat(3, 4), 3, 4},
		{MapScale, mat(9, 9), 0, 0}, // unary: b is not read
	} {
		br, bc, err := CheckMap(tc.op, mat(3, 4), tc.b, mat(3, 4))
		if err != nil || br != tc.wantR || bc != tc.want {
			t.Errorf("CheckMap(%v, b %v) = %d, %d, %v; want %d, %d", tc.op, tc.b.Shape, br, bc, err, tc.wantR, tc.want)
		}
	}
}

func TestCheckReduce(t *testing.T) {
	runChecks(t, []checkCase{
		{"rows", func() error { return CheckReduce(AxisRows, mat(3, 4), mat(1, 4)) }, nil, ""},
		{"rows-empty", func() error { return CheckReduce(AxisRows, mat(0, 4), mat(1, 4)) }, nil, ""},
		{"cols", func() error { return CheckReduce(AxisCols, mat(3, 6), mat(3, 2)) }, nil, ""},
		{"cols-empty", func() error { return CheckReduce(AxisCols, mat(3, 0), mat(3, 0)) }, nil, ""},
		{"nil-a", func() error { return CheckReduce(AxisRows, nil, mat(1, 4)) }, ErrShape, "Reduce: a is nil"},
		{"rows-cols", func() error { return CheckReduce(AxisRows, mat(3, 4), mat(1, 3)) }, ErrShape, "Reduce: rows: out is 1x3, want 1x4"},
		{"rows-out", func() error { return CheckReduce(AxisRows, mat(3, 4), mat(3, 4)) }, ErrShape, "rows: out is 3x4, want 1x4"},
		{"cols-groups", func() error { return CheckReduce(AxisCols, mat(3, 6), mat(3, 4)) }, ErrShape,
			"Reduce: cols: out is 3x4, want 3xG with G dividing 6"},
		{"cols-rows", func() error { return CheckReduce(AxisCols, mat(3, 6), mat(2, 3)) }, ErrShape, "cols: out is 2x3, want 3xG"},
		{"cols-zero", func() error { return CheckReduce(AxisCols, mat(3, 6), mat(3, 0)) }, ErrShape, "cols: out is 3x0"},
		{"axis", func() error { return CheckReduce(ReduceAxis(7), mat(3, 6), mat(3, 6)) }, ErrShape, "Reduce: unknown axis 7"},
	})
}

func TestCheckLoss(t *testing.T) {
	labels := []int32{0, 3, 2}
	runChecks(t, []checkCase{
		{"logsoftmax/ok", func() error { return CheckLogSoftmax(mat(3, 4), mat(3, 4)) }, nil, ""},
		{"logsoftmax/nil", func() error { return CheckLogSoftmax(mat(3, 4), nil) }, ErrShape, "LogSoftmax: out is nil"},
		{"logsoftmax/shape", func() error { return CheckLogSoftmax(mat(3, 4), mat(3, 5)) }, ErrShape, "LogSoftmax: x is 3x4 but out is 3x5"},
		{"back/ok", func() error { return CheckLogSoftmaxBackward(mat(3, 4), mat(3, 4), mat(3, 4)) }, nil, ""},
		{"back/nil", func() error { return CheckLogSoftmaxBackward(nil, mat(3, 4), mat(3, 4)) }, ErrShape, "LogSoftmaxBackward: y is nil"},
		{"back/dx", func() error { return CheckLogSoftmaxBackward(mat(3, 4), mat(3, 4), mat(4, 4)) }, ErrShape,
			"LogSoftmaxBackward: y is 3x4, dy 3x4, dx 4x4; want all equal"},
		{"nll/ok", func() error { return CheckNLLLoss(mat(3, 4), labels, []int32{2, 0, 2}, mat(3, 4)) }, nil, ""},
		{"nll/no-rows", func() error { return CheckNLLLoss(mat(3, 4), nil, nil, nil) }, nil, ""},
		{"nll/nil", func() error { return CheckNLLLoss(nil, labels, []int32{0}, nil) }, ErrShape, "NLLLoss: logp is nil"},
		{"nll/row", func() error { return CheckNLLLoss(mat(3, 4), labels, []int32{0, 3}, nil) }, ErrShape, "NLLLoss: row 3 at position 1 is outside [0,3)"},
		{"nll/negative-row", func() error { return CheckNLLLoss(mat(3, 4), labels, []int32{-2}, nil) }, ErrShape, "row -2 at position 0"},
		{"nll/no-label", func() error { return CheckNLLLoss(mat(3, 4), labels[:1], []int32{1}, nil) }, ErrShape, "NLLLoss: row 1 has no label (1 labels)"},
		{"nll/label", func() error { return CheckNLLLoss(mat(3, 3), labels, []int32{1}, nil) }, ErrShape, "NLLLoss: row 1 has label 3, outside [0,3)"},
		{"nll/negative-label", func() error { return CheckNLLLoss(mat(3, 4), []int32{-1}, []int32{0}, nil) }, ErrShape, "row 0 has label -1"},
		{"nll/grad", func() error { return CheckNLLLoss(mat(3, 4), labels, []int32{0}, mat(3, 3)) }, ErrShape, "NLLLoss: grad is 3x3 but logp is 3x4"},
	})
}

func TestCheckDropout(t *testing.T) {
	runChecks(t, []checkCase{
		{"ok", func() error { return CheckDropout(mat(3, 4), 0.5, nil, mat(3, 4), mat(3, 4)) }, nil, ""},
		{"ok-rows", func() error { return CheckDropout(mat(3, 4), 1, []int32{7, 0, 7}, mat(3, 4), nil) }, nil, ""},
		{"rows-empty", func() error { return CheckDropout(mat(3, 4), 0, []int32{}, mat(3, 4), nil) }, ErrShape, "0 row ids for 3 rows"},
		{"p-high", func() error { return CheckDropout(mat(3, 4), 1.5, nil, mat(3, 4), nil) }, ErrShape, "Dropout: probability 1.5 outside [0,1]"},
		{"p-nan", func() error { return CheckDropout(mat(3, 4), float32(math.NaN()), nil, mat(3, 4), nil) }, ErrShape, "probability NaN"},
		{"nil-x", func() error { return CheckDropout(nil, 0.5, nil, mat(3, 4), nil) }, ErrShape, "Dropout: x is nil"},
		{"out", func() error { return CheckDropout(mat(3, 4), 0.5, nil, mat(4, 3), mat(3, 4)) }, ErrShape, "Dropout: x is 3x4 but out is 4x3"},
		{"mask", func() error { return CheckDropout(mat(3, 4), 0.5, nil, mat(3, 4), mat(3, 5)) }, ErrShape, "Dropout: x is 3x4 but mask is 3x5"},
		{"rows", func() error { return CheckDropout(mat(4, 2), 0.5, []int32{0, 1}, mat(4, 2), nil) }, ErrShape, "Dropout: 2 row ids for 4 rows"},
		{"row-id", func() error { return CheckDropout(mat(2, 2), 0.5, []int32{0, -3}, mat(2, 2), nil) }, ErrShape, "Dropout: row 1 has negative id -3"},
	})
}

func TestCheckOptimizers(t *testing.T) {
	adam := AdamParams{LR: 1, Beta1: 0.9, Beta2: 0.99, Step: 1}
	runChecks(t, []checkCase{
		{"adam/ok", func() error { return CheckAdam(mat(3, 4), mat(3, 4), mat(3, 4), mat(3, 4), adam) }, nil, ""},
		{"adam/step", func() error {
			return CheckAdam(mat(3, 4), mat(3, 4), mat(3, 4), mat(3, 4), AdamParams{Step: 0})
		}, ErrShape, "Adam: step 0, want >= 1"},
		{"adam/nil-p", func() error { return CheckAdam(nil, mat(3, 4), mat(3, 4), mat(3, 4), adam) }, ErrShape, "Adam: p is nil"},
		{"adam/nil-m", func() error { return CheckAdam(mat(3, 4), mat(3, 4), nil, mat(3, 4), adam) }, ErrShape, "Adam: m is nil"},
		{"adam/g", func() error { return CheckAdam(mat(3, 4), mat(3, 5), mat(3, 4), mat(3, 4), adam) }, ErrShape,
			"Adam: g has shape [3 5], want [3 4] like p"},
		{"adam/v", func() error { return CheckAdam(mat(3, 4), mat(3, 4), mat(3, 4), mat(4, 3), adam) }, ErrShape, "v has shape [4 3]"},
		{"sgd/ok", func() error { return CheckSGD(mat(3, 4), mat(3, 4), nil, SGDParams{LR: 1}) }, nil, ""},
		{"sgd/mom-ignored", func() error { return CheckSGD(mat(3, 4), mat(3, 4), mat(9, 9), SGDParams{LR: 1}) }, nil, ""},
		{"sgd/momentum", func() error {
			return CheckSGD(mat(3, 4), mat(3, 4), mat(3, 4), SGDParams{LR: 1, Momentum: 0.9, Step: 2})
		}, nil, ""},
		{"sgd/g", func() error { return CheckSGD(mat(3, 4), mat(4, 4), nil, SGDParams{LR: 1, Step: 1}) }, ErrShape,
			"SGD: g has shape [4 4], want [3 4] like p"},
		{"sgd/no-mom", func() error { return CheckSGD(mat(3, 4), mat(3, 4), nil, SGDParams{Momentum: 0.9, Step: 1}) }, ErrShape,
			"SGD: momentum 0.9 needs a momentum buffer"},
		{"sgd/step", func() error { return CheckSGD(mat(3, 4), mat(3, 4), mat(3, 4), SGDParams{Momentum: 0.9}) }, ErrShape,
			"SGD: step 0, want >= 1"},
		{"sgd/mom", func() error {
			return CheckSGD(mat(3, 4), mat(3, 4), mat(3, 2), SGDParams{LR: 1, Momentum: 0.9, Step: 1})
		}, ErrShape, "SGD: mom has shape [3 2], want [3 4] like p"},
	})
}
