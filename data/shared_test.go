package data

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gnnkit/gnnkit/data/internal/pack"
)

// sharedData finds shared/data: $GNNKIT_SHARED_DATA, or ../../shared/data
// from this package's folder. It skips the test when absent.
func sharedData(t testing.TB, name string) string {
	t.Helper()
	root := os.Getenv("GNNKIT_SHARED_DATA")
	if root == "" {
		root = filepath.Join("..", "..", "shared", "data")
	}
	dir := filepath.Join(root, name)
	if _, err := os.Stat(filepath.Join(dir, "meta.json")); err != nil {
		t.Skipf("shared dataset %s not found (%v); set GNNKIT_SHARED_DATA to the shared/data folder to run this test", name, err)
	}
	return dir
}

const coraFeaturesSHA256 = "f0faab5177bcc12f5688f042c8e0ed24ffb9baa8efc3ae7cde440d42524c9075"

func TestLoadSharedCora(t *testing.T) {
	dir := sharedData(t, "cora")
	d, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d.NumNodes != 2708 || d.NumEdges() != 5278 || d.Graph.NumEdges() != 10556 || d.FeatureDim != 1433 || d.NumClasses != 7 {
		t.Errorf("cora: %d nodes, %d edges (%d entries), %d features, %d classes; want 2708, 5278 (10556), 1433, 7",
			d.NumNodes, d.NumEdges(), d.Graph.NumEdges(), d.FeatureDim, d.NumClasses)
	}
	if len(d.Train) != 140 || len(d.Val) != 500 || len(d.Test) != 1000 {
		t.Errorf("split %d/%d/%d, want 140/500/1000", len(d.Train), len(d.Val), len(d.Test))
	}
	nz := 0
	for _, v := range d.Features {
		if v != 0 {
			nz++
		}
	}
	if nz != 49216 {
		t.Errorf("%d feature non-zeros, want 49216", nz)
	}
	if got := classCounts(d.Labels, 7); !slices.Equal(got, []int{351, 217, 418, 818, 426, 298, 180}) {
		t.Errorf("class counts %v", got)
	}
	if err := d.Validate(); err != nil {
		t.Error(err)
	}

	// The embedded copy is the same dataset.
	e, err := Cora()
	if err != nil {
		t.Fatal(err)
	}
	if e.Source != "embedded:cora" {
		t.Errorf("embedded source %q", e.Source)
	}
	e.Source = d.Source
	sameDataset(t, d, e)
}

// TestEmbeddedCoraReproducesFiles decodes the embedded pack and renders
// every original file: the bytes must hash to meta.json's sums (and to the
// shared files themselves when present).
func TestEmbeddedCoraReproducesFiles(t *testing.T) {
	s, err := pack.Decode(coraPack)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(); err != nil {
		t.Fatal(err)
	}
	if len(s.Sums) != 6 {
		t.Fatalf("%d sums in the pack, want 6", len(s.Sums))
	}
	feat := s.FeaturesFile()
	if got := sha256.Sum256(feat); hex.EncodeToString(got[:]) != coraFeaturesSHA256 {
		t.Errorf("features.f32 renders to sha256 %x, want %s", got, coraFeaturesSHA256)
	}
	if len(coraPack) > 300<<10 {
		t.Errorf("embedded pack is %d bytes, want well under 300 KB", len(coraPack))
	}
	t.Logf("embedded cora.pack: %d bytes", len(coraPack))

	root := os.Getenv("GNNKIT_SHARED_DATA")
	if root == "" {
		root = filepath.Join("..", "..", "shared", "data")
	}
	dir := filepath.Join(root, "cora")
	mb, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		t.Skipf("shared cora absent (%v): checked the pack against its own sums only", err)
	}
	var m struct {
		Files map[string]struct {
			Bytes  int64
			Sha256 string
		}
	}
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	rendered := map[string][]byte{
		"features.f32": feat, "edges.tsv": s.EdgesFile(), "labels.txt": pack.IntsFile(s.Labels),
		"train.txt": pack.IntsFile(s.Train), "val.txt": pack.IntsFile(s.Val), "test.txt": pack.IntsFile(s.Test),
	}
	for name, b := range rendered {
		want := m.Files[name]
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != want.Sha256 || int64(len(b)) != want.Bytes {
			t.Errorf("%s: rendered %d bytes sha256 %x; meta.json lists %d bytes %s", name, len(b), got, want.Bytes, want.Sha256)
		}
		orig, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(orig, b) {
			t.Errorf("%s: rendered bytes differ from the shared file", name)
		}
	}
}

func TestLoadSharedBitcoinAlpha(t *testing.T) {
	dir := sharedData(t, "bitcoin_alpha")
	d, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Nodes, Edges int
		TimeMin      int64 `json:"time_min"`
		Snap         struct {
			Seconds int64 `json:"seconds_per_snapshot"`
			Count   int   `json:"snapshots"`
			PerSnap []int `json:"edges_per_snapshot"`
		} `json:"snapshot_convention"`
	}
	mb, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	if d.Kind != KindDynamic || d.NumNodes != 3783 || len(d.Events) != 24186 || !d.Directed {
		t.Fatalf("bitcoin_alpha: kind %s, %d nodes, %d events, directed %v", d.Kind, d.NumNodes, len(d.Events), d.Directed)
	}
	if d.Features != nil || d.Labels != nil || len(d.NodeIDs) != 3783 {
		t.Errorf("features %v, labels %v, %d node ids", d.Features != nil, d.Labels != nil, len(d.NodeIDs))
	}
	if d.SnapshotSeconds != 1200000 {
		t.Errorf("SnapshotSeconds = %d, want 1200000", d.SnapshotSeconds)
	}
	if d.Graph.NumEdges() != 24186 { // no repeated pair in this data set
		t.Errorf("union graph has %d entries, want 24186", d.Graph.NumEdges())
	}
	snaps, err := d.Snapshots(1200000)
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 137 || len(m.Snap.PerSnap) != 137 {
		t.Fatalf("%d snapshots (meta.json lists %d), want 137", len(snaps), len(m.Snap.PerSnap))
	}
	total := 0
	for k, s := range snaps {
		if s.Index != k || s.Start != m.TimeMin+int64(k)*1200000 {
			t.Errorf("snapshot %d: index %d start %d", k, s.Index, s.Start)
		}
		if len(s.Events) != m.Snap.PerSnap[k] || s.Graph.NumEdges() != m.Snap.PerSnap[k] || len(s.Weights) != m.Snap.PerSnap[k] {
			t.Errorf("snapshot %d: %d events, %d graph entries, %d weights; meta.json lists %d", k, len(s.Events), s.Graph.NumEdges(), len(s.Weights), m.Snap.PerSnap[k])
		}
		for _, e := range s.Events {
			if e.Time < s.Start || e.Time >= s.Start+1200000 {
				t.Fatalf("snapshot %d: event at %d outside its window", k, e.Time)
			}
		}
		total += len(s.Events)
	}
	if total != 24186 {
		t.Errorf("snapshots hold %d events, want 24186", total)
	}
	in := d.Info()
	if in.Snapshots != 137 || in.TimeMin != 1289192400 || in.TimeMax != 1453438800 || in.Edges != 24186 {
		t.Errorf("info: %+v", in)
	}
}

// sameDataset compares two datasets field by field.
func sameDataset(t *testing.T, a, b *Dataset) {
	t.Helper()
	if a.Name != b.Name || a.Kind != b.Kind || a.NumNodes != b.NumNodes || a.FeatureDim != b.FeatureDim ||
		a.NumClasses != b.NumClasses || a.Directed != b.Directed || a.Source != b.Source || a.SnapshotSeconds != b.SnapshotSeconds {
		t.Errorf("headers differ:\n%+v\n%+v", a.Info(), b.Info())
	}
	if !slices.Equal(a.Graph.Offsets, b.Graph.Offsets) || !slices.Equal(a.Graph.Indices, b.Graph.Indices) {
		t.Error("graphs differ")
	}
	if !slices.Equal(a.Features, b.Features) {
		t.Error("features differ")
	}
	if !slices.Equal(a.Labels, b.Labels) || !slices.Equal(a.Train, b.Train) || !slices.Equal(a.Val, b.Val) || !slices.Equal(a.Test, b.Test) {
		t.Error("labels or split differ")
	}
	if !slices.Equal(a.Events, b.Events) || !slices.Equal(a.NodeIDs, b.NodeIDs) {
		t.Error("events or node ids differ")
	}
}
