// Package sdk is the only package a scheduler plugin's author imports
// (besides core for the types): write a core.Scheduler, then
//
//	func main() { sdk.Serve(&MyScheduler{}) }
//
// and build it with go build. gnnkit loads the binary at run time with
// --scheduler plugin:PATH and talks to it over a versioned gRPC protocol
// (hashicorp/go-plugin, mutual TLS on a local socket). The scheduler sees
// a core.Workload with the plain data only: Model and Graph are nil on the
// plugin side. Its plans are validated by the host (core.Plan.Validate),
// so an invalid plan is reported as an error naming the plugin, never run.
//
// If the scheduler also implements core.SchedulerWithFeedback, the host
// detects it at launch and sends it the trace of every iteration.
//
// Errors that wrap a core sentinel (core.ErrOutOfMemory, core.ErrUnsupported,
// core.ErrInvalidPlan, context.Canceled, …) keep matching errors.Is on the
// host, and a *core.OOMError keeps its fields for errors.As. A panic in
// Schedule is returned as an error rather than killing the plugin; the
// stack goes to stderr, which the host shows when the plugin fails.
//
// A plugin binary run by hand (not by a host) prints a short notice and
// exits with status 1; LaunchedByHost tells the two cases apart, for a main
// that wants to do something else when run directly.
//
// To test a plugin, run the conformance suite and the exactness oracle in
// core/schedtest in process, and over an in-memory gRPC connection with
// plugins/plugintest.InMemory (see plugins/examples/examplesched).
package sdk
