package sdk

import (
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/plugins/internal/wire"
)

// ProtocolVersion is the scheduler protocol version this SDK serves.
const ProtocolVersion = wire.ProtocolVersion

// ServeOpt configures Serve.
type ServeOpt func(*serveConfig)

type serveConfig struct {
	logger hclog.Logger
	test   *plugin.ServeTestConfig
}

// WithLogger sets the logger of the plugin side of go-plugin (default:
// warnings and errors as JSON on stderr, which the host reads; set
// GNNKIT_PLUGIN_LOG=debug for more).
func WithLogger(l hclog.Logger) ServeOpt { return func(c *serveConfig) { c.logger = l } }

// WithTestConfig serves in test mode (go-plugin's ServeTestConfig): Serve
// returns when the config's context ends instead of owning the process, and
// hands out a reattach config. For debugging a plugin under a debugger.
func WithTestConfig(t *plugin.ServeTestConfig) ServeOpt { return func(c *serveConfig) { c.test = t } }

// LaunchedByHost reports whether this process was started by a gnnkit
// host (the handshake's cookie is in the environment).
func LaunchedByHost() bool {
	return os.Getenv(wire.Handshake.MagicCookieKey) == wire.Handshake.MagicCookieValue
}

// Serve serves s as a scheduler plugin until the host closes it, then
// returns; the plugin's main should return too. Run by hand, it prints a
// notice and exits with status 1.
func Serve(s core.Scheduler, opts ...ServeOpt) {
	c := serveConfig{}
	for _, o := range opts {
		o(&c)
	}
	if s == nil {
		panic("sdk: Serve called with a nil scheduler")
	}
	if c.logger == nil {
		level := hclog.LevelFromString(os.Getenv("GNNKIT_PLUGIN_LOG"))
		if level == hclog.NoLevel {
			level = hclog.Warn
		}
		c.logger = hclog.New(&hclog.LoggerOptions{Name: "sdk", Level: level, Output: os.Stderr, JSONFormat: true})
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: wire.ServerPlugins(s),
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, wire.ServerOptions()...)...)
		},
		Logger: c.logger,
		Test:   c.test,
	})
}
