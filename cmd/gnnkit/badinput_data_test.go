package main

import (
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
