package graphpipe

import (
	"reflect"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

// TestSharedDevices: the devices hosting several stages' replicas, each
// with its (stage, replica) pairs in stage order, and nil where none
// does; deviceCount counts each device once.
func TestSharedDevices(t *testing.T) {
	d := func(ids ...string) []core.DeviceID {
		out := make([]core.DeviceID, len(ids))
		for i, id := range ids {
			out[i] = core.DeviceID(id)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		devs  [][]core.DeviceID
		want  map[core.DeviceID][]hosted
		count int
	}{
		{"disjoint", [][]core.DeviceID{d("cuda:0"), d("cuda:1", "cuda:2")}, nil, 3},
		{"a trunk on every branch's device", [][]core.DeviceID{d("cuda:0", "cuda:1"), d("cuda:0"), d("cuda:1")},
			map[core.DeviceID][]hosted{"cuda:0": {{0, 0}, {1, 0}}, "cuda:1": {{0, 1}, {2, 0}}}, 2},
		{"one device, three stages", [][]core.DeviceID{d("cpu:0"), d("cpu:0"), d("cpu:1"), d("cpu:0")},
			map[core.DeviceID][]hosted{"cpu:0": {{0, 0}, {1, 0}, {3, 0}}}, 2},
		{"no stages", nil, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Partition{Devices: tc.devs}
			if got := sharedDevices(p); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("sharedDevices: %v, want %v", got, tc.want)
			}
			if got := deviceCount(p); got != tc.count {
				t.Errorf("deviceCount: %d, want %d", got, tc.count)
			}
		})
	}
}
