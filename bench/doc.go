// Package bench will hold the cross-hardware benchmark matrix (issue 10):
// backends x schedulers x models x graphs built from the registries, with
// reports in Markdown, CSV, JSON and plots. Measured numbers, with the
// commands that produced them, are kept in bench/RESULTS.md.
package bench
