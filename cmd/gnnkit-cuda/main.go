//go:build cuda

// Command gnnkit-cuda is the CUDA backend-plugin worker: the gnnkit host
// starts it (go-plugin, handshake GNN_BACKEND_PLUGIN) to train on the
// machine's GPUs, which live in this separate process because
// gorgonia.org/cu ends any process that imports it where there is no GPU.
// Build it with
//
//	CGO_ENABLED=1 go build -tags cuda -o bin/gnnkit-cuda ./cmd/gnnkit-cuda
//
// and put it next to gnnkit, in $GNNKIT_PLUGIN_DIR or on $PATH; `gnnkit
// devices` then lists cuda:0, ... and `gnnkit train --devices cuda:0` uses
// them. Run by hand it only says so: the host starts it.
package main

import (
	"fmt"
	"os"

	_ "github.com/gnnkit/gnnkit/backends/cuda" // registers "cuda"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/plugins/worker"
)

func main() {
	if !worker.LaunchedByHost() {
		fmt.Fprintln(os.Stderr, "gnnkit-cuda is the CUDA worker of gnnkit; gnnkit starts it (try: gnnkit devices)")
		os.Exit(1)
	}
	opts, err := worker.BackendOptions()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gnnkit-cuda:", err)
		os.Exit(1)
	}
	b, err := core.OpenBackend("cuda", opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gnnkit-cuda:", err)
		os.Exit(1)
	}
	worker.Serve(b)
}
