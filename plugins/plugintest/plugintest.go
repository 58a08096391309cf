package plugintest

import (
	"context"
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/plugins/internal/wire"
	pb "github.com/gnnkit/gnnkit/plugins/proto/scheduler/v1"
)

// InMemory serves s over an in-memory gRPC connection and returns the
// host's view of it. The connection closes when the test ends. Like a
// launched plugin, the result implements core.SchedulerWithFeedback
// exactly when s does.
func InMemory(t testing.TB, s core.Scheduler) core.Scheduler {
	t.Helper()
	client, server := plugin.TestPluginGRPCConn(t, false, wire.ServerPlugins(s)[wire.ProtocolVersion])
	_ = server // client.Close asks it to stop (a second Stop would race inside go-plugin)
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense(wire.PluginName)
	if err != nil {
		t.Fatalf("plugintest: dispense: %v", err)
	}
	sched, _, err := wire.Connect(context.Background(), wire.Config{Client: raw.(pb.SchedulerClient), Prefix: "plugintest", Where: "in-memory"})
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	return sched
}
