// Package gradcheck checks the backward passes of ops against central
// finite differences, for the tests of packages nn and models. It runs ops
// on a real device (the tests use the CPU backend), the way the engine
// does: one core.Env per evaluation, ops forward in order, backward in
// reverse.
//
// A Case binds values, params and graphs, runs its ops, and defines the
// scalar L = sum of <output, R> over its gradient seeds plus Env.Loss.
// Check compares every analytic gradient with (L(v+eps) - L(v-eps)) / 2eps
// elementwise, retrying an element with smaller steps before reporting it,
// since a step across a ReLU kink is the usual cause of a mismatch.
package gradcheck
