package core

import (
	"errors"
	"strings"
	"testing"
)

func TestRegistry(t *testing.T) {
	RegisterScheduler("zz-test-b", func(map[string]string) (Scheduler, error) { return nil, nil })
	RegisterScheduler("zz-test-a", func(map[string]string) (Scheduler, error) { return nil, nil })
	names := Schedulers()
	ia, ib := -1, -1
	for i, n := range names {
		switch n {
		case "zz-test-a":
			ia = i
		case "zz-test-b":
			ib = i
		}
	}
	if ia < 0 || ib < 0 || ia > ib {
		t.Errorf("Schedulers() = %v, want both, sorted", names)
	}
	_, err := NewScheduler("nope", nil)
	if !errors.Is(err, ErrUnknownScheduler) || !strings.Contains(err.Error(), "zz-test-a") {
		t.Errorf("unknown scheduler error %v should list registered names", err)
	}
	_, err = OpenBackend("cuda", BackendOptions{})
	if !errors.Is(err, ErrUnknownBackend) || !strings.Contains(err.Error(), "-tags cuda") {
		t.Errorf("unknown backend error %v should name the build tag", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("duplicate registration did not panic")
		}
	}()
	RegisterScheduler("zz-test-a", func(map[string]string) (Scheduler, error) { return nil, nil })
}
