// Package host launches scheduler plugins and returns them as
// core.Scheduler values, so the rest of gnnkit cannot tell a plugin from a
// built-in scheduler:
//
//	sched, closer, err := host.Launch(ctx, "./bin/examplesched", host.Options{})
//	if err != nil {
//		return err
//	}
//	defer closer.Close() // ends the plugin process
//	plan, err := sched.Schedule(ctx, workload)
//
// A plugin is a separate process speaking version 1 of the scheduler
// protocol (plugins/proto/scheduler/v1) over gRPC with hashicorp/go-plugin:
// a handshake on its stdout, then mutual TLS on a local socket. The host
// hides go-plugin entirely (no Dispense, no type assertions).
//
// What the host guarantees, whatever the plugin does:
//
//   - Every plan that comes back has passed core.Plan.Validate against the
//     workload it was made for; an invalid plan is an error wrapping
//     core.ErrInvalidPlan that names the plugin and the problem.
//   - Every call has a deadline (Options.Timeout, default 30 s). A plugin
//     that does not answer in time is killed, and the error wraps both
//     context.DeadlineExceeded and ErrExited. A caller's own cancellation
//     or deadline is passed to the plugin and does not kill it.
//   - A plugin that crashes gives an error wrapping ErrExited with its exit
//     status and the last lines of its stderr; later calls fail fast with
//     ErrExited, and launching another plugin works as before.
//   - Launch failures (missing or non-executable file, not a plugin,
//     garbage on stdout, another protocol version, a checksum mismatch)
//     wrap ErrLaunch, and leave no process behind.
//   - Close ends the process (gracefully, then by force) and waits for it.
//   - Errors that the plugin's scheduler returned keep matching their core
//     sentinels with errors.Is (core.ErrOutOfMemory, core.ErrUnsupported,
//     context.Canceled, …); a *core.OOMError arrives as one.
//
// If the plugin's scheduler implements core.SchedulerWithFeedback, the
// returned scheduler does too; otherwise it does not, and the runtime never
// sends it traces.
//
// Discovery: Dir returns the plugin folder ($GNNKIT_PLUGIN_DIR, default
// the user's config folder + gnnkit/plugins), Find lists the executables in
// it, each with an optional pin (a NAME.sha256 file next to it, as
// written by sha256sum), and Options.SHA256 makes Launch refuse a binary
// whose checksum differs (go-plugin's SecureConfig).
//
// Set GNNKIT_PLUGIN_LOG=debug (or info, warn, …) to see go-plugin's log
// and the plugins' stderr on the host's stderr.
package host
