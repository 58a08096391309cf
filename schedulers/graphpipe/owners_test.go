package graphpipe

import (
	"fmt"
	"math"
	"math/rand/v2"
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

// TestOwnedBound: no replica of a stage owns more under spreadOwners
// than ownedBound, the bound the DPs charge a replica's optimizer state
// by — on random tensor sizes and replica counts, also where an earlier
// stage on other devices reads some of the stage's parameters.
func TestOwnedBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		n := 1 + rng.IntN(12)
		bytes := make([]float64, n)
		for i := range bytes {
			bytes[i] = float64(1 + rng.IntN(1<<rng.IntN(20)))
		}
		d := 1 + rng.IntN(8)
		var stage []int32
		for i := range n {
			stage = append(stage, int32(i))
		}
		var devs []core.DeviceID
		for r := range d {
			devs = append(devs, core.DeviceID(fmt.Sprintf("r%d", r)))
		}
		stageParams, stageDevs := [][]int32{stage}, [][]core.DeviceID{devs}
		if trial%2 == 1 { // an earlier stage on devices of its own reads a few
			var early []int32
			for i := range n {
				if rng.IntN(3) == 0 {
					early = append(early, int32(i))
				}
			}
			stageParams = [][]int32{early, stage}
			stageDevs = [][]core.DeviceID{{"e0", "e1"}, devs}
		}
		var total, largest float64
		for _, b := range bytes {
			total += b
			largest = math.Max(largest, b)
		}
		owned := map[core.DeviceID]float64{}
		for p, o := range spreadOwners(stageParams, stageDevs, bytes) {
			owned[o] += bytes[p]
		}
		bound := ownedBound(total, largest, d)
		for _, r := range devs {
			if owned[r] > bound*(1+1e-12) {
				t.Fatalf("trial %d: %s owns %v bytes > bound %v (sizes %v, %d replicas)", trial, r, owned[r], bound, bytes, d)
			}
		}
	}
}
