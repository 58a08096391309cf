package models_test

import (
	"fmt"
	"strings"

	"github.com/gnnkit/gnnkit/core"
	_ "github.com/gnnkit/gnnkit/models" // registers gcn, sage and gat
)

// Build the two-layer GCN for Cora (1433 features, 7 classes) by name and
// list its ops and parameters.
func Example() {
	m, err := core.BuildModel("gcn", core.ModelConfig{InDim: 1433, Classes: 7, Dropout: 0.5})
	if err != nil {
		panic(err)
	}
	for _, op := range m.Ops {
		fmt.Printf("%-6s %-11s %s -> %s\n", op.Name(), op.Kind(), strings.Join(op.Inputs(), ","), strings.Join(op.Outputs(), ","))
	}
	for _, p := range m.Params {
		fmt.Println(p.Name, p.Shape, "decay:", p.WeightDecay)
	}
	fmt.Println("output:", m.Output)
	// Output:
	// drop0  elementwise x -> drop0
	// lin0   dense       drop0,conv0.weight -> lin0
	// agg0   graph       lin0,adj.w -> agg0
	// bias0  elementwise agg0,conv0.bias -> bias0
	// relu0  elementwise bias0 -> relu0
	// drop1  elementwise relu0 -> drop1
	// lin1   dense       drop1,conv1.weight -> lin1
	// agg1   graph       lin1,adj.w -> agg1
	// bias1  elementwise agg1,conv1.bias -> logits
	// loss   loss        logits -> loss
	// conv0.weight [1433 16] decay: true
	// conv0.bias [1 16] decay: true
	// conv1.weight [16 7] decay: false
	// conv1.bias [1 7] decay: false
	// output: logits
}
