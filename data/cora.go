package data

import (
	_ "embed"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/data/internal/pack"
)

//go:generate go run ./internal/gencora -in ../../shared/data/cora -out embedded/cora.pack

// coraPack is Cora in the compact format of data/internal/pack, made by
// internal/gencora from the shared layout's folder.
//
//go:embed embedded/cora.pack
var coraPack []byte

// Cora returns the Cora citation graph (Planetoid public split, as in Kipf
// & Welling's GCN) from the copy embedded in the binary: 2708 nodes, 5278
// undirected edges, 1433 binary bag-of-words features, 7 classes, 140/500/
// 1000 train/val/test nodes. It equals Load of shared/data/cora, except
// Source is "embedded:cora". Each call decodes a fresh copy (about 15 MB).
func Cora() (*Dataset, error) { return decodePack(coraPack, "embedded:cora") }

// decodePack turns a packed set into a static dataset.
func decodePack(b []byte, source string) (*Dataset, error) {
	s, err := pack.Decode(b)
	if err != nil {
		return nil, &Error{File: source, Msg: "decoding the embedded dataset", Kind: ErrMalformed, Err: err}
	}
	if int64(s.Nodes)*int64(s.FeatureDim) > 1<<28 {
		return nil, malformed(source, 0, "%d x %d features are too many to expand", s.Nodes, s.FeatureDim)
	}
	g, err := core.Undirected(s.Nodes, s.Src, s.Dst)
	if err != nil {
		return nil, &Error{File: source, Msg: "building the graph", Kind: ErrMalformed, Err: err}
	}
	d := &Dataset{
		Name: s.Name, Kind: KindStatic, NumNodes: s.Nodes, Graph: g,
		FeatureDim: s.FeatureDim, Labels: s.Labels, NumClasses: s.Classes,
		Train: s.Train, Val: s.Val, Test: s.Test, Source: source,
	}
	if s.FeatureDim > 0 {
		d.Features = s.Features()
	}
	if d.Labels == nil && (len(d.Train) > 0 || len(d.Val) > 0 || len(d.Test) > 0) {
		return nil, malformed(source, 0, "a split without labels")
	}
	if d.Labels == nil {
		d.Train, d.Val, d.Test = nil, nil, nil
	}
	if err := d.Validate(); err != nil { // unlabelled split nodes, overlaps
		return nil, err
	}
	return d, nil
}
