package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gnnkit/gnnkit/data/internal/pack"
)

// TestEmbeddedIsCurrent regenerates the pack from the shared folder and
// checks that the committed embedded/cora.pack decodes to the same set.
func TestEmbeddedIsCurrent(t *testing.T) {
	root := os.Getenv("GNNKIT_SHARED_DATA")
	if root == "" {
		root = filepath.Join("..", "..", "..", "..", "shared", "data")
	}
	in := filepath.Join(root, "cora")
	if _, err := os.Stat(filepath.Join(in, "meta.json")); err != nil {
		t.Skipf("shared cora not found (%v); set GNNKIT_SHARED_DATA to run this test", err)
	}
	out := filepath.Join(t.TempDir(), "cora.pack")
	if err := run(in, out); err != nil {
		t.Fatal(err)
	}
	fresh, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile(filepath.Join("..", "..", "embedded", "cora.pack"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := pack.Decode(fresh)
	if err != nil {
		t.Fatal(err)
	}
	b, err := pack.Decode(committed)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Error("embedded/cora.pack is stale: run go generate ./data")
	}
}
