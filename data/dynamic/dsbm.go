package dynamic

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/gnnkit/gnnkit/data"
)

// DSBMSpec describes a synthetic dynamic stochastic block model: Nodes
// nodes in Communities fixed communities and Snapshots snapshots. The
// edge count of snapshot t is Edges * Skew^u_t with u_t uniform in [0,1]
// (one snapshot at each end), so sizes vary Skew-fold; a snapshot's
// edges are drawn among max(16, min(Nodes, e_t/4)) active nodes, a PIn
// share of them inside a community. Rating weights are +1, or -1 for a
// NegShare of the edges drawn across communities. Node features are a
// noisy one-hot of the community.
type DSBMSpec struct {
	Nodes, Snapshots, Communities, Edges int
	Skew, PIn, NegShare                  float64
	Seed                                 uint64
}

// DefaultDSBM is the spec "dsbm" alone stands for.
func DefaultDSBM() DSBMSpec {
	return DSBMSpec{Nodes: 2000, Snapshots: 40, Communities: 8, Edges: 300, Skew: 50, PIn: 0.9, NegShare: 0.5, Seed: 1}
}

// String prints the spec in canonical form.
func (s DSBMSpec) String() string {
	return fmt.Sprintf("dsbm,nodes=%d,snapshots=%d,communities=%d,edges=%d,skew=%g,pin=%g,neg=%g,seed=%d",
		s.Nodes, s.Snapshots, s.Communities, s.Edges, s.Skew, s.PIn, s.NegShare, s.Seed)
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
		default:
			return s, errf("dsbm spec %q: unknown key %q (known: nodes, snapshots, communities, edges, skew, pin, neg, seed)", spec, k)
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
	case !(s.PIn >= 0 && s.PIn <= 1), !(s.NegShare >= 0 && s.NegShare <= 1):
		return errf("dsbm: pin %g and neg %g must be in [0,1]", s.PIn, s.NegShare)
	}
	return nil
}

// DSBM generates the dataset: a dynamic data.Dataset with one second per
// snapshot (cut it with Snapshots(1)).
func DSBM(s DSBMSpec) (*data.Dataset, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(s.Seed, 0xd5b))
	comm := make([]int, s.Nodes)
	for i := range comm {
		comm[i] = i % s.Communities
	}
	u := make([]float64, s.Snapshots)
	for t := range u {
		u[t] = r.Float64()
	}
	lo, hi := r.IntN(s.Snapshots), r.IntN(s.Snapshots-1)
	if hi >= lo {
		hi++
	}
	u[lo], u[hi] = 0, 1
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
	return &data.Dataset{Name: s.String(), Kind: data.KindDynamic, NumNodes: s.Nodes, Directed: true,
		Features: x, FeatureDim: fd,
		Events: ev, SnapshotSeconds: 1, Source: "synthetic:" + s.String()}, nil
}
