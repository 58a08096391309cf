package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/backends/opencl"
	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/engine"
	"github.com/gnnkit/gnnkit/plugins/worker"
)

// workerBackends are the backends whose devices live in a worker process
// (plugins/worker) rather than in gnnkit itself, with the worker binary and
// how to build it. gnnkit never imports them: gorgonia.org/cu ends any
// process that imports it on a machine without a GPU.
var workerBackends = map[string]struct{ binary, build string }{
	"cuda": {"gnnkit-cuda", "CGO_ENABLED=1 go build -tags cuda -o bin/gnnkit-cuda ./cmd/gnnkit-cuda"},
}

// isWorkerBackend reports whether name is served by a worker here (a
// backend compiled into this binary wins).
func isWorkerBackend(name string) bool {
	if _, ok := workerBackends[name]; !ok {
		return false
	}
	for _, b := range core.Backends() {
		if b == name {
			return false
		}
	}
	return true
}

// unavailableError is a worker backend that cannot be used here.
type unavailableError struct {
	backend, reason, hint string
	err                   error
}

func (e *unavailableError) Error() string {
	msg := fmt.Sprintf("backend %s: unavailable (%s)", e.backend, e.reason)
	if e.hint != "" {
		msg += "; " + e.hint
	}
	return msg
}

func (e *unavailableError) Unwrap() error { return e.err }

// startWorker finds and starts the worker of a worker backend; its devices
// are named BACKEND:i. The error is an *unavailableError with the reason
// (the binary is missing, or its exit status and output).
func startWorker(ctx context.Context, backend string, o core.BackendOptions) (*worker.Worker, error) {
	wb := workerBackends[backend]
	path, err := worker.Find(wb.binary)
	if err != nil {
		return nil, &unavailableError{backend: backend, reason: err.Error(), err: err,
			hint: fmt.Sprintf("%s serves the %s devices: build it with %s and put it next to gnnkit, in $GNNKIT_PLUGIN_DIR or on $PATH", wb.binary, backend, wb.build)}
	}
	w, err := worker.Start(ctx, path, worker.Options{Name: backend, Backend: o})
	if err != nil {
		reason := err.Error()
		var se *worker.StartError
		if errors.As(err, &se) {
			reason = fmt.Sprintf("%s: %s", path, se.Reason)
		}
		return nil, &unavailableError{backend: backend, reason: reason, err: err}
	}
	return w, nil
}

// trainDevices are the devices a run trains on: local ones (the first holds
// the master parameters and runs evaluation) and workers' ones.
type trainDevices struct {
	local   []core.Device
	remote  []engine.Remote
	infos   []core.DeviceInfo // the devices plans use, in --devices order
	ids     []core.DeviceID
	backend string // e.g. "cpu", "cuda", "cpu+cuda"
	closers []io.Closer
}

func (d *trainDevices) Close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i].Close()
	}
}

// checkBackendDevices checks an explicit --backend against --devices,
// which names the backends itself: --backend must be one of them (a
// worker backend such as cuda may join a local one, --devices
// cpu:0,cuda:0). Malformed --devices is left to openTrainDevices.
func checkBackendDevices(backend, list string) error {
	if strings.TrimSpace(list) == "" {
		return nil
	}
	var names []string
	for _, s := range strings.Split(list, ",") {
		name, _, err := core.ParseDeviceID(s)
		if err != nil {
			return nil
		}
		if name == backend {
			return nil
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return fmt.Errorf("--backend %s, but --devices %s names devices of %s: leave out --backend (--devices names the backend) or give devices of %s (e.g. %s:0)", backend, list, strings.Join(names, " and "), backend, backend)
}

// openTrainDevices opens the devices of --backend/--devices. A worker
// backend (cuda) may join one local backend (--devices cpu:0,cuda:0);
// without a local one, a one-device CPU backend holds the master
// parameters, the optimizer and evaluation.
// logicalDeviceLimits is, per local backend that splits its hardware
// into logical devices, how many it opens at most.
var logicalDeviceLimits = map[string]int{cpu.Name: cpu.MaxDevices, opencl.Name: opencl.MaxDevices}

// checkLogicalIndex refuses --devices name:i past the logical devices
// the backend opens: name:i opens name:0 to name:i, so a mistyped index
// (cpu:999, opencl:100000) would open that many devices instead of
// failing.
func checkLogicalIndex(id core.DeviceID, name string, i int) error {
	if limit, ok := logicalDeviceLimits[name]; ok && i >= limit {
		return fmt.Errorf("--devices %s: the %s backend has at most %d logical devices, %s:0 to %s:%d", id, name, limit, name, name, limit-1)
	}
	return nil
}

// warnCPUVariant prints one warning line to w when devs include a cpu
// device and GNN_CPU names a kernel variant the backend did not follow
// (unknown, or one this CPU cannot run): the run still trains, on the
// variant shown, and otherwise only 'gnnkit devices' said so.
func warnCPUVariant(w io.Writer, devs []core.Device) {
	why := cpu.EnvVariantFallback()
	if why == "" || !slices.ContainsFunc(devs, func(d core.Device) bool { return strings.HasPrefix(string(d.ID()), cpu.Name+":") }) {
		return
	}
	fmt.Fprintf(w, "gnnkit: warning: %s is not followed; the cpu kernels are %s. Set it to one of %s, or unset it\n",
		cpu.VariantEnvVar, why, strings.Join(cpu.Variants(), ", "))
}

// checkThreads checks --threads for a run with cpuDevs logical CPU
// devices (0: none, with local backend local): not negative, at most
// cpu.MaxThreads worker threads in all, and not given where no CPU device
// would take it.
func checkThreads(threads, cpuDevs int, local string) error {
	switch {
	case threads < 0:
		return fmt.Errorf("--threads %d: want >= 1 worker threads per CPU device (0: the cores divided among the devices)", threads)
	case threads == 0:
		return nil
	case cpuDevs == 0:
		return fmt.Errorf("--threads %d: only CPU devices take a thread count, and --backend %s trains on none (its driver sizes its own work); drop --threads", threads, local)
	case threads > cpu.MaxThreads/cpuDevs:
		return fmt.Errorf("--threads %d on %d CPU devices: the cpu backend starts at most %d worker threads in all (--threads times the devices); use --threads %d or fewer",
			threads, cpuDevs, cpu.MaxThreads, cpu.MaxThreads/cpuDevs)
	}
	return nil
}

func openTrainDevices(ctx context.Context, backend, list string, threads int, memCap int64) (*trainDevices, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	type group struct {
		name string
		ids  []core.DeviceID
	}
	var groups []*group
	byName := map[string]*group{}
	var order []core.DeviceID
	if strings.TrimSpace(list) == "" {
		groups = []*group{{name: backend}}
	} else {
		seen := map[core.DeviceID]bool{}
		for _, s := range strings.Split(list, ",") {
			name, i, err := core.ParseDeviceID(s)
			if err != nil {
				return nil, fmt.Errorf("--devices: %w", err)
			}
			id := core.DeviceID(fmt.Sprintf("%s:%d", name, i))
			if err := checkLogicalIndex(id, name, i); err != nil {
				return nil, err
			}
			if seen[id] {
				return nil, fmt.Errorf("--devices lists %s twice", id)
			}
			seen[id] = true
			g := byName[name]
			if g == nil {
				g = &group{name: name}
				byName[name] = g
				groups = append(groups, g)
			}
			g.ids = append(g.ids, id)
			order = append(order, id)
		}
	}
	var localName string
	for _, g := range groups {
		if isWorkerBackend(g.name) {
			continue
		}
		if localName != "" {
			return nil, fmt.Errorf("--devices mixes backends %s and %s; one backend per run (a worker backend such as cuda may join it)", localName, g.name)
		}
		localName = g.name
	}
	// --threads sizes the cpu backend's workers: the local cpu devices,
	// or the host CPU device that holds the master parameters when only
	// worker devices train.
	cpuDevs := 0
	switch localName {
	case cpu.Name:
		cpuDevs = 1
		for _, g := range groups {
			for _, id := range g.ids {
				if _, i, _ := core.ParseDeviceID(string(id)); g.name == cpu.Name {
					cpuDevs = max(cpuDevs, i+1)
				}
			}
		}
	case "":
		cpuDevs = 1
	}
	if err := checkThreads(threads, cpuDevs, localName); err != nil {
		return nil, err
	}
	d := &trainDevices{}
	fail := func(err error) (*trainDevices, error) {
		d.Close()
		return nil, err
	}
	byID := map[core.DeviceID]core.DeviceInfo{}
	var names []string
	for _, g := range groups {
		need := 1
		for _, id := range g.ids {
			_, i, _ := core.ParseDeviceID(string(id))
			need = max(need, i+1)
		}
		names = append(names, g.name)
		var infos []core.DeviceInfo
		if isWorkerBackend(g.name) {
			w, err := startWorker(ctx, g.name, core.BackendOptions{Devices: need, MemCap: memCap})
			if err != nil {
				return fail(err)
			}
			d.closers = append(d.closers, w)
			d.remote = append(d.remote, w)
			infos = w.Devices()
		} else {
			be, err := core.OpenBackend(g.name, core.BackendOptions{Devices: need, Threads: threads, MemCap: memCap})
			if err != nil {
				return fail(err)
			}
			d.closers = append(d.closers, be)
			for _, dev := range be.Devices() {
				infos = append(infos, dev.Info())
			}
			// The devices named come first, so the first holds the master copy.
			for _, id := range g.ids {
				for _, dev := range be.Devices() {
					if dev.ID() == id {
						d.local = append(d.local, dev)
					}
				}
			}
			if len(g.ids) == 0 {
				d.local = append(d.local, be.Devices()[0])
			}
		}
		for _, info := range infos {
			byID[info.ID] = info
		}
		if len(g.ids) == 0 {
			g.ids = []core.DeviceID{infos[0].ID}
			order = append(order, infos[0].ID)
		}
		for _, id := range g.ids {
			if _, ok := byID[id]; !ok {
				return fail(fmt.Errorf("device %s not found on backend %s (have %d devices)", id, g.name, len(infos)))
			}
		}
	}
	for _, id := range order {
		d.ids = append(d.ids, id)
		d.infos = append(d.infos, byID[id])
	}
	if localName == "" {
		// Only worker devices: the master parameters, the optimizer and
		// evaluation stay here, on one CPU device.
		be, err := core.OpenBackend("cpu", core.BackendOptions{Devices: 1, Threads: threads})
		if err != nil {
			return fail(err)
		}
		d.closers = append(d.closers, be)
		d.local = be.Devices()[:1]
	}
	d.backend = strings.Join(names, "+")
	return d, nil
}

// backendNames lists the registered backends and the worker backends.
func backendNames() []string {
	names := core.Backends()
	for name, wb := range workerBackends {
		if isWorkerBackend(name) {
			names = append(names, name+" (through "+wb.binary+")")
		}
	}
	sort.Strings(names)
	return names
}

// workerReports starts each worker backend's worker to list its devices,
// or says why it is unavailable ("unavailable (REASON)"), and carries on.
func workerReports(ctx context.Context) []backendReport {
	if ctx == nil {
		ctx = context.Background()
	}
	names := make([]string, 0, len(workerBackends))
	for name := range workerBackends {
		if isWorkerBackend(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var reps []backendReport
	for _, name := range names {
		r := backendReport{Name: name, Worker: workerBackends[name].binary}
		w, err := startWorker(ctx, name, core.BackendOptions{})
		var ue *unavailableError
		switch {
		case errors.As(err, &ue):
			r.Error = "unavailable (" + ue.reason + ")"
		case err != nil:
			r.Error = "unavailable (" + err.Error() + ")"
		default:
			r.Worker = w.Name()
			r.Devices = w.Devices()
			w.Close()
		}
		reps = append(reps, r)
	}
	return reps
}
