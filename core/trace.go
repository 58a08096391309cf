package core

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"
)

// TraceEvent is one timed span: a task, a transfer, or an evaluation.
type TraceEvent struct {
	Name   string        `json:"name"`
	Cat    string        `json:"cat"` // task kind, "transfer", "eval", ...
	Device DeviceID      `json:"device"`
	Stream int           `json:"stream"`
	Unit   int           `json:"unit"`
	Start  time.Duration `json:"start_ns"` // from the trace origin
	Dur    time.Duration `json:"dur_ns"`
	Bytes  int64         `json:"bytes,omitempty"` // bytes moved (transfers)
}

// Trace records what an execution did: timings, bytes moved and the peak
// memory per device.
type Trace struct {
	Events     []TraceEvent       `json:"events"`
	PeakMem    map[DeviceID]int64 `json:"peak_mem_bytes"`
	BytesMoved int64              `json:"bytes_moved"`
	Wall       time.Duration      `json:"wall_ns"`
}

// Append adds o's events shifted by offset, sums bytes, and keeps the
// larger peak per device.
func (t *Trace) Append(o *Trace, offset time.Duration) {
	for _, e := range o.Events {
		e.Start += offset
		t.Events = append(t.Events, e)
	}
	if t.PeakMem == nil {
		t.PeakMem = map[DeviceID]int64{}
	}
	for d, p := range o.PeakMem {
		if p > t.PeakMem[d] {
			t.PeakMem[d] = p
		}
	}
	t.BytesMoved += o.BytesMoved
	if end := offset + o.Wall; end > t.Wall {
		t.Wall = end
	}
}

// Busy returns each device's summed event time (its busy time when its
// streams do not overlap).
func (t *Trace) Busy() map[DeviceID]time.Duration {
	b := map[DeviceID]time.Duration{}
	for _, e := range t.Events {
		b[e.Device] += e.Dur
	}
	return b
}

type chromeEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// WriteChrome writes the trace in the Chrome trace-event JSON format, which
// Perfetto (ui.perfetto.dev) and chrome://tracing open: one process per
// device, one thread per stream, a complete ("X") event per span, and a
// counter track of peak memory.
func (t *Trace) WriteChrome(w io.Writer) error {
	devs := map[DeviceID]int{}
	var names []DeviceID
	for _, e := range t.Events {
		if _, ok := devs[e.Device]; !ok {
			devs[e.Device] = 0
			names = append(names, e.Device)
		}
	}
	for d := range t.PeakMem {
		if _, ok := devs[d]; !ok {
			devs[d] = 0
			names = append(names, d)
		}
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	var out []chromeEvent
	streams := map[[2]int]bool{}
	for i, d := range names {
		devs[d] = i + 1
		out = append(out, chromeEvent{Name: "process_name", Ph: "M", Pid: i + 1, Args: map[string]any{"name": string(d)}})
	}
	for _, e := range t.Events {
		pid := devs[e.Device]
		if k := [2]int{pid, e.Stream}; !streams[k] {
			streams[k] = true
			out = append(out, chromeEvent{Name: "thread_name", Ph: "M", Pid: pid, Tid: e.Stream, Args: map[string]any{"name": fmt.Sprintf("stream %d", e.Stream)}})
		}
		args := map[string]any{}
		if e.Unit >= 0 {
			args["unit"] = e.Unit
		}
		if e.Bytes > 0 {
			args["bytes"] = e.Bytes
		}
		out = append(out, chromeEvent{Name: e.Name, Cat: e.Cat, Ph: "X", Ts: us(e.Start), Dur: us(e.Dur), Pid: pid, Tid: e.Stream, Args: args})
	}
	for _, d := range names {
		if p, ok := t.PeakMem[d]; ok {
			out = append(out, chromeEvent{Name: "peak memory", Ph: "C", Ts: us(t.Wall), Pid: devs[d], Args: map[string]any{"bytes": p}})
		}
	}
	enc := json.NewEncoder(w)
	return enc.Encode(map[string]any{"traceEvents": out, "displayTimeUnit": "ms"})
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }
