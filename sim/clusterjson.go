package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/gnnkit/gnnkit/core"
)

// ErrBadCluster reports a cluster file that cannot be used.
var ErrBadCluster = errors.New("sim: bad cluster")

// WriteCluster writes c as indented JSON, the format ReadCluster reads
// (per-pair Links are not written).
func WriteCluster(w io.Writer, c *Cluster) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(c)
}

// ReadCluster reads a cluster written by WriteCluster (or by hand):
// unknown fields are errors, and the cluster must pass Validate.
func ReadCluster(r io.Reader) (*Cluster, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("sim: reading cluster: %w", err)
	}
	return ParseCluster(b)
}

// ParseCluster is ReadCluster on bytes.
func ParseCluster(b []byte) (*Cluster, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Cluster
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: empty input; want a JSON object (gnnkit plan --write-cluster FILE writes a preset's)", ErrBadCluster)
		}
		return nil, fmt.Errorf("%w: %v", ErrBadCluster, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: text after the cluster object", ErrBadCluster)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Ranges Validate allows: wide enough for any machine, narrow enough
// that no time or size the simulator derives overflows.
const (
	minGBps, maxGBps   = 1e-3, 1e7 // links and memory: 1 MB/s to 10 PB/s
	minGFLOPS, maxGFLO = 1e-3, 1e9
	maxLatency         = time.Second // a link's latency, an op's launch
	minCores, maxCores = 0.01, 1e6
	maxOptFactor       = 64
)

// The range of a device's Speedup (0: none) that Validate allows.
const MinSpeedup, MaxSpeedup = 1e-3, 1e6

// MaxMemBytes is the most memory a device may have (1 PiB).
const MaxMemBytes = 1 << 50

// Validate checks what the simulator and the planners rely on: at least
// one device, unique canonical backend:index ids, and every figure finite
// and in a range no derived time or size overflows (compute speed and
// memory bandwidth positive; link bandwidths 0, unlimited, or positive).
func (c *Cluster) Validate() error {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrBadCluster, fmt.Sprintf(format, a...))
	}
	if len(c.Devices) == 0 {
		return fail("no devices")
	}
	seen := map[core.DeviceID]bool{}
	for i, d := range c.Devices {
		at := fmt.Sprintf("devices[%d]", i)
		if d.ID != "" {
			at += " (" + string(d.ID) + ")"
		}
		b, idx, err := core.ParseDeviceID(string(d.ID))
		if err != nil || string(d.ID) != fmt.Sprintf("%s:%d", b, idx) {
			return fail("%s: id %q: want backend:index, e.g. cuda:0", at, d.ID)
		}
		if seen[d.ID] {
			return fail("%s: id %s appears twice", at, d.ID)
		}
		seen[d.ID] = true
		for _, f := range []span{
			{"gflops", d.GFLOPS, minGFLOPS, maxGFLO, false},
			{"mem_gbps", d.MemGBps, minGBps, maxGBps, false},
			{"speedup", d.Speedup, MinSpeedup, MaxSpeedup, true},
			{"stream_overlap", d.StreamOverlap, 0, 1, true},
		} {
			if err := f.check(); err != "" {
				return fail("%s: %s", at, err)
			}
		}
		if d.MemBytes < 0 || d.MemBytes > MaxMemBytes {
			return fail("%s: mem_bytes = %d: want 0 (no cap) to %d (1 PiB)", at, d.MemBytes, int64(MaxMemBytes))
		}
		if d.Launch < 0 || d.Launch > maxLatency {
			return fail("%s: launch_ns = %d: want 0 to %d (1 s)", at, d.Launch, maxLatency)
		}
		if d.SMs < 0 || d.SMs > 1<<20 {
			return fail("%s: sms = %d: want 0 (no GEMM model) to %d", at, d.SMs, 1<<20)
		}
	}
	for _, l := range []struct {
		name string
		l    Link
	}{{"link", c.Link}, {"inter_node", c.InterNode}} {
		for _, f := range []span{{"gbps", l.l.GBps, minGBps, maxGBps, true}, {"port_gbps", l.l.PortGBps, minGBps, maxGBps, true}} {
			if err := f.check(); err != "" {
				return fail("%s: %s", l.name, err)
			}
		}
		if l.l.Latency < 0 || l.l.Latency > maxLatency {
			return fail("%s: latency_ns = %d: want 0 to %d (1 s)", l.name, l.l.Latency, maxLatency)
		}
	}
	if c.NodeSize < 0 {
		return fail("node_size = %d: want 0 (one node) or the devices per node", c.NodeSize)
	}
	for _, f := range []span{{"opt_state_factor", c.OptStateFactor, 0, maxOptFactor, true}, {"host_cores", c.HostCores, minCores, maxCores, true}} {
		if err := f.check(); err != "" {
			return fail("%s", err)
		}
	}
	return nil
}

// span is a field's allowed range [lo, hi], and 0 too when zero is set
// (0 means "unset" or "none" there).
type span struct {
	name   string
	v      float64
	lo, hi float64
	zero   bool
}

func (f span) check() string {
	if f.zero && f.v == 0 {
		return ""
	}
	if math.IsNaN(f.v) || f.v < f.lo || f.v > f.hi {
		if f.zero {
			return fmt.Sprintf("%s = %v: want 0 or %g to %g", f.name, f.v, f.lo, f.hi)
		}
		return fmt.Sprintf("%s = %v: want %g to %g", f.name, f.v, f.lo, f.hi)
	}
	return ""
}
