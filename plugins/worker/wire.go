package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/gnnkit/gnnkit/core"
	pb "github.com/gnnkit/gnnkit/plugins/proto/backend/v1"
)

// ProtocolVersion is the newest backend-worker protocol this build speaks.
const ProtocolVersion = 1

// Version identifies this implementation of the worker side in Devices.
const Version = "gnnkit-worker/1"

// pluginName is the name of the one plugin in each plugin set.
const pluginName = "backend"

// Handshake is the go-plugin handshake of backend workers. The magic cookie
// only stops a worker binary run by hand from waiting for a host forever;
// the protocol version comes from the versioned plugin sets.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "GNN_BACKEND_PLUGIN",
	MagicCookieValue: "3b9d2f4e-gnnkit-backend",
}

// OptionsEnv is the environment variable through which the host passes
// core.BackendOptions (as JSON) to the worker; BackendOptions reads it.
const OptionsEnv = "GNNKIT_WORKER_OPTIONS"

// maxMessageBytes bounds one gRPC message each way, set explicitly on both
// sides. Load streams its arrays in chunks of chunkElems elements (at most
// 8 MiB), so only a Run request (parameters, a sampled batch, the slice) or
// response (gradients) can come near it; a larger one is refused with an
// error that says so.
const maxMessageBytes = math.MaxInt32

// chunkElems is the number of array elements per Load message.
const chunkElems = 1 << 20

// ErrExited reports a worker that can no longer be called: its process
// exited (crashed), was killed after a call passed its deadline, or was
// closed.
var ErrExited = errors.New("worker process exited")

// ErrLaunch reports a worker that could not be started; the error is a
// *StartError with the reason.
var ErrLaunch = errors.New("worker failed to start")

// grpcPlugin is the go-plugin GRPCPlugin of the backend protocol: gRPC
// only, no net/rpc.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	srv *server // worker side only
}

var _ plugin.GRPCPlugin = (*grpcPlugin)(nil)

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.srv == nil {
		return errors.New("worker: no backend to serve")
	}
	pb.RegisterBackendServer(s, p.srv)
	return nil
}

func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pb.NewBackendClient(c), nil
}

func serverPlugins(s *server) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{ProtocolVersion: {pluginName: &grpcPlugin{srv: s}}}
}

func clientPlugins() map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{ProtocolVersion: {pluginName: &grpcPlugin{}}}
}

func serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(maxMessageBytes), grpc.MaxSendMsgSize(maxMessageBytes)}
}

func dialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithDefaultCallOptions(
		grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes))}
}

// BackendOptions returns the backend options the host asked for (device
// count, threads, memory cap), for the worker's main to open its backend
// with. Outside a host, or when the host set none, it is the zero value.
func BackendOptions() (core.BackendOptions, error) {
	var o core.BackendOptions
	s := os.Getenv(OptionsEnv)
	if s == "" {
		return o, nil
	}
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		return o, fmt.Errorf("worker: %s=%q: %v", OptionsEnv, s, err)
	}
	return o, nil
}

// LaunchedByHost reports whether this process was started by a gnnkit
// host (the handshake's cookie is in the environment).
func LaunchedByHost() bool {
	return os.Getenv(Handshake.MagicCookieKey) == Handshake.MagicCookieValue
}
