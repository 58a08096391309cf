// Command examplesched is a third-party gnnkit scheduler plugin: a
// speed-aware data-parallel split (see README.md). Build it and point
// gnnkit at it:
//
//	go build -o bin/examplesched ./plugins/examples/examplesched
//	gnnkit train --scheduler plugin:./bin/examplesched --devices cpu:0,cpu:1
//
// Options arrive as KEY=VALUE arguments (gnnkit passes each --sched-opt
// that way): by=auto|gflops|threads|mem|equal, units=N, devices=N,
// adapt=true, slack=F.
package main

import (
	"fmt"
	"os"

	"github.com/gnnkit/gnnkit/plugins/sdk"
)

func main() {
	s, err := Parse(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "examplesched:", err)
		os.Exit(2)
	}
	if !sdk.LaunchedByHost() {
		fmt.Fprintln(os.Stderr, "examplesched is a gnnkit scheduler plugin; run it through gnnkit:\n"+
			"  gnnkit train --scheduler plugin:"+os.Args[0]+" --devices cpu:0,cpu:1")
		os.Exit(1)
	}
	sdk.Serve(s)
}
