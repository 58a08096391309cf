// Package stats holds the small summary statistics the benchmarks, the
// simulator's calibration, the executor's summaries and the CLI share.
package stats
