package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrainRowNormSignedFeatures: the default --feature-norm row keeps
// signed features (synthetic:sbm) learnable. Dividing each row by its
// plain sum scaled rows that sum to nearly 0 up thousands of times and
// flipped the signs of rows with a negative sum: test accuracy 0.30 where
// --feature-norm none gives 0.99.
func TestTrainRowNormSignedFeatures(t *testing.T) {
	spec := "synthetic:sbm,nodes=2000,classes=8,feat=64"
	row := trainJSON(t, "--epochs", "50", "--data", spec)
	none := trainJSON(t, "--epochs", "50", "--data", spec, "--feature-norm", "none")
	if row.TestAcc < 0.8 || none.TestAcc < 0.9 {
		t.Errorf("test accuracy %.3f with --feature-norm row, %.3f with none; want >= 0.8 and >= 0.9", row.TestAcc, none.TestAcc)
	}
}

// TestEdgeListIDErrors: an edge-list file whose ids are too large or too
// sparse to be node numbers gets an error saying what a command-line user
// can do (renumber the ids), not the Go options Remap and NumNodes.
func TestEdgeListIDErrors(t *testing.T) {
	for _, c := range []struct{ name, line, want string }{
		{"beyond int32", "0\t99999999999\n", "dst node id 99999999999 is too large"},
		{"sparse", "0\t2000000000\n", "2000000001 mostly isolated nodes"},
	} {
		p := filepath.Join(t.TempDir(), "g.tsv")
		if err := os.WriteFile(p, []byte(c.line), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"data", "info", p}, {"train", "--data", p, "--epochs", "1", "-q"}} {
			_, err := run(t, args...)
			if err == nil {
				t.Fatalf("%s: %v: no error", c.name, args)
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) || !strings.Contains(msg, "renumber them densely from 0") || strings.Contains(msg, "Remap") || strings.Contains(msg, "NumNodes") {
				t.Errorf("%s: %v: %q; want %q and a hint to renumber, no Go option names", c.name, args, msg, c.want)
			}
		}
	}
}

// sharedData is the repository's shared dataset folder, "" when absent.
func sharedData(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "data", name)
	if _, err := os.Stat(filepath.Join(dir, "meta.json")); err != nil {
		return ""
	}
	return dir
}

// TestDataInfoDynamicSynthetic: data info takes the synthetic dynamic
// spec that train-dynamic takes (it said: unknown kind "dsbm").
func TestDataInfoDynamicSynthetic(t *testing.T) {
	out, err := run(t, "data", "info", "--json", "synthetic:dsbm,nodes=300,snapshots=12,edges=40")
	if err != nil {
		t.Fatalf("data info: %v\n%s", err, out)
	}
	var in struct {
		Kind       string `json:"kind"`
		Nodes      int    `json:"nodes"`
		Edges      int    `json:"edges"`
		CSREntries int    `json:"csr_entries"`
		Snapshots  int    `json:"snapshots"`
	}
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if in.Kind != "dynamic" || in.Nodes != 300 || in.Edges == 0 || in.CSREntries == 0 || in.CSREntries > in.Edges || in.Snapshots != 12 {
		t.Errorf("info %+v", in)
	}
	if out, err := run(t, "data", "info", "dsbm"); err != nil || !strings.Contains(out, "dynamic") {
		t.Errorf("data info dsbm: %v\n%s", err, out)
	}
	if _, err := run(t, "data", "info", "synthetic:dsbm,color=red"); err == nil || !strings.Contains(err.Error(), `unknown key "color"`) {
		t.Errorf("bad dsbm spec: %v", err)
	}
}

// TestDataExportDynamic: data export refuses a dynamic dataset saying so,
// and what reads it instead (it said the dataset "has no graph, features
// or labels", though it has a graph); a static one lacking features or
// labels is told which it lacks.
func TestDataExportDynamic(t *testing.T) {
	specs := []string{"synthetic:dsbm,nodes=300,snapshots=12,edges=40"}
	if dir := sharedData(t, "bitcoin_alpha"); dir != "" {
		specs = append(specs, dir)
	}
	for _, spec := range specs {
		_, err := run(t, "data", "export", spec, filepath.Join(t.TempDir(), "out"))
		if err == nil || !strings.Contains(err.Error(), "is a dynamic dataset") || !strings.Contains(err.Error(), "gnnkit train-dynamic --data "+spec) ||
			strings.Contains(err.Error(), "no graph") {
			t.Errorf("export %s: %v", spec, err)
		}
	}
	_, err := run(t, "data", "export", "synthetic:rmat,nodes=100,edges=300,feat=0", filepath.Join(t.TempDir(), "out"))
	if err == nil || !strings.Contains(err.Error(), "has no node features;") {
		t.Errorf("export without features: %v", err)
	}
}
