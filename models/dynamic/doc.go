// Package dynamic holds dynamic-graph (snapshot sequence) models for
// link prediction and edge-sign classification, built from the ops of
// models/nn, registered as "tgcn" and "evolvegcn".
//
// A model over a BPTT window of w snapshots reads the node features "x",
// the graphs "adj.t0" .. "adj.t{w-1}" (oldest first; self-loops and GCN
// weights added by the runtime) and the scored node pairs "pairs" (pair k
// is the edge with id k), and writes the P x 2 logits [0, s_k + c] of
// every pair (Output "logits"), so that the usual cross-entropy over them
// is binary cross-entropy. Classes is 2 and Layers is the window w.
//
// Op order is part of the design: T-GCN lists the hidden-state-
// independent GCN over every X_t (x·W once, then one aggregation per
// snapshot) before the recurrence, so that a scheduler may run those
// graph ops ahead of the GRU chain (BLAD's topology manager) with plain
// op lists.
//
// TGCNVertex is T-GCN rewritten for the vertex-partition baseline (each
// device a slice of every snapshot, halo rows exchanged), over per-part
// graphs that engine/dyntrain builds; it computes the same loss and
// gradients. OpDims gives the size each op computes for a group, for a
// simulator or a cost estimate.
package dynamic
