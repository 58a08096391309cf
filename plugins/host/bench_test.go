package host_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/protobuf/proto"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/plugins/host"
	"github.com/gnnkit/gnnkit/plugins/internal/fromproto"
	"github.com/gnnkit/gnnkit/plugins/internal/toproto"
	"github.com/gnnkit/gnnkit/plugins/internal/wire"
	pb "github.com/gnnkit/gnnkit/plugins/proto/scheduler/v1"
)

// bigWorkload is the benchmark's workload: a batch of nodes node ids, a
// GCN-sized op list (12 ops) and one device.
func bigWorkload(nodes int) *core.Workload {
	w := testWorkload()
	w.Dims = core.Dims{Nodes: int64(nodes), Edges: 10 * int64(nodes)}
	w.Devices = w.Devices[:1]
	w.Ops = nil
	for i := 0; i < 12; i++ {
		op := core.OpInfo{Index: i, Name: fmt.Sprintf("op%d", i), Kind: core.OpKind(i % 5), Cost: core.Cost{FLOPs: 1 << 30, BytesMoved: 1 << 28}}
		if i > 0 {
			op.Deps = []int{i - 1}
		}
		w.Ops = append(w.Ops, op)
	}
	w.Batch = make([]int32, nodes)
	for i := range w.Batch {
		w.Batch[i] = int32(i)
	}
	return w
}

// BenchmarkSchedule measures one Schedule call for a workload of 1M nodes
// whose plan has 10k units (and, as for one mini-batch, 1024 nodes in 4
// units): in process (the scheduler alone, and with the
// Plan.Validate every runtime does), and through a real plugin process
// (conversion, marshalling, the local socket, the plugin's own decoding
// and encoding, and the host's validation). The difference is the
// plugin's overhead.
func BenchmarkSchedule(b *testing.B) {
	for _, size := range []struct{ nodes, units int }{{1 << 20, 10_000}, {1024, 4}} {
		benchSchedule(b, size.nodes, size.units)
	}
}

func benchSchedule(b *testing.B, nodes, units int) {
	w := bigWorkload(nodes)
	name := fmt.Sprintf("nodes=%d/units=%d", nodes, units)
	in := chunks{units: units}
	ctx := context.Background()
	b.Run("way=inprocess/"+name, func(b *testing.B) {
		for b.Loop() {
			if _, err := in.Schedule(ctx, w); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("way=inprocess+validate/"+name, func(b *testing.B) {
		for b.Loop() {
			p, err := in.Schedule(ctx, w)
			if err == nil {
				err = p.Validate(w)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	env := fmt.Sprintf("GNNKIT_TEST_UNITS=%d", units)
	b.Run("way=subprocess-rpc/"+name, func(b *testing.B) {
		c := rawClient(b, "chunks", env)
		for b.Loop() {
			resp, err := c.Schedule(ctx, &pb.ScheduleRequest{Workload: toproto.Workload(w)})
			if err == nil {
				_, err = fromproto.Plan(resp.GetPlan())
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("way=subprocess/"+name, func(b *testing.B) {
		p := mustLaunch(b, "chunks", host.Options{Env: []string{env}})
		s := p.Scheduler()
		for b.Loop() {
			if _, err := s.Schedule(ctx, w); err != nil {
				b.Fatal(err)
			}
		}
		plan, _ := in.Schedule(ctx, w)
		req := proto.Size(&pb.ScheduleRequest{Workload: toproto.Workload(w)})
		resp := proto.Size(&pb.ScheduleResponse{Plan: toproto.Plan(plan)})
		b.ReportMetric(float64(req+resp)/1e6, "MB-on-wire/op")
	})
}

// rawClient launches the helper plugin kind with go-plugin directly, as
// the host does, and returns the generated client: the protocol without
// the host's plan validation, to time the wire alone.
func rawClient(b *testing.B, kind string, env ...string) pb.SchedulerClient {
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(env, kindEnv+"="+kind)
	c := plugin.NewClient(&plugin.ClientConfig{HandshakeConfig: wire.Handshake, VersionedPlugins: wire.ClientPlugins(),
		Cmd: cmd, AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC}, AutoMTLS: true,
		Logger: hclog.NewNullLogger(), GRPCDialOptions: wire.DialOptions()})
	b.Cleanup(c.Kill)
	rpc, err := c.Client()
	if err != nil {
		b.Fatal(err)
	}
	raw, err := rpc.Dispense(wire.PluginName)
	if err != nil {
		b.Fatal(err)
	}
	return raw.(pb.SchedulerClient)
}

// BenchmarkValidate shows what Plan.Validate costs by plan shape: units
// on their own streams (linear) against units chained on one stream.
func BenchmarkValidate(b *testing.B) {
	for _, units := range []int{1000, 2000, 4000} {
		w := bigWorkload(1 << 16)
		p, _ := chunks{units: units}.Schedule(context.Background(), w)
		b.Run(fmt.Sprintf("streams=own/units=%d", units), func(b *testing.B) {
			for b.Loop() {
				if err := p.Validate(w); err != nil {
					b.Fatal(err)
				}
			}
		})
		one := *p
		one.Tasks = append([]core.Task(nil), p.Tasks...)
		for i := range one.Tasks {
			one.Tasks[i].Stream = 0
		}
		b.Run(fmt.Sprintf("streams=one/units=%d", units), func(b *testing.B) {
			for b.Loop() {
				if err := one.Validate(w); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
