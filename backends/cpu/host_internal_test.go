package cpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

// withHostMemory opens backends with limit bytes of host memory until the
// test ends.
func withHostMemory(t *testing.T, limit int64) {
	old := hostMemory
	hostMemory = func() int64 { return limit }
	t.Cleanup(func() { hostMemory = old })
}

// TestHostMemoryShared: the logical devices share the machine's memory,
// so an allocation past it fails with an *core.OOMError (not the Go
// runtime's fatal out of memory) whichever device asks, whatever the
// device caps, and freeing on one device makes room on another.
func TestHostMemoryShared(t *testing.T) {
	const limit = 1 << 20
	withHostMemory(t, limit)
	cases := []struct {
		name   string
		memCap int64
	}{
		{"no device cap", 0},
		{"device caps above the machine", 4 << 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := New(core.BackendOptions{Devices: 2, Threads: 1, MemCap: c.memCap})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			d0, d1 := b.Device(0), b.Device(1)
			if got := d0.HostMem().Stats().Cap; got != limit {
				t.Fatalf("HostMem cap %d, want %d", got, limit)
			}
			x, err := d0.Alloc(600 << 10 / 4)
			if err != nil {
				t.Fatal(err)
			}
			_, err = d1.Alloc(600 << 10 / 4)
			var oom *core.OOMError
			if !errors.Is(err, core.ErrOutOfMemory) || !errors.As(err, &oom) {
				t.Fatalf("alloc past the machine's memory: %v, want an *core.OOMError", err)
			}
			if oom.Device != d1.ID() || oom.Cap != limit || oom.Used != 600<<10 {
				t.Errorf("OOMError %+v, want device %s, cap %d, used %d", oom, d1.ID(), limit, 600<<10)
			}
			for _, want := range []string{"cpu:1: out of memory", "share this machine's memory", "--hidden"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "raise --device-mem") {
				t.Errorf("error %q suggests --device-mem, which cannot help", err)
			}
			if p := d1.Mem().Stats().Peak; p != 0 {
				t.Errorf("cpu:1 peak %d after a refused alloc, want 0", p)
			}
			d0.Free(x)
			y, err := d1.Alloc(600 << 10 / 4)
			if err != nil {
				t.Fatalf("alloc after freeing on the other device: %v", err)
			}
			d1.Free(y)
			if u := d0.HostMem().Stats().Used; u != 0 {
				t.Errorf("host memory in use after freeing all: %d", u)
			}
		})
	}
}

// TestAllocOverflow: a shape past what Go can allocate (its byte count
// may even overflow an int64) is an out-of-memory error, not a makeslice
// panic, also after another allocation (the accountant's used + need
// overflowed).
func TestAllocOverflow(t *testing.T) {
	b, err := New(core.BackendOptions{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d := b.Device(0)
	small, err := d.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free(small)
	for _, shape := range [][]int{
		{1433, 1_000_000_000_000_000_000},
		{1 << 31, 1 << 31},
		{1 << 62},
		{1<<61 - 1},
		{1 << 47},
	} {
		_, err := d.Alloc(shape...)
		if !errors.Is(err, core.ErrOutOfMemory) || !strings.Contains(err.Error(), "over 256 TiB") {
			t.Errorf("Alloc%v: %v, want an out-of-memory error saying it is over 256 TiB", shape, err)
		}
	}
}

// TestMaxDevices: at most MaxDevices logical devices, and the error names
// the valid range.
func TestMaxDevices(t *testing.T) {
	cases := []struct {
		devices int
		ok      bool
	}{
		{1, true},
		{MaxDevices, true},
		{MaxDevices + 1, false},
		{1_000_000, false},
		{99_999_999_999 + 1, false},
	}
	for _, c := range cases {
		b, err := New(core.BackendOptions{Devices: c.devices, Threads: 1})
		if c.ok {
			if err != nil {
				t.Errorf("%d devices: %v", c.devices, err)
				continue
			}
			if len(b.Devices()) != c.devices {
				t.Errorf("%d devices: got %d", c.devices, len(b.Devices()))
			}
			b.Close()
			continue
		}
		if err == nil {
			b.Close()
			t.Errorf("%d devices: no error", c.devices)
		} else if !strings.Contains(err.Error(), "cpu:0 to cpu:63") {
			t.Errorf("%d devices: %v, want the range cpu:0 to cpu:63", c.devices, err)
		}
	}
}
