package core

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// OpKind classifies an op for schedulers (BLAD overlaps graph ops with
// dense ops) and for reports.
type OpKind uint8

const (
	KindDense  OpKind = iota // GEMM-bound
	KindGraph                // SpMM / SDDMM / edge softmax: irregular, memory-bound
	KindElem                 // elementwise / broadcast
	KindLoss                 // loss and its normalisation
	KindGather               // index-select / scatter
)

func (k OpKind) String() string {
	switch k {
	case KindDense:
		return "dense"
	case KindGraph:
		return "graph"
	case KindElem:
		return "elementwise"
	case KindLoss:
		return "loss"
	case KindGather:
		return "gather"
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// Cost is an op's predicted work for one forward+backward pass.
type Cost struct {
	FLOPs           int64 `json:"flops"`
	BytesMoved      int64 `json:"bytes_moved"`      // memory traffic, forward + backward
	ActivationBytes int64 `json:"activation_bytes"` // kept from forward for backward
	WeightBytes     int64 `json:"weight_bytes"`     // parameters read
}

// Add returns the sum of two costs.
func (c Cost) Add(o Cost) Cost {
	return Cost{c.FLOPs + o.FLOPs, c.BytesMoved + o.BytesMoved, c.ActivationBytes + o.ActivationBytes, c.WeightBytes + o.WeightBytes}
}

// Dims are the sizes an op's cost depends on: the rows it computes (nodes
// of the graph or batch) and the edges of the graph it aggregates over.
type Dims struct {
	Nodes int64 `json:"nodes"`
	Edges int64 `json:"edges"`
}

// Op is one node of a model's DAG. It reads named values and writes named
// values in an Env; Backward reads the gradients of its outputs and adds
// the gradients of its inputs (Env.AccumGrad), only for inputs where
// Env.NeedsGrad holds. Ops use only Env.K (the Kernels), so every backend
// runs every model.
type Op interface {
	Name() string
	Kind() OpKind
	Inputs() []string
	Outputs() []string
	Forward(env *Env) error
	Backward(env *Env) error
	Cost(d Dims) Cost
}

// GEMM is one matrix product an op runs: an M x N output summed over an
// inner dimension K (2·M·N·K FLOPs).
type GEMM struct{ M, N, K int64 }

// GEMMOp is implemented by ops whose work is matrix products, so that a
// cost model can price a small product by how well it fills a device
// (sim.Roofline on devices with DeviceModel.SMs) instead of by its FLOPs
// alone. GEMMs returns the products of the forward and of the backward at
// the given size; their FLOPs are the dense part of Cost(d).
type GEMMOp interface {
	GEMMs(d Dims) (fwd, bwd []GEMM)
}

// EdgeWeights selects the per-edge weights the runtime prepares for a
// model's graph input.
type EdgeWeights uint8

const (
	WeightsNone EdgeWeights = iota
	WeightsGCN              // Graph.GCNNorm
	WeightsMean             // Graph.MeanWeights
)

// GraphSpec says how a model wants the dataset graph prepared. The
// runtime binds the graph under the spec's name and, if Weights is set,
// an E x 1 tensor under the value name Name+".w".
type GraphSpec struct {
	Name      string
	SelfLoops bool
	Weights   EdgeWeights
}

// InitKind selects a parameter initialiser.
type InitKind uint8

const (
	InitGlorot InitKind = iota // uniform(-a, a), a = sqrt(6/(fan_in+fan_out))
	InitZeros
)

// ParamSpec declares a trainable parameter.
type ParamSpec struct {
	Name        string
	Shape       []int
	Init        InitKind
	WeightDecay bool // whether the optimizer's weight decay applies
}

// Initial returns the parameter's initial values, deterministic in seed.
func (p ParamSpec) Initial(seed uint64) []float32 {
	n := NumElems(p.Shape)
	out := make([]float32, n)
	if p.Init == InitZeros || n == 0 {
		return out
	}
	fanIn, fanOut := 1, 1
	if len(p.Shape) >= 2 {
		fanIn, fanOut = p.Shape[0], NumElems(p.Shape[1:])
	} else if len(p.Shape) == 1 {
		fanIn, fanOut = 1, p.Shape[0]
	}
	a := math.Sqrt(6 / float64(fanIn+fanOut))
	h := uint64(14695981039346656037)
	for _, c := range p.Name {
		h = (h ^ uint64(c)) * 1099511628211
	}
	r := rand.New(rand.NewPCG(seed, h))
	for i := range out {
		out[i] = float32((2*r.Float64() - 1) * a)
	}
	return out
}

// Model is a DAG of ops over named values. Values are the model's Inputs
// (data such as "x"), its graph-weight inputs (Graphs[i].Name+".w"), its
// Params, and the outputs of its Ops. Ops are listed in a topological
// order; Loss names the scalar loss value's producer output.
type Model struct {
	Name   string
	Config ModelConfig
	Inputs []string
	Graphs []GraphSpec
	Params []ParamSpec
	Ops    []Op
	// Output is the value holding the per-node class scores (logits).
	Output string
	// LayerOutputs optionally names, in order, the value each
	// message-passing layer outputs (the last is Output). A row of layer
	// l's output depends only on its node's (l+1)-hop in-neighbourhood.
	// Activation reuse (Plan.Reuse) needs it: its boundary is the input of
	// the last layer.
	LayerOutputs []string
}

// ReuseBoundary returns the value the last layer reads (the output of the
// layer before it), or "" when the model declares fewer than two layers.
func (m *Model) ReuseBoundary() string {
	if len(m.LayerOutputs) < 2 {
		return ""
	}
	return m.LayerOutputs[len(m.LayerOutputs)-2]
}

// ModelConfig holds the hyper-parameters models are built from.
type ModelConfig struct {
	InDim       int     `json:"in_dim"`
	Hidden      int     `json:"hidden"`
	Classes     int     `json:"classes"`
	Layers      int     `json:"layers"`
	Heads       int     `json:"heads,omitempty"`
	Branches    int     `json:"branches,omitempty"`   // multi-branch (DAG) models
	TableRows   int     `json:"table_rows,omitempty"` // dlrm: rows of each embedding table (0: the model's default)
	Dropout     float32 `json:"dropout"`
	AttnDropout float32 `json:"attn_dropout,omitempty"`
}

// Validate checks that names are unique, every op input is defined before
// use, and the DAG is therefore acyclic.
func (m *Model) Validate() error {
	defined := map[string]string{}
	def := func(name, by string) error {
		if name == "" {
			return fmt.Errorf("core: model %s: %s defines an empty value name", m.Name, by)
		}
		if prev, ok := defined[name]; ok {
			return fmt.Errorf("core: model %s: value %q defined by both %s and %s", m.Name, name, prev, by)
		}
		defined[name] = by
		return nil
	}
	for _, in := range m.Inputs {
		if err := def(in, "input"); err != nil {
			return err
		}
	}
	for _, g := range m.Graphs {
		if g.Weights != WeightsNone {
			if err := def(g.Name+".w", "graph "+g.Name); err != nil {
				return err
			}
		}
	}
	for _, p := range m.Params {
		if err := def(p.Name, "param"); err != nil {
			return err
		}
	}
	ops := map[string]bool{}
	for _, op := range m.Ops {
		if ops[op.Name()] {
			return fmt.Errorf("core: model %s: two ops named %q", m.Name, op.Name())
		}
		ops[op.Name()] = true
		for _, in := range op.Inputs() {
			if _, ok := defined[in]; !ok {
				return fmt.Errorf("core: model %s: op %s reads %q before anything defines it", m.Name, op.Name(), in)
			}
		}
		for _, out := range op.Outputs() {
			if err := def(out, "op "+op.Name()); err != nil {
				return err
			}
		}
	}
	if _, ok := defined[m.Output]; !ok {
		return fmt.Errorf("core: model %s: output %q is not defined", m.Name, m.Output)
	}
	for _, v := range m.LayerOutputs {
		if _, ok := defined[v]; !ok {
			return fmt.Errorf("core: model %s: layer output %q is not defined", m.Name, v)
		}
	}
	if n := len(m.LayerOutputs); n > 0 && m.LayerOutputs[n-1] != m.Output {
		return fmt.Errorf("core: model %s: the last layer output is %q, not the model's output %q", m.Name, m.LayerOutputs[n-1], m.Output)
	}
	return nil
}

// OpDeps returns, for each op, the indices of the ops whose outputs it reads.
func (m *Model) OpDeps() [][]int {
	producer := map[string]int{}
	deps := make([][]int, len(m.Ops))
	for i, op := range m.Ops {
		seen := map[int]bool{}
		for _, in := range op.Inputs() {
			if p, ok := producer[in]; ok && !seen[p] {
				seen[p] = true
				deps[i] = append(deps[i], p)
			}
		}
		for _, out := range op.Outputs() {
			producer[out] = i
		}
	}
	return deps
}

// OpParams returns, per op, the parameters it reads (each once, in the
// op's input order): what OpInfo.Params lists and where StepOwners looks.
func (m *Model) OpParams() [][]string {
	isParam := map[string]bool{}
	for _, p := range m.Params {
		isParam[p.Name] = true
	}
	out := make([][]string, len(m.Ops))
	for i, op := range m.Ops {
		for _, v := range op.Inputs() {
			if isParam[v] && !slices.Contains(out[i], v) {
				out[i] = append(out[i], v)
			}
		}
	}
	return out
}

// InputsRead reports which batch inputs the ops read: features (any of
// m.Inputs) and the weighted graphs whose edge weights (Name+".w") they
// read, in m.Graphs order. A device keeps, and a unit brings to it, only
// these (the executor's setWant; the simulator and the partitioners
// price them so).
func (m *Model) InputsRead(ops []int) (features bool, weights []string) {
	read := map[string]bool{}
	for _, o := range ops {
		if o < 0 || o >= len(m.Ops) {
			continue
		}
		for _, v := range m.Ops[o].Inputs() {
			features = features || slices.Contains(m.Inputs, v)
			read[v] = true
		}
	}
	for _, g := range m.Graphs {
		if g.Weights != WeightsNone && read[g.Name+".w"] {
			weights = append(weights, g.Name+".w")
		}
	}
	return features, weights
}

// WeightedGraphs is the number of m's graphs with edge weights (inputs
// Name+".w").
func (m *Model) WeightedGraphs() int {
	n := 0
	for _, g := range m.Graphs {
		if g.Weights != WeightsNone {
			n++
		}
	}
	return n
}

// NeedsGrad returns the set of values whose gradient backward must compute:
// the params and everything computed from them.
func (m *Model) NeedsGrad() map[string]bool {
	need := map[string]bool{}
	for _, p := range m.Params {
		need[p.Name] = true
	}
	for _, op := range m.Ops {
		any := false
		for _, in := range op.Inputs() {
			any = any || need[in]
		}
		if any {
			for _, out := range op.Outputs() {
				need[out] = true
			}
		}
	}
	return need
}

// ParamBytes is the size of all parameters in bytes.
func (m *Model) ParamBytes() int64 {
	var n int64
	for _, p := range m.Params {
		n += int64(NumElems(p.Shape)) * 4
	}
	return n
}

// Cost sums the ops' costs for one pass over a graph of the given dims.
func (m *Model) Cost(d Dims) Cost {
	var c Cost
	for _, op := range m.Ops {
		c = c.Add(op.Cost(d))
	}
	return c
}
