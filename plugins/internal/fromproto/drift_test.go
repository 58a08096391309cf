package fromproto_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/plugins/internal/fromproto"
	"github.com/gnnkit/gnnkit/plugins/internal/toproto"
	pb "github.com/gnnkit/gnnkit/plugins/proto/scheduler/v1"
)

// fill sets every serialisable field of v (a pointer) to a non-zero value,
// recursively: a field that core adds later is filled too, so the round
// trip below fails until the protocol carries it.
func fill(v reflect.Value, path string, t *testing.T) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem(), path, t)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			fill(v.Field(i), path+"."+f.Name, t)
		}
	case reflect.String:
		v.SetString("cpu:1")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(3)
	case reflect.Uint8, reflect.Uint64:
		v.SetUint(1) // a valid TaskKind and OpKind
	case reflect.Float64:
		v.SetFloat(0.25)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := 0; i < 2; i++ {
			fill(s.Index(i), path+"[]", t)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, path+"{key}", t)
		fill(e, path+"{}", t)
		m.SetMapIndex(k, e)
		v.Set(m)
	default:
		t.Fatalf("%s: fill does not know kind %v; teach it", path, v.Kind())
	}
}

// TestEveryFieldCrossesTheWire guards against core growing a field that
// the protocol silently drops (Unit.Subgraph, Task.Ops and Plan.Metrics
// arrived this way).
func TestEveryFieldCrossesTheWire(t *testing.T) {
	t.Run("workload", func(t *testing.T) {
		w := &core.Workload{}
		fill(reflect.ValueOf(w), "Workload", t)
		got, err := fromproto.Workload(roundTrip(t, toproto.Workload(w), &pb.Workload{}))
		if err != nil {
			t.Fatal(err)
		}
		diff(t, got, w)
	})
	t.Run("plan", func(t *testing.T) {
		p := &core.Plan{}
		fill(reflect.ValueOf(p), "Plan", t)
		got, err := fromproto.Plan(roundTrip(t, toproto.Plan(p), &pb.Plan{}))
		if err != nil {
			t.Fatal(err)
		}
		diff(t, got, p)
	})
	t.Run("trace", func(t *testing.T) {
		tr := &core.Trace{}
		fill(reflect.ValueOf(tr), "Trace", t)
		got, err := fromproto.Trace(roundTrip(t, toproto.Trace(tr), &pb.Trace{}))
		if err != nil {
			t.Fatal(err)
		}
		diff(t, got, tr)
	})
}

func diff(t *testing.T, got, want any) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	var lost []string
	g, w := reflect.ValueOf(got).Elem(), reflect.ValueOf(want).Elem()
	for i := 0; i < w.NumField(); i++ {
		if f := w.Type().Field(i); f.IsExported() && !reflect.DeepEqual(g.Field(i).Interface(), w.Field(i).Interface()) {
			lost = append(lost, f.Name)
		}
	}
	t.Errorf("%T fields %s do not survive the protocol: add them to scheduler.proto (make proto) and to toproto/fromproto",
		want, strings.Join(lost, ", "))
}
