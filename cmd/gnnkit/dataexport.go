package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"github.com/gnnkit/gnnkit/internal/atomicfile"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gnnkit/gnnkit/data"
)

func newDataExportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "export cora|PATH|synthetic:SPEC DIR",
		Short: "Write a dataset in the shared folder layout (edges.tsv, features.f32, labels.txt, splits, meta.json)",
		Long: `Write a dataset in the shared folder layout that 'gnnkit train --data DIR'
reads, as do other tools (scripts/pyg_epoch.py, shared/anchors): so gnnkit and
PyTorch Geometric can train on the very same graph, e.g. a synthetic one.
Undirected edges are written once, src < dst, sorted; the embedded cora comes
out byte for byte as shared/data/cora.`,
		Example: `  gnnkit data export cora out/data/cora
  gnnkit data export synthetic:rmat,nodes=200000,edges=2000000,feat=128 out/data/rmat`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return exportDataset(cmd.OutOrStdout(), args[0], args[1])
		},
	}
}

func exportDataset(out io.Writer, spec, dir string) error {
	ds, err := openDataset(spec)
	if err != nil {
		return err
	}
	if ds.Kind == data.KindDynamic {
		return fmt.Errorf("%s is a dynamic dataset (timestamped edge events); data export writes static node-classification datasets only "+
			"(a graph, node features, labels and a split); train-dynamic reads it as it is: gnnkit train-dynamic --data %s", spec, spec)
	}
	var missing []string
	if ds.Graph == nil {
		missing = append(missing, "graph")
	}
	if ds.FeatureDim == 0 {
		missing = append(missing, "node features")
	}
	if ds.Labels == nil {
		missing = append(missing, "labels")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s has no %s; data export writes node-classification datasets, which need a graph, node features and labels",
			spec, strings.Join(missing, " or "))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	g := ds.Graph
	edges := 0
	err = writeBuffered(filepath.Join(dir, "edges.tsv"), func(w *bufio.Writer) error {
		for v := 0; v < g.NumDst; v++ {
			for _, u := range g.Indices[g.Offsets[v]:g.Offsets[v+1]] {
				switch {
				case ds.Directed: // CSR by destination: u -> v
					fmt.Fprintf(w, "%d\t%d\n", u, v)
				case int(u) > v: // an undirected edge once, src < dst, sorted
					fmt.Fprintf(w, "%d\t%d\n", v, u)
				default:
					continue
				}
				edges++
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = writeBuffered(filepath.Join(dir, "features.f32"), func(w *bufio.Writer) error {
		var b [4]byte
		for _, x := range ds.Features {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
			if _, err := w.Write(b[:]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	ints := func(name string, v []int32) error {
		return writeBuffered(filepath.Join(dir, name), func(w *bufio.Writer) error {
			for _, x := range v {
				fmt.Fprintln(w, x)
			}
			return nil
		})
	}
	for _, f := range []struct {
		name string
		v    []int32
	}{{"labels.txt", ds.Labels}, {"train.txt", ds.Train}, {"val.txt", ds.Val}, {"test.txt", ds.Test}} {
		if err := ints(f.name, f.v); err != nil {
			return err
		}
	}
	meta := map[string]any{"name": ds.Name, "kind": "static", "nodes": ds.NumNodes, "edges": edges, "directed": ds.Directed,
		"edge_file": "edges.tsv", "feature_file": "features.f32", "feature_dim": ds.FeatureDim, "classes": ds.NumClasses,
		"label_file": "labels.txt", "source": "exported by gnnkit data export from " + spec,
		"split": map[string]any{"train": len(ds.Train), "val": len(ds.Val), "test": len(ds.Test),
			"train_file": "train.txt", "val_file": "val.txt", "test_file": "test.txt"}}
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: %d nodes, %d edges, %d features, %d classes -> %s\n", spec, ds.NumNodes, edges, ds.FeatureDim, ds.NumClasses, dir)
	return atomicfile.WriteBytes(filepath.Join(dir, "meta.json"), append(b, '\n'))
}

// writeBuffered writes path atomically (internal/atomicfile) through a
// buffer.
func writeBuffered(path string, f func(*bufio.Writer) error) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		if err := f(bw); err != nil {
			return err
		}
		return bw.Flush()
	})
}
