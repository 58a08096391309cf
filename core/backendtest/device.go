package backendtest

import (
	"errors"
	"math"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

func testDevice(t *testing.T, b core.Backend) {
	devs := b.Devices()
	t.Run("IDs", func(t *testing.T) {
		seen := map[core.DeviceID]bool{}
		for i, d := range devs {
			id := d.ID()
			if seen[id] {
				t.Errorf("device %d: duplicate id %s", i, id)
			}
			seen[id] = true
			be, _, err := core.ParseDeviceID(string(id))
			if err != nil {
				t.Errorf("device %d: id %q: %v", i, id, err)
			} else if be != b.Name() {
				t.Errorf("device %d: id %q does not name backend %q", i, id, b.Name())
			}
			info := d.Info()
			if info.ID != id {
				t.Errorf("device %d: Info().ID = %q, want %q", i, info.ID, id)
			}
			if info.Backend != b.Name() {
				t.Errorf("device %d: Info().Backend = %q, want %q", i, info.Backend, b.Name())
			}
			if info.MemCap != d.Mem().Stats().Cap {
				t.Errorf("device %d: Info().MemCap = %d, but the accountant's cap is %d", i, info.MemCap, d.Mem().Stats().Cap)
			}
			if d.Kernels() == nil {
				t.Errorf("device %d: Kernels() is nil", i)
			}
		}
	})
	for _, d := range devs {
		t.Run(string(d.ID()), func(t *testing.T) { testOneDevice(t, b, d) })
	}
}

func testOneDevice(t *testing.T, b core.Backend, d core.Device) {
	mem := d.Mem()
	if mem == nil {
		t.Fatal("Mem() is nil")
	}
	t.Run("AllocZeroFills", func(t *testing.T) {
		// Dirty a buffer and free it first, so an allocator that reuses
		// memory must clear it.
		x, err := d.Alloc(64, 33)
		if err != nil {
			t.Fatal(err)
		}
		junk := make([]float32, x.Len())
		for i := range junk {
			junk[i] = float32(i) + 0.5
		}
		if err := d.Upload(x, junk); err != nil {
			t.Fatal(err)
		}
		d.Free(x)
		for _, shape := range [][]int{{64, 33}, {7}, {3, 4, 5}, {0, 8}, {5, 0}, {}} {
			y, err := d.Alloc(shape...)
			if err != nil {
				t.Fatalf("Alloc%v: %v", shape, err)
			}
			if y.Len() != core.NumElems(shape) || y.Rows()*y.Cols() != y.Len() {
				t.Errorf("Alloc%v: tensor %v has %d elements", shape, y, y.Len())
			}
			if y.Device() != d.ID() {
				t.Errorf("Alloc%v: tensor on %q, want %q", shape, y.Device(), d.ID())
			}
			got := make([]float32, y.Len())
			if err := d.Download(got, y); err != nil {
				t.Fatal(err)
			}
			for i, v := range got {
				if v != 0 {
					t.Errorf("Alloc%v: element %d = %v, want 0", shape, i, v)
					break
				}
			}
			d.Free(y)
		}
		if _, err := d.Alloc(3, -1); err == nil {
			t.Error("Alloc(3, -1) succeeded, want an error")
		}
	})
	t.Run("Accounting", func(t *testing.T) {
		base := mem.Stats().Used
		hold, err := d.Alloc(100)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Free(hold)
		afterHold := mem.Stats().Used
		if afterHold-base < 400 {
			t.Errorf("Alloc(100) charged %d bytes, want >= 400", afterHold-base)
		}
		mem.ResetPeak()
		x, err := d.Alloc(1000)
		if err != nil {
			t.Fatal(err)
		}
		y, err := d.Alloc(2000)
		if err != nil {
			t.Fatal(err)
		}
		if used := mem.Stats().Used; used-afterHold < 12000 {
			t.Errorf("after Alloc(1000), Alloc(2000): %d bytes more in use, want >= 12000", used-afterHold)
		}
		d.Free(x)
		d.Free(y)
		st := mem.Stats()
		if st.Used != afterHold {
			t.Errorf("after Free: %d bytes in use, want %d", st.Used, afterHold)
		}
		if st.Peak < afterHold+12000 {
			t.Errorf("peak %d, want >= %d", st.Peak, afterHold+12000)
		}
		// Double free, nil and foreign tensors are no-ops.
		d.Free(x)
		d.Free(nil)
		host, _ := core.NewHostTensor(make([]float32, 100), 10, 10)
		d.Free(host)
		d.Free(&core.Tensor{Shape: []int{4}})
		for _, o := range b.Devices() {
			if o.ID() == d.ID() {
				continue
			}
			z, err := o.Alloc(100)
			if err != nil {
				t.Fatal(err)
			}
			d.Free(z)
			if z.Len() != 100 {
				t.Error("foreign Free changed the tensor")
			}
			o.Free(z)
		}
		if used := mem.Stats().Used; used != afterHold {
			t.Errorf("after double/foreign/nil Free: %d bytes in use, want %d", used, afterHold)
		}
		mem.ResetPeak()
		if p := mem.Stats().Peak; p != afterHold {
			t.Errorf("ResetPeak: peak %d, want %d", p, afterHold)
		}
	})
	t.Run("OutOfMemory", func(t *testing.T) {
		old := mem.Stats().Cap
		defer mem.SetCap(old)
		used := mem.Stats().Used
		capBytes := used + 1000
		mem.SetCap(capBytes)
		ok, err := d.Alloc(200) // 800 bytes: fits
		if err != nil {
			t.Fatalf("Alloc of 800 bytes under a cap with 1000 free: %v", err)
		}
		defer d.Free(ok)
		free := capBytes - mem.Stats().Used
		x, err := d.Alloc(1000) // 4000 bytes: does not
		if err == nil {
			d.Free(x)
			t.Fatal("Alloc over the cap succeeded")
		}
		if !errors.Is(err, core.ErrOutOfMemory) {
			t.Errorf("Alloc over the cap: %v; want errors.Is(err, core.ErrOutOfMemory)", err)
		}
		var oom *core.OOMError
		if !errors.As(err, &oom) {
			t.Fatalf("Alloc over the cap: %T %v; want an *core.OOMError", err, err)
		}
		if oom.Need < 4000 {
			t.Errorf("OOMError.Need = %d, want >= 4000", oom.Need)
		}
		if oom.Free != free {
			t.Errorf("OOMError.Free = %d, want %d", oom.Free, free)
		}
		if oom.Cap != capBytes {
			t.Errorf("OOMError.Cap = %d, want %d", oom.Cap, capBytes)
		}
		if oom.Device != d.ID() {
			t.Errorf("OOMError.Device = %q, want %q", oom.Device, d.ID())
		}
		if u := mem.Stats().Used; u != capBytes-free {
			t.Errorf("a failed Alloc changed the bytes in use: %d, want %d", u, capBytes-free)
		}
	})
	t.Run("UploadDownload", func(t *testing.T) {
		x, err := d.Alloc(3, 5)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Free(x)
		src := []float32{1, -2, 3.5, float32(math.Inf(1)), 0, 1e-38, -0, 7, 8, 9, 10, 11, 12, 13, 14}
		if err := d.Upload(x, src); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, 15)
		if err := d.Download(got, x); err != nil {
			t.Fatal(err)
		}
		for i := range src {
			if got[i] != src[i] {
				t.Errorf("round trip [%d] = %v, want %v", i, got[i], src[i])
			}
		}
		if err := call(t, "Upload short", func() error { return d.Upload(x, src[:3]) }); err == nil {
			t.Error("Upload of 3 values into 15 succeeded")
		}
		if err := call(t, "Download short", func() error { return d.Download(got[:4], x) }); err == nil {
			t.Error("Download of 15 values into 4 succeeded")
		}
	})
	t.Run("Stream", func(t *testing.T) {
		s := d.NewStream()
		if s == nil {
			t.Fatal("NewStream is nil")
		}
		ev := s.Record()
		if ev == nil {
			t.Fatal("Record returned nil")
		}
		ev.Wait()
		s.Wait(ev)
		if err := s.Sync(); err != nil {
			t.Errorf("Sync: %v", err)
		}
	})
}

// testEveryDevice runs a small GEMM and SpMM on every device, so a
// multi-device backend is checked beyond device 0.
func testEveryDevice(t *testing.T, b core.Backend) {
	g := RMAT(50, 300, 3)
	for i, d := range b.Devices() {
		t.Run(string(d.ID()), func(t *testing.T) {
			e := newEnv(t, d, uint64(i))
			gemmCase(e, false, true, 33, 20, 17, 1, 0, 0.3)
			spmmCase(e, "rmat", g, core.ReduceMean, 1, 17)
		})
	}
}

// Opener opens a backend with options, for RunOptions.
type Opener func(t *testing.T, opts core.BackendOptions) core.Backend

// RunOptions checks that a backend honours core.BackendOptions: the
// device count, the memory cap given at open (enforced with an
// *core.OOMError and reported in Info) and, for host backends, the
// thread count in Info. Backends that cannot expose several devices may
// skip by returning nil for Devices > 1.
func RunOptions(t *testing.T, open Opener) {
	t.Run("Devices", func(t *testing.T) {
		for _, n := range []int{1, 3} {
			b := open(t, core.BackendOptions{Devices: n})
			if b == nil {
				t.Skipf("backend cannot open %d devices", n)
			}
			if got := len(b.Devices()); got != n {
				t.Errorf("Devices=%d: backend has %d devices", n, got)
			}
			b.Close()
		}
	})
	t.Run("MemCap", func(t *testing.T) {
		const capBytes = 1 << 16
		b := open(t, core.BackendOptions{MemCap: capBytes})
		if b == nil {
			t.Skip("backend cannot open with a cap")
		}
		defer b.Close()
		for _, d := range b.Devices() {
			if c := d.Info().MemCap; c != capBytes {
				t.Errorf("%s: Info().MemCap = %d, want %d", d.ID(), c, capBytes)
			}
			if c := d.Mem().Stats().Cap; c != capBytes {
				t.Errorf("%s: accountant cap = %d, want %d", d.ID(), c, capBytes)
			}
			used := d.Mem().Stats().Used
			x, err := d.Alloc(capBytes / 4) // one element more than fits, with anything in use
			if used == 0 && err != nil {
				t.Errorf("%s: Alloc of exactly the cap: %v", d.ID(), err)
			}
			d.Free(x)
			_, err = d.Alloc(capBytes/4 + 1)
			var oom *core.OOMError
			if !errors.Is(err, core.ErrOutOfMemory) || !errors.As(err, &oom) {
				t.Fatalf("%s: Alloc over the cap: %v, want an *core.OOMError", d.ID(), err)
			}
			if oom.Need < capBytes+4 || oom.Free != capBytes-used || oom.Cap != capBytes {
				t.Errorf("%s: OOMError{Need %d, Free %d, Cap %d}, want {>= %d, %d, %d}", d.ID(), oom.Need, oom.Free, oom.Cap, capBytes+4, capBytes-used, capBytes)
			}
		}
	})
	t.Run("Threads", func(t *testing.T) {
		b := open(t, core.BackendOptions{Threads: 2, Devices: 2})
		if b == nil {
			t.Skip("backend cannot open with threads")
		}
		defer b.Close()
		for _, d := range b.Devices() {
			if th := d.Info().Threads; th != 0 && th != 2 {
				t.Errorf("%s: Info().Threads = %d, want 2", d.ID(), th)
			}
		}
	})
}
