// Package pack is the compact binary format of the datasets embedded in
// package data (Cora): a labelled undirected graph with binary node
// features, stored as delta-coded varints and gzipped. The format is:
//
//	"GNNKPACK" version=1
//	name                       uvarint length + bytes
//	nodes, feature_dim, classes uvarints
//	features   per node: count, then the ascending column indices of its 1s as gaps
//	edges      count, then per edge (src < dst, sorted by src then dst):
//	           src - previous src, then dst - previous dst - 1 when src
//	           repeats, else dst - src - 1
//	labels     0 (none) or 1, then per node label + 1
//	splits     train, val, test: count, then ascending ids as gaps
//	sums       count, then per file: name, 32-byte sha256 of the original
//
// where a list of ascending values is coded as the first value, then each
// value minus the previous minus 1. Decode checks every bound, so corrupt
// input gives an error, never a panic or a huge allocation.
package pack

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

const magic = "GNNKPACK"

const version = 1

// Bounds that Decode enforces.
const (
	MaxNodes      = 1 << 24
	MaxFeatureDim = 1 << 20
	MaxClasses    = 1 << 16
	MaxEdges      = 1 << 26
	MaxDecoded    = 64 << 20 // bytes after gunzip
	maxName       = 1 << 10
	maxSums       = 64
)

// ErrCorrupt is wrapped by every Decode error.
var ErrCorrupt = errors.New("pack: corrupt data")

// Set is a decoded dataset.
type Set struct {
	Name       string
	Nodes      int
	FeatureDim int
	Classes    int
	// FeatOff and FeatCols list the columns where each node's feature is
	// 1 (all others are 0): node i's are FeatCols[FeatOff[i]:FeatOff[i+1]],
	// ascending. FeatOff has Nodes+1 entries.
	FeatOff  []int64
	FeatCols []int32
	// Src and Dst are the undirected edges, Src[k] < Dst[k], sorted by
	// (Src, Dst).
	Src, Dst []int32
	// Labels is nil or one class per node, -1 for none.
	Labels           []int32
	Train, Val, Test []int32
	// Sums are the sha256 sums of the files the set was made from.
	Sums []Sum
}

// Sum is the sha256 of one original file.
type Sum struct {
	File   string
	SHA256 [32]byte
}

// Check verifies the invariants Encode needs and Decode guarantees.
func (s *Set) Check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("pack: set %q: "+format, append([]any{s.Name}, args...)...)
	}
	switch {
	case len(s.Name) > maxName:
		return bad("name longer than %d bytes", maxName)
	case s.Nodes < 0 || s.Nodes > MaxNodes:
		return bad("%d nodes, want 0..%d", s.Nodes, MaxNodes)
	case s.FeatureDim < 0 || s.FeatureDim > MaxFeatureDim:
		return bad("feature dim %d, want 0..%d", s.FeatureDim, MaxFeatureDim)
	case s.Classes < 0 || s.Classes > MaxClasses:
		return bad("%d classes, want 0..%d", s.Classes, MaxClasses)
	case len(s.FeatOff) != s.Nodes+1 || s.FeatOff[0] != 0 || s.FeatOff[s.Nodes] != int64(len(s.FeatCols)):
		return bad("feature offsets do not frame %d columns over %d nodes", len(s.FeatCols), s.Nodes)
	case len(s.Src) != len(s.Dst) || len(s.Src) > MaxEdges:
		return bad("%d sources, %d destinations (at most %d)", len(s.Src), len(s.Dst), MaxEdges)
	case s.Labels != nil && len(s.Labels) != s.Nodes:
		return bad("%d labels for %d nodes", len(s.Labels), s.Nodes)
	case len(s.Sums) > maxSums:
		return bad("%d sums, at most %d", len(s.Sums), maxSums)
	}
	for i := 0; i < s.Nodes; i++ {
		a, b := s.FeatOff[i], s.FeatOff[i+1]
		if b < a {
			return bad("feature offsets decrease at node %d", i)
		}
		if err := ascending(s.FeatCols[a:b], s.FeatureDim); err != nil {
			return bad("features of node %d: %v", i, err)
		}
	}
	for k := range s.Src {
		if s.Src[k] < 0 || s.Src[k] >= s.Dst[k] || int(s.Dst[k]) >= s.Nodes {
			return bad("edge %d (%d, %d): want 0 <= src < dst < %d", k, s.Src[k], s.Dst[k], s.Nodes)
		}
		if k > 0 && (s.Src[k] < s.Src[k-1] || s.Src[k] == s.Src[k-1] && s.Dst[k] <= s.Dst[k-1]) {
			return bad("edge %d (%d, %d) out of order", k, s.Src[k], s.Dst[k])
		}
	}
	for i, y := range s.Labels {
		if y < -1 || int(y) >= s.Classes {
			return bad("label %d of node %d outside [-1,%d)", y, i, s.Classes)
		}
	}
	for name, ids := range map[string][]int32{"train": s.Train, "val": s.Val, "test": s.Test} {
		if err := ascending(ids, s.Nodes); err != nil {
			return bad("%s split: %v", name, err)
		}
	}
	for _, sum := range s.Sums {
		if len(sum.File) > maxName {
			return bad("sum file name too long")
		}
	}
	return nil
}

func ascending(v []int32, limit int) error {
	for k, x := range v {
		if x < 0 || int(x) >= limit {
			return fmt.Errorf("value %d outside [0,%d)", x, limit)
		}
		if k > 0 && x <= v[k-1] {
			return fmt.Errorf("value %d after %d: not ascending", x, v[k-1])
		}
	}
	return nil
}

// Encode writes s, gzipped at the best compression.
func Encode(w io.Writer, s *Set) error {
	if err := s.Check(); err != nil {
		return err
	}
	var raw bytes.Buffer
	e := encoder{w: &raw}
	raw.WriteString(magic)
	e.u(version)
	e.str(s.Name)
	e.u(uint64(s.Nodes))
	e.u(uint64(s.FeatureDim))
	e.u(uint64(s.Classes))
	for i := 0; i < s.Nodes; i++ {
		e.list(s.FeatCols[s.FeatOff[i]:s.FeatOff[i+1]])
	}
	e.u(uint64(len(s.Src)))
	for k := range s.Src {
		if k > 0 && s.Src[k] == s.Src[k-1] {
			e.u(0)
			e.u(uint64(s.Dst[k] - s.Dst[k-1] - 1))
			continue
		}
		prev := int32(0)
		if k > 0 {
			prev = s.Src[k-1]
		}
		e.u(uint64(s.Src[k] - prev))
		e.u(uint64(s.Dst[k] - s.Src[k] - 1))
	}
	if s.Labels == nil {
		e.u(0)
	} else {
		e.u(1)
		for _, y := range s.Labels {
			e.u(uint64(y + 1))
		}
	}
	e.list(s.Train)
	e.list(s.Val)
	e.list(s.Test)
	e.u(uint64(len(s.Sums)))
	for _, sum := range s.Sums {
		e.str(sum.File)
		raw.Write(sum.SHA256[:])
	}
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return err
	}
	return zw.Close()
}

type encoder struct {
	w   *bytes.Buffer
	tmp [binary.MaxVarintLen64]byte
}

func (e *encoder) u(v uint64) { e.w.Write(binary.AppendUvarint(e.tmp[:0], v)) }

func (e *encoder) str(s string) {
	e.u(uint64(len(s)))
	e.w.WriteString(s)
}

// list writes count, first value, then gaps minus one (v ascending).
func (e *encoder) list(v []int32) {
	e.u(uint64(len(v)))
	for k, x := range v {
		if k == 0 {
			e.u(uint64(x))
		} else {
			e.u(uint64(x - v[k-1] - 1))
		}
	}
}

// Decode reads a gzipped set and checks it.
func Decode(b []byte) (*Set, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: gzip: %v", ErrCorrupt, err)
	}
	zr.Multistream(false)
	raw, err := io.ReadAll(io.LimitReader(zr, MaxDecoded+1))
	if err != nil {
		return nil, fmt.Errorf("%w: gzip: %v", ErrCorrupt, err)
	}
	if len(raw) > MaxDecoded {
		return nil, fmt.Errorf("%w: more than %d bytes after gunzip", ErrCorrupt, MaxDecoded)
	}
	return DecodeRaw(raw)
}

// DecodeRaw reads a set that is not gzipped.
func DecodeRaw(raw []byte) (s *Set, err error) {
	d := &decoder{r: bufio.NewReader(bytes.NewReader(raw)), left: int64(len(raw))}
	defer func() {
		if p := recover(); p != nil {
			de, ok := p.(decodeError)
			if !ok {
				panic(p)
			}
			s, err = nil, fmt.Errorf("%w: %s", ErrCorrupt, string(de))
		}
	}()
	var m [len(magic)]byte
	d.read(m[:])
	if string(m[:]) != magic {
		d.fail("bad magic %q, want %q", m[:], magic)
	}
	if v := d.u(); v != version {
		d.fail("version %d, want %d", v, version)
	}
	s = &Set{}
	s.Name = d.str()
	s.Nodes = d.n(MaxNodes, "nodes")
	s.FeatureDim = d.n(MaxFeatureDim, "feature dim")
	s.Classes = d.n(MaxClasses, "classes")

	s.FeatOff = make([]int64, s.Nodes+1)
	for i := 0; i < s.Nodes; i++ {
		s.FeatCols = d.list(s.FeatCols, s.FeatureDim, "feature columns of node "+strconv.Itoa(i))
		s.FeatOff[i+1] = int64(len(s.FeatCols))
	}

	m2 := d.n(MaxEdges, "edges")
	d.need(int64(m2)*2, "edges")
	s.Src = make([]int32, m2)
	s.Dst = make([]int32, m2)
	var src, dst uint64
	for k := 0; k < m2; k++ {
		ds := d.u()
		if ds > uint64(s.Nodes) {
			d.fail("edge %d: source step %d too large", k, ds)
		}
		src += ds
		if k > 0 && ds == 0 {
			dst += d.u() + 1
		} else {
			dst = src + d.u() + 1
		}
		if src >= uint64(s.Nodes) || dst >= uint64(s.Nodes) || dst <= src { // dst <= src: wrapped
			d.fail("edge %d: (%d, %d) outside [0,%d)", k, src, dst, s.Nodes)
		}
		s.Src[k], s.Dst[k] = int32(src), int32(dst)
	}

	switch d.u() {
	case 0:
	case 1:
		d.need(int64(s.Nodes), "labels")
		s.Labels = make([]int32, s.Nodes)
		for i := range s.Labels {
			y := d.u()
			if y > uint64(s.Classes) {
				d.fail("label %d of node %d outside [-1,%d)", int64(y)-1, i, s.Classes)
			}
			s.Labels[i] = int32(y) - 1
		}
	default:
		d.fail("bad labels flag")
	}
	s.Train = d.list(nil, s.Nodes, "train split")
	s.Val = d.list(nil, s.Nodes, "val split")
	s.Test = d.list(nil, s.Nodes, "test split")
	ns := d.n(maxSums, "sums")
	for k := 0; k < ns; k++ {
		var sum Sum
		sum.File = d.str()
		d.read(sum.SHA256[:])
		s.Sums = append(s.Sums, sum)
	}
	if _, err := d.r.ReadByte(); err != io.EOF {
		d.fail("trailing data")
	}
	if err := s.Check(); err != nil { // the decoder enforces all of it; be sure
		d.fail("%v", err)
	}
	return s, nil
}

type decodeError string

type decoder struct {
	r    *bufio.Reader
	left int64 // bytes not yet read, to bound allocations
}

func (d *decoder) fail(format string, args ...any) {
	panic(decodeError(fmt.Sprintf(format, args...)))
}

func (d *decoder) read(p []byte) {
	if _, err := io.ReadFull(d.r, p); err != nil {
		d.fail("truncated")
	}
	d.left -= int64(len(p))
}

func (d *decoder) u() uint64 {
	v, err := binary.ReadUvarint(d.r)
	if err != nil {
		d.fail("truncated or bad varint")
	}
	d.left -= int64(len(binary.AppendUvarint(nil, v)))
	return v
}

// n reads a count in [0, max].
func (d *decoder) n(max int, what string) int {
	v := d.u()
	if v > uint64(max) {
		d.fail("%s = %d, more than %d", what, v, max)
	}
	return int(v)
}

// need fails unless at least n more bytes remain (every item takes one).
func (d *decoder) need(n int64, what string) {
	if n > d.left {
		d.fail("%s: %d items but only %d bytes left", what, n, d.left)
	}
}

func (d *decoder) str() string {
	n := d.n(maxName, "string length")
	b := make([]byte, n)
	d.read(b)
	return string(b)
}

// list appends an ascending list of values below limit to dst.
func (d *decoder) list(dst []int32, limit int, what string) []int32 {
	n := d.n(math.MaxInt32, what)
	d.need(int64(n), what)
	if n > limit {
		d.fail("%s: %d values, more than the %d possible", what, n, limit)
	}
	var prev uint64
	for k := 0; k < n; k++ {
		g := d.u()
		var v uint64
		if k == 0 {
			v = g
		} else {
			v = prev + g + 1
			if v < prev { // overflow
				d.fail("%s: value overflow", what)
			}
		}
		if v >= uint64(limit) {
			d.fail("%s: value %d outside [0,%d)", what, v, limit)
		}
		dst = append(dst, int32(v))
		prev = v
	}
	return dst
}

// Features renders the dense float32 little-endian features: the exact
// bytes of the layout's features.f32.
func (s *Set) Features() []float32 {
	out := make([]float32, s.Nodes*s.FeatureDim)
	for i := 0; i < s.Nodes; i++ {
		row := out[i*s.FeatureDim : (i+1)*s.FeatureDim]
		for _, c := range s.FeatCols[s.FeatOff[i]:s.FeatOff[i+1]] {
			row[c] = 1
		}
	}
	return out
}

// FeaturesFile renders features.f32.
func (s *Set) FeaturesFile() []byte {
	f := s.Features()
	b := make([]byte, 4*len(f))
	for k, v := range f {
		binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(v))
	}
	return b
}

// EdgesFile renders edges.tsv: "src\tdst\n" per edge.
func (s *Set) EdgesFile() []byte {
	var b []byte
	for k := range s.Src {
		b = strconv.AppendInt(b, int64(s.Src[k]), 10)
		b = append(b, '\t')
		b = strconv.AppendInt(b, int64(s.Dst[k]), 10)
		b = append(b, '\n')
	}
	return b
}

// IntsFile renders one integer a line (labels.txt, the split files).
func IntsFile(v []int32) []byte {
	var b []byte
	for _, x := range v {
		b = strconv.AppendInt(b, int64(x), 10)
		b = append(b, '\n')
	}
	return b
}

// Verify renders each file named in s.Sums (features.f32, edges.tsv,
// labels.txt, train.txt, val.txt, test.txt) and compares its sha256 with
// the recorded one.
func (s *Set) Verify() error {
	for _, sum := range s.Sums {
		var b []byte
		switch sum.File {
		case "features.f32":
			b = s.FeaturesFile()
		case "edges.tsv":
			b = s.EdgesFile()
		case "labels.txt":
			b = IntsFile(s.Labels)
		case "train.txt":
			b = IntsFile(s.Train)
		case "val.txt":
			b = IntsFile(s.Val)
		case "test.txt":
			b = IntsFile(s.Test)
		default:
			return fmt.Errorf("pack: set %q: no rendering for %s", s.Name, sum.File)
		}
		if got := sha256.Sum256(b); got != sum.SHA256 {
			return fmt.Errorf("pack: set %q: %s renders to sha256 %x, the original had %x", s.Name, sum.File, got, sum.SHA256)
		}
	}
	return nil
}
