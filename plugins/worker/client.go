package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/plugins/internal/fromproto"
	"github.com/gnnkit/gnnkit/plugins/internal/proc"
	"github.com/gnnkit/gnnkit/plugins/internal/toproto"
	pb "github.com/gnnkit/gnnkit/plugins/proto/backend/v1"
)

// Defaults for Options.
const (
	DefaultTimeout      = 5 * time.Minute
	DefaultLoadTimeout  = 10 * time.Minute
	DefaultStartTimeout = time.Minute
)

// TimeoutEnv overrides Options.Timeout's default (a Go duration, e.g. 30s).
const TimeoutEnv = "GNNKIT_WORKER_TIMEOUT"

// Options configure Start; the zero value is useful.
type Options struct {
	// Name is the backend name the host gives the worker's devices: the
	// worker's device BACKEND:i appears as NAME:i. Empty: the worker's own
	// ids (gnnkit-cuda's are cuda:0, cuda:1, ...).
	Name string
	// Backend is passed to the worker (BackendOptions) for opening its
	// backend: device count, threads, memory cap.
	Backend core.BackendOptions
	// Args and Env are added to the worker's command line and environment.
	Args []string
	Env  []string
	// Timeout bounds each Run and Close (default 5 min, or
	// $GNNKIT_WORKER_TIMEOUT); a worker that passes it is killed.
	Timeout time.Duration
	// LoadTimeout bounds Load (default 10 min).
	LoadTimeout time.Duration
	// StartTimeout bounds the launch, the handshake and Devices (default
	// 1 min: a driver's first initialisation can be slow).
	StartTimeout time.Duration
	// Stderr, if set, receives the worker's stderr and stdout as it runs.
	// The host always keeps the last lines for its error messages.
	Stderr io.Writer
}

// Worker is a running worker process: an engine.Remote whose devices are
// the worker's backend's.
type Worker struct {
	path    string
	opts    Options
	cmd     *exec.Cmd
	client  *plugin.Client
	rpc     pb.BackendClient
	tail    *proc.Tail
	backend string
	version string
	pid     int
	infos   []core.DeviceInfo
	toHost  idMap
	toWork  idMap

	deadMu sync.Mutex
	dead   error // why the worker can no longer be called; nil while it can

	mu      sync.Mutex // one call at a time; guards the fields below
	spec    *engine.RemoteSpec
	batch   *engine.Batch
	batchID uint64
	slice   *core.Plan
	sliceID uint64
	nextID  uint64

	closeOnce sync.Once
}

var _ engine.Remote = (*Worker)(nil)

// StartError explains why a worker could not start.
type StartError struct {
	Path string
	// Reason is a one-line cause: the exit status and the worker's last
	// output ("exit status 1: Error in initialization ... NoDevice"), or
	// what was wrong before it ran ("no such file").
	Reason string
	err    error
}

func (e *StartError) Error() string {
	return fmt.Sprintf("worker %s could not start: %s", e.Path, e.Reason)
}

// Unwrap matches ErrLaunch and the underlying cause (fs.ErrNotExist for a
// missing binary, context.DeadlineExceeded for no handshake in time).
func (e *StartError) Unwrap() []error { return []error{ErrLaunch, e.err} }

// Start starts the worker binary at path, completes the handshake and asks
// for its devices. On error no process is left running and the error is a
// *StartError.
func Start(ctx context.Context, path string, o Options) (*Worker, error) {
	fail := func(reason string, err error) error {
		return &StartError{Path: path, Reason: reason, err: err}
	}
	if err := ctx.Err(); err != nil {
		return nil, fail(err.Error(), err)
	}
	abs, err := proc.Executable(path, "worker")
	if err != nil {
		return nil, fail(err.Error(), err)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
		if d, err := time.ParseDuration(os.Getenv(TimeoutEnv)); err == nil && d > 0 {
			o.Timeout = d
		}
	}
	if o.LoadTimeout <= 0 {
		o.LoadTimeout = DefaultLoadTimeout
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < o.StartTimeout {
		o.StartTimeout = max(time.Until(dl), time.Millisecond)
	}
	bo, err := json.Marshal(o.Backend)
	if err != nil {
		return nil, fail(err.Error(), err)
	}
	w := &Worker{path: path, opts: o, tail: &proc.Tail{Max: 8 << 10}}
	w.cmd = exec.Command(abs, o.Args...)
	w.cmd.Env = append(append([]string(nil), o.Env...), OptionsEnv+"="+string(bo))
	var out io.Writer = w.tail
	if o.Stderr != nil {
		out = io.MultiWriter(w.tail, o.Stderr)
	}
	w.client = plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: clientPlugins(),
		Cmd:              w.cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		StartTimeout:     o.StartTimeout,
		Stderr:           out,
		SyncStdout:       out,
		SyncStderr:       out,
		Logger:           proc.Logger("gnnkit-worker"),
		GRPCDialOptions:  dialOptions(),
	})
	rpc, err := w.client.Client()
	if err != nil {
		return nil, w.startErr(err)
	}
	if w.cmd.Process != nil {
		w.pid = w.cmd.Process.Pid
	}
	raw, err := rpc.Dispense(pluginName)
	if err != nil {
		w.kill()
		return nil, fail(err.Error(), err)
	}
	bc, ok := raw.(pb.BackendClient)
	if !ok {
		w.kill()
		return nil, fail(fmt.Sprintf("dispensed %T, want a backend client", raw), ErrLaunch)
	}
	w.rpc = bc
	dctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	resp, err := bc.Devices(dctx, &pb.DevicesRequest{})
	if err != nil {
		w.kill()
		reason := "Devices: " + status.Convert(err).Message()
		if dctx.Err() != nil {
			reason = fmt.Sprintf("no answer to Devices within %v", o.StartTimeout)
			err = context.DeadlineExceeded
		}
		return nil, fail(reason+w.tail.LastLines(), err)
	}
	var devs []core.DeviceInfo
	for _, d := range resp.GetDevices() {
		info, err := fromproto.DeviceInfo(d)
		if err != nil {
			w.kill()
			return nil, fail(err.Error(), err)
		}
		devs = append(devs, info)
	}
	if len(devs) == 0 {
		w.kill()
		return nil, fail(fmt.Sprintf("its %s backend has no devices", resp.GetBackend()), ErrLaunch)
	}
	w.backend, w.version = resp.GetBackend(), resp.GetWorkerVersion()
	if w.toHost, w.toWork, w.infos, err = hostIDs(o.Name, devs); err != nil {
		w.kill()
		return nil, fail(err.Error(), err)
	}
	return w, nil
}

// Name names the worker in messages: "gnnkit-cuda (PATH, pid N)".
func (w *Worker) Name() string {
	return fmt.Sprintf("%s (%s, pid %d)", filepath.Base(w.path), w.path, w.pid)
}

// Backend is the name of the backend the worker serves ("cuda").
func (w *Worker) Backend() string { return w.backend }

// Version is the worker implementation's version string.
func (w *Worker) Version() string { return w.version }

// Pid is the worker's process id.
func (w *Worker) Pid() int { return w.pid }

// Devices lists the worker's devices under the host's ids.
func (w *Worker) Devices() []core.DeviceInfo { return append([]core.DeviceInfo(nil), w.infos...) }

// Exited reports whether the worker process has ended.
func (w *Worker) Exited() bool { return w.client.Exited() }

// Load sends the model, data, optimizer settings and seed (engine.Remote).
func (w *Worker) Load(ctx context.Context, spec *engine.RemoteSpec) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.call(ctx, "Load", w.opts.LoadTimeout, func(ctx context.Context) error {
		stream, err := w.rpc.Load(ctx)
		if err != nil {
			return err
		}
		if err := loadMessages(spec, chunkElems, stream.Send); err != nil {
			if errors.Is(err, io.EOF) { // the worker refused; its error comes with CloseAndRecv
				_, err = stream.CloseAndRecv()
			}
			return err
		}
		_, err = stream.CloseAndRecv()
		return err
	})
	if err != nil {
		return err
	}
	w.spec = spec
	w.batch, w.slice = nil, nil
	return nil
}

// Run sends one slice and returns its result (engine.Remote). The batch
// and the slice are sent only when they differ from the previous call's
// (by pointer); the parameters when the engine passes them.
func (w *Worker) Run(ctx context.Context, s *engine.Slice) (*engine.SliceResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.spec == nil {
		return nil, fmt.Errorf("worker %s: Run before Load", w.Name())
	}
	req := &pb.RunRequest{Step: int64(s.Step), Params: encodeTensors(w.spec.Model, s.Params), OpTrace: s.OpTrace}
	if s.Batch != w.batch || w.batch == nil {
		w.nextID++
		w.batchID = w.nextID
		req.Batch = encodeBatch(s.Batch, w.spec.Data.Graph)
	}
	req.BatchId = w.batchID
	if s.Plan != w.slice || w.slice == nil {
		sp := toproto.Plan(s.Plan)
		for _, t := range sp.Tasks {
			id, ok := w.toWork.get(core.DeviceID(t.Device))
			if !ok {
				return nil, fmt.Errorf("worker %s: the slice has task %d on %s, which is not one of its devices", w.Name(), t.Id, t.Device)
			}
			t.Device = string(id)
		}
		w.nextID++
		w.sliceID = w.nextID
		req.Slice = sp
	}
	req.SliceId = w.sliceID
	if n := proto.Size(req); n > maxMessageBytes {
		w.batch, w.slice = nil, nil
		return nil, fmt.Errorf("worker %s: the Run request is %s, over the protocol's %s message limit (a smaller batch, or fewer units per slice)",
			w.Name(), core.FormatBytes(int64(n)), core.FormatBytes(maxMessageBytes))
	}
	var resp *pb.RunResponse
	err := w.call(ctx, "Run", w.opts.Timeout, func(ctx context.Context) (err error) {
		resp, err = w.rpc.Run(ctx, req)
		return err
	})
	if err != nil {
		w.batch, w.slice = nil, nil // send both again next time
		return nil, err
	}
	w.batch, w.slice = s.Batch, s.Plan
	grads, err := decodeTensors(w.spec.Model, resp.GetGrads())
	if err != nil {
		return nil, fmt.Errorf("worker %s: Run returned bad gradients: %v", w.Name(), err)
	}
	tr, err := fromproto.Trace(resp.GetTrace())
	if err != nil {
		return nil, fmt.Errorf("worker %s: Run returned a bad trace: %v", w.Name(), err)
	}
	if tr != nil {
		for i, e := range tr.Events {
			if id, ok := w.toHost.get(e.Device); ok {
				tr.Events[i].Device = id
			}
		}
		peaks := make(map[core.DeviceID]int64, len(tr.PeakMem))
		for d, p := range tr.PeakMem {
			if id, ok := w.toHost.get(d); ok {
				d = id
			}
			peaks[d] = p
		}
		tr.PeakMem = peaks
	}
	return &engine.SliceResult{Loss: resp.GetLoss(), Grads: grads, Trace: tr}, nil
}

// Close asks the worker to free its devices, then ends the process (killing
// it if it has not exited within a few seconds) and waits for it. Calls
// after Close fail with ErrExited. Close is idempotent and returns nil.
func (w *Worker) Close() error {
	w.closeOnce.Do(func() {
		if w.alive() == nil {
			ctx, cancel := context.WithTimeout(context.Background(), min(w.opts.Timeout, 10*time.Second))
			_, _ = w.rpc.Close(ctx, &pb.CloseRequest{})
			cancel()
		}
		w.setDead(&workerError{msg: "the worker was closed", errs: []error{ErrExited}})
		done := make(chan struct{})
		go func() { w.client.Kill(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second): // the graceful path is stuck
			w.kill()
			<-done
		}
	})
	return nil
}

// call runs one RPC under its deadline and turns a failure into an error
// that names the worker; a hung or crashed worker is killed.
func (w *Worker) call(ctx context.Context, name string, timeout time.Duration, f func(context.Context) error) error {
	label := "worker " + w.Name()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %s: %w", label, name, err)
	}
	if err := w.alive(); err != nil {
		return fmt.Errorf("%s: %s: %w", label, name, err)
	}
	out, err := proc.Call(ctx, timeout, f)
	switch {
	case out == proc.OK:
		return nil
	case out == proc.CallerDone: // the caller gave up; the worker saw its context end
		return fmt.Errorf("%s: %s: %w", label, name, err)
	case out == proc.TimedOut:
		err = fmt.Errorf("%s: %s did not answer within %v: %w", label, name, timeout, context.DeadlineExceeded)
	case status.Code(err) == codes.Unavailable || w.client.Exited():
		err = fmt.Errorf("%s: %s: lost the connection to the worker (%s)", label, name, status.Convert(err).Message())
	default:
		return fmt.Errorf("%s: %s: %w", label, name, fromproto.Error(err))
	}
	return w.broken(err)
}

func (w *Worker) setDead(err error) {
	w.deadMu.Lock()
	defer w.deadMu.Unlock()
	if w.dead == nil {
		w.dead = err
	}
}

// alive returns why the worker can no longer be called, or nil.
func (w *Worker) alive() error {
	if w.client.Exited() {
		w.setDead(&workerError{msg: fmt.Sprintf("the worker process exited earlier (%s)%s", w.exitStatus(), w.tail.LastLines()), errs: []error{ErrExited}})
	}
	w.deadMu.Lock()
	defer w.deadMu.Unlock()
	return w.dead
}

// broken handles a call that timed out or lost its connection: give a
// crashing worker a moment to exit, then kill it, so nothing is left.
func (w *Worker) broken(err error) error {
	deadline := time.Now().Add(time.Second)
	if errors.Is(err, context.DeadlineExceeded) {
		deadline = time.Now() // hung: no point waiting
	}
	for !w.client.Exited() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	what := "the worker was killed"
	if w.client.Exited() {
		what = fmt.Sprintf("the worker process exited (%s)", w.exitStatus())
	}
	w.kill()
	w.setDead(&workerError{msg: what + " earlier" + w.tail.LastLines(), errs: []error{ErrExited}})
	return &workerError{msg: err.Error() + "; " + what + w.tail.LastLines(), errs: []error{err, ErrExited}}
}

// kill ends the process at once and waits for go-plugin to reap it.
func (w *Worker) kill() {
	if w.cmd.Process != nil && !w.client.Exited() {
		_ = w.cmd.Process.Kill()
	}
	w.client.Kill()
}

func (w *Worker) exitStatus() string {
	if w.cmd.ProcessState == nil {
		return "status unknown"
	}
	return w.cmd.ProcessState.String()
}

// startErr explains a failed start from the exit status and the worker's
// output; the process is gone afterwards.
func (w *Worker) startErr(err error) error {
	msg := err.Error()
	// Let an exiting worker finish, so its status and output are known.
	for deadline := time.Now().Add(2 * time.Second); !w.client.Exited() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	exited := w.client.Exited()
	w.kill()
	status := "killed"
	if exited {
		status = w.exitStatus()
	}
	out := w.tail.Lines()
	// go-plugin reads the handshake from stdout: a worker whose library
	// init printed there and exited (gorgonia.org/cu without a GPU) shows
	// up as an unrecognised message, and go-plugin kills it at once, so
	// its own exit status is usually lost; its first line is the reason.
	if rest, ok := strings.CutPrefix(msg, "Unrecognized remote plugin message: "); ok {
		line, _, _ := strings.Cut(rest, "\n")
		if line = strings.TrimSpace(line); line != "" && !strings.Contains(strings.Join(out, "\n"), line) {
			out = append([]string{line}, out...)
		}
		if status == "signal: killed" || status == "killed" {
			status = "it printed"
		}
	}
	reason := status
	switch {
	case strings.HasPrefix(msg, "incompatible API version"):
		v := "another version"
		if _, after, ok := strings.Cut(msg, "Plugin version: "); ok {
			v, _, _ = strings.Cut(after, ",")
		}
		reason = fmt.Sprintf("it speaks backend protocol %s, this gnnkit speaks %d; rebuild it from the same source", v, ProtocolVersion)
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		reason = fmt.Sprintf("no handshake within %v", w.opts.StartTimeout)
		if len(out) > 0 {
			reason += ": " + strings.Join(last(out, 3), " | ")
		}
		return &StartError{Path: w.path, Reason: reason, err: context.DeadlineExceeded}
	case len(out) > 0:
		reason += ": " + strings.Join(last(out, 3), " | ")
	case !exited:
		reason = "no handshake (" + msg + ")"
	}
	return &StartError{Path: w.path, Reason: reason, err: err}
}

func last(s []string, n int) []string { return s[max(0, len(s)-n):] }

// workerError is an error with its own message that matches several
// sentinels (errors.Is) without repeating their text.
type workerError struct {
	msg  string
	errs []error
}

func (e *workerError) Error() string   { return e.msg }
func (e *workerError) Unwrap() []error { return e.errs }
