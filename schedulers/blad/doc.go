// Package blad schedules dynamic-GNN training (snapshot groups, see
// engine.RunOptions.Groups) the way BLAD (Fu et al., SC'23) does, as
// reconstructed in docs/design.md ("BLAD: dynamic GNNs"):
//
//   - Level 1 places whole groups on devices (no hidden state crosses a
//     device) by LPT — longest cost first onto the device where it would
//     finish first — and, through Observe, re-places them from the
//     previous iteration's trace (the adaptive part; same Home): each
//     device's slowness and a cost model a·Graph + b·Dense + c are fitted
//     to the measured times (FitCost), and groups move only for a
//     MinGain cut of the predicted makespan.
//   - Level 2 runs a device's groups on two streams: stream 0 runs the
//     graph phase of each group (the hoisted ops, below), stream 1 its
//     dense phase and backward, so the graph ops of group i+1 overlap the
//     dense ops of group i. Groups are ordered on a device alternating
//     graph-heavy and dense-heavy ones.
//   - The topology manager splits a unit's ops into the hoisted set — the
//     first graph ops of the model (those with no graph op upstream) and
//     everything they depend on, e.g. T-GCN's Â_t·X·W for every t, which
//     do not depend on the hidden state — and the rest. It only splits
//     along dependencies (both parts keep the model's op order), so
//     results equal sequential training up to summation order.
//
// ESDG is the baseline: an equal-count contiguous partition of the groups
// over the devices, one stream each (with one device, the sequential
// reference over the same groups).
//
// Both are registered ("blad", "esdg"). Units are the groups (unit i is
// group i, loss weight proportional to its sample count when SetGroups
// gave counts), so every group runs exactly once per iteration.
//
// VertexPartition is the other baseline: every group on every device,
// device k computing part k of its nodes, for vertex-partitioned models
// (models/dynamic.TGCNVertex); it is not registered, as it plans only
// those.
package blad
