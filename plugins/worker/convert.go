package worker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/engine"
	pb "github.com/gnnkit/gnnkit/plugins/proto/backend/v1"
)

// This file converts between engine/core values and the protocol's
// messages. The decoders run on input from another process and are fuzzed:
// they check every size and index before anything is allocated from it or
// indexed with it.

// signature describes a model for the worker's sameness check.
func signature(m *core.Model) *pb.ModelSignature {
	s := &pb.ModelSignature{Output: m.Output}
	for _, p := range m.Params {
		q := &pb.Param{Name: p.Name}
		for _, d := range p.Shape {
			q.Shape = append(q.Shape, int64(d))
		}
		s.Params = append(s.Params, q)
	}
	for _, op := range m.Ops {
		s.Ops = append(s.Ops, op.Name())
	}
	return s
}

// sameModel explains how the model built here differs from the host's.
func sameModel(m *core.Model, host *pb.ModelSignature) error {
	here := signature(m)
	if here.GetOutput() != host.GetOutput() {
		return fmt.Errorf("its output is %q here and %q on the host", here.GetOutput(), host.GetOutput())
	}
	if len(here.Ops) != len(host.GetOps()) {
		return fmt.Errorf("it has %d ops here and %d on the host", len(here.Ops), len(host.GetOps()))
	}
	for i, op := range here.Ops {
		if op != host.GetOps()[i] {
			return fmt.Errorf("op %d is %s here and %s on the host", i, op, host.GetOps()[i])
		}
	}
	if len(here.Params) != len(host.GetParams()) {
		return fmt.Errorf("it has %d parameters here and %d on the host", len(here.Params), len(host.GetParams()))
	}
	for i, p := range here.Params {
		q := host.GetParams()[i]
		if p.GetName() != q.GetName() || !slices.Equal(p.GetShape(), q.GetShape()) {
			return fmt.Errorf("parameter %d is %s %v here and %s %v on the host", i, p.GetName(), p.GetShape(), q.GetName(), q.GetShape())
		}
	}
	return nil
}

// loadMessages sends spec as a header and chunks of at most chunk
// elements each.
func loadMessages(spec *engine.RemoteSpec, chunk int, send func(*pb.LoadRequest) error) error {
	m, d := spec.Model, spec.Data
	if m == nil || d.Graph == nil {
		return fmt.Errorf("worker: Load needs a model and a graph")
	}
	if m.Name == "" {
		return fmt.Errorf("worker: the model has no name; a worker rebuilds models from the registry (core.RegisterModel)")
	}
	if _, err := core.BuildModel(m.Name, m.Config); err != nil {
		return fmt.Errorf("worker: the model cannot be rebuilt from its name and config: %w", err)
	}
	cfg, err := json.Marshal(m.Config)
	if err != nil {
		return err
	}
	g := d.Graph
	o := spec.Optimizer
	h := &pb.LoadHeader{Model: m.Name, ModelConfigJson: cfg, Signature: signature(m), Seed: spec.Seed,
		Optimizer: &pb.Optimizer{Kind: o.Kind, Lr: o.LR, WeightDecay: o.WeightDecay, Momentum: o.Momentum,
			Beta1: o.Beta1, Beta2: o.Beta2, Eps: o.Eps},
		NumDst: int64(g.NumDst), NumSrc: int64(g.NumSrc), NumEdges: int64(len(g.Indices)), HasEids: g.EIDs != nil,
		FeatureDim: int64(d.FeatureDim)}
	if err := send(&pb.LoadRequest{Header: h}); err != nil {
		return err
	}
	chunk = max(chunk, 1)
	for lo := 0; lo < len(g.Offsets); lo += chunk {
		if err := send(&pb.LoadRequest{Chunk: &pb.Chunk{Array: pb.ArrayKind_ARRAY_KIND_OFFSETS, Offset: int64(lo), I64: g.Offsets[lo:min(lo+chunk, len(g.Offsets))]}}); err != nil {
			return err
		}
	}
	for _, a := range []struct {
		kind pb.ArrayKind
		v    []int32
	}{{pb.ArrayKind_ARRAY_KIND_INDICES, g.Indices}, {pb.ArrayKind_ARRAY_KIND_EIDS, g.EIDs}, {pb.ArrayKind_ARRAY_KIND_LABELS, d.Labels}} {
		for lo := 0; lo < len(a.v); lo += chunk {
			if err := send(&pb.LoadRequest{Chunk: &pb.Chunk{Array: a.kind, Offset: int64(lo), I32: a.v[lo:min(lo+chunk, len(a.v))]}}); err != nil {
				return err
			}
		}
	}
	for lo := 0; lo < len(d.Features); lo += chunk {
		if err := send(&pb.LoadRequest{Chunk: &pb.Chunk{Array: pb.ArrayKind_ARRAY_KIND_FEATURES, Offset: int64(lo), F32: d.Features[lo:min(lo+chunk, len(d.Features))]}}); err != nil {
			return err
		}
	}
	return nil
}

// maxLoadElems bounds each array of a Load (2^40 elements): sizes beyond it
// are corrupt headers, not datasets.
const maxLoadElems = 1 << 40

// assembler rebuilds a RemoteSpec from Load messages.
type assembler struct {
	h        *pb.LoadHeader
	offsets  []int64
	indices  []int32
	eids     []int32
	labels   []int32
	features []float32
}

// add takes one message: the header first, then chunks in order.
func (a *assembler) add(m *pb.LoadRequest) error {
	if h := m.GetHeader(); h != nil {
		if a.h != nil {
			return fmt.Errorf("a second header")
		}
		for _, f := range []struct {
			name string
			v    int64
		}{{"num_dst", h.GetNumDst()}, {"num_src", h.GetNumSrc()}, {"num_edges", h.GetNumEdges()}, {"feature_dim", h.GetFeatureDim()}} {
			if f.v < 0 || f.v > maxLoadElems {
				return fmt.Errorf("header has %s = %d", f.name, f.v)
			}
		}
		if h.GetFeatureDim() > 0 && h.GetNumDst() > maxLoadElems/h.GetFeatureDim() {
			return fmt.Errorf("header has %d x %d features", h.GetNumDst(), h.GetFeatureDim())
		}
		a.h = h
		if m.GetChunk() == nil {
			return nil
		}
	}
	if a.h == nil {
		return fmt.Errorf("a chunk before the header")
	}
	c := m.GetChunk()
	if c == nil {
		return fmt.Errorf("a message with neither header nor chunk")
	}
	h := a.h
	type arr struct {
		name string
		have int
		want int64
	}
	var x arr
	switch c.GetArray() {
	case pb.ArrayKind_ARRAY_KIND_OFFSETS:
		x = arr{"offsets", len(a.offsets), h.GetNumDst() + 1}
	case pb.ArrayKind_ARRAY_KIND_INDICES:
		x = arr{"indices", len(a.indices), h.GetNumEdges()}
	case pb.ArrayKind_ARRAY_KIND_EIDS:
		x = arr{"eids", len(a.eids), h.GetNumEdges()}
		if !h.GetHasEids() {
			x.want = 0
		}
	case pb.ArrayKind_ARRAY_KIND_LABELS:
		x = arr{"labels", len(a.labels), h.GetNumDst()}
	case pb.ArrayKind_ARRAY_KIND_FEATURES:
		x = arr{"features", len(a.features), h.GetNumDst() * h.GetFeatureDim()}
	default:
		return fmt.Errorf("a chunk of unknown array %v", c.GetArray())
	}
	n := len(c.GetI64()) + len(c.GetI32()) + len(c.GetF32())
	if c.GetOffset() != int64(x.have) {
		return fmt.Errorf("a chunk of %s at offset %d, want %d (chunks come in order)", x.name, c.GetOffset(), x.have)
	}
	if int64(x.have)+int64(n) > x.want {
		return fmt.Errorf("%s: %d values past the %d the header announced", x.name, int64(x.have)+int64(n), x.want)
	}
	typed := map[pb.ArrayKind]int{pb.ArrayKind_ARRAY_KIND_OFFSETS: len(c.GetI64()), pb.ArrayKind_ARRAY_KIND_FEATURES: len(c.GetF32())}
	want, ok := typed[c.GetArray()]
	if !ok {
		want = len(c.GetI32())
	}
	if want != n {
		return fmt.Errorf("a chunk of %s carries values of the wrong type", x.name)
	}
	switch c.GetArray() {
	case pb.ArrayKind_ARRAY_KIND_OFFSETS:
		a.offsets = append(a.offsets, c.GetI64()...)
	case pb.ArrayKind_ARRAY_KIND_INDICES:
		a.indices = append(a.indices, c.GetI32()...)
	case pb.ArrayKind_ARRAY_KIND_EIDS:
		a.eids = append(a.eids, c.GetI32()...)
	case pb.ArrayKind_ARRAY_KIND_LABELS:
		a.labels = append(a.labels, c.GetI32()...)
	case pb.ArrayKind_ARRAY_KIND_FEATURES:
		a.features = append(a.features, c.GetF32()...)
	}
	return nil
}

// finish checks that every array is complete and builds the spec: the
// model from the registry (it must match the host's signature), the graph
// (validated) and the data.
func (a *assembler) finish() (*engine.RemoteSpec, error) {
	h := a.h
	if h == nil {
		return nil, fmt.Errorf("no header")
	}
	for _, x := range []struct {
		name       string
		have, want int64
	}{{"offsets", int64(len(a.offsets)), h.GetNumDst() + 1}, {"indices", int64(len(a.indices)), h.GetNumEdges()},
		{"labels", int64(len(a.labels)), h.GetNumDst()}, {"features", int64(len(a.features)), h.GetNumDst() * h.GetFeatureDim()}} {
		if x.have != x.want {
			return nil, fmt.Errorf("%s: %d values arrived, the header announced %d", x.name, x.have, x.want)
		}
	}
	var eids []int32
	if h.GetHasEids() {
		if int64(len(a.eids)) != h.GetNumEdges() {
			return nil, fmt.Errorf("eids: %d values arrived, want %d", len(a.eids), h.GetNumEdges())
		}
		eids = a.eids
		if eids == nil {
			eids = []int32{}
		}
	}
	g, err := core.NewGraph(int(h.GetNumDst()), int(h.GetNumSrc()), a.offsets, a.indices, eids)
	if err != nil {
		return nil, err
	}
	var cfg core.ModelConfig
	dec := json.NewDecoder(bytes.NewReader(h.GetModelConfigJson()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("model config %s: %v (is the worker older than the host? rebuild both from one source)", h.GetModelConfigJson(), err)
	}
	m, err := core.BuildModel(h.GetModel(), cfg)
	if err != nil {
		return nil, err
	}
	if err := sameModel(m, h.GetSignature()); err != nil {
		return nil, fmt.Errorf("model %s differs between host and worker: %v; rebuild both from one source", h.GetModel(), err)
	}
	for i, l := range a.labels {
		if l < -1 || (cfg.Classes > 0 && int(l) >= cfg.Classes) {
			return nil, fmt.Errorf("label %d of node %d is outside [-1, %d)", l, i, cfg.Classes)
		}
	}
	o := h.GetOptimizer()
	return &engine.RemoteSpec{Model: m, Seed: h.GetSeed(),
		Data: engine.Data{Graph: g, Features: a.features, FeatureDim: int(h.GetFeatureDim()), Labels: a.labels},
		Optimizer: engine.Optimizer{Kind: o.GetKind(), LR: o.GetLr(), WeightDecay: o.GetWeightDecay(), Momentum: o.GetMomentum(),
			Beta1: o.GetBeta1(), Beta2: o.GetBeta2(), Eps: o.GetEps()}}, nil
}

func encodeGraph(g *core.Graph) *pb.Graph {
	return &pb.Graph{NumDst: int64(g.NumDst), NumSrc: int64(g.NumSrc), Offsets: g.Offsets, Indices: g.Indices, Eids: g.EIDs}
}

func decodeGraph(m *pb.Graph) (*core.Graph, error) {
	if m == nil {
		return nil, fmt.Errorf("no graph")
	}
	if m.GetNumDst() < 0 || m.GetNumSrc() < 0 || m.GetNumDst() > math.MaxInt32 || m.GetNumSrc() > math.MaxInt32 {
		return nil, fmt.Errorf("graph of %d x %d nodes", m.GetNumDst(), m.GetNumSrc())
	}
	return core.NewGraph(int(m.GetNumDst()), int(m.GetNumSrc()), m.GetOffsets(), m.GetIndices(), m.GetEids())
}

// encodeBatch describes b; data is the dataset graph, sent once by Load,
// so a full-graph batch is just its targets.
func encodeBatch(b *engine.Batch, data *core.Graph) *pb.Batch {
	m := &pb.Batch{Targets: b.Targets, Nodes: b.Nodes, HasLabels: b.Labels != nil, Labels: b.Labels}
	for _, e := range b.HopEnds {
		m.HopEnds = append(m.HopEnds, int64(e))
	}
	if b.Graph == data && b.Nodes == nil {
		m.Full = true
	} else {
		m.Graph = encodeGraph(b.Graph)
	}
	if len(b.Graphs) > 0 {
		m.Graphs = make(map[string]*pb.Graph, len(b.Graphs))
		for k, g := range b.Graphs {
			m.Graphs[k] = encodeGraph(g)
		}
	}
	return m
}

// decodeBatch rebuilds a batch over spec's data; node ids must name the
// dataset's nodes, labels its classes.
func decodeBatch(m *pb.Batch, spec *engine.RemoteSpec) (*engine.Batch, error) {
	if m == nil {
		return nil, fmt.Errorf("no batch")
	}
	data := spec.Data.Graph
	b := &engine.Batch{Targets: m.GetTargets()}
	if m.GetFull() {
		if m.GetGraph() != nil || len(m.GetNodes()) > 0 {
			return nil, fmt.Errorf("a full-graph batch with its own graph or nodes")
		}
		b.Graph = data
	} else {
		g, err := decodeGraph(m.GetGraph())
		if err != nil {
			return nil, fmt.Errorf("batch graph: %w", err)
		}
		b.Graph = g
		if m.GetNodes() != nil {
			if len(m.GetNodes()) != g.NumDst {
				return nil, fmt.Errorf("batch maps %d nodes but its graph has %d", len(m.GetNodes()), g.NumDst)
			}
			for _, v := range m.GetNodes() {
				if v < 0 || int(v) >= data.NumDst {
					return nil, fmt.Errorf("batch node %d is not one of the dataset's %d nodes", v, data.NumDst)
				}
			}
			b.Nodes = m.GetNodes()
		} else if g.NumDst > data.NumDst {
			return nil, fmt.Errorf("a batch graph of %d nodes without a node map, over a dataset of %d", g.NumDst, data.NumDst)
		}
	}
	if len(m.GetGraphs()) > 0 {
		b.Graphs = map[string]*core.Graph{}
		for k, gm := range m.GetGraphs() {
			g, err := decodeGraph(gm)
			if err != nil {
				return nil, fmt.Errorf("batch graph %s: %w", k, err)
			}
			if g.NumDst != b.Graph.NumDst || g.NumSrc != b.Graph.NumSrc {
				return nil, fmt.Errorf("batch graph %s is %d x %d, the batch graph %d x %d", k, g.NumDst, g.NumSrc, b.Graph.NumDst, b.Graph.NumSrc)
			}
			b.Graphs[k] = g
		}
	}
	if m.GetHasLabels() {
		b.Labels = m.GetLabels()
		if b.Labels == nil {
			b.Labels = []int32{}
		}
		classes := spec.Model.Config.Classes
		for i, l := range b.Labels {
			if l < -1 || (classes > 0 && int(l) >= classes) {
				return nil, fmt.Errorf("batch label %d of row %d is outside [-1, %d)", l, i, classes)
			}
		}
	}
	rows := b.Graph.NumDst
	if b.Labels != nil {
		rows = len(b.Labels)
	}
	for _, n := range b.Targets {
		if n < 0 || int(n) >= rows {
			return nil, fmt.Errorf("batch target %d outside its %d rows", n, rows)
		}
	}
	for i, e := range m.GetHopEnds() {
		if e < 0 || e > int64(b.Graph.NumDst) || (i > 0 && e < m.GetHopEnds()[i-1]) {
			return nil, fmt.Errorf("batch hop ends %v: want non-decreasing counts up to the %d nodes", m.GetHopEnds(), b.Graph.NumDst)
		}
		b.HopEnds = append(b.HopEnds, int(e))
	}
	return b, nil
}

// encodeTensors lists values in the model's parameter order.
func encodeTensors(m *core.Model, vals map[string][]float32) []*pb.Tensor {
	out := make([]*pb.Tensor, 0, len(vals))
	for _, p := range m.Params {
		if v, ok := vals[p.Name]; ok {
			out = append(out, &pb.Tensor{Name: p.Name, Values: v})
		}
	}
	return out
}

// decodeTensors checks names and sizes against the model.
func decodeTensors(m *core.Model, ts []*pb.Tensor) (map[string][]float32, error) {
	if len(ts) == 0 {
		return nil, nil
	}
	shapes := map[string][]int{}
	for _, p := range m.Params {
		shapes[p.Name] = p.Shape
	}
	out := make(map[string][]float32, len(ts))
	for _, t := range ts {
		s, ok := shapes[t.GetName()]
		if !ok {
			return nil, fmt.Errorf("model %s has no parameter %q", m.Name, t.GetName())
		}
		if _, dup := out[t.GetName()]; dup {
			return nil, fmt.Errorf("parameter %s sent twice", t.GetName())
		}
		if len(t.GetValues()) != core.NumElems(s) {
			return nil, fmt.Errorf("%d values for parameter %s of shape %v", len(t.GetValues()), t.GetName(), s)
		}
		v := t.GetValues()
		if v == nil {
			v = []float32{}
		}
		out[t.GetName()] = v
	}
	return out, nil
}

// idMap renames device ids between the host's names and the worker's.
type idMap map[core.DeviceID]core.DeviceID

func (m idMap) get(id core.DeviceID) (core.DeviceID, bool) {
	v, ok := m[id]
	return v, ok
}

// hostIDs names the worker's devices for the host: NAME:i for the worker's
// BACKEND:i, or the worker's own ids when name is empty.
func hostIDs(name string, devs []core.DeviceInfo) (toHost, toWorker idMap, infos []core.DeviceInfo, err error) {
	toHost, toWorker = idMap{}, idMap{}
	for _, d := range devs {
		h := d
		if name != "" {
			_, i, err := core.ParseDeviceID(string(d.ID))
			if err != nil {
				return nil, nil, nil, fmt.Errorf("the worker's device %q: %v", d.ID, err)
			}
			h.ID = core.DeviceID(fmt.Sprintf("%s:%d", name, i))
			if h.ID != d.ID {
				h.Backend = name
				h.Name = strings.TrimSpace(d.Name + " (worker's " + string(d.ID) + ")")
			}
		}
		if _, dup := toWorker[h.ID]; dup {
			return nil, nil, nil, fmt.Errorf("the worker lists device %s twice", h.ID)
		}
		toHost[d.ID], toWorker[h.ID] = h.ID, d.ID
		infos = append(infos, h)
	}
	return toHost, toWorker, infos, nil
}
