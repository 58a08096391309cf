package wire

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/plugins/internal/fromproto"
	"github.com/gnnkit/gnnkit/plugins/internal/toproto"
	pb "github.com/gnnkit/gnnkit/plugins/proto/scheduler/v1"
)

// SDKVersion identifies this implementation of the plugin side in GetInfo.
const SDKVersion = "gnnkit-sdk/1"

// Server exposes a core.Scheduler as the gRPC scheduler service. A panic
// in the scheduler becomes an INTERNAL error (with the stack on the
// plugin's stderr) rather than a dead plugin.
type Server struct {
	pb.UnimplementedSchedulerServer
	Impl core.Scheduler
}

// GetInfo reports the name and optional calls of the scheduler.
func (s *Server) GetInfo(context.Context, *pb.GetInfoRequest) (resp *pb.GetInfoResponse, err error) {
	defer recoverTo("Name", &err)
	_, fb := s.Impl.(core.SchedulerWithFeedback)
	return &pb.GetInfoResponse{Name: s.Impl.Name(), SdkVersion: SDKVersion,
		Capabilities: &pb.Capabilities{Feedback: fb}}, nil
}

// Schedule runs the scheduler on the workload of the request.
func (s *Server) Schedule(ctx context.Context, req *pb.ScheduleRequest) (resp *pb.ScheduleResponse, err error) {
	defer recoverTo("Schedule", &err)
	w, err := fromproto.Workload(req.GetWorkload())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	p, err := s.Impl.Schedule(ctx, w)
	if err != nil {
		return nil, toproto.Error(err)
	}
	if p == nil {
		return nil, status.Errorf(codes.Internal, "sdk: scheduler %s returned neither a plan nor an error", s.Impl.Name())
	}
	return &pb.ScheduleResponse{Plan: toproto.Plan(p)}, nil
}

// Observe passes a trace to a scheduler with feedback.
func (s *Server) Observe(ctx context.Context, req *pb.ObserveRequest) (resp *pb.ObserveResponse, err error) {
	defer recoverTo("Observe", &err)
	fb, ok := s.Impl.(core.SchedulerWithFeedback)
	if !ok {
		return nil, toproto.Error(fmt.Errorf("sdk: scheduler %s takes no feedback: %w", s.Impl.Name(), core.ErrUnsupported))
	}
	w, err := fromproto.Workload(req.GetWorkload())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	tr, err := fromproto.Trace(req.GetTrace())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	p, err := fb.Observe(ctx, w, tr)
	if err != nil {
		return nil, toproto.Error(err)
	}
	return &pb.ObserveResponse{Plan: toproto.Plan(p)}, nil
}

func recoverTo(call string, err *error) {
	if r := recover(); r != nil {
		fmt.Fprintf(os.Stderr, "sdk: scheduler panicked in %s: %v\n%s", call, r, debug.Stack())
		*err = status.Errorf(codes.Internal, "sdk: the scheduler panicked in %s: %v (stack on the plugin's stderr)", call, r)
	}
}
