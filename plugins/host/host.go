package host

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/plugins/internal/proc"
	"github.com/gnnkit/gnnkit/plugins/internal/wire"
	pb "github.com/gnnkit/gnnkit/plugins/proto/scheduler/v1"
)

// ProtocolVersion is the scheduler protocol version this host speaks.
const ProtocolVersion = wire.ProtocolVersion

// Defaults for Options.
const (
	DefaultTimeout      = wire.DefaultTimeout
	DefaultStartTimeout = 20 * time.Second
)

var (
	// ErrLaunch reports a plugin that could not be started.
	ErrLaunch = errors.New("host: plugin failed to start")
	// ErrChecksum reports a plugin binary whose SHA-256 is not the pinned
	// one (it also wraps ErrLaunch).
	ErrChecksum = errors.New("host: plugin checksum does not match its pin")
	// ErrIncompatible reports a plugin that speaks another protocol
	// version (it also wraps ErrLaunch).
	ErrIncompatible = errors.New("host: plugin speaks another protocol version")
	// ErrExited reports a plugin whose process is gone: it crashed, was
	// killed after a call passed its deadline, or was closed.
	ErrExited = wire.ErrExited
)

// Options configure Launch; the zero value is useful.
type Options struct {
	// Args are passed to the plugin binary (gnnkit's CLI passes each
	// --sched-opt as KEY=VALUE).
	Args []string
	// Env is added to the plugin's environment, after the host's own.
	Env []string
	// Timeout bounds each call (default 30 s); a plugin that passes it is
	// killed.
	Timeout time.Duration
	// StartTimeout bounds the launch, handshake and first call (default
	// 20 s, or less if ctx has an earlier deadline).
	StartTimeout time.Duration
	// SHA256, if set, pins the binary: Launch fails with ErrChecksum
	// unless the file's SHA-256 is this.
	SHA256 []byte
	// Stderr, if set, receives the plugin's stderr and stdout as it runs.
	// The host always keeps the last lines to put in error messages.
	Stderr io.Writer
}

// Info describes a launched plugin.
type Info struct {
	Path            string // as given to Launch
	Name            string // the scheduler's Name()
	ProtocolVersion int    // negotiated in the handshake
	Feedback        bool   // the scheduler implements core.SchedulerWithFeedback
	SDKVersion      string // what built the plugin's side, e.g. "gnnkit-sdk/1"
	Pid             int
}

// Plugin is a running plugin process.
type Plugin struct {
	path   string
	cmd    *exec.Cmd
	client *plugin.Client
	sched  core.Scheduler
	info   Info
	tail   *proc.Tail

	mu   sync.Mutex
	dead error // why the plugin can no longer be called; nil while it can

	closeOnce sync.Once
}

// Launch starts the plugin binary at path and returns its scheduler and a
// Closer that ends the process. It is Start for callers that need nothing
// else.
func Launch(ctx context.Context, path string, o Options) (core.Scheduler, io.Closer, error) {
	p, err := Start(ctx, path, o)
	if err != nil {
		return nil, nil, err
	}
	return p.Scheduler(), p, nil
}

// Start starts the plugin binary at path, completes the handshake and asks
// the plugin for its name. On error no process is left running.
func Start(ctx context.Context, path string, o Options) (*Plugin, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("host: plugin %s: %w", path, err)
	}
	launchErr := func(err error) error {
		return &hostError{msg: fmt.Sprintf("host: plugin %s: %v", path, err), errs: []error{ErrLaunch, err}}
	}
	abs, err := proc.Executable(path, "plugin")
	if err != nil {
		return nil, launchErr(err)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < o.StartTimeout {
		o.StartTimeout = max(time.Until(dl), time.Millisecond)
	}
	p := &Plugin{path: path, tail: &proc.Tail{Max: 8 << 10}}
	// go-plugin's handshake wait does not watch ctx: while the start is
	// under way, ctx ending kills the process (which ends the wait); once
	// the plugin is up, ctx no longer touches it (Close ends it).
	var starting atomic.Bool
	starting.Store(true)
	p.cmd = exec.CommandContext(ctx, abs, o.Args...)
	p.cmd.Cancel = func() error {
		if !starting.Load() {
			return os.ErrProcessDone // not ours to end any more: no kill, no error
		}
		return p.cmd.Process.Kill()
	}
	p.cmd.Env = append([]string(nil), o.Env...)
	var out io.Writer = p.tail
	if o.Stderr != nil {
		out = io.MultiWriter(p.tail, o.Stderr)
	}
	cfg := &plugin.ClientConfig{
		HandshakeConfig:  wire.Handshake,
		VersionedPlugins: wire.ClientPlugins(),
		Cmd:              p.cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		StartTimeout:     o.StartTimeout,
		Stderr:           out,
		SyncStdout:       out,
		SyncStderr:       out,
		Logger:           proc.Logger("gnnkit-plugin"),
		GRPCDialOptions:  wire.DialOptions(),
	}
	if len(o.SHA256) > 0 {
		cfg.SecureConfig = &plugin.SecureConfig{Checksum: o.SHA256, Hash: sha256.New()}
	}
	p.client = plugin.NewClient(cfg)
	rpc, err := p.client.Client()
	if err != nil {
		p.kill()
		if cerr := ctx.Err(); cerr != nil {
			return nil, &hostError{msg: fmt.Sprintf("host: plugin %s: stopped waiting for its handshake: %v%s", path, cerr, p.tail.LastLines()),
				errs: []error{cerr}}
		}
		return nil, p.startErr(err, o)
	}
	p.info = Info{Path: path, ProtocolVersion: p.client.NegotiatedVersion()}
	if p.cmd.Process != nil {
		p.info.Pid = p.cmd.Process.Pid
	}
	raw, err := rpc.Dispense(wire.PluginName)
	if err != nil {
		p.kill()
		return nil, launchErr(err)
	}
	sc, ok := raw.(pb.SchedulerClient)
	if !ok {
		p.kill()
		return nil, launchErr(fmt.Errorf("dispensed %T, want a scheduler client", raw))
	}
	ictx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	sched, info, err := wire.Connect(ictx, wire.Config{Client: sc, Prefix: "host", Where: path,
		Timeout: o.Timeout, Alive: p.alive, Broken: p.broken})
	if err != nil {
		p.kill()
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			// ctx ending kills the starting plugin (cmd.Cancel), and the
			// call can see the connection drop before it sees ctx end:
			// the caller's cancellation is the cause, so say that.
			return nil, &hostError{msg: fmt.Sprintf("host: plugin %s: GetInfo: %v (the plugin was stopped with the start)", path, cerr), errs: []error{cerr}}
		}
		return nil, err
	}
	starting.Store(false)
	if err := ctx.Err(); err != nil { // it ended as the start finished
		p.kill()
		return nil, fmt.Errorf("host: plugin %s: %w", path, err)
	}
	p.sched = sched
	p.info.Name, p.info.Feedback, p.info.SDKVersion = info.Name, info.Feedback, info.SDKVersion
	return p, nil
}

// Scheduler returns the plugin's scheduler. It is a
// core.SchedulerWithFeedback exactly when Info().Feedback holds.
func (p *Plugin) Scheduler() core.Scheduler { return p.sched }

// Info describes the plugin.
func (p *Plugin) Info() Info { return p.info }

// Exited reports whether the plugin process has ended.
func (p *Plugin) Exited() bool { return p.client.Exited() }

// Close ends the plugin process: it asks the plugin to shut down, kills it
// if it has not exited within two seconds, and waits for it. Calls after
// Close fail with ErrExited. Close is idempotent and always returns nil.
func (p *Plugin) Close() error {
	p.closeOnce.Do(func() {
		p.setDead(&hostError{msg: "the plugin was closed", errs: []error{ErrExited}})
		done := make(chan struct{})
		go func() { p.client.Kill(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second): // the graceful path is stuck
			p.kill()
			<-done
		}
	})
	return nil
}

// kill ends the process at once and waits for go-plugin to reap it.
func (p *Plugin) kill() {
	if p.cmd.Process != nil && !p.client.Exited() {
		_ = p.cmd.Process.Kill()
	}
	p.client.Kill()
}

func (p *Plugin) setDead(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead == nil {
		p.dead = err
	}
}

// alive is wire.Config.Alive.
func (p *Plugin) alive() error {
	p.mu.Lock()
	dead := p.dead
	p.mu.Unlock()
	if dead != nil {
		return dead
	}
	if p.client.Exited() {
		p.setDead(&hostError{msg: fmt.Sprintf("the plugin process exited earlier (%s)%s", p.exitStatus(), p.tail.LastLines()), errs: []error{ErrExited}})
		return p.alive()
	}
	return nil
}

// broken is wire.Config.Broken: a call timed out or lost its connection.
// A crashing plugin has usually exited by now; give it a moment, then kill
// it, so nothing is left running.
func (p *Plugin) broken(err error) error {
	deadline := time.Now().Add(time.Second)
	if errors.Is(err, context.DeadlineExceeded) {
		deadline = time.Now() // hung: no point waiting
	}
	for !p.client.Exited() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	what := ""
	if p.client.Exited() {
		what = fmt.Sprintf("the plugin process exited (%s)", p.exitStatus())
	} else {
		what = "the plugin was killed"
	}
	p.kill()
	p.setDead(&hostError{msg: what + " earlier" + p.tail.LastLines(), errs: []error{ErrExited}})
	return &hostError{msg: err.Error() + "; " + what + p.tail.LastLines(), errs: []error{err, ErrExited}}
}

// exitStatus describes how the process ended; call after Exited.
func (p *Plugin) exitStatus() string {
	if p.cmd.ProcessState == nil {
		return "status unknown"
	}
	return p.cmd.ProcessState.String()
}

// startErr explains a failed start in gnnkit's terms; the process has been
// killed.
func (p *Plugin) startErr(err error, o Options) error {
	msg := err.Error()
	wrap := func(sentinel error, format string, a ...any) error {
		return &hostError{msg: fmt.Sprintf("host: plugin %s: ", p.path) + fmt.Sprintf(format, a...) + p.tail.LastLines(),
			errs: []error{ErrLaunch, sentinel}}
	}
	// lead puts what the plugin wrote to stderr first: a plugin that exits
	// before its handshake has usually said why (it rejected an argument).
	lead := func(said, format string, a ...any) error {
		return &hostError{msg: fmt.Sprintf("host: plugin %s: its stderr: %s; ", p.path, said) + fmt.Sprintf(format, a...),
			errs: []error{ErrLaunch, errNotPlugin}}
	}
	switch {
	case errors.Is(err, plugin.ErrChecksumsDoNotMatch):
		sum, _ := Checksum(p.path)
		return wrap(ErrChecksum, "its SHA-256 is %s, but %x is pinned (rebuilt or replaced? update the pin)", sum, o.SHA256)
	case strings.HasPrefix(msg, "Unrecognized remote plugin message"):
		line, _, _ := strings.Cut(strings.TrimPrefix(msg, "Unrecognized remote plugin message: "), "\n")
		if line == "" {
			if said := p.said(); said != "" {
				return lead(said, "it exited without a handshake (%s)", p.exitStatusAfterKill())
			}
			return wrap(errNotPlugin, "exited without a handshake (%s); is it a gnnkit scheduler plugin (sdk.Serve)?", p.exitStatusAfterKill())
		}
		return wrap(errNotPlugin, "is not a gnnkit scheduler plugin, or wrote to stdout before its handshake: its first line was %q", line)
	case strings.HasPrefix(msg, "incompatible API version"):
		v := "another version"
		if _, after, ok := strings.Cut(msg, "Plugin version: "); ok {
			v, _, _ = strings.Cut(after, ",")
		}
		return wrap(ErrIncompatible, "speaks scheduler protocol %s, but this gnnkit speaks %d; rebuild the plugin against a gnnkit/plugins/sdk of this version", v, ProtocolVersion)
	case strings.Contains(msg, "exited before we could connect"):
		if said := p.said(); said != "" {
			return lead(said, "it exited before the handshake (%s)", p.exitStatusAfterKill())
		}
		return wrap(errNotPlugin, "exited before the handshake (%s)", p.exitStatusAfterKill())
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		return wrap(context.DeadlineExceeded, "no handshake within %v", o.StartTimeout)
	}
	return wrap(err, "start: %v", err)
}

// said returns the last lines of the plugin's stderr, joined, or "" if
// it wrote none.
func (p *Plugin) said() string {
	l := p.tail.Lines()
	if len(l) == 0 {
		return ""
	}
	return strings.Join(l[max(0, len(l)-4):], " | ")
}

// hostError is an error with its own message that matches several
// sentinels (errors.Is) without repeating their text.
type hostError struct {
	msg  string
	errs []error
}

func (e *hostError) Error() string   { return e.msg }
func (e *hostError) Unwrap() []error { return e.errs }

var errNotPlugin = errors.New("no scheduler plugin handshake")

func (p *Plugin) exitStatusAfterKill() string {
	if !p.client.Exited() {
		return "killed"
	}
	return p.exitStatus()
}
