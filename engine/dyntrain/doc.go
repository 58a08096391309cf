// Package dyntrain trains dynamic GNNs (models/dynamic) on snapshot
// groups (data/dynamic) with the engine's group units and a group-aware
// scheduler (schedulers/blad: "blad" or "esdg"), and evaluates them: AUC
// and MRR for link prediction, F1 (and AUC) for edge sign.
//
// An iteration is StepGroups training groups (default: all of them, one
// optimizer step per epoch); the scheduler plans it, the engine runs it
// (engine.RunOptions{Groups}), and a scheduler with feedback observes the
// trace. Evaluation runs the model forward on the home device with the
// trained parameters, group by group.
//
// Session runs epochs one at a time (a benchmark interleaves several);
// Planner prepares the same iterations for simulated devices. With
// Config.VertexParts the vertex-partitioned T-GCN trains instead, each
// group cut into parts by VertexPartition (schedulers/blad.VertexPartition
// places part k on device k). Utilisation measures per-device busy time,
// imbalance and the overlap of a device's task spans from traces; OpDims
// and VertexOpDims size every op of a group for the simulator
// (sim.SimulateUnits).
package dyntrain
