package dyntrain

import (
	"context"
	"fmt"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data/dynamic"
	"github.com/gnnkit/gnnkit/engine"
)

// Evaluate scores the groups' pairs with the trainer's current
// parameters (evaluation mode) on the first device.
func Evaluate(ctx context.Context, tr *engine.Trainer, m *core.Model, s *dynamic.Set, groups []*dynamic.Group, devs []core.Device) (Metrics, error) {
	return evaluate(ctx, tr, m, s, groups, devs, plainBatch)
}

func plainBatch(g *dynamic.Group) (*engine.Batch, error) { return Batch(g), nil }

func evaluate(ctx context.Context, tr *engine.Trainer, m *core.Model, s *dynamic.Set, groups []*dynamic.Group, devs []core.Device,
	batch func(*dynamic.Group) (*engine.Batch, error)) (Metrics, error) {
	p, err := tr.Params()
	if err != nil {
		return Metrics{}, err
	}
	return evaluateParams(ctx, p, m, s, groups, devs[0], batch)
}

// Scores returns the logit s_k (logit1 - logit0) of every pair of g.
func Scores(ctx context.Context, params map[string]*core.Tensor, m *core.Model, s *dynamic.Set, g *dynamic.Group, dev core.Device) ([]float32, error) {
	return groupScores(ctx, params, m, s, g, Batch(g), dev)
}

func groupScores(ctx context.Context, params map[string]*core.Tensor, m *core.Model, s *dynamic.Set, g *dynamic.Group, b *engine.Batch, dev core.Device) ([]float32, error) {
	env := core.NewEnv(dev, params, map[string]*core.Tensor{}, map[string]bool{})
	defer env.Release()
	for _, gs := range m.Graphs {
		gr := b.Graph
		if og, ok := b.Graphs[gs.Name]; ok {
			gr = og
		}
		if gs.SelfLoops {
			var err error
			if gr, err = gr.WithSelfLoops(); err != nil {
				return nil, err
			}
		}
		env.Graphs[gs.Name] = gr
		var w []float32
		switch gs.Weights {
		case core.WeightsGCN:
			w = gr.GCNNorm()
		case core.WeightsMean:
			w = gr.MeanWeights()
		default:
			continue
		}
		t, err := env.Alloc(len(w), 1)
		if err != nil {
			return nil, err
		}
		if err := dev.Upload(t, w); err != nil {
			return nil, err
		}
		env.SetValue(gs.Name+".w", t)
	}
	f := s.FeatureDim
	x, err := env.Alloc(len(g.Nodes), f)
	if err != nil {
		return nil, err
	}
	buf := make([]float32, len(g.Nodes)*f)
	for i, v := range g.Nodes {
		copy(buf[i*f:(i+1)*f], s.Features[int(v)*f:(int(v)+1)*f])
	}
	if err := dev.Upload(x, buf); err != nil {
		return nil, err
	}
	env.SetValue("x", x)
	env.NodeIDs = g.Nodes
	env.Labels = g.Labels
	for _, op := range m.Ops {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := op.Forward(env); err != nil {
			return nil, fmt.Errorf("dyntrain: evaluate: %w", err)
		}
	}
	out, err := env.Value(m.Output)
	if err != nil {
		return nil, err
	}
	lg := make([]float32, out.Len())
	if err := dev.Download(lg, out); err != nil {
		return nil, err
	}
	sc := make([]float32, len(g.Labels))
	for k := range sc {
		sc[k] = lg[2*k+1] - lg[2*k]
	}
	return sc, nil
}

func evaluateParams(ctx context.Context, host map[string][]float32, m *core.Model, s *dynamic.Set, groups []*dynamic.Group, dev core.Device,
	batch func(*dynamic.Group) (*engine.Batch, error)) (Metrics, error) {
	params := map[string]*core.Tensor{}
	defer func() {
		for _, t := range params {
			dev.Free(t)
		}
	}()
	for _, p := range m.Params {
		t, err := dev.Alloc(p.Shape...)
		if err != nil {
			return Metrics{}, err
		}
		params[p.Name] = t
		if err := dev.Upload(t, host[p.Name]); err != nil {
			return Metrics{}, err
		}
	}
	var scores []float32
	var labels, query []int32
	for _, g := range groups {
		b, err := batch(g)
		if err != nil {
			return Metrics{}, err
		}
		sc, err := groupScores(ctx, params, m, s, g, b, dev)
		if err != nil {
			return Metrics{}, err
		}
		off := int32(len(scores))
		scores = append(scores, sc...)
		labels = append(labels, g.Labels...)
		for _, q := range g.Query {
			query = append(query, q+off)
		}
	}
	mt := Metrics{Pairs: len(scores), AUC: AUC(scores, labels), F1: F1(scores, labels), MacroF1: MacroF1(scores, labels)}
	if len(query) == len(scores) {
		mt.MRR = MRR(scores, labels, query)
	}
	return mt, nil
}
