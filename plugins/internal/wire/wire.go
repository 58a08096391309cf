package wire

import (
	"context"
	"errors"
	"math"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/gnnkit/gnnkit/core"
	pb "github.com/gnnkit/gnnkit/plugins/proto/scheduler/v1"
)

// ProtocolVersion is the newest scheduler protocol this build speaks.
const ProtocolVersion = 1

// PluginName is the name of the one plugin in each plugin set.
const PluginName = "scheduler"

// Handshake is the go-plugin handshake of scheduler plugins. The magic
// cookie only stops a plugin binary run by hand from waiting for a host
// forever (UX, not security); the protocol version comes from
// VersionedPlugins.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "GNN_SCHEDULER_PLUGIN",
	MagicCookieValue: "6e1f0c3a-gnnkit-scheduler",
}

// MaxMessageBytes bounds one gRPC message each way. gRPC's default of 4 MiB
// is too small: a batch of a million node ids is about 3 MB on the wire,
// and its plan as much again.
const MaxMessageBytes = math.MaxInt32

// ErrExited reports a plugin that can no longer be called: its process
// exited (crashed), was killed after a call timed out, or was closed.
var ErrExited = errors.New("plugin process exited")

// Plugin is the go-plugin GRPCPlugin of the scheduler protocol: gRPC
// only, no net/rpc.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	// Impl is the scheduler served (plugin side only).
	Impl core.Scheduler
}

var _ plugin.GRPCPlugin = (*Plugin)(nil)

// GRPCServer registers the scheduler service for p.Impl.
func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("sdk: no scheduler to serve")
	}
	pb.RegisterSchedulerServer(s, &Server{Impl: p.Impl})
	return nil
}

// GRPCClient returns the generated pb.SchedulerClient; Connect wraps it.
func (p *Plugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pb.NewSchedulerClient(c), nil
}

// ServerPlugins is the plugin side's VersionedPlugins.
func ServerPlugins(s core.Scheduler) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{ProtocolVersion: {PluginName: &Plugin{Impl: s}}}
}

// ClientPlugins is the host side's VersionedPlugins.
func ClientPlugins() map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{ProtocolVersion: {PluginName: &Plugin{}}}
}

// ServerOptions are the gRPC server options of a plugin.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes)}
}

// DialOptions are the gRPC dial options of a host.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithDefaultCallOptions(
		grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes))}
}
