package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gnnkit/gnnkit/internal/atomicfile"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Schema names the results-file format; a reader refuses any other.
const Schema = "gnnkit-bench-results/v1"

// Cell statuses.
const (
	StatusOK      = "ok"      // trained; the numbers are set
	StatusSkipped = "skipped" // the backend or scheduler cannot run the cell here; Reason says why
	StatusFailed  = "failed"  // it should have run and did not; Reason has the error (re-run retries it)
)

// ReasonPluginLaunch begins the Reason of a cell skipped because its
// plugin did not launch (not built yet, a bad pin, no handshake). Unlike
// the other skips it is not permanent: a re-run retries the cell.
const ReasonPluginLaunch = "plugin did not launch: "

// File is one run's results: a machine, a suite, and its cells as they
// finish. It is rewritten atomically after every cell.
type File struct {
	Schema  string    `json:"schema"`
	Label   string    `json:"label"`
	Suite   SuiteRef  `json:"suite"`
	Machine Machine   `json:"machine"`
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
	Cells   []Result  `json:"cells"`
}

// SuiteRef identifies the suite a results file measures.
type SuiteRef struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	Digest  string `json:"digest"`
}

// Result is one cell's outcome.
type Result struct {
	ID     string    `json:"id"`
	Cell   Cell      `json:"cell"`
	Status string    `json:"status"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
	WallS  float64   `json:"wall_s"`

	// The measured (post-warm-up) epochs' times and their statistics.
	EpochMs       []float64 `json:"epoch_ms,omitempty"`
	EpochMsMedian float64   `json:"epoch_ms_median,omitempty"`
	EpochMsP10    float64   `json:"epoch_ms_p10,omitempty"`
	EpochMsP90    float64   `json:"epoch_ms_p90,omitempty"`
	EpochMsMin    float64   `json:"epoch_ms_min,omitempty"`
	EpochMsMax    float64   `json:"epoch_ms_max,omitempty"`
	// Throughput at the median epoch: graph edges (each counted once per
	// epoch) and training samples per second.
	EdgesPerS   float64 `json:"edges_per_s,omitempty"`
	SamplesPerS float64 `json:"samples_per_s,omitempty"`
	Nodes       int     `json:"nodes,omitempty"`
	Edges       int64   `json:"edges,omitempty"`
	TrainNodes  int     `json:"train_nodes,omitempty"`

	PeakMem       map[string]int64 `json:"peak_mem_bytes,omitempty"`
	PredictedPeak map[string]int64 `json:"predicted_peak_mem_bytes,omitempty"`
	FinalLoss     float64          `json:"final_loss,omitempty"`
	TrainAcc      float64          `json:"train_acc,omitempty"`
	ValAcc        float64          `json:"val_acc,omitempty"`
	TestAcc       float64          `json:"test_acc,omitempty"`
	Iterations    int              `json:"iterations_per_epoch,omitempty"`
	Units         int              `json:"units,omitempty"`
	// Metrics are the scheduler's plan metrics averaged over iterations
	// (micro_batches, bubble_bound, redundancy, stages, ...) plus two
	// measured from the trace: bubble (1 - busy device time / (devices x
	// epoch time)) and imbalance (max / mean busy time - 1).
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

// PeakMax is the largest per-device peak.
func (r *Result) PeakMax() int64 {
	var m int64
	for _, v := range r.PeakMem {
		m = max(m, v)
	}
	return m
}

// Finished reports whether a re-run may keep the result: ok and skipped
// cells are done; failed ones, and those skipped because their plugin did
// not launch (ReasonPluginLaunch), are retried.
func (r *Result) Finished() bool {
	return r.Status == StatusOK || (r.Status == StatusSkipped && !strings.HasPrefix(r.Reason, ReasonPluginLaunch))
}

// ErrCorrupt wraps every error of a results file that is not well formed.
var ErrCorrupt = errors.New("bench: corrupt results file")

// CorruptError says what is wrong with a results file and where.
type CorruptError struct {
	Path string // may be empty
	Msg  string
}

func (e *CorruptError) Error() string {
	p := e.Path
	if p == "" {
		p = "input"
	}
	return fmt.Sprintf("bench: corrupt results file %s: %s (it was not merged; move it away or re-run into a new --out)", p, e.Msg)
}

func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// ReadFile reads and checks a results file.
func ReadFile(path string) (*File, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	f, err := Parse(raw)
	if err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) {
			ce.Path = path
		}
		return nil, err
	}
	return f, nil
}

// Parse decodes a results file and checks it thoroughly: the schema,
// unknown fields, trailing data, each cell's ID against its definition,
// duplicate IDs, statuses, non-finite or negative numbers, and that the
// recorded statistics agree with the recorded epoch times. Anything off
// is a *CorruptError; nothing is repaired.
func Parse(raw []byte) (*File, error) {
	bad := func(format string, args ...any) error {
		return &CorruptError{Msg: fmt.Sprintf(format, args...)}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, bad("%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, bad("trailing data after the JSON object")
	}
	if f.Schema != Schema {
		return nil, bad("schema %q, want %q", f.Schema, Schema)
	}
	if f.Suite.Name == "" || f.Suite.Version <= 0 {
		return nil, bad("no suite name or version")
	}
	seen := map[string]bool{}
	for i, r := range f.Cells {
		where := fmt.Sprintf("cell %d (%s)", i, r.ID)
		if want := r.Cell.ID(); r.ID != want {
			return nil, bad("%s: id does not match its cell definition %q", where, want)
		}
		if seen[r.ID] {
			return nil, bad("%s: duplicate cell", where)
		}
		seen[r.ID] = true
		if r.Cell.Epochs <= 0 || r.Cell.Devices <= 0 || r.Cell.Warmup < 0 {
			return nil, bad("%s: bad epochs, warm-up or devices", where)
		}
		nums := []float64{r.WallS, r.EpochMsMedian, r.EpochMsP10, r.EpochMsP90, r.EpochMsMin, r.EpochMsMax,
			r.EdgesPerS, r.SamplesPerS, r.FinalLoss, r.TrainAcc, r.ValAcc, r.TestAcc}
		nums = append(nums, r.EpochMs...)
		for _, v := range r.Metrics {
			nums = append(nums, v)
		}
		for _, v := range nums {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, bad("%s: a non-finite number", where)
			}
		}
		for _, v := range r.PeakMem {
			if v < 0 {
				return nil, bad("%s: negative peak memory", where)
			}
		}
		switch r.Status {
		case StatusOK:
			if len(r.EpochMs) != r.Cell.Epochs {
				return nil, bad("%s: %d epoch times for %d epochs", where, len(r.EpochMs), r.Cell.Epochs)
			}
			st := stats(r.EpochMs)
			if !near(st.median, r.EpochMsMedian) || !near(st.min, r.EpochMsMin) || !near(st.max, r.EpochMsMax) ||
				!near(st.p10, r.EpochMsP10) || !near(st.p90, r.EpochMsP90) {
				return nil, bad("%s: the statistics do not match the epoch times", where)
			}
			for _, v := range r.EpochMs {
				if v < 0 {
					return nil, bad("%s: negative epoch time", where)
				}
			}
		case StatusSkipped, StatusFailed:
			if r.Reason == "" {
				return nil, bad("%s: %s without a reason", where, r.Status)
			}
		default:
			return nil, bad("%s: unknown status %q", where, r.Status)
		}
	}
	return &f, nil
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(a), math.Abs(b)) }

// Write writes f to path atomically: a temporary file in the same folder,
// synced, then renamed over path, so a crash leaves the old file or the
// new one, never half of one.
func (f *File) Write(path string) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	b = append(b, '\n')
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if err := atomicfile.WriteBytes(path, b); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

type summary struct{ median, p10, p90, min, max float64 }

// stats are the median, 10th and 90th percentiles (linear interpolation)
// and extremes of xs.
func stats(xs []float64) summary {
	if len(xs) == 0 {
		return summary{}
	}
	c := append([]float64(nil), xs...)
	sort.Float64s(c)
	q := func(p float64) float64 {
		pos := p * float64(len(c)-1)
		lo := int(math.Floor(pos))
		hi := min(lo+1, len(c)-1)
		return c[lo] + (c[hi]-c[lo])*(pos-float64(lo))
	}
	return summary{median: q(0.5), p10: q(0.1), p90: q(0.9), min: c[0], max: c[len(c)-1]}
}
