package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/data"
)

// TestDataExport: an exported dataset loads back as the same dataset, so
// gnnkit and other tools reading the folder train on the same graph.
func TestDataExport(t *testing.T) {
	for _, spec := range []string{"cora", "synthetic:rmat,nodes=500,edges=3000,feat=8,classes=3,train=5,val=50,test=100"} {
		t.Run(strings.SplitN(spec, ",", 2)[0], func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ds")
			out, err := run(t, "data", "export", spec, dir)
			if err != nil || !strings.Contains(out, "nodes") {
				t.Fatalf("export: %v\n%s", err, out)
			}
			want, err := data.Open(spec)
			if err != nil {
				t.Fatal(err)
			}
			got, err := data.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got.NumNodes != want.NumNodes || got.Graph.NumEdges() != want.Graph.NumEdges() || !slices.Equal(got.Graph.Offsets, want.Graph.Offsets) ||
				!slices.Equal(got.Graph.Indices, want.Graph.Indices) || !slices.Equal(got.Features, want.Features) || !slices.Equal(got.Labels, want.Labels) ||
				!slices.Equal(got.Train, want.Train) || !slices.Equal(got.Val, want.Val) || !slices.Equal(got.Test, want.Test) || got.NumClasses != want.NumClasses {
				t.Errorf("%s does not load back as %s", dir, spec)
			}
			if spec == "cora" {
				if shared, err := os.ReadFile("../../../shared/data/cora/edges.tsv"); err == nil {
					mine, _ := os.ReadFile(filepath.Join(dir, "edges.tsv"))
					if string(mine) != string(shared) {
						t.Errorf("edges.tsv differs from shared/data/cora's")
					}
				}
			}
		})
	}
}
