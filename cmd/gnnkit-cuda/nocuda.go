//go:build !cuda

// Command gnnkit-cuda is the CUDA backend-plugin worker of gnnkit. This
// build has no CUDA support: it was built without -tags cuda, so it only
// says how to build the real one. See main.go.
package main

import (
	"fmt"
	"os"
)

// buildHint is how to build the real worker.
const buildHint = "CGO_ENABLED=1 go build -tags cuda -o bin/gnnkit-cuda ./cmd/gnnkit-cuda"

func main() {
	fmt.Fprintln(os.Stderr, "gnnkit-cuda was built without -tags cuda; rebuild with: "+buildHint)
	os.Exit(1)
}
