package data

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gnnkit/gnnkit/core"
)

// LoadOptions tunes LoadWith. The zero value is the default of Load.
type LoadOptions struct {
	// SkipChecksums skips comparing each file with its size and sha256 in
	// meta.json "files". The check is on by default; it reads every listed
	// file once (about 20 ms for Cora).
	SkipChecksums bool
}

// Load reads a dataset folder in the shared layout (see
// shared/data/README.md): meta.json, edges.tsv and, as meta.json says,
// features.f32, labels.txt, the split files and node_ids.txt. Every file
// is checked against meta.json (counts, shapes, sizes and sha256 sums),
// and every rule of the layout is enforced; the first problem is returned
// as an *Error naming the file and line.
func Load(dir string) (*Dataset, error) { return LoadWith(dir, LoadOptions{}) }

// LoadWith is Load with options.
func LoadWith(dir string, opt LoadOptions) (*Dataset, error) {
	ld := &loader{dir: dir, base: filepath.Base(filepath.Clean(dir)), opt: opt, checked: map[string]bool{}}
	return ld.load()
}

type loader struct {
	dir, base string
	opt       LoadOptions
	m         *meta
	checked   map[string]bool // files whose checksum was verified
}

// show is how a file of the folder is named in messages: "cora/edges.tsv".
func (ld *loader) show(name string) string { return path.Join(ld.base, filepath.ToSlash(name)) }

// open opens a file of the folder; why says what the layout expects it for.
func (ld *loader) open(name, why string) (*os.File, error) {
	f, err := os.Open(filepath.Join(ld.dir, filepath.FromSlash(name)))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &Error{File: ld.show(name), Msg: "missing; " + why, Kind: ErrMissingFile, Err: err}
		}
		return nil, &Error{File: ld.show(name), Msg: "cannot open", Kind: ErrMissingFile, Err: err}
	}
	return f, nil
}

// summer hashes what a parser reads, to check it against meta.json.
type summer struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (s *summer) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.n += int64(n)
		if s.h != nil {
			s.h.Write(p[:n])
		}
	}
	return n, err
}

// parse opens a file, runs fn over its contents and then checks its size
// and sha256 against meta.json "files".
func (ld *loader) parse(name, why string, fn func(r io.Reader, file string) error) error {
	f, err := ld.open(name, why)
	if err != nil {
		return err
	}
	defer f.Close()
	s := &summer{r: f}
	sum, listed := ld.m.Files[filepath.ToSlash(name)]
	check := listed && !ld.opt.SkipChecksums
	if check && sum.Sha256 != "" {
		s.h = sha256.New()
	}
	if err := fn(s, ld.show(name)); err != nil {
		return err
	}
	if !check {
		return nil
	}
	if _, err := io.Copy(io.Discard, s); err != nil { // parsers stop at EOF; be sure
		return &Error{File: ld.show(name), Msg: "read failed", Kind: ErrMalformed, Err: err}
	}
	ld.checked[filepath.ToSlash(name)] = true
	return ld.verify(name, sum, s)
}

func (ld *loader) verify(name string, sum metaFile, s *summer) error {
	if sum.Bytes != nil && s.n != *sum.Bytes {
		return &Error{File: ld.show(name), Msg: fmt.Sprintf("%d bytes, but meta.json files lists %d; the file was changed or damaged", s.n, *sum.Bytes), Kind: ErrChecksum}
	}
	if s.h != nil {
		got := hex.EncodeToString(s.h.Sum(nil))
		if !strings.EqualFold(got, sum.Sha256) {
			return &Error{File: ld.show(name), Msg: fmt.Sprintf("sha256 %s, but meta.json files lists %s; the file was changed or damaged", got, strings.ToLower(sum.Sha256)), Kind: ErrChecksum}
		}
	}
	return nil
}

func (ld *loader) load() (*Dataset, error) {
	f, err := ld.open("meta.json", "a dataset folder in the shared layout (shared/data/README.md) describes itself in meta.json")
	if err != nil {
		return nil, err
	}
	ld.m, err = parseMeta(f, ld.show("meta.json"))
	f.Close()
	if err != nil {
		return nil, err
	}
	m := ld.m
	n := int(*m.Nodes)
	d := &Dataset{Name: m.Name, Kind: m.kind, NumNodes: n, Source: ld.dir}
	if d.Name == "" {
		d.Name = ld.base
	}
	directed := *m.Directed

	// Edges.
	var ed *edgeData
	err = ld.parse(m.EdgeFile, "meta.json edge_file names it, and every dataset has an edge file", func(r io.Reader, file string) error {
		var err error
		ed, err = parseEdges(r, file, m.cols, n, m.kind, directed)
		return err
	})
	if err != nil {
		return nil, err
	}
	if int64(len(ed.src)) != *m.Edges {
		return nil, mismatch(ld.show(m.EdgeFile), "%d edge lines, but meta.json edges = %d", len(ed.src), *m.Edges)
	}
	if m.kind == KindDynamic {
		d.Directed = true
		d.Events = ed.events
		if err := ld.checkDynamic(d); err != nil {
			return nil, err
		}
	}

	// Features.
	if m.FeatureDim > 0 {
		d.FeatureDim = int(m.FeatureDim)
		err = ld.parse(m.features, fmt.Sprintf("meta.json feature_dim = %d, so the layout expects %d x %d float32 values here", m.FeatureDim, n, m.FeatureDim), func(r io.Reader, file string) error {
			var err error
			d.Features, err = parseFeatures(r, file, n, d.FeatureDim)
			return err
		})
		if err != nil {
			return nil, err
		}
	}

	// Labels and the split.
	if m.Classes > 0 {
		d.NumClasses = int(m.Classes)
		err = ld.parse(m.labels, fmt.Sprintf("meta.json classes = %d, so the layout expects one label per node here", m.Classes), func(r io.Reader, file string) error {
			var err error
			d.Labels, err = parseLabels(r, file, n, d.NumClasses)
			return err
		})
		if err != nil {
			return nil, err
		}
		if err := ld.checkClassCounts(d); err != nil {
			return nil, err
		}
	}
	if s := m.Split; s != nil {
		sets := make([][]int32, 3)
		files := []string{s.TrainFile, s.ValFile, s.TestFile}
		sizes := []*int64{s.Train, s.Val, s.Test}
		for k, name := range []string{"train", "val", "test"} {
			err = ld.parse(files[k], "meta.json has a split, so the layout expects its "+name+" node ids here", func(r io.Reader, file string) error {
				var err error
				sets[k], err = parseSplit(r, file, n, d.Labels)
				return err
			})
			if err != nil {
				return nil, err
			}
			if sizes[k] != nil && int64(len(sets[k])) != *sizes[k] {
				return nil, mismatch(ld.show(files[k]), "%d node ids, but meta.json split.%s = %d", len(sets[k]), name, *sizes[k])
			}
		}
		shown := []string{ld.show(files[0]), ld.show(files[1]), ld.show(files[2])}
		if err := checkDisjoint(shown, sets); err != nil {
			return nil, err
		}
		d.Train, d.Val, d.Test = sets[0], sets[1], sets[2]
	}

	// Original node ids.
	if m.NodeIDFile != "" {
		err = ld.parse(m.NodeIDFile, "meta.json node_id_file names it", func(r io.Reader, file string) error {
			var err error
			d.NodeIDs, err = parseNodeIDs(r, file, n)
			return err
		})
		if err != nil {
			return nil, err
		}
	}

	// The graph, built only now: the files read above hold one entry per
	// node, so they have confirmed meta.json nodes before a CSR of that
	// many rows is allocated.
	if err := ld.checkNodeCount(n, ed); err != nil {
		return nil, err
	}
	if m.kind == KindStatic {
		d.Directed = directed
		if directed {
			d.Graph, err = core.FromEdges(n, n, ed.src, ed.dst)
		} else {
			d.Graph, err = core.Undirected(n, ed.src, ed.dst)
		}
		if err != nil {
			return nil, &Error{File: ld.show(m.EdgeFile), Msg: "building the graph", Kind: ErrMalformed, Err: err}
		}
	} else {
		d.Graph, _, err = buildCSR(n, ed.src, ed.dst, false, true, false)
		if err != nil {
			return nil, err
		}
	}

	if m.Isolated != nil {
		if got := isolated(d.Graph); int64(got) != *m.Isolated {
			return nil, mismatch(ld.show(m.EdgeFile), "%d isolated nodes, but meta.json isolated_nodes = %d", got, *m.Isolated)
		}
	}

	// Every other listed file (README.md, raw/...): size and sha256.
	if !ld.opt.SkipChecksums {
		names := make([]string, 0, len(m.Files))
		for name := range m.Files {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if ld.checked[name] {
				continue
			}
			err := ld.parse(name, "meta.json files lists it", func(r io.Reader, file string) error { return nil })
			if err != nil {
				return nil, err
			}
		}
	}
	if err := d.Validate(); err != nil { // cannot fail after the checks above; cheap insurance
		return nil, err
	}
	return d, nil
}

// sparseNodes is the node count above which a dataset whose files do not
// confirm it (no features, labels or node ids) must have at least one edge
// per 16 nodes: below it a graph costs at most a few hundred MB, above it
// a made-up count could exhaust memory (the CSR takes 20 bytes a node
// while it is built).
const sparseNodes = 1 << 24

// checkNodeCount is called before the graph is allocated. The features,
// labels and node ids, when the dataset has them, were read with one entry
// per node, so they have confirmed meta.json nodes. Without any of them
// the layout bounds nodes only from below (ids in the edge file < nodes;
// isolated nodes are allowed), so a count far beyond what the edges touch
// is refused rather than allocated.
func (ld *loader) checkNodeCount(n int, ed *edgeData) error {
	m := ld.m
	if m.FeatureDim > 0 || m.Classes > 0 || m.NodeIDFile != "" || n <= sparseNodes {
		return nil
	}
	edges := len(ed.src)
	if n/16 <= edges {
		return nil
	}
	maxID := int32(-1)
	for k := range ed.src {
		maxID = max(maxID, ed.src[k], ed.dst[k])
	}
	return mismatch(ld.show("meta.json"), "nodes = %d, but %s has only %d edges (largest node id %d) and no features, labels or node ids confirm the count; "+
		"set nodes to the real number of nodes (over %d nodes, a dataset without per-node files needs at least one edge per 16 nodes)",
		n, ld.show(m.EdgeFile), edges, maxID, sparseNodes)
}

// checkDynamic compares the events with meta.json's time range, sign
// counts and snapshot list.
func (ld *loader) checkDynamic(d *Dataset) error {
	m := ld.m
	file := ld.show(m.EdgeFile)
	if len(d.Events) > 0 {
		first, last := d.Events[0].Time, d.Events[len(d.Events)-1].Time
		if m.TimeMin != nil && first != *m.TimeMin {
			return mismatch(file, "first event at time %d, but meta.json time_min = %d", first, *m.TimeMin)
		}
		if m.TimeMax != nil && last != *m.TimeMax {
			return mismatch(file, "last event at time %d, but meta.json time_max = %d", last, *m.TimeMax)
		}
	}
	var pos, neg int64
	for _, e := range d.Events {
		if e.Weight > 0 {
			pos++
		} else if e.Weight < 0 {
			neg++
		}
	}
	if m.Positive != nil && pos != *m.Positive {
		return mismatch(file, "%d events with positive weight, but meta.json positive_edges = %d", pos, *m.Positive)
	}
	if m.Negative != nil && neg != *m.Negative {
		return mismatch(file, "%d events with negative weight, but meta.json negative_edges = %d", neg, *m.Negative)
	}
	sc := m.Snapshots
	if sc == nil {
		return nil
	}
	d.SnapshotSeconds = sc.Seconds
	if len(d.Events) == 0 {
		return nil
	}
	counts, err := snapshotCounts(d.Events, sc.Seconds)
	if err != nil {
		return err
	}
	if sc.Count != nil && int64(len(counts)) != *sc.Count {
		return mismatch(file, "%d snapshots of %d s, but meta.json snapshot_convention.snapshots = %d", len(counts), sc.Seconds, *sc.Count)
	}
	if sc.PerSnap != nil {
		if len(sc.PerSnap) != len(counts) {
			return mismatch(file, "%d snapshots of %d s, but meta.json snapshot_convention.edges_per_snapshot lists %d", len(counts), sc.Seconds, len(sc.PerSnap))
		}
		for k, c := range counts {
			if int64(c) != sc.PerSnap[k] {
				return mismatch(file, "snapshot %d has %d events, but meta.json snapshot_convention.edges_per_snapshot[%d] = %d", k, c, k, sc.PerSnap[k])
			}
		}
	}
	return nil
}

// checkClassCounts compares the labels with meta.json class_counts.
func (ld *loader) checkClassCounts(d *Dataset) error {
	if ld.m.ClassCounts == nil {
		return nil
	}
	counts := classCounts(d.Labels, d.NumClasses)
	file := ld.show(ld.m.labels)
	// Sorted keys: the first mismatch reported is the same on every run.
	for _, key := range slices.Sorted(maps.Keys(ld.m.ClassCounts)) {
		want := ld.m.ClassCounts[key]
		c, err := strconv.Atoi(key)
		if err != nil || c < 0 || c >= d.NumClasses {
			return mismatch(ld.show("meta.json"), "class_counts key %q is not a class in [0,%d)", key, d.NumClasses)
		}
		if int64(counts[c]) != want {
			return mismatch(file, "%d nodes of class %d, but meta.json class_counts[%q] = %d", counts[c], c, key, want)
		}
	}
	for c, got := range counts {
		if _, ok := ld.m.ClassCounts[strconv.Itoa(c)]; !ok && got > 0 {
			return mismatch(file, "%d nodes of class %d, which meta.json class_counts omits", got, c)
		}
	}
	return nil
}

func classCounts(labels []int32, classes int) []int {
	counts := make([]int, classes)
	for _, y := range labels {
		if y >= 0 && int(y) < classes {
			counts[y]++
		}
	}
	return counts
}

// isolated counts nodes with no edge in either direction.
func isolated(g *core.Graph) int {
	in, out := g.InDegrees(), g.OutDegrees()
	n := 0
	for i := range in {
		if in[i] == 0 && out[i] == 0 {
			n++
		}
	}
	return n
}
