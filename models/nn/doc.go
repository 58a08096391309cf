// Package nn holds the ops gnnkit's models are built from: dense layers
// (Linear, Bias, Add), message passing (Aggregate, and the GAT attention
// pieces HeadDot, EdgeScore and EdgeSoftmax), activations, dropout and the
// cross-entropy loss. Every op implements core.Op.
//
// # Conventions
//
// A value is a named tensor in a core.Env whose rows are nodes (or, for
// edge values such as attention scores, edge ids: an edge tensor for graph
// g has g.NumEdgeIDs() rows). Forward allocates its outputs with Env.Alloc
// and binds them with Env.SetValue. Backward reads the gradients of its
// outputs (nil: no gradient flowed, nothing to do) and, for every input
// where Env.NeedsGrad holds, hands a freshly allocated gradient to
// Env.AccumGrad, which takes ownership. Temporaries are freed with Env.Free.
//
// Ops use only Env.K (core.Kernels) and Env.Alloc; they never touch tensor
// memory, so every backend runs every model. Gradients are written once,
// here, from the forward kernels: the transpose of SpMM over g is SpMM over
// g.Reverse() with the same edge values (edge ids carry through), the
// gradient of an SpMM's edge values is an SDDMM (EdgeDot) of the output
// gradient with the input, and the row sums an SDDMM(EdgeAdd) needs in
// backward are SpMMs of the edge gradient against a matrix of ones.
//
// Ops are stateless between Forward and Backward: what backward needs is
// either a bound value (inputs and outputs stay bound until the Env is
// released) or recomputed. Dropout recomputes its mask in backward, since
// the kernel's draw depends only on (seed, element); the loss recomputes
// its log-softmax; a mean aggregation derives its 1/deg edge weights as the
// edge softmax of zeros.
//
// Each op's Cost is an honest per-pass estimate (forward plus backward) in
// terms of core.Dims; AnnotateGrads tells the ops of a model which inputs
// never need a gradient, so Cost leaves out the backward work that Backward
// skips at run time.
package nn
