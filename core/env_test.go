package core_test

import (
	"testing"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
)

// TestEnvReleaseExcept: after a unit's last backward on a device only the
// gradients another device still fetches stay allocated; Release frees
// them too.
func TestEnvReleaseExcept(t *testing.T) {
	b, err := cpu.New(core.BackendOptions{Devices: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	dev := b.Devices()[0]
	env := core.NewEnv(dev, nil, nil, map[string]bool{"h": true, "y": true})
	alloc := func() *core.Tensor {
		x, err := env.Alloc(4, 4) // 64 bytes
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	env.SetValue("h", alloc())
	env.SetValue("y", alloc())
	if err := env.AccumGrad("h", alloc()); err != nil { // h came from another device
		t.Fatal(err)
	}
	if err := env.AccumGrad("y", alloc()); err != nil {
		t.Fatal(err)
	}
	if used := dev.Mem().Stats().Used; used != 4*64 {
		t.Fatalf("%d bytes allocated, want 256", used)
	}
	env.ReleaseExcept("h")
	if used := dev.Mem().Stats().Used; used != 64 {
		t.Errorf("after ReleaseExcept(h): %d bytes, want 64 (h's gradient)", used)
	}
	if env.Grad("h") == nil || env.Grad("y") != nil {
		t.Error("ReleaseExcept(h) should keep exactly h's gradient")
	}
	if _, err := env.Value("h"); err == nil {
		t.Error("values stay bound after ReleaseExcept")
	}
	env.Release()
	if used := dev.Mem().Stats().Used; used != 0 {
		t.Errorf("after Release: %d bytes, want 0", used)
	}
}
