package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/engine"
	_ "github.com/gnnkit/gnnkit/models"         // the models a host may load: gcn, sage, gat, mbgnn, uno, dlrm
	_ "github.com/gnnkit/gnnkit/models/dynamic" // tgcn, evolvegcn
	"github.com/gnnkit/gnnkit/plugins/internal/fromproto"
	"github.com/gnnkit/gnnkit/plugins/internal/toproto"
	pb "github.com/gnnkit/gnnkit/plugins/proto/backend/v1"
)

// ServeOpt configures Serve.
type ServeOpt func(*serveConfig)

type serveConfig struct {
	logger hclog.Logger
	test   *plugin.ServeTestConfig
}

// WithLogger sets the logger of the worker side of go-plugin (default:
// warnings and errors as JSON on stderr, which the host reads; set
// GNNKIT_PLUGIN_LOG=debug for more).
func WithLogger(l hclog.Logger) ServeOpt { return func(c *serveConfig) { c.logger = l } }

// WithTestConfig serves in go-plugin's test mode: Serve returns when the
// config's context ends instead of owning the process.
func WithTestConfig(t *plugin.ServeTestConfig) ServeOpt { return func(c *serveConfig) { c.test = t } }

// Serve serves b's devices to a gnnkit host until the host closes the
// worker, then closes b and returns; the worker's main should return too.
// Run by hand (not by a host), it prints a notice and exits with status 1.
//
// The worker is backend-agnostic: gnnkit-cuda serves backends/cuda, the
// tests serve the CPU backend. A host's Load builds an engine.Trainer over
// all of b's devices; each Run executes a slice of the host's plan there
// (engine.Trainer.RunSlice).
func Serve(b core.Backend, opts ...ServeOpt) {
	if b == nil {
		panic("worker: Serve called with a nil backend")
	}
	c := serveConfig{}
	for _, o := range opts {
		o(&c)
	}
	if c.logger == nil {
		level := hclog.LevelFromString(os.Getenv("GNNKIT_PLUGIN_LOG"))
		if level == hclog.NoLevel {
			level = hclog.Warn
		}
		c.logger = hclog.New(&hclog.LoggerOptions{Name: "worker", Level: level, Output: os.Stderr, JSONFormat: true})
	}
	s := &server{b: b}
	defer s.shutdown()
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: serverPlugins(s),
		GRPCServer: func(o []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(o, serverOptions()...)...)
		},
		Logger: c.logger,
		Test:   c.test,
	})
}

// server is the worker side of the protocol over one backend.
type server struct {
	pb.UnimplementedBackendServer
	b core.Backend

	// mu serialises Load, Run and Close: one trainer, one slice at a time.
	mu      sync.Mutex
	spec    *engine.RemoteSpec
	tr      *engine.Trainer
	batchID uint64
	batch   *engine.Batch
	sliceID uint64
	slice   *core.Plan
	closed  bool
}

func (s *server) Devices(context.Context, *pb.DevicesRequest) (resp *pb.DevicesResponse, err error) {
	defer recoverTo("Devices", &err)
	resp = &pb.DevicesResponse{Backend: s.b.Name(), WorkerVersion: Version}
	for _, d := range s.b.Devices() {
		resp.Devices = append(resp.Devices, toproto.DeviceInfo(d.Info()))
	}
	return resp, nil
}

func (s *server) Load(stream pb.Backend_LoadServer) (err error) {
	defer recoverTo("Load", &err)
	var a assembler
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := a.add(m); err != nil {
			return status.Errorf(codes.InvalidArgument, "worker: load: %v", err)
		}
	}
	spec, err := a.finish()
	if err != nil {
		return toproto.Error(fmt.Errorf("worker: load: %w", err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return status.Error(codes.FailedPrecondition, "worker: closed")
	}
	tr, err := engine.New(engine.Config{Model: spec.Model, Data: spec.Data, Devices: s.b.Devices(),
		Optimizer: spec.Optimizer, Seed: spec.Seed})
	if err != nil {
		return toproto.Error(fmt.Errorf("worker: load: %w", err))
	}
	if s.tr != nil {
		s.tr.Close()
	}
	s.spec, s.tr = spec, tr
	s.batch, s.batchID, s.slice, s.sliceID = nil, 0, nil, 0
	return stream.SendAndClose(&pb.LoadResponse{})
}

func (s *server) Run(ctx context.Context, req *pb.RunRequest) (resp *pb.RunResponse, err error) {
	defer recoverTo("Run", &err)
	s.mu.Lock()
	defer s.mu.Unlock()
	sl, err := s.decodeRun(req)
	if err != nil {
		return nil, err
	}
	res, err := s.tr.RunSlice(ctx, sl)
	if err != nil {
		return nil, toproto.Error(fmt.Errorf("worker: %w", err))
	}
	return &pb.RunResponse{Loss: res.Loss, Grads: encodeTensors(s.spec.Model, res.Grads), Trace: toproto.Trace(res.Trace)}, nil
}

// decodeRun turns a request into a slice, using (and updating) the cached
// batch and slice.
func (s *server) decodeRun(req *pb.RunRequest) (*engine.Slice, error) {
	if s.closed {
		return nil, status.Error(codes.FailedPrecondition, "worker: closed")
	}
	if s.tr == nil {
		return nil, status.Error(codes.FailedPrecondition, "worker: Run before Load")
	}
	bad := func(format string, a ...any) error {
		return status.Errorf(codes.InvalidArgument, "worker: run: "+format, a...)
	}
	if req.GetStep() < 0 || int64(int(req.GetStep())) != req.GetStep() {
		return nil, bad("step %d", req.GetStep())
	}
	params, err := decodeTensors(s.spec.Model, req.GetParams())
	if err != nil {
		return nil, bad("%v", err)
	}
	if req.GetBatch() != nil {
		b, err := decodeBatch(req.GetBatch(), s.spec)
		if err != nil {
			return nil, bad("%v", err)
		}
		s.batch, s.batchID = b, req.GetBatchId()
	} else if s.batch == nil || s.batchID != req.GetBatchId() {
		return nil, status.Errorf(codes.FailedPrecondition, "worker: run: batch %d was never sent", req.GetBatchId())
	}
	if req.GetSlice() != nil {
		p, err := fromproto.Plan(req.GetSlice())
		if err != nil {
			return nil, bad("%v", err)
		}
		s.slice, s.sliceID = p, req.GetSliceId()
	} else if s.slice == nil || s.sliceID != req.GetSliceId() {
		return nil, status.Errorf(codes.FailedPrecondition, "worker: run: slice %d was never sent", req.GetSliceId())
	}
	return &engine.Slice{Step: int(req.GetStep()), Params: params, Batch: s.batch, Plan: s.slice, OpTrace: req.GetOpTrace()}, nil
}

func (s *server) Close(context.Context, *pb.CloseRequest) (resp *pb.CloseResponse, err error) {
	defer recoverTo("Close", &err)
	s.shutdown()
	return &pb.CloseResponse{}, nil
}

// shutdown frees the trainer and the backend, once.
func (s *server) shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.tr != nil {
		s.tr.Close()
		s.tr = nil
	}
	_ = s.b.Close()
}

func recoverTo(call string, err *error) {
	if r := recover(); r != nil {
		fmt.Fprintf(os.Stderr, "worker: panic in %s: %v\n%s", call, r, debug.Stack())
		*err = status.Errorf(codes.Internal, "worker: panic in %s: %v (stack on the worker's stderr)", call, r)
	}
}
