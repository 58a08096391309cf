package engine_test

import (
	"slices"
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/engine"
)

// TestMoveTensor: values arrive intact between host-resident devices
// (one direct copy) and with a shape mismatch the error says so.
func TestMoveTensor(t *testing.T) {
	b, err := cpu.New(core.BackendOptions{Devices: 2, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a, c := b.Devices()[0], b.Devices()[1]
	src, _ := a.Alloc(3, 2)
	dst, _ := c.Alloc(3, 2)
	want := []float32{1, -2, 3.5, 4, 0, 6}
	if err := a.Upload(src, want); err != nil {
		t.Fatal(err)
	}
	if err := engine.MoveTensor(a, c, src, dst); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 6)
	if err := c.Download(got, dst); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("moved %v, want %v", got, want)
	}
	small, _ := c.Alloc(2, 2)
	if err := engine.MoveTensor(a, c, src, small); err == nil {
		t.Error("moving 6 values into 4 succeeded")
	}
}
