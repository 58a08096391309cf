// Package dynamic turns a discrete-time dynamic graph (a list of
// data.Snapshot) into the units of dynamic-GNN training: snapshot groups.
//
// A group is a BPTT window of w consecutive snapshots and the task on the
// snapshot after it: link prediction (its edges against seeded negative
// samples) or edge-sign classification (its edges labelled by the sign of
// their weight), as in EvolveGCN. Every group carries its own node set
// (the nodes active in the window or in the target pairs, in local ids),
// so the cost of a group follows the size of its snapshots — the skew the
// BLAD scheduler balances. Groups are split into train/val/test by the
// position of their target snapshot (EvolveGCN: 70/10/20).
//
// DSBM generates a dynamic stochastic block model whose snapshot sizes
// vary by a chosen factor (10-100x), from a spec string
// "dsbm,nodes=2000,snapshots=40,...", with a trend over time: none
// (random sizes), growth, or the shape of Bitcoin-Alpha's snapshot sizes
// (BitcoinAlphaEdges). A trend is what makes an equal-count contiguous
// partition of the groups imbalanced.
//
// The package depends only on core and data; engine/dyntrain turns groups
// into engine batches.
package dynamic
