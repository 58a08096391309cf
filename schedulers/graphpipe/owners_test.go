package graphpipe

import (
	"slices"
	"testing"

	"github.com/gnnkit/gnnkit/core"
)

func TestSpreadOwners(t *testing.T) {
	for _, c := range []struct {
		name        string
		stageParams [][]int32
		devs        [][]core.DeviceID
		bytes       []float64
		want        []core.DeviceID
	}{
		{
			name:        "one device per stage: each stage owns what it reads",
			stageParams: [][]int32{{0, 1}, {2}},
			devs:        [][]core.DeviceID{{"a"}, {"b"}},
			bytes:       []float64{4, 8, 16},
			want:        []core.DeviceID{"a", "a", "b"},
		},
		{
			name:        "a replicated stage spreads, largest first",
			stageParams: [][]int32{{0, 1, 2, 3}},
			devs:        [][]core.DeviceID{{"a", "b"}},
			bytes:       []float64{32, 16, 16, 1},
			want:        []core.DeviceID{"a", "b", "b", "a"}, // a 33, b 32
		},
		{
			name: "a shared parameter goes to its least-loaded reader",
			// Parameter 2 is read by both stages; stage 0's replicas own
			// 0 and 1 first, so b (owning 1 byte) takes it.
			stageParams: [][]int32{{0, 1}, {2}},
			devs:        [][]core.DeviceID{{"a", "b"}, {"a", "b", "c"}},
			bytes:       []float64{8, 1, 4},
			want:        []core.DeviceID{"a", "b", "c"},
		},
		{
			name:        "ties go to the earlier reader; unread parameters to none",
			stageParams: [][]int32{{1}, {0, 1}},
			devs:        [][]core.DeviceID{{"b"}, {"a"}},
			bytes:       []float64{5, 5, 7},
			want:        []core.DeviceID{"a", "b", ""},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := spreadOwners(c.stageParams, c.devs, c.bytes); !slices.Equal(got, c.want) {
				t.Errorf("spreadOwners = %v, want %v", got, c.want)
			}
		})
	}
}
