package dynamic

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data"
)

// DSBMSpec describes a synthetic dynamic stochastic block model: Nodes
// nodes in Communities fixed communities and Snapshots snapshots. The
// edge count of snapshot t is Edges * Skew^u_t, so sizes vary Skew-fold,
// with u_t set by Trend:
//
//   - TrendRandom (the default): u_t uniform in [0,1], independent per
//     snapshot (one snapshot at each end): no trend over time, so runs of
//     consecutive snapshots average out.
//   - TrendGrow: u_t = t/(Snapshots-1), a graph whose activity grows
//     exponentially over time (the first snapshot Edges, the last
//     Edges*Skew edges).
//   - TrendBitcoin: the shape of Bitcoin-Alpha's per-snapshot edge counts
//     (EvolveGCN's 1,200,000-second snapshots: a ramp, a burst, a long
//     plateau, a decay; BitcoinAlphaEdges) cut into Snapshots equal spans
//     of time, scaled so the busiest is Edges*Skew and floored at Edges
//     (the real profile spans 700-fold, its quiet tail included).
//
// A snapshot's edges are drawn among max(16, min(Nodes, e_t/4)) active
// nodes, a PIn share of them inside a community. Rating weights are +1,
// or -1 for a NegShare of the edges drawn across communities. Node
// features are a noisy one-hot of the community.
type DSBMSpec struct {
	Nodes, Snapshots, Communities, Edges int
	Skew, PIn, NegShare                  float64
	Trend                                Trend
	Seed                                 uint64
}

// Trend is how a DSBM's snapshot sizes evolve over time (see DSBMSpec).
type Trend uint8

const (
	TrendRandom Trend = iota
	TrendGrow
	TrendBitcoin
)

func (t Trend) String() string {
	switch t {
	case TrendGrow:
		return "grow"
	case TrendBitcoin:
		return "bitcoin"
	}
	return "random"
}

// ParseTrend reads "random", "grow" or "bitcoin".
func ParseTrend(s string) (Trend, error) {
	for _, t := range []Trend{TrendRandom, TrendGrow, TrendBitcoin} {
		if s == t.String() {
			return t, nil
		}
	}
	return 0, errf("unknown trend %q (want random, grow or bitcoin)", s)
}

// BitcoinAlphaEdges are the edge counts of Bitcoin-Alpha's 137 snapshots
// of 1,200,000 s (EvolveGCN's cut; ../shared/data/bitcoin_alpha
// meta.json, snapshot_convention.edges_per_snapshot).
var BitcoinAlphaEdges = []int{
	28, 22, 19, 32, 32, 29, 77, 104, 70, 78, 148, 229, 650, 904, 1066, 1431, 524, 276, 208, 236,
	200, 177, 144, 92, 98, 135, 156, 126, 185, 208, 170, 181, 200, 238, 227, 291, 216, 231, 305, 230,
	319, 330, 334, 261, 338, 238, 334, 255, 339, 295, 334, 244, 272, 288, 378, 290, 279, 254, 240, 251,
	262, 279, 460, 434, 314, 315, 240, 212, 208, 185, 276, 208, 191, 170, 146, 131, 155, 146, 157, 233,
	262, 167, 99, 108, 121, 148, 146, 77, 102, 106, 185, 131, 75, 102, 123, 138, 87, 97, 146, 129,
	100, 82, 85, 72, 86, 55, 72, 65, 63, 26, 13, 19, 10, 7, 7, 12, 4, 60, 19, 25,
	6, 19, 15, 13, 12, 4, 13, 12, 11, 7, 13, 2, 4, 7, 18, 18, 13,
}

// sizeExponents returns u_t for the spec's trend: snapshot t has
// Edges*Skew^u_t edges.
func (s DSBMSpec) sizeExponents(r *rand.Rand) []float64 {
	T := s.Snapshots
	u := make([]float64, T)
	switch s.Trend {
	case TrendGrow:
		for t := range u {
			u[t] = float64(t) / float64(T-1)
		}
	case TrendBitcoin:
		// Cut the real profile into T equal spans of time (edges spread
		// evenly within a real snapshot) and take each span's edge count.
		src := BitcoinAlphaEdges
		cum := func(x float64) float64 { // edges before position x (in source snapshots)
			i := int(x)
			var c float64
			for _, e := range src[:min(i, len(src))] {
				c += float64(e)
			}
			if i < len(src) {
				c += (x - float64(i)) * float64(src[i])
			}
			return c
		}
		span := float64(len(src)) / float64(T)
		e := make([]float64, T)
		peak := 0.0
		for t := range e {
			e[t] = cum(float64(t+1)*span) - cum(float64(t)*span)
			peak = math.Max(peak, e[t])
		}
		for t := range u {
			// Skew^u = Skew * e/peak, floored at 1.
			u[t] = math.Max(0, 1+math.Log(e[t]/peak)/math.Log(s.Skew))
			if s.Skew == 1 || math.IsNaN(u[t]) {
				u[t] = 0
			}
		}
	default:
		for t := range u {
			u[t] = r.Float64()
		}
		lo, hi := r.IntN(T), r.IntN(T-1)
		if hi >= lo {
			hi++
		}
		u[lo], u[hi] = 0, 1
	}
	return u
}

// DefaultDSBM is the spec "dsbm" alone stands for.
func DefaultDSBM() DSBMSpec {
	return DSBMSpec{Nodes: 2000, Snapshots: 40, Communities: 8, Edges: 300, Skew: 50, PIn: 0.9, NegShare: 0.5, Seed: 1}
}

// String prints the spec in canonical form (the trend only when it is
// not random, so the names of earlier specs are unchanged).
func (s DSBMSpec) String() string {
	trend := ""
	if s.Trend != TrendRandom {
		trend = ",trend=" + s.Trend.String()
	}
	return fmt.Sprintf("dsbm,nodes=%d,snapshots=%d,communities=%d,edges=%d,skew=%g%s,pin=%g,neg=%g,seed=%d",
		s.Nodes, s.Snapshots, s.Communities, s.Edges, s.Skew, trend, s.PIn, s.NegShare, s.Seed)
}

// ParseDSBM reads "dsbm[,key=value...]" (an optional "synthetic:" prefix
// is accepted); keys are those String prints.
func ParseDSBM(spec string) (DSBMSpec, error) {
	s := DefaultDSBM()
	parts := strings.Split(strings.TrimPrefix(strings.TrimSpace(spec), "synthetic:"), ",")
	if parts[0] != "dsbm" {
		return s, errf("synthetic dynamic spec %q: want dsbm[,key=value...]", spec)
	}
	for _, kv := range parts[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return s, errf("dsbm spec %q: %q is not key=value", spec, kv)
		}
		var err error
		switch k {
		case "nodes":
			s.Nodes, err = strconv.Atoi(v)
		case "snapshots":
			s.Snapshots, err = strconv.Atoi(v)
		case "communities":
			s.Communities, err = strconv.Atoi(v)
		case "edges":
			s.Edges, err = strconv.Atoi(v)
		case "skew":
			s.Skew, err = strconv.ParseFloat(v, 64)
		case "pin":
			s.PIn, err = strconv.ParseFloat(v, 64)
		case "neg":
			s.NegShare, err = strconv.ParseFloat(v, 64)
		case "seed":
			s.Seed, err = strconv.ParseUint(v, 10, 64)
		case "trend":
			if s.Trend, err = ParseTrend(v); err != nil {
				return s, errf("dsbm spec %q: trend=%q: want random, grow or bitcoin", spec, v)
			}
		default:
			return s, errf("dsbm spec %q: unknown key %q (known: nodes, snapshots, communities, edges, skew, trend, pin, neg, seed)", spec, k)
		}
		if err != nil {
			return s, errf("dsbm spec %q: %s=%q is not a number", spec, k, v)
		}
	}
	return s, s.validate()
}

func (s DSBMSpec) validate() error {
	switch {
	case s.Nodes < 2 || s.Nodes > 1<<22:
		return errf("dsbm: nodes %d: want 2..%d", s.Nodes, 1<<22)
	case s.Snapshots < 2 || s.Snapshots > 1<<16:
		return errf("dsbm: snapshots %d: want 2..%d", s.Snapshots, 1<<16)
	case s.Communities < 1 || s.Communities > s.Nodes:
		return errf("dsbm: communities %d: want 1..nodes", s.Communities)
	case s.Edges < 1:
		return errf("dsbm: edges %d: want >= 1", s.Edges)
	case !(s.Skew >= 1 && s.Skew <= 1e4):
		return errf("dsbm: skew %g: want 1..10000", s.Skew)
	case float64(s.Edges)*s.Skew*float64(s.Snapshots) > 1<<28:
		return errf("dsbm: edges*skew*snapshots = %.0f events is too many", float64(s.Edges)*s.Skew*float64(s.Snapshots))
	case s.Trend > TrendBitcoin:
		return errf("dsbm: unknown trend %d", s.Trend)
	case !(s.PIn >= 0 && s.PIn <= 1), !(s.NegShare >= 0 && s.NegShare <= 1):
		return errf("dsbm: pin %g and neg %g must be in [0,1]", s.PIn, s.NegShare)
	}
	return nil
}

// DSBM generates the dataset: a dynamic data.Dataset with one second per
// snapshot (cut it with Snapshots(1)); its Graph is the union of the
// events, each distinct src -> dst pair once.
func DSBM(s DSBMSpec) (*data.Dataset, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(s.Seed, 0xd5b))
	comm := make([]int, s.Nodes)
	for i := range comm {
		comm[i] = i % s.Communities
	}
	u := s.sizeExponents(r)
	var ev []data.Event
	perm := make([]int32, s.Nodes)
	for i := range perm {
		perm[i] = int32(i)
	}
	for t := 0; t < s.Snapshots; t++ {
		e := int(math.Round(float64(s.Edges) * math.Pow(s.Skew, u[t])))
		active := max(16, min(s.Nodes, e/4))
		active = min(active, s.Nodes)
		r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		act := perm[:active]
		byComm := make([][]int32, s.Communities)
		for _, v := range act {
			byComm[comm[v]] = append(byComm[comm[v]], v)
		}
		for k := 0; k < e; k++ {
			a := act[r.IntN(active)]
			var b int32
			in := r.Float64() < s.PIn
			if in && len(byComm[comm[a]]) > 1 {
				c := byComm[comm[a]]
				b = c[r.IntN(len(c))]
			} else {
				b = act[r.IntN(active)]
			}
			if a == b {
				continue
			}
			w := float32(1)
			if comm[a] != comm[b] && r.Float64() < s.NegShare {
				w = -1
			}
			ev = append(ev, data.Event{Src: a, Dst: b, Weight: w, Time: int64(t)})
		}
	}
	// Features: a noisy one-hot of the community (unit noise) and four
	// noise columns, so structure and features both carry the signal.
	fd := s.Communities + 4
	x := make([]float32, s.Nodes*fd)
	for i := 0; i < s.Nodes; i++ {
		for j := 0; j < fd; j++ {
			x[i*fd+j] = float32(r.NormFloat64())
		}
		x[i*fd+comm[i]] += 1.5
	}
	g, err := unionGraph(s.Nodes, ev)
	if err != nil {
		return nil, err
	}
	return &data.Dataset{Name: s.String(), Kind: data.KindDynamic, NumNodes: s.Nodes, Graph: g, Directed: true,
		Features: x, FeatureDim: fd,
		Events: ev, SnapshotSeconds: 1, Source: "synthetic:" + s.String()}, nil
}

// unionGraph is the directed graph src -> dst with each distinct pair of
// the events once: data.Dataset.Graph of a dynamic dataset.
func unionGraph(n int, ev []data.Event) (*core.Graph, error) {
	keys := make([]uint64, len(ev))
	for k, e := range ev {
		keys[k] = uint64(uint32(e.Dst))<<32 | uint64(uint32(e.Src))
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	src, dst := make([]int32, len(keys)), make([]int32, len(keys))
	for k, key := range keys {
		dst[k], src[k] = int32(key>>32), int32(uint32(key))
	}
	return core.FromEdges(n, n, src, dst)
}
