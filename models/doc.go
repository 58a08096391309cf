// Package models builds gnnkit's graph neural networks as core.Model DAGs
// of the ops in package nn, and registers them by name in init:
//
//	"gcn"   GCN (Kipf & Welling), symmetric normalisation with self-loops
//	"sage"  GraphSAGE with mean aggregation (PyG SAGEConv)
//	"gat"   GAT (Veličković et al., PyG GATConv semantics)
//
// Library users may call GCN, SAGE and GAT directly; the CLI and the
// benchmarks resolve names with core.BuildModel. Every model reads the
// node features "x" (N x InDim) and one graph named "adj" prepared per
// its GraphSpec, and ends with a CrossEntropy op writing "loss"; its
// Output is the logits value (N x Classes).
//
// Zero fields of core.ModelConfig take the reference defaults: Hidden 16
// (GCN, SAGE) or 8 per head (GAT), Layers 2, Heads 8. Dropout and
// AttnDropout are taken as given (0 disables them); the reference
// settings are 0.5 for GCN and SAGE and 0.6 for both in GAT.
package models
