package wire

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/plugins/internal/fromproto"
	"github.com/gnnkit/gnnkit/plugins/internal/proc"
	"github.com/gnnkit/gnnkit/plugins/internal/toproto"
	pb "github.com/gnnkit/gnnkit/plugins/proto/scheduler/v1"
)

// DefaultTimeout bounds each call to a plugin when Config.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// Config configures the host side of a connection.
type Config struct {
	Client pb.SchedulerClient
	// Prefix starts every error message ("host", "plugintest").
	Prefix string
	// Where names the plugin in messages (its path, or "in-memory").
	Where string
	// Timeout bounds each call (0: DefaultTimeout). A call that passes it
	// is a hung plugin: Broken is called.
	Timeout time.Duration
	// Alive, if set, returns why the plugin can no longer be called (an
	// error wrapping ErrExited), or nil.
	Alive func() error
	// Broken, if set, is called when a call timed out or the connection
	// failed; it ends the plugin and returns the error to report, given
	// the error so far.
	Broken func(err error) error
}

// Info is what GetInfo reported.
type Info struct {
	Name       string
	Feedback   bool
	SDKVersion string
}

// Remote is a core.Scheduler served by a plugin. Every plan it returns has
// passed core.Plan.Validate against the workload it was made for.
type Remote struct {
	cfg  Config
	info Info
}

// feedbackRemote is a Remote whose plugin implements Observe; only it
// satisfies core.SchedulerWithFeedback, so the runtime does not send
// traces to plugins that would ignore them.
type feedbackRemote struct{ *Remote }

var (
	_ core.Scheduler             = (*Remote)(nil)
	_ core.SchedulerWithFeedback = feedbackRemote{}
)

// Connect asks the plugin for its name and capabilities and returns the
// scheduler: a core.SchedulerWithFeedback when the plugin has Observe.
func Connect(ctx context.Context, cfg Config) (core.Scheduler, Info, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	r := &Remote{cfg: cfg}
	var resp *pb.GetInfoResponse
	err := r.call(ctx, "GetInfo", func(ctx context.Context) (err error) {
		resp, err = cfg.Client.GetInfo(ctx, &pb.GetInfoRequest{})
		return err
	})
	if err != nil {
		return nil, Info{}, err
	}
	r.info = Info{Name: resp.GetName(), Feedback: resp.GetCapabilities().GetFeedback(), SDKVersion: resp.GetSdkVersion()}
	if r.info.Name == "" {
		r.info.Name = "unnamed"
	}
	if r.info.Feedback {
		return feedbackRemote{r}, r.info, nil
	}
	return r, r.info, nil
}

// Name returns the name the plugin reported.
func (r *Remote) Name() string { return r.info.Name }

// String names the plugin for the host's messages: "plugin NAME (WHERE)".
func (r *Remote) String() string { return fmt.Sprintf("plugin %s (%s)", r.info.Name, r.cfg.Where) }

func (r *Remote) label() string {
	if r.info.Name == "" {
		return fmt.Sprintf("%s: plugin %s", r.cfg.Prefix, r.cfg.Where)
	}
	return fmt.Sprintf("%s: plugin %s (%s)", r.cfg.Prefix, r.info.Name, r.cfg.Where)
}

// Schedule sends the workload's plain data and validates the plan that
// comes back.
func (r *Remote) Schedule(ctx context.Context, w *core.Workload) (*core.Plan, error) {
	req := &pb.ScheduleRequest{Workload: toproto.Workload(w)}
	var resp *pb.ScheduleResponse
	err := r.call(ctx, "Schedule", func(ctx context.Context) (err error) {
		resp, err = r.cfg.Client.Schedule(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	return r.plan("Schedule", resp.GetPlan(), w)
}

// Observe sends the trace of an iteration; a nil plan keeps the current
// one.
func (f feedbackRemote) Observe(ctx context.Context, w *core.Workload, t *core.Trace) (*core.Plan, error) {
	r := f.Remote
	req := &pb.ObserveRequest{Workload: toproto.Workload(w), Trace: toproto.Trace(t)}
	var resp *pb.ObserveResponse
	err := r.call(ctx, "Observe", func(ctx context.Context) (err error) {
		resp, err = r.cfg.Client.Observe(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	if resp.GetPlan() == nil {
		return nil, nil
	}
	return r.plan("Observe", resp.GetPlan(), w)
}

func (r *Remote) plan(call string, m *pb.Plan, w *core.Workload) (*core.Plan, error) {
	p, err := fromproto.Plan(m)
	if err == nil {
		err = p.Validate(w)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %s returned an invalid plan: %w", r.label(), call, err)
	}
	return p, nil
}

// call runs one RPC under the per-call deadline and turns its failure into
// an error that names the plugin and keeps errors.Is working.
func (r *Remote) call(ctx context.Context, name string, f func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %s: %w", r.label(), name, err)
	}
	if r.cfg.Alive != nil {
		if err := r.cfg.Alive(); err != nil {
			return fmt.Errorf("%s: %s: %w", r.label(), name, err)
		}
	}
	out, err := proc.Call(ctx, r.cfg.Timeout, f)
	switch {
	case out == proc.OK:
		return nil
	case out == proc.CallerDone: // the caller gave up; the plugin saw its context end
		return fmt.Errorf("%s: %s: %w", r.label(), name, err)
	case out == proc.TimedOut:
		err = fmt.Errorf("%s: %s did not answer within %v: %w", r.label(), name, r.cfg.Timeout, context.DeadlineExceeded)
	case status.Code(err) == codes.Unavailable:
		err = fmt.Errorf("%s: %s: lost the connection to the plugin (%s)", r.label(), name, status.Convert(err).Message())
	default:
		return fmt.Errorf("%s: %s: %w", r.label(), name, fromproto.Error(err))
	}
	if r.cfg.Broken != nil {
		return r.cfg.Broken(err)
	}
	return err
}
