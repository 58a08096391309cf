// Package plugintest runs a scheduler behind the plugin protocol inside a
// test, so a plugin's author (and gnnkit's own tests) can run the
// conformance suite and the exactness oracle over the wire without
// building a binary:
//
//	func TestOverGRPC(t *testing.T) {
//		schedtest.Run(t, func(t *testing.T) core.Scheduler {
//			return plugintest.InMemory(t, &MyScheduler{})
//		})
//	}
//
// The scheduler returned is the host's: workloads and plans cross a real
// gRPC connection (go-plugin's TestPluginGRPCConn, on a local socket),
// errors are mapped to status codes and back, and every plan is validated,
// exactly as for a plugin launched with host.Launch. Only the process
// (launch, crash, kill) is missing; tests of that use real binaries. The
// in-memory server keeps gRPC's default 4 MiB message limit (launched
// plugins allow 2 GiB), so workloads of more than about a million nodes
// need a real process.
package plugintest
