package data

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
)

// meta is the part of meta.json that the loader reads and checks. Other
// keys (provenance, citation, verification) are ignored.
type meta struct {
	Name         string              `json:"name"`
	Kind         string              `json:"kind"`
	Nodes        *int64              `json:"nodes"`
	Edges        *int64              `json:"edges"`
	Directed     *bool               `json:"directed"`
	EdgeFile     string              `json:"edge_file"`
	EdgeColumns  []string            `json:"edge_columns"`
	FeatureDim   int64               `json:"feature_dim"`
	FeatureFile  *string             `json:"feature_file"`
	FeatureDtype string              `json:"feature_dtype"`
	FeatureShape []int64             `json:"feature_shape"`
	Classes      int64               `json:"classes"`
	LabelFile    string              `json:"label_file"`
	ClassCounts  map[string]int64    `json:"class_counts"`
	Isolated     *int64              `json:"isolated_nodes"`
	Split        *metaSplit          `json:"split"`
	NodeIDFile   string              `json:"node_id_file"`
	TimeMin      *int64              `json:"time_min"`
	TimeMax      *int64              `json:"time_max"`
	Positive     *int64              `json:"positive_edges"`
	Negative     *int64              `json:"negative_edges"`
	Snapshots    *metaSnapshots      `json:"snapshot_convention"`
	Files        map[string]metaFile `json:"files"`

	kind     string   // KindStatic or KindDynamic
	cols     edgeCols // positions of the edge columns
	features string   // the feature file, "" when none
	labels   string   // the label file, "" when none
}

type metaSplit struct {
	Train     *int64 `json:"train"`
	Val       *int64 `json:"val"`
	Test      *int64 `json:"test"`
	TrainFile string `json:"train_file"`
	ValFile   string `json:"val_file"`
	TestFile  string `json:"test_file"`
}

type metaSnapshots struct {
	Seconds int64   `json:"seconds_per_snapshot"`
	Count   *int64  `json:"snapshots"`
	PerSnap []int64 `json:"edges_per_snapshot"`
}

type metaFile struct {
	Bytes  *int64 `json:"bytes"`
	Sha256 string `json:"sha256"`
}

// edgeCols says where each edge column is; -1 when absent.
type edgeCols struct {
	n                      int
	src, dst, weight, time int
}

// parseMeta reads and checks meta.json. file names the file in messages.
func parseMeta(r io.Reader, file string) (*meta, error) {
	b, err := io.ReadAll(io.LimitReader(r, 16<<20))
	if err != nil {
		return nil, &Error{File: file, Msg: "read failed", Kind: ErrMalformed, Err: err}
	}
	b = bytes.TrimPrefix(b, utf8BOM) // editors on Windows write one; JSON has no use for it
	var m meta
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&m); err != nil {
		line := 0
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			line = lineAt(b, se.Offset)
		case errors.As(err, &te):
			line = lineAt(b, te.Offset)
		}
		return nil, &Error{File: file, Line: line, Msg: "not valid meta.json", Kind: ErrMalformed, Err: err}
	}
	if dec.More() {
		return nil, malformed(file, 0, "extra data after the JSON object")
	}
	bad := func(format string, args ...any) error { return malformed(file, 0, format, args...) }

	switch {
	case strings.HasPrefix(m.Kind, KindStatic):
		m.kind = KindStatic
	case strings.HasPrefix(m.Kind, KindDynamic):
		m.kind = KindDynamic
	default:
		return nil, bad("kind %q: want one starting with %q or %q", m.Kind, KindStatic, KindDynamic)
	}
	if m.Nodes == nil {
		return nil, bad(`no "nodes" count`)
	}
	if *m.Nodes < 0 || *m.Nodes > maxNodes {
		return nil, bad("nodes = %d, want 0..%d", *m.Nodes, maxNodes)
	}
	if m.Edges == nil {
		return nil, bad(`no "edges" count (lines in the edge file)`)
	}
	if *m.Edges < 0 || *m.Edges > maxNodes {
		return nil, bad("edges = %d, want 0..%d", *m.Edges, maxNodes)
	}
	if m.Directed == nil {
		return nil, bad(`no "directed" flag`)
	}
	if m.kind == KindDynamic && !*m.Directed {
		return nil, bad("a dynamic dataset must be directed (events are src -> dst)")
	}
	if m.EdgeFile == "" {
		m.EdgeFile = "edges.tsv"
	}
	if len(m.EdgeColumns) == 0 {
		m.EdgeColumns = []string{"src", "dst"}
	}
	m.cols = edgeCols{n: len(m.EdgeColumns), src: -1, dst: -1, weight: -1, time: -1}
	for i, c := range m.EdgeColumns {
		var p *int
		switch c {
		case "src":
			p = &m.cols.src
		case "dst":
			p = &m.cols.dst
		case "weight":
			p = &m.cols.weight
		case "time":
			p = &m.cols.time
		default:
			return nil, bad("edge column %q: known columns are src, dst, weight, time", c)
		}
		if *p >= 0 {
			return nil, bad("edge column %q listed twice", c)
		}
		*p = i
	}
	if m.cols.src < 0 || m.cols.dst < 0 {
		return nil, bad("edge_columns %q lack src or dst", m.EdgeColumns)
	}
	if m.kind == KindDynamic && m.cols.time < 0 {
		return nil, bad(`a dynamic dataset needs a "time" edge column, have %q`, m.EdgeColumns)
	}

	if m.FeatureDim < 0 || m.FeatureDim > 1<<24 {
		return nil, bad("feature_dim = %d, want 0..%d", m.FeatureDim, 1<<24)
	}
	if m.FeatureDim > 0 {
		m.features = "features.f32"
		if m.FeatureFile != nil && *m.FeatureFile != "" {
			m.features = *m.FeatureFile
		}
		if m.FeatureDtype != "" && !strings.HasPrefix(m.FeatureDtype, "float32") {
			return nil, bad("feature_dtype %q: only little-endian float32 is supported", m.FeatureDtype)
		}
		if m.FeatureShape != nil && (len(m.FeatureShape) != 2 || m.FeatureShape[0] != *m.Nodes || m.FeatureShape[1] != m.FeatureDim) {
			return nil, bad("feature_shape %v disagrees with nodes = %d and feature_dim = %d", m.FeatureShape, *m.Nodes, m.FeatureDim)
		}
	} else if m.FeatureFile != nil && *m.FeatureFile != "" {
		return nil, bad("feature_file %q given with feature_dim = 0", *m.FeatureFile)
	}

	if m.Classes < 0 || m.Classes > 1<<20 {
		return nil, bad("classes = %d, want 0..%d", m.Classes, 1<<20)
	}
	if m.Classes > 0 {
		m.labels = "labels.txt"
		if m.LabelFile != "" {
			m.labels = m.LabelFile
		}
	}
	if m.Split != nil {
		if m.Classes == 0 {
			return nil, bad("a split needs labels, but classes = 0")
		}
		s := m.Split
		for _, p := range []struct {
			name string
			n    *int64
			file *string
		}{{"train", s.Train, &s.TrainFile}, {"val", s.Val, &s.ValFile}, {"test", s.Test, &s.TestFile}} {
			if *p.file == "" {
				*p.file = p.name + ".txt"
			}
			if p.n != nil && (*p.n < 0 || *p.n > *m.Nodes) {
				return nil, bad("split %s = %d, want 0..%d (nodes)", p.name, *p.n, *m.Nodes)
			}
		}
	}
	if m.Snapshots != nil {
		if m.kind != KindDynamic {
			return nil, bad("snapshot_convention given for a static dataset")
		}
		if m.Snapshots.Seconds <= 0 {
			return nil, bad("snapshot_convention.seconds_per_snapshot = %d, want > 0", m.Snapshots.Seconds)
		}
		if c := m.Snapshots.Count; c != nil && m.Snapshots.PerSnap != nil && int64(len(m.Snapshots.PerSnap)) != *c {
			return nil, bad("snapshot_convention lists %d edge counts for %d snapshots", len(m.Snapshots.PerSnap), *c)
		}
	}
	if m.TimeMin != nil && m.TimeMax != nil && *m.TimeMin > *m.TimeMax {
		return nil, bad("time_min %d after time_max %d", *m.TimeMin, *m.TimeMax)
	}

	// Every file name must stay inside the folder.
	names := []string{m.EdgeFile, m.features, m.labels, m.NodeIDFile}
	if m.Split != nil {
		names = append(names, m.Split.TrainFile, m.Split.ValFile, m.Split.TestFile)
	}
	for name := range m.Files {
		names = append(names, name)
	}
	for _, name := range names {
		if name != "" && !filepath.IsLocal(filepath.FromSlash(name)) {
			return nil, bad("file name %q leaves the dataset folder", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(m.Files)) { // the same entry first on every run
		f := m.Files[name]
		if f.Bytes != nil && *f.Bytes < 0 {
			return nil, bad("files[%q].bytes = %d", name, *f.Bytes)
		}
		if f.Sha256 != "" && !isHex(f.Sha256, 64) {
			return nil, bad("files[%q].sha256 = %q is not 64 hex digits", name, f.Sha256)
		}
	}
	return &m, nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// lineAt is the 1-based line of byte offset off in b.
func lineAt(b []byte, off int64) int {
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	if off < 0 {
		off = 0
	}
	return bytes.Count(b[:off], []byte{'\n'}) + 1
}
