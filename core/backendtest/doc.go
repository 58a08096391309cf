// Package backendtest is the conformance suite for gnnkit backends, in
// the manner of nettest, fstest and gonum's testblas: a backend's test
// file is three lines,
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, func(t *testing.T) core.Backend { b, _ := mybackend.New(core.BackendOptions{}); return b })
//	}
//
// Run checks every kernel of core.Kernels against a naive float64
// reference kept in this package, on a labelled corpus of awkward graphs
// (Corpus: empty, edgeless, isolated nodes, zero in-degree rows,
// self-loops, multi-edges, unsorted rows, a hub row, bipartite,
// power-law, a k-hop subgraph with foreign edge ids, reverses; the
// fixtures are testdata/*.edges) crossed with feature widths 0, 1, 3, 17
// and 64 and head counts 1 and 4. It covers GEMM in all four transpose
// combinations with alpha and beta (beta == 0 must overwrite NaN), SpMM
// sum and mean with no, per-edge and per-head weights (also on reverse
// graphs, whose edge ids come through EIDs), SDDMM add and dot, edge
// softmax and its backward, Gather, ScatterAdd with repeated indices,
// every MapOp in every broadcast form and in place, Reduce over rows and
// column groups, LogSoftmax and its backward, NLLLoss with and without a
// gradient, Dropout (the mask must follow core.DropoutKeep exactly), and
// several steps of Adam and SGD with PyTorch's semantics.
//
// It also checks that wrong shapes return an error wrapping
// core.ErrShape and never panic; the device contract (Alloc zero-fills
// and is charged to the accountant, Free releases and ignores nil,
// foreign and already-freed tensors, a cap makes Alloc fail with an
// *core.OOMError carrying Need and Free, the peak is tracked, Upload and
// Download round-trip, device ids are distinct); identities that need no
// reference (SpMM is linear, sums of ones are in-degrees, SpMM on the
// reverse is the adjoint, repeated calls agree bit for bit); and random
// graphs from a fixed seed (CheckGraph, which a Fuzz target can drive).
// RunOptions additionally checks that core.BackendOptions are honoured.
//
// # Tolerance
//
// Results are float32. Each value r is compared with its float64
// reference w as |r - w| <= RelTol(L)*mag + AbsTol, where mag is the sum
// of the absolute values of the terms behind w and L the reduction
// length; RelTol(L) = 1e-5 * (1 + L/64). See RelTol.
package backendtest
