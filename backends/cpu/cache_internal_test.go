package cpu

import (
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

// TestAllocReusesLargeObjects checks that a freed buffer above Go's
// small-object size (here a 1000x16 embedding table's gradient, 64000
// bytes) is recycled, cleared, by the next Alloc of its size instead of
// taking fresh pages from the heap.
func TestAllocReusesLargeObjects(t *testing.T) {
	b, err := New(core.BackendOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d := b.Device(0)
	x, err := d.Alloc(1000, 16)
	if err != nil {
		t.Fatal(err)
	}
	data := x.Buf.(*core.HostMem).Data
	for i := range data {
		data[i] = 1
	}
	d.Free(x)
	y, err := d.Alloc(1000, 16)
	if err != nil {
		t.Fatal(err)
	}
	got := y.Buf.(*core.HostMem).Data
	if &got[0] != &data[0] {
		t.Fatal("Alloc did not reuse the freed 64000-byte buffer")
	}
	for i, v := range got {
		if v != 0 {
			t.Fatalf("reused buffer not cleared: [%d] = %v", i, v)
		}
	}
	d.Free(y)
}
