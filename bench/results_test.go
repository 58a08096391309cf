package bench

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// validFile is a small well-formed results file.
func validFile() *File {
	c := Cell{Backend: "cpu", Devices: 1, Scheduler: "sequential", Model: "gcn", Dataset: "cora", Epochs: 3, Warmup: 1, Seed: 1}
	ms := []float64{10, 12, 11}
	st := stats(ms)
	ok := Result{ID: c.ID(), Cell: c, Status: StatusOK, At: time.Unix(0, 0).UTC(), EpochMs: ms,
		EpochMsMedian: st.median, EpochMsP10: st.p10, EpochMsP90: st.p90, EpochMsMin: st.min, EpochMsMax: st.max,
		PeakMem: map[string]int64{"cpu:0": 1 << 20}, TestAcc: 0.5, Metrics: map[string]float64{"bubble": 0.1}}
	s := c
	s.Scheduler = "cherry"
	sk := Result{ID: s.ID(), Cell: s, Status: StatusSkipped, Reason: "cherry needs a cap", At: time.Unix(0, 0).UTC()}
	return &File{Schema: Schema, Label: "a", Suite: SuiteRef{Name: "t", Version: 1, Digest: "00"},
		Machine: Machine{Host: "h", CPU: "c", LogicalCores: 2}, Cells: []Result{ok, sk}}
}

func TestParseResults(t *testing.T) {
	good, _ := json.Marshal(validFile())
	if _, err := Parse(good); err != nil {
		t.Fatalf("valid file rejected: %v", err)
	}
	mod := func(f func(*File)) string {
		v := validFile()
		f(v)
		b, _ := json.Marshal(v)
		return string(b)
	}
	for _, tc := range []struct{ name, in, err string }{
		{"empty", "", "EOF"},
		{"truncated", string(good[:len(good)/2]), "unexpected EOF"},
		{"not json", "hello", "invalid character"},
		{"trailing", string(good) + "{}", "trailing"},
		{"two files concatenated", string(good) + string(good), "trailing"},
		{"schema", mod(func(f *File) { f.Schema = "v0" }), "schema"},
		{"unknown field", strings.Replace(string(good), `"label"`, `"lable"`, 1), "unknown field"},
		{"id mismatch", mod(func(f *File) { f.Cells[0].Cell.Epochs = 4 }), "id does not match"},
		{"duplicate", mod(func(f *File) { f.Cells[1] = f.Cells[0] }), "duplicate"},
		{"status", mod(func(f *File) { f.Cells[0].Status = "great" }), "unknown status"},
		{"stats", mod(func(f *File) { f.Cells[0].EpochMsMedian = 1 }), "statistics"},
		{"epochs count", mod(func(f *File) { f.Cells[0].EpochMs = f.Cells[0].EpochMs[:2] }), "epoch times for"},
		{"skip without reason", mod(func(f *File) { f.Cells[1].Reason = "" }), "without a reason"},
		{"no suite", mod(func(f *File) { f.Suite.Name = "" }), "suite"},
		{"negative memory", mod(func(f *File) { f.Cells[0].PeakMem["cpu:0"] = -1 }), "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			if err == nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Parse: %v, want a corrupt-file error containing %q", err, tc.err)
			}
		})
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "r.json")
	f := validFile()
	if err := f.Write(p); err != nil {
		t.Fatal(err)
	}
	g, err := ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Cells) != 2 || g.Cells[0].EpochMsMedian != 11 {
		t.Errorf("round trip lost data: %+v", g.Cells)
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	if len(ents) != 1 {
		t.Errorf("temporary files left behind: %v", ents)
	}
}

// FuzzParse: the parser never panics, and whatever it accepts survives a
// write and re-read unchanged in meaning.
func FuzzParse(f *testing.F) {
	good, _ := json.Marshal(validFile())
	f.Add(good)
	f.Add(good[:len(good)/3])
	f.Add([]byte(`{"schema":"gnnkit-bench-results/v1","suite":{"name":"x","version":1},"cells":[]}`))
	f.Add([]byte(`{"schema":"gnnkit-bench-results/v1","suite":{"name":"x","version":1},"cells":[{"id":"","cell":{},"status":"ok"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(again); err != nil {
			t.Fatalf("accepted file rejected after a round trip: %v", err)
		}
	})
}

// TestFinished: a re-run keeps ok cells and permanent skips, and retries
// failures and cells whose plugin did not launch.
func TestFinished(t *testing.T) {
	for _, c := range []struct {
		status, reason string
		want           bool
	}{
		{StatusOK, "", true},
		{StatusSkipped, "cherry needs a device memory cap to micro-batch against (set device_mem)", true},
		{StatusSkipped, "backend opencl unavailable: no OpenCL platform", true},
		{StatusSkipped, ReasonPluginLaunch + "host: plugin ./bin/x: ./bin/x does not exist", false},
		{StatusFailed, "epoch 1: boom", false},
	} {
		r := &Result{Status: c.status, Reason: c.reason}
		if got := r.Finished(); got != c.want {
			t.Errorf("Finished(%s, %q) = %v, want %v", c.status, c.reason, got, c.want)
		}
	}
}
