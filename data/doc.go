// Package data loads and generates the graphs gnnkit trains on, as a
// Dataset: a core.Graph in CSR form plus node features, labels and a
// train/val/test split, or, for dynamic graphs, a time-sorted stream of
// edge events that Snapshots cuts into per-window graphs.
//
// # Sources
//
// Open takes the spec a user types and picks the source:
//
//   - Cora, embedded in the binary (Cora, spec "cora"): the Planetoid
//     public split that Kipf & Welling's GCN uses. The file
//     embedded/cora.pack is made by internal/gencora (go generate) from
//     shared/data/cora and reproduces its files byte for byte; features
//     are stored as delta-coded column indices of their 1s and gzipped
//     (about 63 KB for 15.5 MB of float32).
//   - A folder in the shared layout (Load; shared/data/README.md): meta.json,
//     edges.tsv, features.f32, labels.txt, train/val/test.txt,
//     node_ids.txt. Everything is checked against meta.json, including the
//     sha256 of every file listed under "files", and meta.json's node
//     count is confirmed by the per-node files before the graph is built.
//     A UTF-8 byte-order mark at the start of meta.json or of a text file
//     is ignored.
//   - A plain edge list (LoadEdgeList): lines "src dst", "src dst weight"
//     or "src dst weight time", with optional remapping of arbitrary ids.
//   - A synthetic graph (ParseSynthetic and Generate): a labelled
//     stochastic block model ("synthetic:sbm,...") whose labels a
//     graph-aware model learns better than an MLP, or an R-MAT power-law
//     graph ("synthetic:rmat,...") for speed benchmarks, generated in
//     parallel and reproducible from a seed (1M nodes and 10M edges take a
//     few seconds).
//
// # Errors
//
// Loaders never panic on bad input. Errors are prefixed "data: " and name
// the file and line ("data: cora/edges.tsv:17: dst node id 2708 outside
// [0,2708)"); they are *Error values wrapping ErrMalformed, ErrMismatch,
// ErrChecksum or ErrMissingFile, so callers can use errors.Is and
// errors.As. Every parser has a fuzz test.
//
// # Graph conventions
//
// A static undirected graph holds both directions of each edge and no
// self-loops (models add those themselves, e.g. with
// core.Graph.WithSelfLoops). Rows are destinations: row i lists the
// sources j of edges j -> i, ascending.
package data
