// Command gencora packs the shared Cora folder into the compact file that
// package data embeds (see data/internal/pack). It loads the folder with
// data.Load (all checks and sha256 sums on), requires binary features and
// canonical edges, writes the pack, then decodes it again and checks that
// rendering it reproduces every original file byte for byte.
//
// Usage (from data/, as go generate runs it):
//
//	go run ./internal/gencora -in ../../shared/data/cora -out embedded/cora.pack
package main

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"github.com/gnnkit/gnnkit/internal/atomicfile"
	"os"
	"path/filepath"

	"github.com/gnnkit/gnnkit/data"
	"github.com/gnnkit/gnnkit/data/internal/pack"
)

func main() {
	in := flag.String("in", "../../shared/data/cora", "the Cora folder in the shared layout")
	out := flag.String("out", "embedded/cora.pack", "the file to write")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gencora:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	d, err := data.Load(in)
	if err != nil {
		return err
	}
	s, err := fromDataset(d)
	if err != nil {
		return err
	}
	for _, name := range []string{"features.f32", "edges.tsv", "labels.txt", "train.txt", "val.txt", "test.txt"} {
		b, err := os.ReadFile(filepath.Join(in, name))
		if err != nil {
			return err
		}
		s.Sums = append(s.Sums, pack.Sum{File: name, SHA256: sha256.Sum256(b)})
	}
	var buf bytes.Buffer
	if err := pack.Encode(&buf, s); err != nil {
		return err
	}
	back, err := pack.Decode(buf.Bytes())
	if err != nil {
		return fmt.Errorf("decoding what was just encoded: %w", err)
	}
	if err := back.Verify(); err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(out, buf.Bytes()); err != nil {
		return err
	}
	fmt.Printf("gencora: wrote %s: %d bytes (%d nodes, %d edges, %d feature non-zeros)\n", out, buf.Len(), s.Nodes, len(s.Src), len(s.FeatCols))
	return nil
}

// fromDataset converts a loaded static, undirected dataset with binary
// features into a pack.Set.
func fromDataset(d *data.Dataset) (*pack.Set, error) {
	if d.Kind != data.KindStatic || d.Directed {
		return nil, fmt.Errorf("%s: need a static undirected dataset", d.Name)
	}
	s := &pack.Set{Name: d.Name, Nodes: d.NumNodes, FeatureDim: d.FeatureDim, Classes: d.NumClasses,
		Labels: d.Labels, Train: d.Train, Val: d.Val, Test: d.Test}
	s.FeatOff = make([]int64, d.NumNodes+1)
	for i := 0; i < d.NumNodes; i++ {
		for j := 0; j < d.FeatureDim; j++ {
			switch v := d.Features[i*d.FeatureDim+j]; v {
			case 0:
			case 1:
				s.FeatCols = append(s.FeatCols, int32(j))
			default:
				return nil, fmt.Errorf("%s: node %d feature %d = %v: only binary features can be packed", d.Name, i, j, v)
			}
		}
		s.FeatOff[i+1] = int64(len(s.FeatCols))
	}
	// Edges src < dst in (src, dst) order: row s of the symmetric graph
	// lists its neighbours ascending.
	g := d.Graph
	for u := 0; u < g.NumDst; u++ {
		for _, v := range g.Indices[g.Offsets[u]:g.Offsets[u+1]] {
			if int(v) > u {
				s.Src = append(s.Src, int32(u))
				s.Dst = append(s.Dst, v)
			}
		}
	}
	return s, nil
}
