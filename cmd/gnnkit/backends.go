package main

import (
	_ "github.com/gnnkit/gnnkit/backends/cpu"          // the CPU backend
	_ "github.com/gnnkit/gnnkit/backends/opencl"       // OpenCL, found at run time
	_ "github.com/gnnkit/gnnkit/models"                // gcn, sage, gat
	_ "github.com/gnnkit/gnnkit/schedulers/cherry"     // micro-batching past the memory cap
	_ "github.com/gnnkit/gnnkit/schedulers/graphpipe"  // graphpipe, 1f1b, gpipe
	_ "github.com/gnnkit/gnnkit/schedulers/sequential" // the reference scheduler
)
