package data

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A small static dataset in the shared layout: 6 nodes, 5 edges, 3
// features, 3 classes, split 2/2/2.
func tinyStatic() (map[string][]byte, map[string]any) {
	files := map[string][]byte{
		"edges.tsv":    []byte("0\t1\n0\t2\n1\t2\n3\t4\n4\t5\n"),
		"features.f32": f32bytes(1, 0, 0, 0, 1, 0, 1, 1, 0, 0, 0, 1, 0.5, 0, 0.5, 0, 0, 0),
		"labels.txt":   []byte("0\n1\n0\n1\n2\n2\n"),
		"train.txt":    []byte("0\n1\n"),
		"val.txt":      []byte("2\n3\n"),
		"test.txt":     []byte("4\n5\n"),
		"README.md":    []byte("# tiny\n"),
	}
	meta := map[string]any{
		"name": "tiny", "kind": "static", "nodes": 6, "edges": 5, "directed": false,
		"edge_file": "edges.tsv", "edge_columns": []string{"src", "dst"},
		"feature_dim": 3, "feature_file": "features.f32", "feature_dtype": "float32, little-endian", "feature_shape": []int{6, 3},
		"classes": 3, "label_file": "labels.txt", "class_counts": map[string]int{"0": 2, "1": 2, "2": 2}, "isolated_nodes": 0,
		"split": map[string]any{"train": 2, "val": 2, "test": 2, "train_file": "train.txt", "val_file": "val.txt", "test_file": "test.txt"},
	}
	return files, meta
}

// A small dynamic dataset: 4 nodes, 4 events, snapshots of 100 s.
func tinyDynamic() (map[string][]byte, map[string]any) {
	files := map[string][]byte{
		"edges.tsv":    []byte("0\t1\t5\t100\n1\t2\t-3\t100\n2\t3\t1\t150\n3\t0\t2\t260\n"),
		"node_ids.txt": []byte("10\n20\n30\n40\n"),
	}
	meta := map[string]any{
		"name": "tinydyn", "kind": "dynamic (test)", "nodes": 4, "edges": 4, "directed": true,
		"edge_file": "edges.tsv", "edge_columns": []string{"src", "dst", "weight", "time"},
		"feature_dim": 0, "feature_file": nil, "classes": 0, "node_id_file": "node_ids.txt",
		"time_min": 100, "time_max": 260, "positive_edges": 3, "negative_edges": 1,
		"snapshot_convention": map[string]any{"seconds_per_snapshot": 100, "snapshots": 2, "edges_per_snapshot": []int{3, 1}},
	}
	return files, meta
}

func f32bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// writeDataset writes the files and meta.json (with "files" sums of sums,
// unless sums is nil) into dir/name and returns the folder.
func writeDataset(t *testing.T, name string, files map[string][]byte, meta map[string]any, sums map[string][]byte) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	for p, b := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if sums != nil {
		fs := map[string]any{}
		for p, b := range sums {
			h := sha256.Sum256(b)
			fs[p] = map[string]any{"bytes": len(b), "sha256": hex.EncodeToString(h[:])}
		}
		if _, ok := meta["files"]; !ok {
			meta["files"] = fs
		}
	}
	mb, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files["meta.json"]; !ok {
		if err := os.WriteFile(filepath.Join(dir, "meta.json"), mb, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func clone(files map[string][]byte) map[string][]byte {
	c := make(map[string][]byte, len(files))
	for k, v := range files {
		c[k] = append([]byte(nil), v...)
	}
	return c
}

func TestLoadTiny(t *testing.T) {
	files, meta := tinyStatic()
	d, err := Load(writeDataset(t, "tiny", files, meta, files))
	if err != nil {
		t.Fatal(err)
	}
	if d.NumNodes != 6 || d.NumEdges() != 5 || d.Graph.NumEdges() != 10 || d.FeatureDim != 3 || len(d.Features) != 18 || d.NumClasses != 3 {
		t.Errorf("tiny: %+v", d.Info())
	}
	if d.Features[12] != 0.5 || d.Labels[4] != 2 || d.Test[1] != 5 {
		t.Errorf("values: features %v labels %v test %v", d.Features, d.Labels, d.Test)
	}
	// Row 1 (dst 1) lists sources 0 and 2.
	if row := d.Graph.Indices[d.Graph.Offsets[1]:d.Graph.Offsets[2]]; len(row) != 2 || row[0] != 0 || row[1] != 2 {
		t.Errorf("row 1 = %v", row)
	}

	files, meta = tinyDynamic()
	d, err = Load(writeDataset(t, "tinydyn", files, meta, files))
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != KindDynamic || len(d.Events) != 4 || d.Events[1] != (Event{Src: 1, Dst: 2, Weight: -3, Time: 100}) || d.NodeIDs[3] != 40 || d.SnapshotSeconds != 100 {
		t.Errorf("tinydyn: %+v events %v", d.Info(), d.Events)
	}
}

func TestLoadErrors(t *testing.T) {
	type mut = func(f map[string][]byte, m map[string]any)
	setSplit := func(m map[string]any, k string, v any) { m["split"].(map[string]any)[k] = v }
	cases := []struct {
		name       string
		dynamic    bool
		mutate     mut
		sumsBefore bool // meta.json sums of the files before mutate
		want       error
		msg        string
	}{
		// Features.
		{name: "features truncated", mutate: func(f map[string][]byte, m map[string]any) { f["features.f32"] = f["features.f32"][:68] },
			want: ErrMismatch, msg: "tiny/features.f32: truncated: 68 bytes, expected 72 (6 nodes x 3 features x 4 bytes)"},
		{name: "features oversized", mutate: func(f map[string][]byte, m map[string]any) {
			f["features.f32"] = append(f["features.f32"], 0, 0, 0, 0, 0)
		},
			want: ErrMismatch, msg: "tiny/features.f32: oversized: 77 bytes, expected 72"},
		{name: "features NaN", mutate: func(f map[string][]byte, m map[string]any) {
			binary.LittleEndian.PutUint32(f["features.f32"][4*7:], math.Float32bits(float32(math.NaN())))
		}, want: ErrMalformed, msg: "tiny/features.f32: node 2 feature 1 (byte offset 28) is NaN"},
		{name: "features Inf", mutate: func(f map[string][]byte, m map[string]any) {
			binary.LittleEndian.PutUint32(f["features.f32"][0:], math.Float32bits(float32(math.Inf(-1))))
		}, want: ErrMalformed, msg: "node 0 feature 0 (byte offset 0) is -Inf"},
		{name: "feature_dim disagrees with file", mutate: func(f map[string][]byte, m map[string]any) {
			m["feature_dim"] = 4
			m["feature_shape"] = []int{6, 4}
		}, want: ErrMismatch, msg: "truncated: 72 bytes, expected 96"},
		{name: "feature_shape disagrees", mutate: func(f map[string][]byte, m map[string]any) { m["feature_shape"] = []int{6, 2} },
			want: ErrMalformed, msg: "tiny/meta.json: feature_shape [6 2] disagrees with nodes = 6 and feature_dim = 3"},
		{name: "feature dtype", mutate: func(f map[string][]byte, m map[string]any) { m["feature_dtype"] = "float64" },
			want: ErrMalformed, msg: `feature_dtype "float64": only little-endian float32`},

		// Edges.
		{name: "node id out of range", mutate: func(f map[string][]byte, m map[string]any) { f["edges.tsv"] = []byte("0\t1\n0\t6\n1\t2\n3\t4\n4\t5\n") },
			want: ErrMalformed, msg: "tiny/edges.tsv:2: dst node id 6 outside [0,6)"},
		{name: "negative node id", mutate: func(f map[string][]byte, m map[string]any) { f["edges.tsv"] = []byte("0\t1\n-1\t2\n") },
			want: ErrMalformed, msg: "tiny/edges.tsv:2: src node id -1 outside [0,6)"},
		{name: "space instead of tab", mutate: func(f map[string][]byte, m map[string]any) { f["edges.tsv"] = []byte("0\t1\n0 2\n") },
			want: ErrMalformed, msg: `tiny/edges.tsv:2: 1 TAB-separated fields, expected 2 (src dst): "0 2"`},
		{name: "three fields", mutate: func(f map[string][]byte, m map[string]any) { f["edges.tsv"] = []byte("0\t1\t7\n") },
			want: ErrMalformed, msg: "tiny/edges.tsv:1: 3 TAB-separated fields, expected 2 (src dst)"},
		{name: "not an integer", mutate: func(f map[string][]byte, m map[string]any) { f["edges.tsv"] = []byte("0\t1\n0\tx2\n") },
			want: ErrMalformed, msg: `tiny/edges.tsv:2: dst "x2" is not an integer node id`},
		{name: "empty line", mutate: func(f map[string][]byte, m map[string]any) { f["edges.tsv"] = []byte("0\t1\n\n0\t2\n") },
			want: ErrMalformed, msg: "tiny/edges.tsv:2: empty line"},
		{name: "self-loop", mutate: func(f map[string][]byte, m map[string]any) { f["edges.tsv"] = []byte("0\t1\n2\t2\n") },
			want: ErrMalformed, msg: "tiny/edges.tsv:2: self-loop 2 -> 2"},
		{name: "src > dst", mutate: func(f map[string][]byte, m map[string]any) { f["edges.tsv"] = []byte("0\t1\n2\t0\n") },
			want: ErrMalformed, msg: "tiny/edges.tsv:2: edge 2 0 has src > dst"},
		{name: "duplicate edge", mutate: func(f map[string][]byte, m map[string]any) {
			f["edges.tsv"] = []byte("0\t1\n3\t4\n0\t2\n1\t2\n3\t4\n")
		}, want: ErrMalformed, msg: "tiny/edges.tsv:5: edge 3 4 repeats line 2"},
		{name: "edge count", mutate: func(f map[string][]byte, m map[string]any) { m["edges"] = 6 },
			want: ErrMismatch, msg: "tiny/edges.tsv: 5 edge lines, but meta.json edges = 6"},
		{name: "isolated count", mutate: func(f map[string][]byte, m map[string]any) { m["isolated_nodes"] = 1 },
			want: ErrMismatch, msg: "0 isolated nodes, but meta.json isolated_nodes = 1"},

		// Labels.
		{name: "label too large", mutate: func(f map[string][]byte, m map[string]any) { f["labels.txt"] = []byte("0\n1\n0\n3\n2\n2\n") },
			want: ErrMalformed, msg: "tiny/labels.txt:4: label 3 of node 3 outside [0,3) (or -1 for no label)"},
		{name: "label below -1", mutate: func(f map[string][]byte, m map[string]any) { f["labels.txt"] = []byte("0\n-2\n") },
			want: ErrMalformed, msg: "tiny/labels.txt:2: label -2 of node 1 outside [0,3)"},
		{name: "label not integer", mutate: func(f map[string][]byte, m map[string]any) { f["labels.txt"] = []byte("0\n1.0\n") },
			want: ErrMalformed, msg: `tiny/labels.txt:2: "1.0" is not an integer class id`},
		{name: "labels too few (nodes count)", mutate: func(f map[string][]byte, m map[string]any) { f["labels.txt"] = []byte("0\n1\n0\n1\n2\n") },
			want: ErrMismatch, msg: "tiny/labels.txt: 5 lines, but meta.json says nodes = 6; the layout has one label per node"},
		{name: "labels too many", mutate: func(f map[string][]byte, m map[string]any) { f["labels.txt"] = append(f["labels.txt"], "1\n"...) },
			want: ErrMalformed, msg: "tiny/labels.txt:7: more than 6 lines"},
		{name: "nodes disagrees", mutate: func(f map[string][]byte, m map[string]any) { m["nodes"] = 7; m["feature_shape"] = []int{7, 3} },
			want: ErrMismatch, msg: "truncated: 72 bytes, expected 84"},
		// A made-up node count is refused before the graph is allocated
		// (it ran out of memory building a CSR of 2^31 rows).
		{name: "nodes huge, labels", mutate: func(f map[string][]byte, m map[string]any) {
			noFeatures(f, m)
			m["nodes"] = math.MaxInt32
		}, want: ErrMismatch, msg: "tiny/labels.txt: 6 lines, but meta.json says nodes = 2147483647"},
		{name: "nodes huge, features", mutate: func(f map[string][]byte, m map[string]any) {
			m["nodes"] = 2000000000
			delete(m, "feature_shape")
		}, want: ErrMismatch, msg: "tiny/features.f32: truncated: 72 bytes, expected 24000000000 (2000000000 nodes x 3 features"},
		{name: "nodes huge, no per-node files", mutate: func(f map[string][]byte, m map[string]any) {
			noFeatures(f, m)
			noLabels(f, m)
			m["nodes"] = 2000000000
		}, want: ErrMismatch, msg: "tiny/meta.json: nodes = 2000000000, but tiny/edges.tsv has only 5 edges (largest node id 5) and no features, labels or node ids confirm the count; set nodes"},
		{name: "class counts", mutate: func(f map[string][]byte, m map[string]any) {
			m["class_counts"] = map[string]int{"0": 3, "1": 1, "2": 2}
		},
			want: ErrMismatch, msg: `tiny/labels.txt: 2 nodes of class 0, but meta.json class_counts["0"] = 3`},
		{name: "classes missing labels file", mutate: func(f map[string][]byte, m map[string]any) { delete(f, "labels.txt") },
			want: ErrMissingFile, msg: "tiny/labels.txt: missing; meta.json classes = 3, so the layout expects one label per node here"},

		// Split.
		{name: "split not ascending", mutate: func(f map[string][]byte, m map[string]any) { f["train.txt"] = []byte("1\n0\n") },
			want: ErrMalformed, msg: "tiny/train.txt:2: node ids not ascending: 0 after 1 on line 1"},
		{name: "split repeats", mutate: func(f map[string][]byte, m map[string]any) { f["train.txt"] = []byte("1\n1\n") },
			want: ErrMalformed, msg: "tiny/train.txt:2: node 1 listed twice"},
		{name: "split overlap", mutate: func(f map[string][]byte, m map[string]any) { f["val.txt"] = []byte("1\n3\n") },
			want: ErrMalformed, msg: "tiny/train.txt: node 1 is also in tiny/val.txt; the split sets must be disjoint"},
		{name: "split unlabelled", mutate: func(f map[string][]byte, m map[string]any) {
			f["labels.txt"] = []byte("0\n1\n0\n-1\n2\n2\n")
			m["class_counts"] = map[string]int{"0": 2, "1": 1, "2": 2}
		}, want: ErrMalformed, msg: "tiny/val.txt:2: node 3 has no label"},
		{name: "split out of range", mutate: func(f map[string][]byte, m map[string]any) { f["test.txt"] = []byte("4\n6\n") },
			want: ErrMalformed, msg: "tiny/test.txt:2: node id 6 outside [0,6)"},
		{name: "split size", mutate: func(f map[string][]byte, m map[string]any) { setSplit(m, "val", 3) },
			want: ErrMismatch, msg: "tiny/val.txt: 2 node ids, but meta.json split.val = 3"},
		{name: "split file missing", mutate: func(f map[string][]byte, m map[string]any) { delete(f, "test.txt") },
			want: ErrMissingFile, msg: "tiny/test.txt: missing; meta.json has a split, so the layout expects its test node ids here"},

		// Missing files, checksums.
		{name: "edges missing", mutate: func(f map[string][]byte, m map[string]any) { delete(f, "edges.tsv") },
			want: ErrMissingFile, msg: "tiny/edges.tsv: missing; meta.json edge_file names it"},
		{name: "features missing", mutate: func(f map[string][]byte, m map[string]any) { delete(f, "features.f32") },
			want: ErrMissingFile, msg: "tiny/features.f32: missing; meta.json feature_dim = 3, so the layout expects 6 x 3 float32 values here"},
		{name: "listed file missing", mutate: func(f map[string][]byte, m map[string]any) { delete(f, "README.md") }, sumsBefore: true,
			want: ErrMissingFile, msg: "tiny/README.md: missing; meta.json files lists it"},
		{name: "sha256 mismatch", sumsBefore: true, mutate: func(f map[string][]byte, m map[string]any) { f["labels.txt"] = []byte("1\n0\n0\n1\n2\n2\n") },
			want: ErrChecksum, msg: "tiny/labels.txt: sha256 "},
		{name: "size mismatch", sumsBefore: true, mutate: func(f map[string][]byte, m map[string]any) { f["README.md"] = []byte("# tiny!\n") },
			want: ErrChecksum, msg: "tiny/README.md: 8 bytes, but meta.json files lists 7"},

		// meta.json.
		{name: "meta missing", mutate: func(f map[string][]byte, m map[string]any) { f["meta.json"] = nil },
			want: ErrMissingFile, msg: "tiny/meta.json: missing; a dataset folder in the shared layout"},
		{name: "meta bad kind", mutate: func(f map[string][]byte, m map[string]any) { m["kind"] = "temporal" },
			want: ErrMalformed, msg: `tiny/meta.json: kind "temporal": want one starting with "static" or "dynamic"`},
		{name: "meta no nodes", mutate: func(f map[string][]byte, m map[string]any) { delete(m, "nodes") },
			want: ErrMalformed, msg: `tiny/meta.json: no "nodes" count`},
		{name: "meta negative nodes", mutate: func(f map[string][]byte, m map[string]any) { m["nodes"] = -1 },
			want: ErrMalformed, msg: "tiny/meta.json: nodes = -1, want 0..2147483647"},
		{name: "meta nodes not integer", mutate: func(f map[string][]byte, m map[string]any) { m["nodes"] = 6.5 },
			want: ErrMalformed, msg: "tiny/meta.json:"},
		{name: "meta path escapes", mutate: func(f map[string][]byte, m map[string]any) { m["label_file"] = "../labels.txt" },
			want: ErrMalformed, msg: `tiny/meta.json: file name "../labels.txt" leaves the dataset folder`},
		{name: "meta unknown column", mutate: func(f map[string][]byte, m map[string]any) { m["edge_columns"] = []string{"src", "dst", "color"} },
			want: ErrMalformed, msg: `edge column "color": known columns are src, dst, weight, time`},
		{name: "meta bad sha", mutate: func(f map[string][]byte, m map[string]any) {
			m["files"] = map[string]any{"edges.tsv": map[string]any{"bytes": 30, "sha256": "xyz"}}
		}, want: ErrMalformed, msg: `files["edges.tsv"].sha256 = "xyz" is not 64 hex digits`},
		{name: "meta split without classes", mutate: func(f map[string][]byte, m map[string]any) { m["classes"] = 0 },
			want: ErrMalformed, msg: "a split needs labels, but classes = 0"},

		// Dynamic.
		{name: "events unsorted", dynamic: true, mutate: func(f map[string][]byte, m map[string]any) {
			f["edges.tsv"] = []byte("0\t1\t5\t100\n2\t3\t1\t150\n1\t2\t-3\t100\n3\t0\t2\t260\n")
		}, want: ErrMalformed, msg: "tinydyn/edges.tsv:3: time 100 is before 150 on line 2; events must be sorted by time"},
		{name: "time not integer", dynamic: true, mutate: func(f map[string][]byte, m map[string]any) {
			f["edges.tsv"] = []byte("0\t1\t5\t100.5\n")
		}, want: ErrMalformed, msg: `tinydyn/edges.tsv:1: time "100.5" is not an integer (Unix seconds)`},
		{name: "weight NaN", dynamic: true, mutate: func(f map[string][]byte, m map[string]any) {
			f["edges.tsv"] = []byte("0\t1\tNaN\t100\n")
		}, want: ErrMalformed, msg: `tinydyn/edges.tsv:1: weight "NaN" is not a finite number`},
		{name: "time_min", dynamic: true, mutate: func(f map[string][]byte, m map[string]any) { m["time_min"] = 99 },
			want: ErrMismatch, msg: "tinydyn/edges.tsv: first event at time 100, but meta.json time_min = 99"},
		{name: "sign counts", dynamic: true, mutate: func(f map[string][]byte, m map[string]any) { m["negative_edges"] = 2 },
			want: ErrMismatch, msg: "1 events with negative weight, but meta.json negative_edges = 2"},
		{name: "snapshot count", dynamic: true, mutate: func(f map[string][]byte, m map[string]any) {
			m["snapshot_convention"] = map[string]any{"seconds_per_snapshot": 50, "snapshots": 2}
		}, want: ErrMismatch, msg: "4 snapshots of 50 s, but meta.json snapshot_convention.snapshots = 2"},
		{name: "edges per snapshot", dynamic: true, mutate: func(f map[string][]byte, m map[string]any) {
			m["snapshot_convention"] = map[string]any{"seconds_per_snapshot": 100, "snapshots": 2, "edges_per_snapshot": []int{2, 2}}
		}, want: ErrMismatch, msg: "snapshot 0 has 3 events, but meta.json snapshot_convention.edges_per_snapshot[0] = 2"},
		{name: "node ids count", dynamic: true, mutate: func(f map[string][]byte, m map[string]any) { f["node_ids.txt"] = []byte("10\n20\n") },
			want: ErrMismatch, msg: "tinydyn/node_ids.txt: 2 lines, but meta.json says nodes = 4; the layout has one original id per node"},
		{name: "nodes huge, node ids", dynamic: true, mutate: func(f map[string][]byte, m map[string]any) { m["nodes"] = 2000000000 },
			want: ErrMismatch, msg: "tinydyn/node_ids.txt: 4 lines, but meta.json says nodes = 2000000000"},
		{name: "nodes huge, dynamic without node ids", dynamic: true, mutate: func(f map[string][]byte, m map[string]any) {
			m["nodes"] = 2000000000
			delete(m, "node_id_file")
		}, want: ErrMismatch, msg: "tinydyn/meta.json: nodes = 2000000000, but tinydyn/edges.tsv has only 4 edges (largest node id 3)"},
		{name: "node ids repeat", dynamic: true, mutate: func(f map[string][]byte, m map[string]any) { f["node_ids.txt"] = []byte("10\n20\n20\n10\n") },
			want: ErrMalformed, msg: "tinydyn/node_ids.txt:3: original id 20 repeats line 2; each node has its own original id"},
		{name: "weight 0", dynamic: true, mutate: func(f map[string][]byte, m map[string]any) {
			f["edges.tsv"] = []byte("0\t1\t5\t100\n1\t2\t0\t100\n2\t3\t1\t150\n3\t0\t2\t260\n")
			delete(m, "positive_edges") // without the sign counts weight 0 was accepted
			delete(m, "negative_edges")
		}, want: ErrMalformed, msg: "tinydyn/edges.tsv:2: weight 0; a dynamic edge's weight is never 0"},
		{name: "weight -0", dynamic: true, mutate: func(f map[string][]byte, m map[string]any) {
			f["edges.tsv"] = []byte("0\t1\t-0.0\t100\n")
		}, want: ErrMalformed, msg: "tinydyn/edges.tsv:1: weight 0"},
		{name: "dynamic without time column", dynamic: true, mutate: func(f map[string][]byte, m map[string]any) {
			m["edge_columns"] = []string{"src", "dst", "weight", "weight2"}
		}, want: ErrMalformed, msg: `edge column "weight2"`},
		{name: "dynamic undirected", dynamic: true, mutate: func(f map[string][]byte, m map[string]any) { m["directed"] = false },
			want: ErrMalformed, msg: "a dynamic dataset must be directed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files, meta := tinyStatic()
			name := "tiny"
			if c.dynamic {
				files, meta = tinyDynamic()
				name = "tinydyn"
			}
			orig := clone(files)
			c.mutate(files, meta)
			sums := files
			if c.sumsBefore {
				sums = orig
			}
			if b, ok := files["meta.json"]; ok && b == nil { // no meta.json at all
				delete(files, "meta.json")
				dir := writeDataset(t, name, files, meta, sums)
				os.Remove(filepath.Join(dir, "meta.json"))
				checkErr(t, loadErr(dir), c.want, c.msg)
				return
			}
			err := loadErr(writeDataset(t, name, files, meta, sums))
			t.Log(err)
			checkErr(t, err, c.want, c.msg)
		})
	}
}

// A UTF-8 byte-order mark, as some editors write, at the start of
// meta.json or of a text file is dropped (meta.json failed with "invalid
// character 'ï'"); the checksums stay those of the files as they are.
func TestLoadBOM(t *testing.T) {
	bom := "\xef\xbb\xbf"
	for _, dynamic := range []bool{false, true} {
		mk, name, texts := tinyStatic, "tiny", []string{"edges.tsv", "labels.txt", "train.txt", "val.txt", "test.txt"}
		if dynamic {
			mk, name, texts = tinyDynamic, "tinydyn", []string{"edges.tsv", "node_ids.txt"}
		}
		files, meta := mk()
		want, err := Load(writeDataset(t, name, files, meta, files))
		if err != nil {
			t.Fatal(err)
		}
		files, meta = mk()
		for _, f := range texts {
			files[f] = append([]byte(bom), files[f]...)
		}
		dir := writeDataset(t, name, files, meta, files)
		mb, err := os.ReadFile(filepath.Join(dir, "meta.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "meta.json"), append([]byte(bom), mb...), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := Load(dir)
		if err != nil {
			t.Fatalf("%s with BOMs: %v", name, err)
		}
		if got.Info().Edges != want.Info().Edges || !slices.Equal(got.Labels, want.Labels) || !slices.Equal(got.Train, want.Train) ||
			!slices.Equal(got.NodeIDs, want.NodeIDs) || !slices.Equal(got.Events, want.Events) {
			t.Errorf("%s with BOMs loads differently", name)
		}
	}
}

// noFeatures drops the features of tinyStatic.
func noFeatures(f map[string][]byte, m map[string]any) {
	delete(f, "features.f32")
	m["feature_dim"] = 0
	m["feature_file"] = nil
	delete(m, "feature_shape")
}

// noLabels drops the labels and the split of tinyStatic.
func noLabels(f map[string][]byte, m map[string]any) {
	for _, name := range []string{"labels.txt", "train.txt", "val.txt", "test.txt"} {
		delete(f, name)
	}
	m["classes"] = 0
	delete(m, "class_counts")
	delete(m, "split")
}

// Isolated nodes are allowed: a dataset without per-node files may have
// more nodes than its edges touch, as long as the count is not absurd.
func TestLoadIsolatedNodesWithoutPerNodeFiles(t *testing.T) {
	files, meta := tinyStatic()
	noFeatures(files, meta)
	noLabels(files, meta)
	meta["nodes"] = 100
	meta["isolated_nodes"] = 94
	d, err := Load(writeDataset(t, "tiny", files, meta, files))
	if err != nil {
		t.Fatal(err)
	}
	if d.NumNodes != 100 || d.Graph.NumDst != 100 || d.NumEdges() != 5 {
		t.Errorf("got %+v", d.Info())
	}
}

func loadErr(dir string) error {
	d, err := Load(dir)
	if err == nil && d == nil {
		return errors.New("nil dataset without error")
	}
	return err
}

func checkErr(t *testing.T, err, want error, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", msg)
	}
	if !errors.Is(err, want) {
		t.Errorf("error %q does not wrap %v", err, want)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Errorf("error %q\n  does not contain %q", err, msg)
	}
	if !strings.HasPrefix(err.Error(), "data: ") {
		t.Errorf("error %q lacks the data: prefix", err)
	}
}

func TestLoadSkipChecksums(t *testing.T) {
	files, meta := tinyStatic()
	orig := clone(files)
	files["labels.txt"] = []byte("1\n0\n0\n1\n2\n2\n")
	dir := writeDataset(t, "tiny", files, meta, orig)
	if _, err := Load(dir); !errors.Is(err, ErrChecksum) {
		t.Fatalf("Load: %v, want a checksum error", err)
	}
	if _, err := LoadWith(dir, LoadOptions{SkipChecksums: true}); err != nil {
		t.Fatalf("LoadWith(SkipChecksums): %v", err)
	}
}

func TestLoadErrorIsTyped(t *testing.T) {
	files, meta := tinyStatic()
	files["edges.tsv"] = []byte("0\t1\n0\t9\n")
	_, err := Load(writeDataset(t, "tiny", files, meta, files))
	var e *Error
	if !errors.As(err, &e) || e.File != "tiny/edges.tsv" || e.Line != 2 || e.Kind != ErrMalformed {
		t.Fatalf("error %#v", err)
	}
}
