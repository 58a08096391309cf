package data

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// SyntheticSpec describes a generated dataset. ParseSynthetic fills it
// from a spec string and String prints it back in canonical form. The
// same spec always generates the same dataset.
type SyntheticSpec struct {
	// Kind is "sbm" (a labelled stochastic block model whose labels can be
	// learnt from features and structure) or "rmat" (an R-MAT power-law
	// graph with random features and labels, for speed benchmarks).
	Kind    string
	Nodes   int
	Classes int
	Feat    int    // feature dim; 0 for none
	Seed    uint64 // all randomness derives from it
	// The split: TrainPerClass nodes of each class for training, then Val
	// and Test nodes drawn from the rest; all three scaled down together
	// when the graph is too small for them.
	TrainPerClass, Val, Test int

	// sbm: AvgDeg is the mean degree aimed at (edges are drawn as
	// Nodes*AvgDeg/2 pairs; repeats and self-loops are dropped); PIn is the
	// fraction of edges drawn within a class; features are the class
	// centroid plus N(0,1) noise per dimension, with centroids drawn so
	// that two of them lie Sep noise units apart on average.
	AvgDeg, PIn, Sep float64

	// rmat: Edges pairs are drawn (repeats and self-loops dropped, then
	// symmetrized) by recursive quadrant choice with probabilities A, B, C
	// and 1-A-B-C; node ids are then shuffled.
	Edges   int
	A, B, C float64
}

// The synthetic generators' keys, in canonical order.
var syntheticKeys = map[string][]string{
	"sbm":  {"nodes", "classes", "feat", "avgdeg", "pin", "sep", "train", "val", "test", "seed"},
	"rmat": {"nodes", "edges", "a", "b", "c", "feat", "classes", "train", "val", "test", "seed"},
}

// DefaultSynthetic returns the defaults of a kind ("sbm" or "rmat").
func DefaultSynthetic(kind string) (SyntheticSpec, bool) {
	s := SyntheticSpec{Kind: kind, Feat: 32, Seed: 1, TrainPerClass: 20, Val: 500, Test: 1000}
	switch kind {
	case "sbm":
		s.Nodes, s.Classes, s.AvgDeg, s.PIn, s.Sep = 1000, 5, 10, 0.8, 2
	case "rmat":
		s.Nodes, s.Classes, s.A, s.B, s.C = 1<<16, 8, 0.57, 0.19, 0.19
		s.Edges = 8 * s.Nodes
	default:
		return SyntheticSpec{}, false
	}
	return s, true
}

// specError is a bad spec: "data: WHAT "SPEC": MSG", wrapping ErrSpec.
type specError struct{ what, spec, msg string }

func (e *specError) Error() string {
	return fmt.Sprintf("data: %s %q: %s", e.what, e.spec, e.msg)
}
func (e *specError) Unwrap() error { return ErrSpec }

// ParseSynthetic parses "synthetic:KIND,key=value,..." (the "synthetic:"
// prefix is optional). Counts accept the suffixes k, M and G (10M = 10
// million). Keys left out take the defaults of DefaultSynthetic; for rmat,
// edges defaults to 8 x nodes, and classes and avgdeg shrink to fit a
// graph too small for their defaults.
func ParseSynthetic(spec string) (SyntheticSpec, error) {
	body := strings.TrimPrefix(strings.TrimSpace(spec), "synthetic:")
	fail := func(format string, args ...any) (SyntheticSpec, error) {
		return SyntheticSpec{}, &specError{what: "synthetic spec", spec: body, msg: fmt.Sprintf(format, args...)}
	}
	parts := strings.Split(body, ",")
	kind := strings.TrimSpace(parts[0])
	if kind == "" {
		return fail("no generator kind (known: rmat, sbm)")
	}
	s, ok := DefaultSynthetic(kind)
	if !ok {
		return fail("unknown kind %q (known: rmat, sbm)", kind)
	}
	keys := syntheticKeys[kind]
	seen := map[string]bool{}
	edgesSet := false
	for _, p := range parts[1:] {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		key, val, ok := strings.Cut(p, "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if !ok {
			return fail("%q: expected key=value", p)
		}
		if !slices.Contains(keys, key) {
			return fail("unknown key %q (known: %s)", key, strings.Join(keys, ", "))
		}
		if seen[key] {
			return fail("key %q given twice", key)
		}
		seen[key] = true
		var err error
		switch key {
		case "nodes":
			s.Nodes, err = parseCount(val, 1, 1<<30)
		case "classes":
			s.Classes, err = parseCount(val, 1, 1<<16)
		case "feat":
			s.Feat, err = parseCount(val, 0, 1<<16)
		case "train":
			s.TrainPerClass, err = parseCount(val, 0, 1<<30)
		case "val":
			s.Val, err = parseCount(val, 0, 1<<30)
		case "test":
			s.Test, err = parseCount(val, 0, 1<<30)
		case "edges":
			s.Edges, err = parseCount(val, 0, 1<<30)
			edgesSet = true
		case "seed":
			s.Seed, err = strconv.ParseUint(val, 10, 64)
			if err != nil {
				err = fmt.Errorf("not an unsigned integer")
			}
		case "avgdeg":
			s.AvgDeg, err = parseReal(val, 0, math.Inf(1))
		case "pin":
			s.PIn, err = parseReal(val, 0, 1)
		case "sep":
			s.Sep, err = parseReal(val, 0, 1e6)
		case "a":
			s.A, err = parseReal(val, 0, 1)
		case "b":
			s.B, err = parseReal(val, 0, 1)
		case "c":
			s.C, err = parseReal(val, 0, 1)
		}
		if err != nil {
			return fail("%s=%s: %v", key, val, err)
		}
	}
	// Defaults that do not fit a small graph shrink to fit it.
	if kind == "rmat" && !edgesSet {
		s.Edges = min(8*s.Nodes, 1<<30)
	}
	if !seen["classes"] {
		s.Classes = min(s.Classes, s.Nodes)
	}
	if kind == "sbm" && !seen["avgdeg"] {
		s.AvgDeg = min(s.AvgDeg, float64(s.Nodes-1))
	}
	if err := s.check(); err != nil {
		return fail("%v", err)
	}
	return s, nil
}

// check validates the combination of values.
func (s SyntheticSpec) check() error {
	if _, ok := syntheticKeys[s.Kind]; !ok {
		return fmt.Errorf("unknown kind %q (known: rmat, sbm)", s.Kind)
	}
	switch {
	case s.Nodes < 1 || s.Nodes > 1<<30:
		return fmt.Errorf("nodes=%d: want 1..%d", s.Nodes, 1<<30)
	case s.Classes < 1 || s.Classes > s.Nodes:
		return fmt.Errorf("classes=%d: want 1..nodes (%d)", s.Classes, s.Nodes)
	case s.Feat < 0 || s.Feat > 1<<16:
		return fmt.Errorf("feat=%d: want 0..%d", s.Feat, 1<<16)
	case int64(s.Nodes)*int64(s.Feat) > 1<<31:
		return fmt.Errorf("nodes x feat = %d feature values, more than %d", int64(s.Nodes)*int64(s.Feat), int64(1)<<31)
	case s.TrainPerClass < 0 || s.Val < 0 || s.Test < 0:
		return fmt.Errorf("negative split size")
	}
	if s.Kind == "sbm" {
		switch {
		case !(s.AvgDeg >= 0) || s.AvgDeg > float64(s.Nodes-1) && s.AvgDeg > 0:
			return fmt.Errorf("avgdeg=%g: want 0..nodes-1 (%d)", s.AvgDeg, s.Nodes-1)
		case s.AvgDeg*float64(s.Nodes)/2 > 1<<30:
			return fmt.Errorf("avgdeg x nodes / 2 = %g edges, more than %d", s.AvgDeg*float64(s.Nodes)/2, 1<<30)
		case !(s.PIn >= 0 && s.PIn <= 1):
			return fmt.Errorf("pin=%g: want a fraction in [0,1]", s.PIn)
		case !(s.Sep >= 0 && s.Sep <= 1e6):
			return fmt.Errorf("sep=%g: want 0..1e6", s.Sep)
		}
	} else {
		switch {
		case s.Edges < 0 || s.Edges > 1<<30:
			return fmt.Errorf("edges=%d: want 0..%d", s.Edges, 1<<30)
		case !(s.A >= 0 && s.B >= 0 && s.C >= 0) || s.A+s.B+s.C > 1+1e-9:
			return fmt.Errorf("a=%g, b=%g, c=%g: want non-negative probabilities with a+b+c <= 1 (d = 1-a-b-c)", s.A, s.B, s.C)
		}
	}
	return nil
}

// parseCount parses a non-negative integer with an optional k, M or G
// suffix, in [lo, hi].
func parseCount(s string, lo, hi int) (int, error) {
	mult := 1.0
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			mult = 1e3
		case 'm', 'M':
			mult = 1e6
		case 'g', 'G':
			mult = 1e9
		}
		if mult != 1 {
			s = s[:n-1]
		}
	}
	if mult == 1 {
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("not an integer count")
		}
		if i < int64(lo) || i > int64(hi) {
			return 0, fmt.Errorf("want %d..%d", lo, hi)
		}
		return int(i), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("not a count")
	}
	v := f * mult
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("not a whole number")
	}
	if v < float64(lo) || v > float64(hi) {
		return 0, fmt.Errorf("want %d..%d", lo, hi)
	}
	return int(v), nil
}

func parseReal(s string, lo, hi float64) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("not a finite number")
	}
	if f < lo || f > hi {
		return 0, fmt.Errorf("want %g..%g", lo, hi)
	}
	return f, nil
}

// String is the canonical spec: every key, in a fixed order.
func (s SyntheticSpec) String() string {
	var b strings.Builder
	b.WriteString("synthetic:")
	b.WriteString(s.Kind)
	for _, key := range syntheticKeys[s.Kind] {
		var v string
		switch key {
		case "nodes":
			v = strconv.Itoa(s.Nodes)
		case "classes":
			v = strconv.Itoa(s.Classes)
		case "feat":
			v = strconv.Itoa(s.Feat)
		case "train":
			v = strconv.Itoa(s.TrainPerClass)
		case "val":
			v = strconv.Itoa(s.Val)
		case "test":
			v = strconv.Itoa(s.Test)
		case "edges":
			v = strconv.Itoa(s.Edges)
		case "seed":
			v = strconv.FormatUint(s.Seed, 10)
		case "avgdeg":
			v = strconv.FormatFloat(s.AvgDeg, 'g', -1, 64)
		case "pin":
			v = strconv.FormatFloat(s.PIn, 'g', -1, 64)
		case "sep":
			v = strconv.FormatFloat(s.Sep, 'g', -1, 64)
		case "a":
			v = strconv.FormatFloat(s.A, 'g', -1, 64)
		case "b":
			v = strconv.FormatFloat(s.B, 'g', -1, 64)
		case "c":
			v = strconv.FormatFloat(s.C, 'g', -1, 64)
		}
		b.WriteString("," + key + "=" + v)
	}
	return b.String()
}

// Random streams: each purpose (and each chunk of parallel work) draws
// from its own PCG stream, so results do not depend on the worker count.
const (
	streamLabels = iota + 1
	streamCentroids
	streamFeatures
	streamEdges
	streamPerm
	streamSplit
)

func rng(seed uint64, stream, chunk int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(stream)<<40|uint64(chunk)))
}

// parallel runs fn(chunk) for chunk in [0, chunks) on GOMAXPROCS workers.
func parallel(chunks int, fn func(chunk int)) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for w := 0; w < min(runtime.GOMAXPROCS(0), chunks); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				c := next
				next++
				mu.Unlock()
				if c >= chunks {
					return
				}
				fn(c)
			}
		}()
	}
	wg.Wait()
}

// Generate builds the dataset a spec describes.
func Generate(s SyntheticSpec) (*Dataset, error) {
	if err := s.check(); err != nil {
		return nil, &specError{what: "synthetic spec", spec: strings.TrimPrefix(s.String(), "synthetic:"), msg: err.Error()}
	}
	n := s.Nodes
	d := &Dataset{Name: s.Kind, Kind: KindStatic, NumNodes: n, FeatureDim: s.Feat, NumClasses: s.Classes, Source: s.String()}

	// Balanced labels, shuffled.
	d.Labels = make([]int32, n)
	for i := range d.Labels {
		d.Labels[i] = int32(i % s.Classes)
	}
	r := rng(s.Seed, streamLabels, 0)
	r.Shuffle(n, func(i, j int) { d.Labels[i], d.Labels[j] = d.Labels[j], d.Labels[i] })

	var src, dst []int32
	switch s.Kind {
	case "sbm":
		src, dst = sbmEdges(s, d.Labels)
		d.Features = sbmFeatures(s, d.Labels)
	case "rmat":
		src, dst = rmatEdges(s)
		d.Features = gaussianFeatures(s, nil, nil)
	}
	g, _, err := buildCSR(n, src, dst, true, true, true)
	if err != nil {
		return nil, err
	}
	d.Graph = g
	d.Train, d.Val, d.Test = randomSplit(s, d.Labels)
	return d, nil
}

const chunkSize = 1 << 16

// sbmEdges draws Nodes*AvgDeg/2 pairs: a uniform node, then a partner from
// its class with probability PIn, else from another class.
func sbmEdges(s SyntheticSpec, labels []int32) (src, dst []int32) {
	m := int(math.Round(float64(s.Nodes) * s.AvgDeg / 2))
	members := make([][]int32, s.Classes)
	for i, y := range labels {
		members[y] = append(members[y], int32(i))
	}
	src, dst = make([]int32, m), make([]int32, m)
	n := s.Nodes
	parallel((m+chunkSize-1)/chunkSize, func(c int) {
		r := rng(s.Seed, streamEdges, c)
		for k := c * chunkSize; k < min(m, (c+1)*chunkSize); k++ {
			u := int32(r.IntN(n))
			same := members[labels[u]]
			var v int32
			if len(same) == n || r.Float64() < s.PIn {
				v = same[r.IntN(len(same))]
			} else {
				for {
					v = int32(r.IntN(n))
					if labels[v] != labels[u] {
						break
					}
				}
			}
			src[k], dst[k] = u, v
		}
	})
	return src, dst
}

// sbmFeatures is each node's class centroid plus N(0,1) noise.
func sbmFeatures(s SyntheticSpec, labels []int32) []float32 {
	if s.Feat == 0 {
		return nil
	}
	cent := make([]float32, s.Classes*s.Feat)
	r := rng(s.Seed, streamCentroids, 0)
	scale := s.Sep / math.Sqrt(2*float64(s.Feat)) // E|c1-c2|^2 = Sep^2
	for k := range cent {
		cent[k] = float32(r.NormFloat64() * scale)
	}
	return gaussianFeatures(s, labels, cent)
}

// gaussianFeatures is N(0,1) noise, plus the centroid of each node's label
// when cent is not nil.
func gaussianFeatures(s SyntheticSpec, labels []int32, cent []float32) []float32 {
	if s.Feat == 0 {
		return nil
	}
	f := s.Feat
	out := make([]float32, s.Nodes*f)
	const rows = 4096
	parallel((s.Nodes+rows-1)/rows, func(c int) {
		r := rng(s.Seed, streamFeatures, c)
		for i := c * rows; i < min(s.Nodes, (c+1)*rows); i++ {
			row := out[i*f : (i+1)*f]
			for j := range row {
				row[j] = float32(r.NormFloat64())
			}
			if cent != nil {
				for j, v := range cent[int(labels[i])*f : int(labels[i]+1)*f] {
					row[j] += v
				}
			}
		}
	})
	return out
}

// rmatEdges draws Edges pairs by R-MAT: at each of ceil(log2 Nodes)
// levels, pick a quadrant with probabilities a, b, c, d; the ids, in
// [0, 2^levels), are scaled onto [0, Nodes) and then shuffled.
func rmatEdges(s SyntheticSpec) (src, dst []int32) {
	n, m := s.Nodes, s.Edges
	levels := bits.Len(uint(n - 1))
	const scale = 1 << 32
	ta := uint64(s.A * scale)
	tb := uint64((s.A + s.B) * scale)
	tc := uint64((s.A + s.B + s.C) * scale)
	src, dst = make([]int32, m), make([]int32, m)
	parallel((m+chunkSize-1)/chunkSize, func(c int) {
		r := rng(s.Seed, streamEdges, c)
		for k := c * chunkSize; k < min(m, (c+1)*chunkSize); k++ {
			var u, v uint64
			var word uint64
			for l := 0; l < levels; l++ {
				if l%2 == 0 {
					word = r.Uint64()
				}
				x := word & (scale - 1)
				word >>= 32
				u <<= 1
				v <<= 1
				switch {
				case x < ta:
				case x < tb:
					v |= 1
				case x < tc:
					u |= 1
				default:
					u |= 1
					v |= 1
				}
			}
			// Scale [0, 2^levels) onto [0, n): the identity when n is a
			// power of 2, and order-preserving otherwise.
			src[k] = int32(u * uint64(n) >> levels)
			dst[k] = int32(v * uint64(n) >> levels)
		}
	})
	// Shuffle the ids so that degree does not follow the id.
	perm := make([]int32, n)
	for i := range perm {
		perm[i] = int32(i)
	}
	r := rng(s.Seed, streamPerm, 0)
	r.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	parallel((m+chunkSize-1)/chunkSize, func(c int) {
		for k := c * chunkSize; k < min(m, (c+1)*chunkSize); k++ {
			src[k], dst[k] = perm[src[k]], perm[dst[k]]
		}
	})
	return src, dst
}

// randomSplit draws TrainPerClass nodes of each class for training, then
// Val and Test nodes from the rest, all scaled down in proportion when
// the graph has fewer nodes than they need together (at least one
// training node per non-empty class). The sets are sorted.
func randomSplit(s SyntheticSpec, labels []int32) (train, val, test []int32) {
	n := len(labels)
	tpc, nv, nt := s.TrainPerClass, s.Val, s.Test
	if want := int64(s.Classes)*int64(tpc) + int64(nv) + int64(nt); want > int64(n) {
		f := float64(n) / float64(want)
		tpc = int(float64(tpc) * f)
		if s.TrainPerClass > 0 {
			tpc = max(tpc, 1)
		}
		nv, nt = int(float64(nv)*f), int(float64(nt)*f)
	}
	r := rng(s.Seed, streamSplit, 0)
	perm := make([]int32, n)
	for i := range perm {
		perm[i] = int32(i)
	}
	r.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	taken := make([]int, s.Classes)
	rest := make([]int32, 0, n)
	for _, v := range perm {
		if y := labels[v]; taken[y] < tpc {
			taken[y]++
			train = append(train, v)
		} else {
			rest = append(rest, v)
		}
	}
	nv = min(nv, len(rest))
	nt = min(nt, len(rest)-nv)
	val = slices.Clone(rest[:nv])
	test = slices.Clone(rest[nv : nv+nt])
	slices.Sort(train)
	slices.Sort(val)
	slices.Sort(test)
	return train, val, test
}
