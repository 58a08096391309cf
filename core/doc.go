// Package core holds gnnkit's contracts: the concrete data types every
// other package shares (Tensor, Graph, Model, Workload, Plan, Trace) and
// the small interfaces implementations provide (Backend, Device, Kernels,
// Scheduler). It imports nothing of gnnkit's, no cgo and no third-party
// code; backends, schedulers and models import it, the way database/sql
// drivers import database/sql/driver.
//
// # Data flow
//
// A dataset is loaded into a Graph plus feature and label arrays. A Model
// is a DAG of Ops over named values, built by a registered ModelFactory. A
// Workload describes one training iteration (the op DAG with costs, the
// batch of target nodes, the devices) to a Scheduler, which returns a Plan:
// plain data listing units of work and tasks on device streams with their
// dependencies. Plan.Validate checks it; the executor (package engine) runs
// it on real devices and returns a Trace.
//
// # Implementing a backend
//
// A backend provides Backend (Name, Devices, Close) and, per device, Device
// (ID, Info, Kernels, Alloc, Free, Upload, Download, NewStream, Mem). Every
// allocation is charged to the device's MemAccountant, which enforces the
// cap and records the peak; over the cap Alloc returns an *OOMError. The
// Kernels are forward-only primitives (GEMM, SpMM, SDDMM, edge softmax,
// gather/scatter, Map, Reduce, log-softmax, NLL, dropout, Adam, SGD);
// gradients are written once, in the model ops, from these primitives. A
// kernel that a backend does not implement returns ErrUnsupported. Register
// the backend from init with RegisterBackend, and export a New for direct
// use. Run core/backendtest.Run from the backend's tests: it checks every
// kernel against a float64 reference on a corpus of awkward graphs.
//
// # Implementing a scheduler
//
// A scheduler implements Name and Schedule(ctx, *Workload) (*Plan, error);
// adaptive schedulers also implement SchedulerWithFeedback.Observe, called
// with the Trace of each iteration. Schedule must be deterministic for a
// given workload and return ctx.Err() when cancelled. The plan must pass
// Plan.Validate: every batch node in exactly one unit, loss weights that
// sum to 1, each unit's ops run forward and backward once on one device,
// gradients of devices other than Home reduced into Home, and one optimizer
// Step. Run core/schedtest.Run and the exactness oracle from the
// scheduler's tests. Plan.StageGraph reads a pipeline plan's stage DAG
// back from its tasks (what 'gnnkit plan' prints), whoever made it.
package core
