// Package bench is the cross-hardware benchmark matrix (issue 10):
// backends × devices × schedulers (built-in or plugin:PATH) × models ×
// datasets, built from the registries, run anywhere and merged across
// machines into one report.
//
// # Suites
//
// A Suite is a named, versioned JSON file (bench/suites/NAME.json,
// embedded; or any path) of groups, each the product of its axes; "*"
// stands for every registered backend, scheduler or model, so new ones
// join the matrix untouched. Each Cell trains a fixed number of epochs
// after warm-up with a fixed seed. Cells a backend or scheduler cannot
// run here are StatusSkipped with the reason (no OpenCL driver, cherry
// without a memory cap, a pipeline on one device, a dynamic-only
// scheduler, a plugin that does not launch, an out-of-memory under the
// cell's cap), never failures.
//
// # Results files
//
// Run writes one File per run: the Machine fingerprint (CPU model and
// features via cpuid, cores, memory, GPUs and driver or why there are
// none, accelerator devices, OS, Go, gnnkit version and commit) and a
// Result per cell: epoch-time median, p10/p90, min/max, throughput
// (edges/s, samples/s), peak memory per device, accuracies and loss, and
// the scheduler's plan metrics plus bubble and imbalance measured from
// the trace. The file is rewritten atomically (temporary file, fsync,
// rename) after every cell and keyed by Cell.ID, so a re-run of the same
// suite on the same machine skips finished cells: an interrupted run
// continues where it stopped. Failed cells, and cells skipped because
// their plugin did not launch (it may be built by the next run), are not
// finished and run again. Parse rejects anything not well formed
// (schema, unknown fields, trailing data, IDs that do not match their
// cells, duplicates, statistics that disagree with the epoch times) with
// a *CorruptError; nothing is repaired or merged silently.
//
// # Reports
//
// LoadReport merges results files; Report.WriteDir writes report.md
// (machines; per workload a table with ratios against a chosen baseline
// cell and the speedup over the run's own 1-device sequential cell;
// skipped and failed cells with reasons), results.csv, benchstat text per
// run and PNG plots (gonum/plot): epoch time per configuration and run,
// speedup vs devices, peak memory vs micro-batches.
//
// The CLI is `gnnkit bench run` and `gnnkit bench report`. Measured
// numbers, with the commands that produced them, are kept in
// bench/RESULTS.md.
package bench
