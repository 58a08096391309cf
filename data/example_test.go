package data_test

import (
	"fmt"
	"log"
	"strings"

	"github.com/gnnkit/gnnkit/data"
)

func ExampleOpen() {
	d, err := data.Open("synthetic:sbm,nodes=100,classes=4,feat=8,seed=1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Name, d.NumNodes, "nodes,", d.NumClasses, "classes,", d.FeatureDim, "features")
	fmt.Println("split:", len(d.Train), len(d.Val), len(d.Test))
	// Output:
	// sbm 100 nodes, 4 classes, 8 features
	// split: 4 31 63
}

func ExampleCora() {
	d, err := data.Cora()
	if err != nil {
		log.Fatal(err)
	}
	in := d.Info()
	fmt.Printf("%s: %d nodes, %d edges (%d CSR entries), %d features, %d classes, split %d/%d/%d\n",
		in.Name, in.Nodes, in.Edges, in.CSREntries, in.FeatureDim, in.Classes, in.Train, in.Val, in.Test)
	// Output:
	// cora: 2708 nodes, 5278 edges (10556 CSR entries), 1433 features, 7 classes, split 140/500/1000
}

func ExampleDataset_Snapshots() {
	// src dst weight time
	list := "0 1 5 1000\n1 2 -3 1000\n2 0 1 1500\n0 2 2 3600\n"
	d, err := data.ParseEdgeList(strings.NewReader(list), "ratings", data.EdgeListOptions{})
	if err != nil {
		log.Fatal(err)
	}
	snaps, err := d.Snapshots(1000)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range snaps {
		fmt.Printf("snapshot %d from t=%d: %d events, weights %v\n", s.Index, s.Start, len(s.Events), s.Weights)
	}
	// Output:
	// snapshot 0 from t=1000: 3 events, weights [1 5 -3]
	// snapshot 1 from t=2000: 0 events, weights []
	// snapshot 2 from t=3000: 1 events, weights [2]
}

func ExampleParseSynthetic() {
	_, err := data.ParseSynthetic("sbm,nodez=5")
	fmt.Println(err)
	s, _ := data.ParseSynthetic("synthetic:rmat,nodes=1M,edges=10M")
	fmt.Println(s)
	// Output:
	// data: synthetic spec "sbm,nodez=5": unknown key "nodez" (known: nodes, classes, feat, avgdeg, pin, sep, train, val, test, seed)
	// synthetic:rmat,nodes=1000000,edges=10000000,a=0.57,b=0.19,c=0.19,feat=32,classes=8,train=20,val=500,test=1000,seed=1
}
