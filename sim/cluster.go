package sim

import (
	"context"
	"errors"
	"fmt"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/internal/stats"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// DeviceModel is what the simulator knows about one device.
type DeviceModel struct {
	ID   core.DeviceID `json:"id"`
	Name string        `json:"name"`
	// GFLOPS and MemGBps are sustained FP32 GEMM speed (10⁹ FLOP/s) and
	// memory bandwidth (10⁹ B/s): the roofline estimate of an op without a
	// profile, the optimizer step and gradient sums.
	GFLOPS  float64 `json:"gflops"`
	MemGBps float64 `json:"mem_gbps"`
	// MemBytes is the device memory (0: unlimited); a simulated peak over
	// it is reported in Result.OverCap.
	MemBytes int64 `json:"mem_bytes"`
	// Launch is the fixed cost of an op per direction (kernel launches,
	// dispatch) in the roofline estimate.
	Launch time.Duration `json:"launch_ns"`
	// SMs, when positive, is the GPU's streaming multiprocessor count:
	// the roofline then prices each matrix product of an op (core.GEMMOp)
	// at GEMMEfficiency of GFLOPS, so that small micro-batches fill the
	// GPU worse than large ones. 0: FLOPs at GFLOPS whatever the size.
	SMs int `json:"sms,omitempty"`
	// Speedup divides a profile's times on this device (0 or 1: the
	// profile was taken on this kind of device).
	Speedup float64 `json:"speedup,omitempty"`
	// StreamOverlap, when positive, lets the device run tasks of different
	// streams at once: tasks of one kind share the device, and a
	// memory-bound task (graph, gather, elementwise ops) running beside a
	// compute-bound one (dense ops) gets (1 + StreamOverlap)/2 of the
	// device, as does its partner: 1 overlaps perfectly, a small value
	// hardly at all. 0 (the default): one task at a time.
	StreamOverlap float64 `json:"stream_overlap,omitempty"`
}

// Link is a one-way connection between two devices.
type Link struct {
	// GBps is the bandwidth in 10⁹ B/s (0: unlimited, only latency).
	GBps    float64       `json:"gbps"`
	Latency time.Duration `json:"latency_ns"`
	// PortGBps, when positive, is the bandwidth per direction of the
	// port each device reaches this link through (a PCIe x16 link, an
	// NVLink set, a NIC): the asynchronous transfers a device sends at
	// once through a port share it max-min fairly, as do those it
	// receives, each also at most GBps (flow-level; design-log.md "Transfer
	// model"). 0: no port, each ordered pair of devices has a link of
	// its own with one transfer at a time (FIFO).
	PortGBps float64 `json:"port_gbps,omitempty"`
	// Port names the port: links naming the same one share it (PCIe
	// peer copies and GPUDirect RDMA both cross a GPU's one x16 link).
	// Empty: a port of this link's own kind (node-local or between
	// nodes).
	Port string `json:"port,omitempty"`
}

// Time is how long n bytes take over the link.
func (l Link) Time(n int64) time.Duration {
	t := l.Latency
	if l.GBps > 0 && n > 0 {
		t += time.Duration(math.Round(float64(n) / l.GBps))
	}
	return t
}

// Cluster is a set of devices and the links between them.
type Cluster struct {
	Name    string        `json:"name"`
	Devices []DeviceModel `json:"devices"`
	// Link connects devices of one node (NodeSize devices, in order; 0:
	// all one node); InterNode connects devices of different nodes.
	Link      Link `json:"link"`
	NodeSize  int  `json:"node_size,omitempty"`
	InterNode Link `json:"inter_node,omitempty"`
	// Links overrides the link of an ordered pair (from, to).
	Links map[[2]core.DeviceID]Link `json:"-"`
	// SyncTransfers models the CPU executor: a task copies the values it
	// needs from other devices itself, at its start, holding its device.
	// Without it transfers run on a copy engine per link as soon as the
	// value is produced, overlapping compute (GPU runtimes' prefetch).
	SyncTransfers bool `json:"sync_transfers"`
	// DemandFirst models a runtime that copies in chunks and serves
	// first the values a task already waits for: through ports, a
	// transfer whose consumer's dependencies are done (next on its
	// stream, waiting only for values) takes the bandwidth before
	// transfers nobody waits for yet (prefetches).
	// Off (the default), the transfers through a port share it evenly.
	DemandFirst bool `json:"demand_first"`
	// OptStateFactor is optimizer state per parameter byte when neither
	// the workload (core.Workload.Optimizer, which gnnkit's trainer always
	// sets) nor the profile gives it; 0 means Adam's 2 (SGD with momentum
	// is 1; a workload says plain SGD's 0).
	OptStateFactor float64 `json:"opt_state_factor,omitempty"`
	// HostCores, when positive, makes the devices' compute share that
	// many host cores (logical CPU devices of one machine): while k tasks
	// compute at once, each runs at min(1, HostCores/k) of its speed
	// (processor sharing). 0: devices compute independently (GPUs).
	HostCores float64 `json:"host_cores,omitempty"`
}

// Device returns the model of the device with the given id.
func (c *Cluster) Device(id core.DeviceID) (*DeviceModel, bool) {
	for i := range c.Devices {
		if c.Devices[i].ID == id {
			return &c.Devices[i], true
		}
	}
	return nil, false
}

// LinkBetween returns the link from a to b.
func (c *Cluster) LinkBetween(a, b core.DeviceID) Link {
	if l, ok := c.Links[[2]core.DeviceID{a, b}]; ok {
		return l
	}
	if c.NodeSize > 0 {
		ia, ib := c.index(a), c.index(b)
		if ia >= 0 && ib >= 0 && ia/c.NodeSize != ib/c.NodeSize {
			return c.InterNode
		}
	}
	return c.Link
}

// PortBetween is the port a transfer from a to b crosses on both
// devices, by name (Link.Port, or the link's kind: "node" or
// "inter-node"), and its bandwidth per direction in 10⁹ B/s; 0: the
// link has no port (Link.PortGBps).
func (c *Cluster) PortBetween(a, b core.DeviceID) (string, float64) {
	l := c.LinkBetween(a, b)
	if l.PortGBps <= 0 {
		return "", 0
	}
	if l.Port != "" {
		return l.Port, l.PortGBps
	}
	if c.NodeSize > 0 {
		ia, ib := c.index(a), c.index(b)
		if ia >= 0 && ib >= 0 && ia/c.NodeSize != ib/c.NodeSize {
			return "inter-node", l.PortGBps
		}
	}
	return "node", l.PortGBps
}

// NodeOf is the node of device id: its index over NodeSize (0 when c is
// nil, NodeSize is 0 or id is not a device of c).
func (c *Cluster) NodeOf(id core.DeviceID) int {
	if c == nil || c.NodeSize <= 0 {
		return 0
	}
	return max(0, c.index(id)) / c.NodeSize
}

// index is the position of device id in c.Devices, -1 if none. Devices
// named BACKEND:i at position i (every preset's, CPU's and the CLI's) are
// found at once: the search asks for links between devices millions of
// times, and a scan of 512 devices each time was half its time.
func (c *Cluster) index(id core.DeviceID) int {
	s := string(id)
	if j := strings.LastIndexByte(s, ':'); j >= 0 {
		if i, err := strconv.Atoi(s[j+1:]); err == nil && i >= 0 && i < len(c.Devices) && c.Devices[i].ID == id {
			return i
		}
	}
	for i, d := range c.Devices {
		if d.ID == id {
			return i
		}
	}
	return -1
}

// Infos describes the devices for schedulers (Workload.Devices).
func (c *Cluster) Infos() []core.DeviceInfo {
	out := make([]core.DeviceInfo, len(c.Devices))
	for i, d := range c.Devices {
		b, _, _ := core.ParseDeviceID(string(d.ID))
		out[i] = core.DeviceInfo{ID: d.ID, Backend: b, Name: d.Name, MemCap: d.MemBytes, MemTotal: d.MemBytes,
			GFLOPS: d.GFLOPS, MemGBps: d.MemGBps}
	}
	return out
}

// Presets lists the cluster presets Preset knows.
func Presets() []string { return []string{"cpu", "nvlink-h100", "pcie-a100"} }

// Preset returns a cluster of n devices:
//
//   - "cpu": n logical CPU devices (cpu:0…) of one thread each, with
//     executor-style synchronous copies between them and the host's
//     cores shared (HostCores = runtime.NumCPU()). The defaults were
//     measured on the development machine (2-vCPU AMD EPYC, Zen 3, AVX2
//     kernels) with MeasureDevice and MeasureLink: 100 GFLOP/s GEMM,
//     40 GB/s streaming copy, copies between logical devices at 7 GB/s
//     with 8 µs latency. CPUCluster measures the machine at hand instead.
//   - "pcie-a100": n × NVIDIA A100 40GB PCIe (cuda:0…), 8 per node,
//     from NVIDIA's A100 datasheet: 19.5 TFLOP/s FP32 (non-tensor),
//     1,555 GB/s HBM2, 40 GB. Peer copies over PCIe Gen4 x16: 32 GB/s
//     nominal per direction, 24 GB/s sustained, 10 µs; between nodes 200
//     Gb/s HDR InfiniBand: 25 GB/s, 10 µs (we use 24 GB/s, 12 µs). Both
//     cross the GPU's one x16 link: one 24 GB/s port per direction,
//     shared by every transfer the GPU sends (or receives) at once.
//   - "nvlink-h100": n × NVIDIA H100 SXM5 80GB (cuda:0…), 8 per NVSwitch
//     node, from NVIDIA's H100 datasheet: 67 TFLOP/s FP32 (non-tensor),
//     3.35 TB/s HBM3, 80 GB; NVLink 4 at 900 GB/s per GPU (450 GB/s per
//     direction; we use 360 GB/s sustained, 3 µs); between nodes one 400
//     Gb/s NDR InfiniBand port per GPU: 50 GB/s, we use 40 GB/s, 8 µs.
//     NVLink and the NIC are two ports of 360 and 40 GB/s per direction.
//
// GPU compute is derated to 60% of peak FLOP/s and 80% of peak bandwidth
// (what large cuBLAS GEMMs and streaming kernels typically sustain), with
// 5 µs per op and direction for kernel launches; matrix products smaller
// than the GPU run at GEMMEfficiency of that (108 SMs on the A100, 132 on
// the H100 SXM5). Numbers are datasheet
// figures recalled, not measured here: treat GPU predictions as
// estimates, and pass a profile taken on the target for better ones.
func Preset(name string, n int) (*Cluster, error) {
	if n <= 0 {
		return nil, fmt.Errorf("sim: preset %s needs a positive device count, got %d", name, n)
	}
	switch name {
	case "cpu":
		c := CPU(n, DeviceModel{Name: "cpu", GFLOPS: 100, MemGBps: 40, Launch: time.Microsecond},
			Link{GBps: 7, Latency: 8 * time.Microsecond})
		c.HostCores = float64(runtime.NumCPU())
		return c, nil
	case "pcie-a100":
		d := DeviceModel{Name: "NVIDIA A100 40GB PCIe", GFLOPS: 0.6 * 19500, MemGBps: 0.8 * 1555, MemBytes: 40 << 30,
			Launch: 5 * time.Microsecond, SMs: 108}
		return gpus(name, n, d, 8, Link{GBps: 24, Latency: 10 * time.Microsecond, PortGBps: 24, Port: "pcie"},
			Link{GBps: 24, Latency: 12 * time.Microsecond, PortGBps: 24, Port: "pcie"}), nil
	case "nvlink-h100":
		d := DeviceModel{Name: "NVIDIA H100 SXM5 80GB", GFLOPS: 0.6 * 67000, MemGBps: 0.8 * 3350, MemBytes: 80 << 30,
			Launch: 5 * time.Microsecond, SMs: 132}
		return gpus(name, n, d, 8, Link{GBps: 360, Latency: 3 * time.Microsecond, PortGBps: 360, Port: "nvlink"},
			Link{GBps: 40, Latency: 8 * time.Microsecond, PortGBps: 40, Port: "nic"}), nil
	}
	return nil, fmt.Errorf("sim: unknown preset %q (known: %s)", name, strings.Join(Presets(), ", "))
}

func gpus(name string, n int, d DeviceModel, node int, intra, inter Link) *Cluster {
	c := &Cluster{Name: fmt.Sprintf("%s x%d", name, n), Link: intra, NodeSize: node, InterNode: inter}
	for i := range n {
		m := d
		m.ID = core.DeviceID(fmt.Sprintf("cuda:%d", i))
		c.Devices = append(c.Devices, m)
	}
	return c
}

// CPU returns n logical CPU devices cpu:0… of the given model, joined by
// link, with the CPU executor's synchronous copies.
func CPU(n int, m DeviceModel, link Link) *Cluster {
	c := &Cluster{Name: fmt.Sprintf("cpu x%d", n), Link: link, SyncTransfers: true}
	for i := range n {
		d := m
		d.ID = core.DeviceID(fmt.Sprintf("cpu:%d", i))
		c.Devices = append(c.Devices, d)
	}
	return c
}

// CPUCluster measures the given devices (MeasureDevice on the first,
// MeasureLink between the first two, MeasureHostCores on all) and returns
// them as a cluster with the CPU executor's synchronous copies.
func CPUCluster(ctx context.Context, devs []core.Device) (*Cluster, error) {
	if len(devs) == 0 {
		return nil, fmt.Errorf("sim: no devices to measure")
	}
	m, err := MeasureDevice(ctx, devs[0])
	if err != nil {
		return nil, err
	}
	link := Link{GBps: 7, Latency: 8 * time.Microsecond}
	if len(devs) > 1 {
		if link, err = MeasureLink(ctx, devs[0], devs[1]); err != nil {
			return nil, err
		}
	}
	cores, err := MeasureHostCores(ctx, devs)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: fmt.Sprintf("%s x%d (measured)", m.Name, len(devs)), Link: link, SyncTransfers: true, HostCores: cores}
	for _, d := range devs {
		dm := m
		dm.ID = d.ID()
		dm.MemBytes = d.Info().MemCap
		c.Devices = append(c.Devices, dm)
	}
	return c, nil
}

// testTensors allocates tensors on dev filled with pseudo-random values
// (zeros would let kernels skip work) and returns them with a release
// function.
func testTensors(dev core.Device, shapes ...[]int) ([]*core.Tensor, func(), error) {
	var ts []*core.Tensor
	free := func() {
		for _, t := range ts {
			dev.Free(t)
		}
	}
	for k, sh := range shapes {
		t, err := dev.Alloc(sh...)
		if err != nil {
			free()
			return nil, nil, fmt.Errorf("sim: measuring %s: %w", dev.ID(), err)
		}
		ts = append(ts, t)
		buf := make([]float32, t.Len())
		x := uint32(2463534242 + k)
		for i := range buf {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			buf[i] = float32(x%2001)/1000 - 1
		}
		if err := dev.Upload(t, buf); err != nil {
			free()
			return nil, nil, fmt.Errorf("sim: measuring %s: %w", dev.ID(), err)
		}
	}
	return ts, free, nil
}

// MeasureDevice times a 384×384×384 GEMM and a 32 MiB elementwise copy on
// dev (medians of 5; under a memory cap, the copy of what is free) and
// returns the device's model. A device that
// reports its speed (DeviceInfo.GFLOPS and MemGBps) is taken at its word.
func MeasureDevice(ctx context.Context, dev core.Device) (DeviceModel, error) {
	info := dev.Info()
	m := DeviceModel{ID: dev.ID(), Name: info.Name, MemBytes: info.MemCap, Launch: time.Microsecond}
	if info.GFLOPS > 0 && info.MemGBps > 0 {
		m.GFLOPS, m.MemGBps = info.GFLOPS, info.MemGBps
		return m, nil
	}
	const n = 384
	elems := 8 << 20
	// Under a memory cap the copy shrinks to what is free (at least 256
	// KiB a buffer): it then runs from cache and reads faster than memory.
	if st := dev.Mem().Stats(); st.Cap > 0 {
		free := st.Cap - st.Used - 3*4*n*n
		elems = int(max(min(int64(elems), free/8), 1<<16))
	}
	ts, free, err := testTensors(dev, []int{n, n}, []int{n, n}, []int{n, n}, []int{elems, 1}, []int{elems, 1})
	if err != nil {
		return m, err
	}
	defer free()
	k := dev.Kernels()
	var gemm, copyT []time.Duration
	for range 5 {
		if err := ctx.Err(); err != nil {
			return m, err
		}
		t0 := time.Now()
		if err := k.GEMM(false, false, 1, ts[0], ts[1], 0, ts[2]); err != nil {
			return m, fmt.Errorf("sim: measuring %s: %w", dev.ID(), err)
		}
		gemm = append(gemm, time.Since(t0))
		t0 = time.Now()
		if err := k.Map(core.MapCopy, ts[3], nil, 0, ts[4]); err != nil {
			return m, fmt.Errorf("sim: measuring %s: %w", dev.ID(), err)
		}
		copyT = append(copyT, time.Since(t0))
	}
	m.GFLOPS = 2 * n * n * n / float64(stats.Median(gemm))
	m.MemGBps = 2 * 4 * float64(elems) / float64(stats.Median(copyT))
	return m, nil
}

// MeasureHostCores estimates how many devices' worth of compute the host
// gives when all of devs compute at once: a 256³ GEMM is timed on the
// first device alone and on every device concurrently (medians of 5), and
// the answer is len(devs) × alone / concurrent, between 0.5 and
// len(devs). On a shared machine it reflects the load at that moment.
func MeasureHostCores(ctx context.Context, devs []core.Device) (float64, error) {
	if len(devs) < 2 {
		return float64(len(devs)), nil
	}
	const n = 256
	type set struct {
		ts   []*core.Tensor
		free func()
	}
	sets := make([]set, len(devs))
	for i, d := range devs {
		ts, free, err := testTensors(d, []int{n, n}, []int{n, n}, []int{n, n})
		if err != nil {
			for _, s := range sets[:i] {
				s.free()
			}
			return 0, err
		}
		sets[i] = set{ts, free}
	}
	defer func() {
		for _, s := range sets {
			s.free()
		}
	}()
	gemm := func(i int) (time.Duration, error) {
		t0 := time.Now()
		err := devs[i].Kernels().GEMM(false, false, 1, sets[i].ts[0], sets[i].ts[1], 0, sets[i].ts[2])
		return time.Since(t0), err
	}
	var alone, together []time.Duration
	for range 5 {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		d, err := gemm(0)
		if err != nil {
			return 0, fmt.Errorf("sim: measuring host cores: %w", err)
		}
		alone = append(alone, d)
		res := make([]time.Duration, len(devs))
		errs := make([]error, len(devs))
		var wg sync.WaitGroup
		for i := range devs {
			wg.Go(func() { res[i], errs[i] = gemm(i) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return 0, fmt.Errorf("sim: measuring host cores: %w", err)
		}
		together = append(together, res...)
	}
	k := float64(len(devs)) * float64(stats.Median(alone)) / float64(stats.Median(together))
	return min(float64(len(devs)), max(0.5, k)), nil
}

// MeasureLink times moving tensors from a to b the way the CPU executor
// does (download into host memory, allocate on b, upload) at 4 KiB and
// 1 MiB, medians of 9 after a warm-up, and fits latency and bandwidth.
func MeasureLink(ctx context.Context, a, b core.Device) (Link, error) {
	move := func(elems int) (time.Duration, error) {
		ts, free, err := testTensors(a, []int{elems, 1})
		if err != nil {
			return 0, err
		}
		defer free()
		var ds []time.Duration
		for rep := range 10 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			// Collect the previous rep's buffers, so this one reuses memory
			// already faulted in, as the executor's steady state does.
			runtime.GC()
			t0 := time.Now()
			// The executor's own transfer: allocate on b, move.
			dst, err := b.Alloc(elems, 1)
			if err != nil {
				return 0, err
			}
			err = engine.MoveTensor(a, b, ts[0], dst)
			if rep > 0 {
				ds = append(ds, time.Since(t0))
			}
			b.Free(dst)
			if err != nil {
				return 0, err
			}
		}
		return stats.Median(ds), nil
	}
	const small, large = 1 << 10, 1 << 18
	ts, err := move(small)
	if err != nil {
		return Link{}, fmt.Errorf("sim: measuring the link %s -> %s: %w", a.ID(), b.ID(), err)
	}
	tl, err := move(large)
	if err != nil {
		return Link{}, fmt.Errorf("sim: measuring the link %s -> %s: %w", a.ID(), b.ID(), err)
	}
	l := Link{Latency: ts}
	if d := tl - ts; d > 0 {
		l.GBps = 4 * float64(large-small) / float64(d)
	}
	return l, nil
}

// ClusterFor is the cluster a scheduler assumes for a workload's devices
// when it is not given one: the preset whose device the infos describe
// (same name and speeds; "pcie-a100", "nvlink-h100"), with the infos'
// ids and memory caps; logical CPU devices (backend "cpu") as the "cpu"
// preset with the infos' measured speeds where they state them; anything
// else as independent devices of the stated speeds (50 GFLOP/s and
// 20 GB/s where unstated, 2 µs per op and direction) joined by 10 GB/s,
// 10 µs links with copy engines. It is a guess about the links, which a
// DeviceInfo does not describe: pass the real cluster where it is known.
func ClusterFor(infos []core.DeviceInfo) *Cluster {
	n := len(infos)
	if n == 0 {
		return &Cluster{Name: "empty"}
	}
	ids := func(c *Cluster) *Cluster {
		for i := range c.Devices {
			c.Devices[i].ID = infos[i].ID
			if infos[i].MemCap > 0 {
				c.Devices[i].MemBytes = infos[i].MemCap
			}
		}
		return c
	}
	for _, name := range []string{"pcie-a100", "nvlink-h100"} {
		c, _ := Preset(name, n)
		d := c.Devices[0]
		same := true
		for _, in := range infos {
			same = same && in.Name == d.Name && in.GFLOPS == d.GFLOPS && in.MemGBps == d.MemGBps
		}
		if same {
			return ids(c)
		}
	}
	cpu := true
	for _, in := range infos {
		b := in.Backend
		if b == "" {
			b, _, _ = core.ParseDeviceID(string(in.ID))
		}
		cpu = cpu && b == "cpu"
	}
	if cpu {
		c, _ := Preset("cpu", n)
		for i := range c.Devices {
			if infos[i].GFLOPS > 0 {
				c.Devices[i].GFLOPS = infos[i].GFLOPS
			}
			if infos[i].MemGBps > 0 {
				c.Devices[i].MemGBps = infos[i].MemGBps
			}
		}
		return ids(c)
	}
	c := &Cluster{Name: fmt.Sprintf("assumed x%d", n), Link: Link{GBps: 10, Latency: 10 * time.Microsecond}}
	for _, in := range infos {
		d := DeviceModel{Name: in.Name, GFLOPS: in.GFLOPS, MemGBps: in.MemGBps, Launch: 2 * time.Microsecond}
		if d.GFLOPS <= 0 {
			d.GFLOPS = 50
		}
		if d.MemGBps <= 0 {
			d.MemGBps = 20
		}
		c.Devices = append(c.Devices, d)
	}
	return ids(c)
}
