// Package engine runs plans on real devices.
//
// A Trainer owns one model's training state: the master parameters and
// optimizer moments on the plan's home device, a parameter replica and
// gradient accumulators on every other device a plan uses, and each
// device's copy of the input data (features, graph edge weights). Run
// executes one iteration of a core.Plan: one goroutine per device stream,
// tasks in plan order on their stream, cross-stream dependencies through
// completion events, gradient reductions between devices, and the single
// optimizer step. Every allocation goes through the device's memory
// accountant, so a plan that does not fit fails with core.ErrOutOfMemory
// and the Trace reports each device's measured peak.
//
// Devices in another process (a backend-plugin worker, Config.Remote) take
// part in plans like local ones: Run sends each worker its slice of the
// plan and adds the gradients it returns into the home (see Remote);
// Trainer.RunSlice is the worker's side.
//
// Train wraps Run in the usual epoch loop with evaluation, for the CLI and
// the benchmarks.
package engine
