package bench

import (
	"github.com/gnnkit/gnnkit/core"

	_ "github.com/gnnkit/gnnkit/backends/cpu"
	_ "github.com/gnnkit/gnnkit/backends/opencl"
	_ "github.com/gnnkit/gnnkit/models"
	_ "github.com/gnnkit/gnnkit/models/dynamic"
	_ "github.com/gnnkit/gnnkit/schedulers/blad"
	_ "github.com/gnnkit/gnnkit/schedulers/cherry"
	_ "github.com/gnnkit/gnnkit/schedulers/graphpipe"
	_ "github.com/gnnkit/gnnkit/schedulers/sequential"
)

func registryBackends() []string   { return core.Backends() }
func registrySchedulers() []string { return core.Schedulers() }
