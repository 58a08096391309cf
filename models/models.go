package models

import (
	"fmt"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/models/nn"
)

func init() {
	core.RegisterModel("gcn", GCN)
	core.RegisterModel("sage", SAGE)
	core.RegisterModel("gat", GAT)
}

// Names of the values every model shares.
const (
	Features = "x"      // the input features, N x InDim
	Adj      = "adj"    // the graph
	AdjW     = "adj.w"  // its edge weights, when the GraphSpec asks for them
	Logits   = "logits" // the output, N x Classes
	Loss     = "loss"   // the 1 x 1 loss
)

// withDefaults validates cfg and fills its zero fields.
func withDefaults(model string, cfg core.ModelConfig, hidden int) (core.ModelConfig, error) {
	if cfg.InDim <= 0 {
		return cfg, fmt.Errorf("models: %s: InDim (input feature width) must be positive, got %d", model, cfg.InDim)
	}
	if cfg.Classes <= 0 {
		return cfg, fmt.Errorf("models: %s: Classes must be positive, got %d", model, cfg.Classes)
	}
	if cfg.Hidden < 0 || cfg.Layers < 0 || cfg.Heads < 0 {
		return cfg, fmt.Errorf("models: %s: Hidden, Layers and Heads must not be negative (got %d, %d, %d)", model, cfg.Hidden, cfg.Layers, cfg.Heads)
	}
	for _, p := range []struct {
		name string
		v    float32
	}{{"Dropout", cfg.Dropout}, {"AttnDropout", cfg.AttnDropout}} {
		if !(p.v >= 0 && p.v < 1) {
			return cfg, fmt.Errorf("models: %s: %s must be in [0,1), got %g", model, p.name, p.v)
		}
	}
	if cfg.Hidden == 0 {
		cfg.Hidden = hidden
	}
	if cfg.Layers == 0 {
		cfg.Layers = 2
	}
	return cfg, nil
}

// builder accumulates a model's ops and params.
type builder struct {
	m *core.Model
}

func newBuilder(name string, cfg core.ModelConfig, g core.GraphSpec) *builder {
	return &builder{m: &core.Model{Name: name, Config: cfg, Inputs: []string{Features}, Graphs: []core.GraphSpec{g}, Output: Logits}}
}

func (b *builder) param(name string, init core.InitKind, decay bool, shape ...int) string {
	b.m.Params = append(b.m.Params, core.ParamSpec{Name: name, Shape: shape, Init: init, WeightDecay: decay})
	return name
}

func (b *builder) op(op core.Op) { b.m.Ops = append(b.m.Ops, op) }

// finish adds the loss, annotates the ops' costs and validates.
func (b *builder) finish() (*core.Model, error) {
	b.op(nn.NewCrossEntropy("loss", Logits, Loss, b.m.Config.Classes))
	nn.AnnotateGrads(b.m)
	if err := b.m.Validate(); err != nil {
		return nil, err
	}
	return b.m, nil
}

// layerName names stage of layer l ("lin0", "conv1"): ops, the values
// they write and (with a suffix) parameters.
func layerName(stage string, l int) string { return fmt.Sprintf("%s%d", stage, l) }
