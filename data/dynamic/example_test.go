package dynamic_test

import (
	"fmt"

	"github.com/gnnkit/gnnkit/data"
	"github.com/gnnkit/gnnkit/data/dynamic"
)

// Cutting a stream of timestamped edges into snapshot groups for link
// prediction: ten seconds per snapshot give six snapshots; with a BPTT
// window of two, snapshots 2..5 are targets, split 70/10/20 by position
// (targets before snapshot 4 train, 4 validates, 5 tests). Each group
// has its own node set (local ids; Nodes maps them back) and scores each
// target edge (a query) against seeded negatives: one per query in
// training, two in evaluation. A negative keeps the query's node and
// draws the other end from the group's nodes, so on a graph this small
// it often hits the true edge, and is then labelled 1.
func ExampleBuild() {
	var ev []data.Event
	add := func(t int64, pairs ...int32) { // src, dst, src, dst, ...
		for i := 0; i+1 < len(pairs); i += 2 {
			ev = append(ev, data.Event{Src: pairs[i], Dst: pairs[i+1], Weight: 1, Time: t})
		}
	}
	add(0, 0, 1, 1, 2)
	add(10, 2, 3)
	add(20, 3, 4, 4, 5, 0, 5)
	add(30, 1, 3)
	add(40, 5, 6, 6, 7, 2, 7)
	add(50, 7, 0, 6, 1)
	d := &data.Dataset{Name: "toy", Kind: data.KindDynamic, NumNodes: 8, Directed: true, Events: ev}
	snaps, err := d.Snapshots(10)
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := dynamic.Build(snaps, d.NumNodes, dynamic.Options{Window: 2, NegTrain: 1, NegEval: 2, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d snapshots, %s task, val from %d, test from %d\n", s.Snapshots, s.Task, s.TrainEnd, s.ValEnd)
	for _, part := range []struct {
		name   string
		groups []*dynamic.Group
	}{{"train", s.Train}, {"val", s.Val}, {"test", s.Test}} {
		for _, g := range part.groups {
			queries := map[int32]bool{}
			for _, q := range g.Query {
				queries[q] = true
			}
			fmt.Printf("%-5s target %d: %d window edges, nodes %v, pairs %d (queries %d)\n",
				part.name, g.Target, g.Edges, g.Nodes, len(g.Labels), len(queries))
		}
	}
	g := s.Test[0]
	fmt.Print("test pairs (dst<-src:label):")
	for k := range g.Labels {
		fmt.Printf(" %d<-%d:%d", g.Nodes[g.Dst[k]], g.Nodes[g.Src[k]], g.Labels[k])
	}
	fmt.Printf("\nfeatures: %d per node (degree buckets and noise)\n", s.FeatureDim)
	// Output:
	// 6 snapshots, link task, val from 4, test from 5
	// train target 2: 3 window edges, nodes [0 1 2 3 4 5], pairs 6 (queries 3)
	// train target 3: 4 window edges, nodes [0 1 2 3 4 5], pairs 2 (queries 1)
	// val   target 4: 4 window edges, nodes [0 1 2 3 4 5 6 7], pairs 9 (queries 3)
	// test  target 5: 4 window edges, nodes [0 1 2 3 5 6 7], pairs 6 (queries 2)
	// test pairs (dst<-src:label): 0<-7:1 0<-2:0 0<-7:1 1<-6:1 1<-5:0 1<-6:1
	// features: 48 per node (degree buckets and noise)
}

// Edge-sign classification: each target edge is labelled by the sign of
// its weight (a rating: 1 positive, 0 negative), with no negative
// sampling, so a group has exactly as many pairs as its target snapshot
// has edges. Four one-second snapshots with a window of one give targets
// 1..3; the default 70/10/20 split of four snapshots trains on 1 and 2,
// tests on 3, and leaves no target for validation.
func ExampleBuild_edgeSign() {
	ev := []data.Event{
		{Src: 0, Dst: 1, Weight: 1, Time: 0}, {Src: 1, Dst: 2, Weight: -1, Time: 0},
		{Src: 2, Dst: 0, Weight: 1, Time: 1},
		{Src: 0, Dst: 2, Weight: -1, Time: 2}, {Src: 2, Dst: 1, Weight: 1, Time: 2}, {Src: 1, Dst: 0, Weight: 1, Time: 2},
		{Src: 3, Dst: 0, Weight: -1, Time: 3},
	}
	d := &data.Dataset{Name: "ratings", Kind: data.KindDynamic, NumNodes: 4, Directed: true, Events: ev}
	snaps, err := d.Snapshots(1)
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := dynamic.Build(snaps, d.NumNodes, dynamic.Options{Window: 1, Task: dynamic.EdgeSign})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d train, %d val, %d test groups\n", len(s.Train), len(s.Val), len(s.Test))
	for _, g := range append(append(s.Train, s.Val...), s.Test...) {
		fmt.Printf("target %d (dst<-src:label):", g.Target)
		for k := range g.Labels {
			fmt.Printf(" %d<-%d:%d", g.Nodes[g.Dst[k]], g.Nodes[g.Src[k]], g.Labels[k])
		}
		fmt.Println()
	}
	// Output:
	// 2 train, 0 val, 1 test groups
	// target 1 (dst<-src:label): 0<-2:1
	// target 2 (dst<-src:label): 2<-0:0 1<-2:1 0<-1:1
	// target 3 (dst<-src:label): 0<-3:0
}

// A synthetic dynamic stochastic block model whose activity grows over
// time: with trend=grow the first snapshot has about Edges events and the
// last about Edges*Skew (a few drawn self-loops are dropped), the skew
// that makes an equal-count partition of the groups imbalanced.
func ExampleDSBM() {
	spec, err := dynamic.ParseDSBM("dsbm,nodes=100,snapshots=6,communities=2,edges=10,skew=20,trend=grow,seed=3")
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := dynamic.DSBM(spec)
	if err != nil {
		fmt.Println(err)
		return
	}
	snaps, err := d.Snapshots(1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(spec)
	fmt.Printf("%d nodes, %d features per node\n", d.NumNodes, d.FeatureDim)
	for _, sn := range snaps {
		fmt.Printf("snapshot %d: %d edges\n", sn.Index, len(sn.Events))
	}
	// Output:
	// dsbm,nodes=100,snapshots=6,communities=2,edges=10,skew=20,trend=grow,pin=0.9,neg=0.5,seed=3
	// 100 nodes, 6 features per node
	// snapshot 0: 8 edges
	// snapshot 1: 18 edges
	// snapshot 2: 28 edges
	// snapshot 3: 49 edges
	// snapshot 4: 100 edges
	// snapshot 5: 191 edges
}
