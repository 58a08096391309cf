package bench_test

import (
	"fmt"

	"github.com/gnnkit/gnnkit/bench"
)

// A suite group is a product of axes; each cell has a stable ID, the key
// under which a results file keeps it across interrupted runs.
func ExampleSuite_Cells() {
	s, err := bench.ParseSuite([]byte(`{"name":"demo","version":1,"epochs":3,"warmup":1,"groups":[
	  {"backends":["cpu"],"devices":[1,2],"schedulers":["sequential"],"models":["gcn"],"datasets":["cora"]},
	  {"backends":["cpu"],"devices":[1],"schedulers":["cherry"],"models":["gcn"],"datasets":["cora"],"device_mem":["24MiB"]}]}`))
	if err != nil {
		panic(err)
	}
	for _, c := range s.Cells() {
		fmt.Println(c.ID())
	}
	// Output:
	// backend=cpu/devices=1/scheduler=sequential/model=gcn/data=cora/epochs=3+1/seed=1
	// backend=cpu/devices=2/scheduler=sequential/model=gcn/data=cora/epochs=3+1/seed=1
	// backend=cpu/devices=1/scheduler=cherry/mem=24MiB/model=gcn/data=cora/epochs=3+1/seed=1
}
