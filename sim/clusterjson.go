package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

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
	if dec.More() {
		return nil, fmt.Errorf("%w: more than one JSON value", ErrBadCluster)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks what the simulator and the planners rely on: at least
// one device, unique backend:index ids, finite positive compute speed and
// memory bandwidth, and no negative (or non-finite) figure elsewhere.
func (c *Cluster) Validate() error {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrBadCluster, fmt.Sprintf(format, a...))
	}
	if len(c.Devices) == 0 {
		return fail("no devices")
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	seen := map[core.DeviceID]bool{}
	for i, d := range c.Devices {
		at := fmt.Sprintf("devices[%d]", i)
		if d.ID != "" {
			at += " (" + string(d.ID) + ")"
		}
		if _, _, err := core.ParseDeviceID(string(d.ID)); err != nil {
			return fail("%s: id %q: want backend:index, e.g. cuda:0", at, d.ID)
		}
		if seen[d.ID] {
			return fail("%s: id %s appears twice", at, d.ID)
		}
		seen[d.ID] = true
		for _, f := range []struct {
			name string
			v    float64
			pos  bool
		}{{"gflops", d.GFLOPS, true}, {"mem_gbps", d.MemGBps, true}, {"speedup", d.Speedup, false}, {"stream_overlap", d.StreamOverlap, false}} {
			if !finite(f.v) || f.v < 0 || (f.pos && f.v == 0) {
				want := "a non-negative number"
				if f.pos {
					want = "a positive number"
				}
				return fail("%s: %s = %v: want %s", at, f.name, f.v, want)
			}
		}
		if d.StreamOverlap > 1 {
			return fail("%s: stream_overlap = %v: want 0 (streams share the device) to 1 (overlap perfectly)", at, d.StreamOverlap)
		}
		if d.MemBytes < 0 || d.Launch < 0 || d.SMs < 0 {
			return fail("%s: mem_bytes %d, launch_ns %d, sms %d: want none negative (mem_bytes 0: no cap)", at, d.MemBytes, d.Launch, d.SMs)
		}
	}
	for _, l := range []struct {
		name string
		l    Link
	}{{"link", c.Link}, {"inter_node", c.InterNode}} {
		if !finite(l.l.GBps) || l.l.GBps < 0 || !finite(l.l.PortGBps) || l.l.PortGBps < 0 || l.l.Latency < 0 {
			return fail("%s: gbps %v, port_gbps %v, latency_ns %d: want none negative (gbps 0: unlimited; port_gbps 0: no port)", l.name, l.l.GBps, l.l.PortGBps, l.l.Latency)
		}
	}
	if c.NodeSize < 0 {
		return fail("node_size = %d: want 0 (one node) or the devices per node", c.NodeSize)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"opt_state_factor", c.OptStateFactor}, {"host_cores", c.HostCores}} {
		if !finite(f.v) || f.v < 0 {
			return fail("%s = %v: want a non-negative number", f.name, f.v)
		}
	}
	return nil
}
