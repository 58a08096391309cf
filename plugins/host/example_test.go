package host_test

import (
	"context"
	"fmt"
	"time"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/plugins/host"
)

// Launch returns a core.Scheduler like any other; the Closer ends the
// plugin process.
func ExampleLaunch() {
	ctx := context.Background()
	sched, closer, err := host.Launch(ctx, "./bin/examplesched", host.Options{
		Args:    []string{"by=threads"}, // the plugin's own options
		Timeout: time.Minute,            // per call; a plugin that passes it is killed
	})
	if err != nil {
		fmt.Println(err) // names the plugin and what went wrong
		return
	}
	defer closer.Close()
	var w *core.Workload // from engine.Trainer.Workload
	plan, err := sched.Schedule(ctx, w)
	fmt.Println(plan, err) // plan has passed plan.Validate(w)
}
