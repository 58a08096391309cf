// Package plugins is the root of gnnkit's out-of-process scheduler
// plugins: a scheduler written by anyone, built as its own binary, loaded
// by gnnkit at run time next to the built-in ones.
//
// The pieces (see README.md in this folder for a walk-through):
//
//   - proto/scheduler/v1: the versioned gRPC protocol (scheduler.proto and
//     the committed generated Go code). Version 1 carries core.Workload's
//     plain data, core.Plan, the optional feedback call with a core.Trace,
//     and errors as gRPC statuses with a detail naming the core sentinel.
//   - sdk: the only package a plugin author imports: sdk.Serve(scheduler).
//   - host: host.Launch(ctx, path, host.Options) returns a core.Scheduler
//     and an io.Closer; it validates every plan, puts a deadline on every
//     call, kills hung plugins and reports crashes. Also plugin discovery
//     (host.Dir, host.Find) and checksum pinning.
//   - plugintest: the same host-side scheduler over an in-memory gRPC
//     connection, for running core/schedtest over the wire in a test.
//   - examples/examplesched: a complete plugin (a speed-aware data-parallel
//     split) with its tests.
//   - internal/{toproto,fromproto,errcode,wire}: conversions, the error
//     table, and what sdk and host share (handshake, plugin sets, the gRPC
//     server and client).
//
// Backend-plugin workers are the other kind: a process that owns a
// backend's devices (gnnkit-cuda: the GPUs) and runs the host's plan
// slices there.
//
//   - proto/backend/v1: their versioned protocol (backend.proto, handshake
//     GNN_BACKEND_PLUGIN), reusing the scheduler protocol's plan, trace,
//     device and error messages.
//   - worker: worker.Serve(backend) on the worker side; worker.Find and
//     worker.Start on the host side, whose *Worker is an engine.Remote.
//
// The transport is hashicorp/go-plugin with gRPC only: one handshake
// (magic cookie GNN_SCHEDULER_PLUGIN), VersionedPlugins starting at 1,
// automatic mutual TLS, optional SHA-256 pinning (go-plugin SecureConfig).
//
// # Regenerating the protocol code
//
// The generated Go code is committed, so building gnnkit needs no protoc.
// After editing proto/scheduler/v1/scheduler.proto or
// proto/backend/v1/backend.proto, run from the repository root
//
//	make proto
//
// which runs `go generate ./plugins/proto/...` (the go:generate lines are in
// proto/scheduler/v1/doc.go and proto/backend/v1/doc.go) and needs protoc 3.21 or later (Debian:
// apt-get install protobuf-compiler) and, on PATH,
//
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
package plugins
