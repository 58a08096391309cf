// Package plugins will hold gnnkit's out-of-process scheduler plugins:
// the versioned gRPC protocol over hashicorp/go-plugin, the SDK a plugin
// author imports, and the host that launches plugin binaries (issue 7).
// Nothing here is implemented yet; the in-process contract they will
// carry over the wire is core.Scheduler with plain-data core.Workload and
// core.Plan.
package plugins
