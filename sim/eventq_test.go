package sim

import (
	"container/heap"
	"math/rand/v2"
	"testing"
	"time"
)

// boxedQ is eventQ through container/heap, as the simulator ran it
// before its typed push and pop.
type boxedQ struct{ eventQ }

func (q *boxedQ) Push(x any) { q.eventQ = append(q.eventQ, x.(event)) }
func (q *boxedQ) Pop() any {
	e := q.eventQ[len(q.eventQ)-1]
	q.eventQ = q.eventQ[:len(q.eventQ)-1]
	return e
}

// TestEventQOrder: the typed heap gives the events in container/heap's
// order, pushes and pops interleaved, with many ties in time and kind
// (seq breaks them).
func TestEventQOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var typed eventQ
	boxed := &boxedQ{}
	seq := 0
	for step := range 20000 {
		if r.IntN(3) > 0 || len(typed) == 0 {
			e := event{t: time.Duration(r.IntN(50)), seq: seq, kind: evKind(r.IntN(len(rank))), task: r.IntN(100)}
			seq++
			typed.push(e)
			heap.Push(boxed, e)
			continue
		}
		if a, b := typed.pop(), heap.Pop(boxed).(event); a != b {
			t.Fatalf("step %d: typed pop %+v, container/heap %+v", step, a, b)
		}
	}
	for len(typed) > 0 {
		if a, b := typed.pop(), heap.Pop(boxed).(event); a != b {
			t.Fatalf("draining: typed pop %+v, container/heap %+v", a, b)
		}
	}
	if boxed.Len() != 0 {
		t.Fatalf("container/heap holds %d more", boxed.Len())
	}
}
