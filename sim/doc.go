// Package sim is gnnkit's discrete-event simulator: it replays one
// iteration of a core.Plan with profiled (or modelled) op costs on a
// model of a cluster, and predicts the iteration time, each device's busy
// time and peak memory, the bubble fraction and the bytes moved, with a
// core.Trace of the simulated schedule (Trace.WriteChrome opens in
// Perfetto). It checks what a schedule must not do: deadlock, run a task
// before the values it reads exist, or hold more micro-batches in flight
// on a stage than its limit (GraphPipe's k_s).
//
//	prof, _ := sim.Measure(ctx, trainer, dev, []int{256, 1024, 0}, 5) // or sim.ReadProfile, or nil
//	cluster, _ := sim.Preset("nvlink-h100", 16)                       // or sim.CPUCluster(ctx, devs)
//	w, _ := trainer.Workload(batch, cluster.Infos())
//	plan, _ := scheduler.Schedule(ctx, w)
//	res, err := sim.Simulate(plan, w, prof, cluster)
//
// # Profiles
//
// A Profile holds, per op of a model: its predecessors, its output bytes
// per row, its weight bytes, and at a ladder of sizes its forward and
// backward times, the memory it holds from forward to backward, its
// output bytes and its backward's transient memory. Sizes are rows: the
// nodes a unit computes (its targets' receptive field for a subgraph
// unit, every node for a whole-graph unit, the samples of a model without
// a graph), with the edges among them. Costs are interpolated linearly
// between ladder points and extrapolated linearly beyond them; graph ops
// (core.KindGraph) interpolate in edges, since their work follows the
// edges. In a subgraph unit each op is priced where it works, not at the
// unit's rows: at the output it gives there (OpProfile.AtOut; the unit's
// shape pass says what each op outputs, CostModel.UnitOuts) and, a graph
// op, at the edges of the hop it reads (OpProfile.AtOwn along
// Point.OpEdges). The per-unit overhead outside the ops (building the unit's Env,
// gathering its features) is the profile's Setup.
//
// Measure takes a profile on a real device through the engine's public
// API: a one-unit plan per ladder size, run with per-op tracing
// (engine.RunOptions.OpTrace), medians over repetitions rescaled to the
// median total; memory from Trainer.Estimate, split among the ops by a
// shape-only pass of the model. Roofline models a profile from the ops'
// Cost (FLOPs and bytes against a device's GFLOP/s and bandwidth) when no
// measurement exists.
//
// Profiles are read and written in GraphPipe's profile.json schema (one
// record per op: "inputs", "input_size" elements per sample, "weight_size"
// bytes, "runtime" forward+backward milliseconds and "reserved_mem" bytes
// per batch size) with gnnkit's fields beside GraphPipe's: the
// forward/backward split, output bytes, backward memory, the ladder's edge
// counts, resident sizes, the optimizer step and the per-unit setup.
// Records with GraphPipe's fields only are accepted (forward:backward
// taken as 1:2).
//
// # The cost model
//
// NewCostModel(workload, profile, cluster) is the simulator's pricing on
// its own: an op's cost at a unit's size on a device, a unit's setup, the
// size Simulate gives a unit, transfers over links, the gradient sum and
// the optimizer step (on home, or over the bytes an owner owns), the
// resident memory. Simulate runs on one
// (SimulateModel reuses one; Clone gives a goroutine its own caches), and
// partitioners plan with the same one (schedulers/graphpipe), so what
// they predict and what Simulate reports differ only by the schedule's
// dynamics. ClusterFor is the cluster a scheduler assumes from the
// workload's DeviceInfos when it is given none.
//
// # The machine model
//
// A Cluster is a list of DeviceModels (sustained GFLOP/s and memory
// bandwidth, memory capacity, a per-op launch cost, and a Speedup over
// the profiled device) and one-way Links (bandwidth and latency; one link
// within a node, another between nodes, overrides per ordered pair).
// Presets: "cpu" (logical devices of this machine), "pcie-a100" and
// "nvlink-h100"; CPUCluster measures the machine at hand instead.
// WriteCluster and ReadCluster keep a cluster as JSON (a preset written
// out and edited describes another machine; ReadCluster rejects unknown
// fields and validates).
//
// # Semantics
//
// The simulator follows engine's executor. Tasks run in plan order on
// each (device, stream) and after their Deps. Each device computes one
// task at a time: a task that is ready (its predecessors done, and with
// prefetching its inputs arrived) waits for the device, which picks an
// optimizer step first, then the task of highest core.Task.Priority (a
// device hosting several stages: the stage nearer the sink), then the
// earliest ready task, ties in plan order. This exclusive engine is a
// GPU's behaviour when each kernel fills the device and the CPU backend's
// when a device's thread budget is spent by the task at hand; a device
// whose streams truly overlap would finish the same work in the same time
// (processor sharing is work-conserving), so only the interleaving in the
// trace differs. A device whose streams do overlap (a GPU running a
// memory-bound SpMM beside a compute-bound GEMM, BLAD's level 2) is
// modelled with DeviceModel.StreamOverlap: its streams' tasks then run at
// once, those of one kind sharing the device, a compute-bound and a
// memory-bound task getting (1 + StreamOverlap)/2 of it each, and
// Result.Overlap reports the time two tasks ran together. Logical CPU
// devices share the host's cores: with
// Cluster.HostCores set, the devices' computing tasks progress at
// min(1, HostCores/active) of their speed each (processor sharing across
// devices), which is how two one-thread devices on a loaded two-core
// machine run at half speed each.
//
// A forward task on a device other than the producer of a value it reads
// receives that value (the producer's output bytes at the unit's size)
// over the link between the two devices: latency + bytes/bandwidth, one
// transfer at a time per directed link. A backward task receives the
// gradient of each output a consumer on another device used, the same
// size. With Cluster.SyncTransfers (the CPU executor) the consumer's task
// makes the copy at its start, holding its device; otherwise (GPU
// runtimes) a copy engine sends each value as soon as it is produced and
// the consumer waits only for its arrival, so transfers overlap compute.
// Those copies go through each device's port where the link names one
// (Link.PortGBps, set by the GPU presets): the transfers a device sends at
// once share its port's bandwidth max-min fairly, as do those it
// receives, each capped at its link's, and a value arrives the link's
// latency after its last byte (flow-level: every start and end of a
// transfer re-shares the ports).
// A ReduceGrads task moves the parameters' bytes from its source to home
// and sums them there (4 × parameter bytes at memory bandwidth); the Step
// runs the measured optimizer time, scaled to the workload's optimizer
// (core.Workload.Optimizer), or else its traffic at memory bandwidth
// (4 + 2 × its buffers of state passes over the parameter bytes: Adam 8,
// plain SGD 4), and then sends the parameters to every other device of
// the plan. A plan with core.Plan.StepOwners steps each
// parameter on its owner (core.Plan.ParamOwners; sizes from the workload's
// OpInfo.Params, each parameter once): ReduceGrads{From: E, Device: O}
// moves only the bytes of the parameters E reads and O owns, as soon as
// its dependencies are done (O holds them from then), and sums them once
// O's own backward tasks reading them are done too (the executor's
// order), and
// O's Step costs the step over the bytes O owns (CostModel.StepBytes)
// and sends each other device the bytes it reads and O owns.
//
// Memory per device is the resident part — on home the whole model's
// parameters, gradient accumulators and optimizer state, elsewhere the
// parameters and accumulators its ops read (CostModel.Resident; with StepOwners:
// on home too only the parameters and accumulators its ops read, and the
// optimizer state of what each device owns on that device;
// CostModel.ResidentOwned), the batch inputs where whole-graph units
// run — plus, per unit on the device, from its
// first task there to the end of its last backward there: its inputs (a
// subgraph unit's features and edge weights), what its forward ops hold
// and the values it received; a backward task adds its transient memory
// and the gradients it receives while it runs. Result.PeakMem is the
// maximum over the iteration; devices over their capacity are listed in
// Result.OverCap.
//
// A stage is the set of ops a unit runs on one device; a unit is in flight
// on it from its first task there to the end of its last backward task
// there. Options.InFlightLimit bounds each stage (ErrInFlight reports an
// excess); with Options.BlockOnLimit a unit instead waits for a free slot,
// which can deadlock a schedule whose buffers are too small. When tasks
// remain that can never start (a cycle through Deps and stream order, or
// units waiting for slots that are never freed), Simulate returns
// ErrDeadlock naming them and what each waits for. A task that would read
// a value no finished task has produced is reported as a missing
// dependency.
//
// # Accuracy
//
// On two logical CPU devices (one thread each) the predicted iteration
// time of sequential, data-parallel, pipelined and micro-batched plans is
// within 20% of the executor's measured median (TestAccuracy; the
// numbers are in bench/RESULTS.md). GPU presets are datasheet figures,
// not measurements: use them to compare plans, and a profile taken on the
// target (with Speedup 1) for absolute numbers.
package sim
