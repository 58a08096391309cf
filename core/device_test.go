package core

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
)

func TestMemAccountant(t *testing.T) {
	m := NewMemAccountant("cpu:0", 100)
	if err := m.Reserve(60, "a"); err != nil {
		t.Fatal(err)
	}
	err := m.Reserve(50, "features")
	var oom *OOMError
	if !errors.Is(err, ErrOutOfMemory) || !errors.As(err, &oom) {
		t.Fatalf("err = %v, want *OOMError", err)
	}
	if oom.Need != 50 || oom.Free != 40 || oom.Cap != 100 {
		t.Errorf("OOMError %+v", oom)
	}
	for _, s := range []string{"cpu:0", "features", "--scheduler cherry", "free"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q lacks %q", err, s)
		}
	}
	// A tensor's description is formatted only when it does not fit.
	err = m.ReserveTensor(48, []int{4, 3})
	if !errors.As(err, &oom) || oom.What != "tensor [4 3]" || !strings.Contains(err.Error(), "tensor [4 3]") {
		t.Errorf("ReserveTensor over the cap: %v", err)
	}
	if err := m.ReserveTensor(40, []int{10}); err != nil {
		t.Fatal(err)
	}
	// A need so large that used + need overflows is refused, not charged.
	if err := m.Reserve(math.MaxInt64-10, "huge"); !errors.Is(err, ErrOutOfMemory) {
		t.Errorf("Reserve(MaxInt64-10) with 100 in use: %v, want out of memory", err)
	}
	m.Release(40)
	m.Release(60)
	if s := m.Stats(); s.Used != 0 || s.Peak != 100 {
		t.Errorf("stats %+v", s)
	}
	m.ResetPeak()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Go(func() {
			for j := 0; j < 100; j++ {
				if m.Reserve(1, "") == nil {
					m.Release(1)
				}
			}
		})
	}
	wg.Wait()
	if s := m.Stats(); s.Used != 0 || s.Peak > 8 {
		t.Errorf("after concurrent use: %+v", s)
	}
}

func TestParseDeviceID(t *testing.T) {
	if b, i, err := ParseDeviceID("cpu:3"); err != nil || b != "cpu" || i != 3 {
		t.Errorf("got %s %d %v", b, i, err)
	}
	if b, i, err := ParseDeviceID(" cuda:0 "); err != nil || b != "cuda" || i != 0 {
		t.Errorf("spaces around a list item: got %s %d %v", b, i, err)
	}
	for _, bad := range []string{"cpu", ":1", "cpu:-1", "cpu:x", "cuda:01", "cuda:+1", "cuda:00"} {
		if _, _, err := ParseDeviceID(bad); err == nil {
			t.Errorf("ParseDeviceID(%q) accepted", bad)
		}
	}
}
