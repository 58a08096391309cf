// Command gnnkit trains graph neural networks on whatever hardware is at
// hand. Run `gnnkit train` to train GCN on the embedded Cora, `gnnkit
// devices` to see the backends and devices, `gnnkit data info PATH` to
// inspect a dataset, and `gnnkit help` for everything else.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// stopSignals cancel the run: Ctrl-C, and the signals a service manager,
// a job scheduler or a closed terminal send. The run ends through its
// context, so plugins and workers are killed, not left behind.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
	defer stop()
	go func() {
		// After the first signal, the next one ends the process at once
		// (as without NotifyContext), should the work not stop.
		<-ctx.Done()
		stop()
	}()
	root := newRoot()
	if err := root.ExecuteContext(ctx); err != nil {
		msg := strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
		if ctx.Err() != nil {
			msg = "interrupted by a signal, stopped: " + msg // not an error of the input
		}
		fmt.Fprintln(os.Stderr, "gnnkit: "+msg)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "gnnkit",
		Short: "Train graph neural networks fast on whatever hardware is at hand",
		Long: `gnnkit trains graph neural networks (and other DAG-shaped models) with
swappable backends (where the arithmetic runs) and schedulers (how the work
is cut up and placed).

With no flags, 'gnnkit train' trains a 2-layer GCN on the embedded Cora
citation graph (Planetoid split) for 200 epochs on the CPU.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newTrainCmd(), newDevicesCmd(), newDataCmd(), newPluginsCmd(), newBenchCmd(), newPlanCmd(), newDynamicCmd())
	return root
}
