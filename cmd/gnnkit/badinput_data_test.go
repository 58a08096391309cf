package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
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

// writeFolder writes a dataset folder (meta.json among the files) and
// returns its path.
func writeFolder(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tinyDynamicFolder is a dynamic dataset in the shared layout: 4 nodes, 3
// events; meta.json gives no positive/negative edge counts.
func tinyDynamicFolder(t *testing.T, edges, nodeIDs string, nodes int) string {
	return writeFolder(t, "dyn", map[string]string{
		"meta.json": `{"name": "dyn", "kind": "dynamic", "nodes": ` + strconv.Itoa(nodes) + `, "edges": 3, "directed": true,
			"edge_columns": ["src", "dst", "weight", "time"], "node_id_file": "node_ids.txt", "feature_dim": 0, "classes": 0}`,
		"edges.tsv":    edges,
		"node_ids.txt": nodeIDs,
	})
}

// TestDataFolderBadInput: data info and train-dynamic on a dataset folder
// in the shared layout whose files are wrong in ways that used to pass or
// crash.
func TestDataFolderBadInput(t *testing.T) {
	const edges = "0\t1\t5\t100\n1\t2\t-3\t100\n2\t3\t1\t150\n"
	for _, c := range []struct {
		name string
		dir  func(t *testing.T) string
		want string
	}{
		// A made-up node count ran out of memory allocating the graph.
		{"nodes huge", func(t *testing.T) string { return tinyDynamicFolder(t, edges, "10\n20\n30\n40\n", 2000000000) },
			"dyn/node_ids.txt: 4 lines, but meta.json says nodes = 2000000000"},
		{"node ids repeat", func(t *testing.T) string { return tinyDynamicFolder(t, edges, "10\n20\n30\n20\n", 4) },
			"dyn/node_ids.txt:4: original id 20 repeats line 2"},
		{"weight 0", func(t *testing.T) string {
			return tinyDynamicFolder(t, "0\t1\t5\t100\n1\t2\t0\t100\n2\t3\t1\t150\n", "10\n20\n30\n40\n", 4)
		}, "dyn/edges.tsv:2: weight 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := c.dir(t)
			for _, args := range [][]string{{"data", "info", dir}, {"train-dynamic", "--data", dir, "--snapshot-seconds", "50", "--epochs", "1"}} {
				_, err := run(t, args...)
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%v: %v, want %q", args[0], err, c.want)
				}
			}
		})
	}
}

// TestDataFolderBOM: a UTF-8 byte-order mark at the start of meta.json and
// of the text files is ignored (meta.json failed: invalid character 'ï').
func TestDataFolderBOM(t *testing.T) {
	const bom = "\xef\xbb\xbf"
	dir := tinyDynamicFolder(t, bom+"0\t1\t5\t100\n1\t2\t-3\t100\n2\t3\t1\t150\n", bom+"10\n20\n30\n40\n", 4)
	meta := filepath.Join(dir, "meta.json")
	b, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(meta, append([]byte(bom), b...), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "data", "info", dir)
	if err != nil || !strings.Contains(out, "dynamic") {
		t.Fatalf("data info: %v\n%s", err, out)
	}
	if cora := sharedData(t, "cora"); cora != "" {
		cp := t.TempDir()
		for _, f := range []string{"edges.tsv", "features.f32", "labels.txt", "train.txt", "val.txt", "test.txt", "README.md"} {
			b, err := os.ReadFile(filepath.Join(cora, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(cp, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, err := os.ReadFile(filepath.Join(cora, "meta.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cp, "meta.json"), append([]byte(bom), b...), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := run(t, "data", "info", cp); err != nil || !strings.Contains(out, "2708") {
			t.Errorf("cora with a BOM in meta.json: %v\n%s", err, out)
		}
	}
}
