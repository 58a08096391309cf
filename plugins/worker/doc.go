// Package worker runs a backend's devices in a separate process (a
// backend-plugin worker) and lets a gnnkit host train on them.
//
// Why: gorgonia.org/cu, which backends/cuda builds on, ends any process
// that imports it on a machine without a GPU. So the gnnkit binary never
// imports it; the CUDA devices live in gnnkit-cuda (cmd/gnnkit-cuda, built
// with -tags cuda), which is nothing but
//
//	b, err := core.OpenBackend("cuda", opts) // opts: worker.BackendOptions()
//	worker.Serve(b)
//
// Worker side: Serve(backend) answers the backend protocol
// (plugins/proto/backend/v1, go-plugin handshake GNN_BACKEND_PLUGIN, gRPC
// only): Devices, Load (the model by registered name and config, the
// dataset graph, features and labels, the optimizer settings and the seed,
// streamed in chunks), Run (one iteration's slice: engine.Trainer.RunSlice
// over all the backend's devices) and Close. Serve is backend-agnostic; the
// tests serve the CPU backend.
//
// Host side: Find locates a worker binary (next to the running executable,
// in the plugin folder, on $PATH); Start launches it and returns a *Worker,
// an engine.Remote to put in engine.Config.Remote. Its devices appear in
// plans like local ones (optionally renamed: Options.Name). Every call has
// a deadline; a worker that hangs is killed, one that crashes is reported
// with its exit status and last output, and either fails the iteration,
// never the host. A worker that cannot start gives a *StartError whose
// Reason is its exit status and output, e.g. "exit status 1: Error in
// initialization ... NoDevice" (no GPU) or "exit status 127: ... error
// while loading shared libraries: libcuda.so.1 ..." (no driver).
//
// What crosses the wire per iteration: the step number, the parameters
// after each optimizer step, the batch and the slice only when they change
// (full-graph training sends them once), and back the summed loss, the
// summed parameter gradients and the trace. No kernel crosses the process
// boundary.
package worker
