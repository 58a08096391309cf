package host_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/plugins/host"
	"github.com/gnnkit/gnnkit/schedulers/blad"
)

// TestBLADOverTheWire: BLAD served as a plugin process places skewed
// snapshot groups exactly as in process, from the group costs the
// workload carries as plain data (core.Workload.Groups); without them it
// would place equal costs differently.
func TestBLADOverTheWire(t *testing.T) {
	w := testWorkload()
	w.Batch = nil
	costs := []float64{12, 1, 1, 1, 1, 1, 1, 12}
	for i, c := range costs {
		w.Batch = append(w.Batch, int32(i))
		w.Groups = append(w.Groups, core.GroupInfo{Key: 100 + i, Graph: c / 4, Dense: 3 * c / 4, Samples: 10})
	}
	ctx := context.Background()
	local, err := blad.New().Schedule(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := local.Validate(w); err != nil {
		t.Fatal(err)
	}
	p := mustLaunch(t, "blad", host.Options{})
	remote, err := p.Scheduler().Schedule(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	place := func(pl *core.Plan) map[int32]core.DeviceID {
		out := map[int32]core.DeviceID{}
		for _, task := range pl.Tasks {
			if task.Kind == core.TaskForward {
				out[pl.Units[task.Unit].Targets[0]] = task.Device
			}
		}
		return out
	}
	if got, want := place(remote), place(local); !reflect.DeepEqual(got, want) {
		t.Fatalf("over the wire BLAD placed %v, in process %v", got, want)
	}
	// The two heavy groups go to different devices: the costs arrived.
	if pl := place(remote); pl[0] == pl[7] {
		t.Errorf("the two heavy groups share %s: the plugin did not see the costs (%v)", pl[0], pl)
	}
	noCosts := *w
	noCosts.Groups = nil
	plain, err := blad.New().Schedule(ctx, &noCosts)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(place(plain), place(remote)) {
		t.Errorf("placement without costs %v equals the one with: the test cannot tell", place(plain))
	}
}
