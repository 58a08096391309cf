// Package wire is what the SDK and the host share: the go-plugin
// handshake, the versioned plugin sets, the gRPC server that exposes a
// core.Scheduler (plugin side) and the core.Scheduler that calls one
// (host side, with per-call deadlines, error mapping and plan validation).
//
// Neither side exposes go-plugin to its users: plugin authors call
// sdk.Serve, hosts call host.Launch, and tests use plugintest.InMemory.
package wire
