package engine

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/gnnkit/gnnkit/core"
)

// Optimizer configures the parameter update.
type Optimizer struct {
	Kind        string  // "adam" (default) or "sgd"
	LR          float32 // default 0.01
	WeightDecay float32 // applied to params whose spec asks for it
	Momentum    float32 // sgd only
	Beta1       float32 // adam; default 0.9
	Beta2       float32 // adam; default 0.999
	Eps         float32 // adam; default 1e-8
}

func (o *Optimizer) defaults() error {
	if o.Kind == "" {
		o.Kind = "adam"
	}
	if o.LR == 0 {
		o.LR = 0.01
	}
	if o.Beta1 == 0 {
		o.Beta1 = 0.9
	}
	if o.Beta2 == 0 {
		o.Beta2 = 0.999
	}
	if o.Eps == 0 {
		o.Eps = 1e-8
	}
	if o.Kind != "adam" && o.Kind != "sgd" {
		return fmt.Errorf("engine: unknown optimizer %q (want adam or sgd)", o.Kind)
	}
	for _, v := range []float32{o.LR, o.WeightDecay, o.Momentum, o.Beta1, o.Beta2, o.Eps} {
		// NaN fails every comparison: it would train to a NaN loss.
		if !(v >= 0) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("engine: optimizer settings must be finite and non-negative (lr %g, weight decay %g, momentum %g, beta1 %g, beta2 %g, eps %g)", o.LR, o.WeightDecay, o.Momentum, o.Beta1, o.Beta2, o.Eps)
		}
	}
	return nil
}

// Data is the training data in host memory.
type Data struct {
	// Graph is the dataset graph (symmetric for undirected data, without
	// self-loops); the trainer prepares it per the model's GraphSpecs.
	Graph      *core.Graph
	Features   []float32 // NumNodes x FeatureDim, row-major
	FeatureDim int
	Labels     []int32 // -1: unlabelled
}

// Config configures a Trainer.
type Config struct {
	Model     *core.Model
	Data      Data
	Devices   []core.Device // the devices plans may use
	Optimizer Optimizer
	Seed      uint64
	// NoTrim makes every layer compute every row of a unit's graph, as
	// PyG does without trim_to_layer; by default a layer computes only
	// the rows a later layer or the loss reads. Same result either way.
	NoTrim bool
	// Remote are devices in other processes (backend-plugin workers, see
	// Remote); plans may use them next to Devices.
	Remote []Remote
	// EvalDevice, when set, is where Predict evaluates when the training
	// devices run out of memory doing it (evaluation reads whole
	// neighbourhoods): a device of its own, not one of Devices.
	EvalDevice core.Device
}

// Trainer holds a model's training state across iterations.
type Trainer struct {
	model    *core.Model
	data     Data
	opt      Optimizer
	seed     uint64
	trim     bool // layers compute only the rows read later (Config.NoTrim)
	devs     map[core.DeviceID]core.Device
	full     *Batch // the dataset graph, for evaluation
	needGrad map[string]bool
	viewMu   sync.Mutex // guards Batch.views (units build views concurrently)
	// producer[v] is the op writing value v; consumers[v] the ops reading it.
	producer  map[string]int
	consumers map[string][]int
	specs     map[string]core.ParamSpec
	opPar     [][]string // the parameters each op reads (Model.OpParams)

	home core.DeviceID
	// evalDev is Config.EvalDevice; evalFallbacks counts the evaluations
	// that ran there.
	evalDev       core.Device
	evalFallbacks int
	// wholeUnits is whether the last plan had a unit computing the whole
	// batch graph (whose inputs then stay resident between iterations).
	wholeUnits bool
	// place is the device each op ran on for the last plan's first unit
	// (nil before one, or where an op ran on none): Predict's staged
	// placement under a memory cap.
	place  []core.DeviceID
	reps   map[core.DeviceID]*replica
	moment map[string][2]*core.Tensor // optimizer state, on momentDev[p]
	step   int
	// stateMu guards momentDev, newest and gradAt, and replicas' ver maps,
	// which owner steps on several devices update concurrently.
	stateMu sync.Mutex
	// momentDev[p] is the device holding p's optimizer state (home's
	// until an owner-stepped plan moves it).
	momentDev map[string]core.DeviceID
	// newest[p], when set, is the device whose replica holds p's current
	// value while home's copy is stale (owner-stepped plans); syncHome
	// brings home up to date.
	newest map[string]core.DeviceID
	// gradAt[p], when set, is where the last owner-stepped iteration run
	// with SkipStep left p's summed gradient (Grads reads it there).
	gradAt map[string]core.DeviceID
	// homeStepFrom/To cache the last owner-stepped plan rewritten to a
	// home step (Plan.HomeStep).
	homeStepFrom, homeStepTo *core.Plan
	remote                   *remoteInfo // Config.Remote (host) or the last slice (worker); see remote.go
}

// replica is one device's copy of the parameters, its gradient
// accumulators and the input data resident there.
type replica struct {
	dev    core.Device
	gradMu sync.Mutex // guards grads: streams of one device share them
	// ver[p] is the optimizer step whose value of param p the replica
	// holds; a stale parameter is refreshed before a plan uses it there.
	ver    map[string]int
	params map[string]*core.Tensor
	grads  map[string]*core.Tensor
	x      *core.Tensor // all features (for full-graph batches), on first use
	// Inputs of the current batch for units that compute the whole batch
	// graph: its features (sampled batches) and edge weights.
	batch  *Batch
	inputs map[string]*core.Tensor
	// inputsAll: inputs holds every input of the batch, not only want's
	// (an evaluation reads them all).
	inputsAll bool
	// want names the inputs the plan's ops on this device read (nil:
	// all); wantKey is it as a string, for the inputs cache.
	want    map[string]bool
	wantKey string
}

// setWant records the inputs (features, edge weights) the current plan's
// ops on r read; batch inputs are kept resident for those only.
func (r *replica) setWant(names map[string]bool) {
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	key := strings.Join(keys, ",")
	if names == nil {
		key = "*"
	}
	if key != r.wantKey {
		r.releaseInputs()
	}
	r.want, r.wantKey = names, key
}

// New prepares a trainer: graphs per the model's specs, parameters
// initialised from the seed (they are placed on devices when a plan first
// uses them).
func New(cfg Config) (*Trainer, error) {
	if cfg.Model == nil {
		return nil, errors.New("engine: no model")
	}
	if err := cfg.Model.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Optimizer.defaults(); err != nil {
		return nil, err
	}
	if len(cfg.Devices) == 0 {
		return nil, errors.New("engine: no devices")
	}
	d := cfg.Data
	if d.Graph == nil {
		return nil, errors.New("engine: no graph")
	}
	n := d.Graph.NumDst
	if d.FeatureDim <= 0 || len(d.Features) != n*d.FeatureDim {
		return nil, fmt.Errorf("engine: features have %d values, want %d nodes x %d", len(d.Features), n, d.FeatureDim)
	}
	if len(d.Labels) != n {
		return nil, fmt.Errorf("engine: %d labels for %d nodes", len(d.Labels), n)
	}
	if cfg.Model.Config.InDim != 0 && cfg.Model.Config.InDim != d.FeatureDim {
		return nil, fmt.Errorf("engine: model %s expects %d input features, data has %d", cfg.Model.Name, cfg.Model.Config.InDim, d.FeatureDim)
	}
	t := &Trainer{model: cfg.Model, data: d, opt: cfg.Optimizer, seed: cfg.Seed, trim: !cfg.NoTrim,
		devs: map[core.DeviceID]core.Device{}, needGrad: cfg.Model.NeedsGrad(), specs: map[string]core.ParamSpec{},
		reps: map[core.DeviceID]*replica{}, moment: map[string][2]*core.Tensor{}, momentDev: map[string]core.DeviceID{},
		newest: map[string]core.DeviceID{}, evalDev: cfg.EvalDevice}
	for _, dev := range cfg.Devices {
		t.devs[dev.ID()] = dev
	}
	for _, p := range cfg.Model.Params {
		t.specs[p.Name] = p
	}
	t.opPar = cfg.Model.OpParams()
	t.producer, t.consumers = map[string]int{}, map[string][]int{}
	for i, op := range cfg.Model.Ops {
		for _, v := range op.Inputs() {
			t.consumers[v] = append(t.consumers[v], i)
		}
		for _, v := range op.Outputs() {
			t.producer[v] = i
		}
	}
	if err := t.initRemotes(cfg); err != nil {
		return nil, err
	}
	t.full = t.FullBatch(nil)
	if err := t.prepare(t.full); err != nil {
		return nil, err
	}
	return t, nil
}

// Graph returns the dataset graph as the model's first graph input sees
// it (with self-loops if asked).
func (t *Trainer) Graph() *core.Graph { return t.batchGraph(t.full) }

// Model returns the model being trained.
func (t *Trainer) Model() *core.Model { return t.model }

// Step is the number of optimizer steps taken.
func (t *Trainer) Step() int { return t.step }

// replicaOn returns dev's replica, creating it on first use. The first
// replica is the home: it holds every parameter and the optimizer state
// (an owner-stepped plan moves the state to the owners and drops home's
// copies of parameters it neither reads nor owns: dropHomeCopies), and
// the gradient accumulators a plan asks for (setHomeGrads). Other
// replicas hold only the parameters their plan's ops read (placeParams),
// so a pipeline stage keeps its own layers, not the whole model.
func (t *Trainer) replicaOn(id core.DeviceID) (*replica, error) {
	return t.replicaWith(id, nil)
}

// replicaWith is replicaOn whose first replica (the home) holds only the
// parameters in names (all when names is nil), initialised from the seed.
func (t *Trainer) replicaWith(id core.DeviceID, names map[string]bool) (*replica, error) {
	if r := t.reps[id]; r != nil {
		return r, nil
	}
	dev, ok := t.devs[id]
	if !ok {
		return nil, fmt.Errorf("engine: plan uses device %s, which the trainer was not given", id)
	}
	r := &replica{dev: dev, params: map[string]*core.Tensor{}, grads: map[string]*core.Tensor{}, inputs: map[string]*core.Tensor{}}
	fail := func(what string, err error) (*replica, error) {
		r.free()
		return nil, fmt.Errorf("engine: %s on %s: %w", what, id, err)
	}
	if len(t.reps) > 0 {
		t.reps[id] = r // parameters arrive with placeParams and refresh
		return r, nil
	}
	// The first replica is the home: initialise from the seed.
	for _, p := range t.model.Params {
		if names != nil && !names[p.Name] {
			continue
		}
		pt, err := dev.Alloc(p.Shape...)
		if err != nil {
			return fail("placing parameter "+p.Name, err)
		}
		r.params[p.Name] = pt
		if err := dev.Upload(pt, p.Initial(t.seed)); err != nil {
			return fail("initialising "+p.Name, err)
		}
	}
	t.home = id
	t.reps[id] = r
	return r, nil
}

// initSpread starts the trainer on an owner-stepped first plan: home
// holds only the parameters its ops read or it owns, and every other
// parameter is initialised from the seed on its owner, recorded there as
// its newest value (t.newest), with a gradient accumulator (placeParams,
// as any replica's). Home
// never holds the whole model, which the plan's memory estimate does not
// count (it prices home after dropHomeCopies): through replicaOn, home
// first held every parameter, and a cap the plan fitted ran out of memory
// before the first task.
func (t *Trainer) initSpread(plan *core.Plan, home core.DeviceID) (err error) {
	defer func() {
		if err != nil { // start again from nothing at the next Run
			for id, r := range t.reps {
				r.free()
				delete(t.reps, id)
			}
			t.newest, t.home = map[string]core.DeviceID{}, "" // as New leaves it
		}
	}()
	opPar := func(o int) []string { return t.opPar[o] }
	owners := plan.ParamOwners(opPar)
	keep := map[string]bool{}
	for p := range core.ParamReaders(plan.Tasks, opPar)[home] {
		keep[p] = true
	}
	for _, p := range t.model.Params {
		if d, ok := owners[p.Name]; !ok || d == home || t.devs[d] == nil || t.isRemote(d) {
			keep[p.Name] = true // no local owner elsewhere: home starts it
		}
	}
	if _, err := t.replicaWith(home, keep); err != nil {
		return err
	}
	spread := map[core.DeviceID]map[string]bool{}
	for _, p := range t.model.Params {
		if !keep[p.Name] {
			addTo(spread, owners[p.Name], p.Name)
		}
	}
	for _, d := range sortedIDs(spread) {
		r, err := t.replicaOn(d)
		if err != nil {
			return err
		}
		if err := t.placeParams(r, spread[d]); err != nil {
			return err
		}
		if r.ver == nil {
			r.ver = map[string]int{}
		}
		for _, p := range t.model.Params {
			if !spread[d][p.Name] {
				continue
			}
			if err := r.dev.Upload(r.params[p.Name], p.Initial(t.seed)); err != nil {
				return fmt.Errorf("engine: initialising %s on %s: %w", p.Name, d, err)
			}
			r.ver[p.Name] = t.step
			t.newest[p.Name] = d
		}
	}
	return nil
}

func (r *replica) free() {
	for _, m := range []map[string]*core.Tensor{r.params, r.grads, r.inputs} {
		for k, x := range m {
			if x != r.x {
				r.dev.Free(x)
			}
			delete(m, k)
		}
	}
	r.dev.Free(r.x)
	r.x, r.batch = nil, nil
}

// trimInputs frees the batch inputs an evaluation brought to r that the
// plan's ops there do not read (r.want), keeping the rest for training.
func (r *replica) trimInputs() {
	if r.want == nil || !r.inputsAll {
		return
	}
	for k, x := range r.inputs {
		if !r.want[k] {
			if x != r.x {
				r.dev.Free(x)
			}
			delete(r.inputs, k)
		}
	}
	if r.x != nil && !r.want["x"] {
		r.dev.Free(r.x)
		r.x = nil
	}
	r.inputsAll = false
}

// releaseInputs frees the data resident on r (features, batch inputs).
func (r *replica) releaseInputs() {
	for k, x := range r.inputs {
		if x != r.x {
			r.dev.Free(x)
		}
		delete(r.inputs, k)
	}
	r.dev.Free(r.x)
	r.x, r.batch = nil, nil
}

// features returns all node features resident on r, uploading them once.
func (t *Trainer) features(r *replica) (*core.Tensor, error) {
	if r.x != nil {
		return r.x, nil
	}
	x, err := r.dev.Alloc(t.data.Graph.NumDst, t.data.FeatureDim)
	if err != nil {
		return nil, fmt.Errorf("engine: placing the %d x %d input features on %s: %w", t.data.Graph.NumDst, t.data.FeatureDim, r.dev.ID(), err)
	}
	if err := r.dev.Upload(x, t.data.Features); err != nil {
		r.dev.Free(x)
		return nil, err
	}
	r.x = x
	return x, nil
}

// batchInputs returns the features and edge weights of b resident on r,
// for units that compute the whole batch graph: those the plan's ops on r
// read (r.want), or every one with all (an evaluation runs the whole
// model there). A new batch replaces the previous one's.
func (t *Trainer) batchInputs(r *replica, b *Batch, all bool) (map[string]*core.Tensor, error) {
	if r.batch == b && (r.inputsAll || !all) {
		return r.inputs, nil
	}
	wants := func(name string) bool { return all || r.want == nil || r.want[name] }
	for k, x := range r.inputs {
		if x != r.x {
			r.dev.Free(x)
		}
		delete(r.inputs, k)
	}
	r.batch = nil
	switch {
	case !wants("x"):
	case b.Nodes == nil:
		x, err := t.features(r)
		if err != nil {
			return nil, err
		}
		r.inputs["x"] = x
	default:
		x, err := t.gatherFeatures(r.dev, nil, b, nil)
		if err != nil {
			return nil, err
		}
		r.inputs["x"] = x
	}
	for name, w := range b.weights {
		if !wants(name + ".w") {
			continue
		}
		wt, err := r.dev.Alloc(len(w), 1)
		if err != nil {
			return nil, fmt.Errorf("engine: placing the edge weights of graph %s on %s: %w", name, r.dev.ID(), err)
		}
		r.inputs[name+".w"] = wt
		if err := r.dev.Upload(wt, w); err != nil {
			return nil, err
		}
	}
	r.batch, r.inputsAll = b, all || r.want == nil
	return r.inputs, nil
}

// gatherFeatures uploads the features of the batch-local rows (all of
// the batch's nodes when rows is nil) into a new tensor, owned by env when
// env is not nil.
func (t *Trainer) gatherFeatures(dev core.Device, env *core.Env, b *Batch, rows []int32) (*core.Tensor, error) {
	n := len(rows)
	if rows == nil {
		n = b.Graph.NumDst
	}
	f := t.data.FeatureDim
	var x *core.Tensor
	var err error
	if ua, ok := dev.(core.UninitAllocator); ok {
		// Every element is written below.
		if x, err = ua.AllocUninit(n, f); err == nil && env != nil {
			env.Adopt(x)
		}
	} else if env != nil {
		x, err = env.Alloc(n, f)
	} else {
		x, err = dev.Alloc(n, f)
	}
	if err != nil {
		return nil, fmt.Errorf("engine: placing the features of %d nodes on %s: %w", n, dev.ID(), err)
	}
	if _, meta := dev.(*metaDevice); meta {
		return x, nil
	}
	// Host-resident devices take the rows in place; others through one
	// staging buffer and an upload.
	buf := x.F32()
	direct := buf != nil
	if !direct {
		buf = make([]float32, n*f)
	}
	for i := 0; i < n; i++ {
		l := int32(i)
		if rows != nil {
			l = rows[i]
		}
		g := int(b.Global(l))
		copy(buf[i*f:(i+1)*f], t.data.Features[g*f:(g+1)*f])
	}
	if direct {
		return x, nil
	}
	return x, dev.Upload(x, buf)
}

// unitEnv builds the Env a unit runs in on replica r. A group unit
// computes its whole batch with inputs owned by the Env (the groups of an
// iteration differ, so nothing batch-specific stays resident).
func (t *Trainer) unitEnv(r *replica, b *Batch, u core.Unit, training, group bool) (*core.Env, error) {
	in, err := t.unitView(b, u)
	if err != nil {
		return nil, err
	}
	return t.unitEnvFrom(r, b, u, in, training, group)
}

// unitEnvFrom is unitEnv over inputs already worked out.
func (t *Trainer) unitEnvFrom(r *replica, b *Batch, u core.Unit, in *unitInputs, training, group bool) (*core.Env, error) {
	return t.unitEnvSel(r, b, u, in, training, group, training)
}

// unitEnvSel is unitEnvFrom bringing to r, with wanted, only the batch
// inputs the plan's ops there read (r.want), else all of them.
func (t *Trainer) unitEnvSel(r *replica, b *Batch, u core.Unit, in *unitInputs, training, group, wanted bool) (*core.Env, error) {
	env := core.NewEnv(r.dev, r.params, r.grads, t.needGrad)
	if !training {
		env = core.NewEnv(r.dev, r.params, r.grads, map[string]bool{})
	}
	env.SetGradLock(&r.gradMu)
	for name, g := range in.graphs {
		env.Graphs[name] = g
	}
	if group {
		x, err := t.features(r)
		if b.Nodes != nil && err == nil {
			x, err = t.gatherFeatures(r.dev, env, b, nil)
		}
		if err != nil {
			env.Release()
			return nil, err
		}
		env.SetValue("x", x)
		for name, w := range b.weights {
			wt, err := env.Alloc(len(w), 1)
			if err != nil {
				env.Release()
				return nil, fmt.Errorf("engine: placing the edge weights of graph %s on %s: %w", name, r.dev.ID(), err)
			}
			if _, meta := r.dev.(*metaDevice); !meta {
				if err := r.dev.Upload(wt, w); err != nil {
					env.Release()
					return nil, err
				}
			}
			env.SetValue(name+".w", wt)
		}
	} else if !u.Subgraph {
		vals, err := t.batchInputs(r, b, !wanted)
		if err != nil {
			return nil, err
		}
		for name, x := range vals {
			env.SetValue(name, x)
		}
	} else {
		// A training unit brings only the inputs the plan's ops on this
		// device read (r.want): a later pipeline stage gathers no features.
		reads := func(v string) bool { return !wanted || r.want == nil || r.want[v] }
		if !in.noFeatures && reads("x") {
			x, err := t.gatherFeatures(r.dev, env, b, in.rows)
			if err != nil {
				env.Release()
				return nil, err
			}
			env.SetValue("x", x)
		}
		for name, em := range in.edgeMap {
			w, ok := b.weights[name]
			if !ok || !reads(name+".w") {
				continue
			}
			wt, err := env.Alloc(len(em), 1)
			if err != nil {
				env.Release()
				return nil, fmt.Errorf("engine: placing the edge weights of unit %d on %s: %w", u.ID, r.dev.ID(), err)
			}
			if _, meta := r.dev.(*metaDevice); !meta {
				buf := make([]float32, len(em))
				for e, id := range em {
					buf[e] = w[id]
				}
				if err := r.dev.Upload(wt, buf); err != nil {
					env.Release()
					return nil, err
				}
			}
			env.SetValue(name+".w", wt)
		}
	}
	env.NodeIDs, env.EdgeIDs = in.nodeIDs, in.edgeIDs
	env.HopRows = in.hopRows
	env.Labels = in.labels
	env.Targets = in.targets
	if len(u.Targets) > 0 {
		env.LossScale = float32(u.LossWeight / float64(len(u.Targets)))
	}
	env.Training = training
	env.Seed = mix(t.seed, uint64(t.step))
	return env, nil
}

// placeParams makes a non-home replica hold exactly the parameters in
// names (with zeroed gradient accumulators): new ones are allocated and
// left stale, for refresh to fill; ones no longer read are freed. Their
// gradients were reduced into home by the previous iteration.
func (t *Trainer) placeParams(r *replica, names map[string]bool) error {
	r.gradMu.Lock()
	defer r.gradMu.Unlock()
	for name, pt := range r.params {
		if !names[name] {
			if d, ok := t.newest[name]; ok && d == r.dev.ID() {
				// r holds the only current value: home gets it first.
				if _, err := t.copyParamsBytes(r, t.reps[t.home], map[string]bool{name: true}); err != nil {
					return fmt.Errorf("engine: saving %s from %s to home: %w", name, r.dev.ID(), err)
				}
				delete(t.newest, name)
			}
			r.dev.Free(pt)
			r.dev.Free(r.grads[name])
			delete(r.params, name)
			delete(r.grads, name)
			delete(r.ver, name)
		}
	}
	for _, p := range t.model.Params {
		if !names[p.Name] || r.params[p.Name] != nil {
			continue
		}
		pt, err := r.dev.Alloc(p.Shape...)
		if err != nil {
			return fmt.Errorf("engine: placing parameter %s on %s: %w", p.Name, r.dev.ID(), err)
		}
		gt, err := r.dev.Alloc(p.Shape...)
		if err != nil {
			r.dev.Free(pt)
			return fmt.Errorf("engine: placing the gradient of %s on %s: %w", p.Name, r.dev.ID(), err)
		}
		r.params[p.Name], r.grads[p.Name] = pt, gt
		delete(r.ver, p.Name)
	}
	return nil
}

// copyParamsBytes copies the parameters of src into dst (through the
// host), only those in names when names is not nil, and returns the bytes
// moved. dst then holds the current step's values of them.
func (t *Trainer) copyParamsBytes(src, dst *replica, names map[string]bool) (int64, error) {
	return t.copyParams(src, dst, names, t.step)
}

// copyParams is copyParamsBytes recording the values as those of step ver.
func (t *Trainer) copyParams(src, dst *replica, names map[string]bool, ver int) (int64, error) {
	var moved int64
	for _, p := range t.model.Params {
		if names != nil && !names[p.Name] {
			continue
		}
		if dst.params[p.Name] == nil {
			if dst != t.reps[t.home] {
				continue
			}
			if _, err := t.homeParam(p); err != nil { // dropped by dropHomeCopies
				return moved, err
			}
		}
		t.stateMu.Lock()
		if dst.ver == nil {
			dst.ver = map[string]int{}
		}
		dst.ver[p.Name] = ver
		t.stateMu.Unlock()
		if err := MoveTensor(src.dev, dst.dev, src.params[p.Name], dst.params[p.Name]); err != nil {
			return moved, err
		}
		moved += int64(core.NumElems(p.Shape)) * 4
	}
	return moved, nil
}

// Close frees every device buffer the trainer holds.
func (t *Trainer) Close() {
	for id, r := range t.reps {
		r.free()
		delete(t.reps, id)
	}
	for k, m := range t.moment {
		d := t.momentDev[k]
		if d == "" {
			d = t.home
		}
		if hd := t.devs[d]; hd != nil {
			for _, x := range m {
				if x != nil {
					hd.Free(x)
				}
			}
		}
		delete(t.moment, k)
		delete(t.momentDev, k)
	}
}

// Params downloads the master parameters (bringing home's copy up to
// date first).
func (t *Trainer) Params() (map[string][]float32, error) {
	if _, err := t.syncHome(); err != nil {
		return nil, err
	}
	return t.download(func(r *replica) map[string]*core.Tensor { return r.params })
}

// Grads downloads the summed gradients after an iteration run with a plan
// whose step was skipped (see RunOptions): home's accumulators, or, for
// an owner-stepped plan, each parameter's owner's. Before any iteration
// every gradient is zero.
func (t *Trainer) Grads() (map[string][]float32, error) {
	if t.reps[t.home] == nil {
		out := map[string][]float32{}
		for _, p := range t.model.Params {
			out[p.Name] = make([]float32, core.NumElems(p.Shape))
		}
		return out, nil
	}
	out, err := t.download(func(r *replica) map[string]*core.Tensor { return r.grads })
	if err != nil {
		return nil, err
	}
	for name, d := range t.gradAt {
		r := t.reps[d]
		if r == nil || r.grads[name] == nil {
			return nil, fmt.Errorf("engine: the gradient of %s is not on %s any more", name, d)
		}
		buf := make([]float32, r.grads[name].Len())
		if err := r.dev.Download(buf, r.grads[name]); err != nil {
			return nil, err
		}
		out[name] = buf
	}
	return out, nil
}

func (t *Trainer) download(pick func(*replica) map[string]*core.Tensor) (map[string][]float32, error) {
	r := t.reps[t.home]
	if r == nil {
		out := map[string][]float32{}
		for _, p := range t.model.Params {
			out[p.Name] = p.Initial(t.seed)
		}
		return out, nil
	}
	out := map[string][]float32{}
	for name, x := range pick(r) {
		buf := make([]float32, x.Len())
		if err := r.dev.Download(buf, x); err != nil {
			return nil, err
		}
		out[name] = buf
	}
	return out, nil
}

// reduceGrads adds from's gradient accumulators of the named params (all
// when names is nil) into into's and clears them.
func (t *Trainer) reduceGrads(from, into core.DeviceID, names map[string]bool) (int64, error) {
	src, dst := t.reps[from], t.reps[into]
	// Lock in device order: owners may reduce into each other at once.
	first, second := src, dst
	if into < from {
		first, second = dst, src
	}
	first.gradMu.Lock()
	defer first.gradMu.Unlock()
	second.gradMu.Lock()
	defer second.gradMu.Unlock()
	var moved int64
	for _, p := range t.model.Params {
		if names != nil && !names[p.Name] {
			continue
		}
		n := core.NumElems(p.Shape)
		tmp, err := dst.dev.Alloc(p.Shape...)
		if err != nil {
			return moved, err
		}
		err = MoveTensor(src.dev, dst.dev, src.grads[p.Name], tmp)
		if err == nil {
			g := dst.grads[p.Name]
			err = dst.dev.Kernels().Map(core.MapAdd, g, tmp, 0, g)
		}
		dst.dev.Free(tmp)
		if err != nil {
			return moved, err
		}
		moved += int64(n) * 4
	}
	if names == nil {
		return moved, t.zeroGrads(src)
	}
	return moved, t.zeroGradsOf(src, names)
}

// staged is a gradient fetched from another device, waiting to be added
// into the accumulator of param.
type staged struct {
	param string
	grad  *core.Tensor
}

// fetchGrads copies from's gradient accumulators of the named params
// onto into (in the model's parameter order) and clears them on from:
// the first half of a reduction, which can run while into still
// computes. addStaged adds them in; freeStaged frees them either way.
func (t *Trainer) fetchGrads(from, into core.DeviceID, names map[string]bool) ([]staged, int64, error) {
	src, dst := t.reps[from], t.reps[into]
	src.gradMu.Lock()
	defer src.gradMu.Unlock()
	var out []staged
	var moved int64
	for _, p := range t.model.Params {
		if !names[p.Name] {
			continue
		}
		tmp, err := dst.dev.Alloc(p.Shape...)
		if err != nil {
			return out, moved, err
		}
		out = append(out, staged{p.Name, tmp})
		if err := MoveTensor(src.dev, dst.dev, src.grads[p.Name], tmp); err != nil {
			return out, moved, err
		}
		moved += int64(core.NumElems(p.Shape)) * 4
	}
	return out, moved, t.zeroGradsOf(src, names)
}

// addStaged adds fetched gradients into into's accumulators, in order.
func (t *Trainer) addStaged(into core.DeviceID, st []staged) error {
	dst := t.reps[into]
	dst.gradMu.Lock()
	defer dst.gradMu.Unlock()
	k := dst.dev.Kernels()
	for _, s := range st {
		g := dst.grads[s.param]
		if err := k.Map(core.MapAdd, g, s.grad, 0, g); err != nil {
			return err
		}
	}
	return nil
}

// freeStaged frees fetched gradients on into.
func (t *Trainer) freeStaged(into core.DeviceID, st []staged) {
	for _, s := range st {
		t.reps[into].dev.Free(s.grad)
	}
}

func (t *Trainer) zeroGrads(r *replica) error {
	k := r.dev.Kernels()
	for _, g := range r.grads {
		if err := k.Map(core.MapFill, nil, nil, 0, g); err != nil {
			return err
		}
	}
	return nil
}

// zeroGradsOf clears r's gradient accumulators of the named params.
func (t *Trainer) zeroGradsOf(r *replica, names map[string]bool) error {
	k := r.dev.Kernels()
	for name := range names {
		if g := r.grads[name]; g != nil {
			if err := k.Map(core.MapFill, nil, nil, 0, g); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *Trainer) applyStep() error {
	r := t.reps[t.home]
	k := r.dev.Kernels()
	t.step++
	for _, p := range t.model.Params {
		st, err := t.momentOn(r, p)
		if err != nil {
			return err
		}
		if err := t.update(k, p, r.params[p.Name], r.grads[p.Name], st, t.step); err != nil {
			return err
		}
	}
	return t.zeroGrads(r)
}

// broadcast copies the master parameters to the other replicas, each
// only the params in used[replica] (what the running plan reads there);
// the rest are refreshed lazily when a plan needs them.
func (t *Trainer) broadcast(used map[core.DeviceID]map[string]bool) (int64, error) {
	var moved int64
	home := t.reps[t.home]
	ids := make([]core.DeviceID, 0, len(t.reps))
	for id := range t.reps {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if id == t.home || len(used[id]) == 0 {
			continue
		}
		n, err := t.copyParamsBytes(home, t.reps[id], used[id])
		moved += n
		if err != nil {
			return moved, err
		}
	}
	return moved, nil
}

// refresh brings the params in names up to the current step on replica r,
// each from the replica holding its newest value (home's, unless an
// owner-stepped plan left it elsewhere).
func (t *Trainer) refresh(r *replica, names map[string]bool) (int64, error) {
	from := map[core.DeviceID]map[string]bool{}
	for p := range names {
		if v, ok := r.ver[p]; ok && v == t.step {
			continue
		}
		src := t.home
		if d, ok := t.newest[p]; ok {
			src = d
		}
		if src != r.dev.ID() {
			addTo(from, src, p)
		}
	}
	return t.copyFrom(r, from)
}

// rehome makes device id the home (a plan's home that differs from the
// last): the old home's parameters are brought current, id's replica gets
// every parameter, current, and the old home becomes a replica like any
// other, emptied (a plan that uses it places what it reads there). The
// optimizer state stays where it lies, recorded there (momentOn moves it
// when a step needs it). If id cannot hold the model, nothing changes.
func (t *Trainer) rehome(id core.DeviceID) error {
	old := t.home
	if _, err := t.syncHome(); err != nil {
		return err
	}
	r, err := t.replicaOn(id)
	if err != nil {
		return err
	}
	t.home = id
	if _, err := t.copyParamsBytes(t.reps[old], r, nil); err != nil {
		t.home = old // old still holds every current value
		// The parameters placed on r as home's (no gradient beside
		// them, as a replica keeps) go again.
		r.gradMu.Lock()
		t.stateMu.Lock()
		for name, pt := range r.params {
			if r.grads[name] == nil {
				r.dev.Free(pt)
				delete(r.params, name)
				delete(r.ver, name)
			}
		}
		t.stateMu.Unlock()
		r.gradMu.Unlock()
		return err
	}
	t.stateMu.Lock()
	for p := range t.moment {
		if t.momentDev[p] == "" {
			t.momentDev[p] = old
		}
	}
	t.newest = map[string]core.DeviceID{} // the new home holds every current value
	o := t.reps[old]
	o.gradMu.Lock()
	o.free()
	clear(o.ver)
	o.gradMu.Unlock()
	t.stateMu.Unlock()
	return nil
}

// syncHome copies into home's replica the current value of every
// parameter an owner-stepped plan left newer elsewhere, and returns the
// bytes moved.
func (t *Trainer) syncHome() (int64, error) {
	if len(t.newest) == 0 {
		return 0, nil
	}
	all := map[string]bool{}
	for p := range t.newest {
		all[p] = true
	}
	return t.refreshHome(all)
}

// setHomeGrads makes home's replica hold gradient accumulators for
// exactly the named params (all when names is nil), zeroed when new.
func (t *Trainer) setHomeGrads(names map[string]bool) error {
	r := t.reps[t.home]
	r.gradMu.Lock()
	defer r.gradMu.Unlock()
	for _, p := range t.model.Params {
		want := names == nil || names[p.Name]
		g := r.grads[p.Name]
		switch {
		case want && g == nil:
			gt, err := r.dev.Alloc(p.Shape...)
			if err != nil {
				return fmt.Errorf("engine: placing the gradient of %s on %s: %w", p.Name, t.home, err)
			}
			if err := r.dev.Kernels().Map(core.MapFill, nil, nil, 0, gt); err != nil {
				r.dev.Free(gt)
				return err
			}
			r.grads[p.Name] = gt
		case !want && g != nil:
			r.dev.Free(g)
			delete(r.grads, p.Name)
		}
	}
	return nil
}

// stepOwned applies the optimizer, as step number stepNo, to the params
// in names on replica r (their owner), moving their optimizer state there
// first if it lives elsewhere, and clears their gradients there.
func (t *Trainer) stepOwned(r *replica, names map[string]bool, stepNo int) error {
	k := r.dev.Kernels()
	r.gradMu.Lock()
	defer r.gradMu.Unlock()
	for _, p := range t.model.Params {
		if !names[p.Name] {
			continue
		}
		st, err := t.momentOn(r, p)
		if err != nil {
			return err
		}
		if err := t.update(k, p, r.params[p.Name], r.grads[p.Name], st, stepNo); err != nil {
			return err
		}
		if err := k.Map(core.MapFill, nil, nil, 0, r.grads[p.Name]); err != nil {
			return err
		}
	}
	return nil
}

// momentOn returns p's optimizer state on r's device, allocating it there
// or moving it from the device that held it: the buffers the optimizer
// reads (stateBuffers; the rest nil), as Estimate counts them.
func (t *Trainer) momentOn(r *replica, p core.ParamSpec) ([2]*core.Tensor, error) {
	id := r.dev.ID()
	t.stateMu.Lock()
	st, ok := t.moment[p.Name]
	at := t.momentDev[p.Name]
	t.stateMu.Unlock()
	if ok && (at == id || at == "" && id == t.home) {
		return st, nil
	}
	var fresh [2]*core.Tensor
	freeFresh := func() {
		for _, x := range fresh {
			if x != nil {
				r.dev.Free(x)
			}
		}
	}
	for i := range t.stateBuffers() {
		x, err := r.dev.Alloc(p.Shape...)
		if err != nil {
			freeFresh()
			return st, fmt.Errorf("engine: optimizer state for %s on %s: %w", p.Name, id, err)
		}
		fresh[i] = x
	}
	if ok { // move it
		if at == "" {
			at = t.home
		}
		src := t.devs[at]
		for i, x := range fresh {
			if x == nil {
				continue
			}
			if err := MoveTensor(src, r.dev, st[i], x); err != nil {
				freeFresh()
				return st, fmt.Errorf("engine: moving the optimizer state of %s from %s to %s: %w", p.Name, at, id, err)
			}
		}
		for _, x := range st {
			if x != nil {
				src.Free(x)
			}
		}
	} else {
		k := r.dev.Kernels()
		for _, x := range fresh {
			if x == nil {
				continue
			}
			if err := k.Map(core.MapFill, nil, nil, 0, x); err != nil {
				freeFresh()
				return st, err
			}
		}
	}
	st = fresh
	t.stateMu.Lock()
	t.moment[p.Name], t.momentDev[p.Name] = st, id
	t.stateMu.Unlock()
	return st, nil
}

// stateBuffers is how many buffers the size of a parameter the optimizer
// keeps for it: Adam's two moments, SGD's momentum buffer when it has
// momentum, else none (optimizerStateBytes in bytes).
func (t *Trainer) stateBuffers() int {
	switch {
	case t.opt.Kind == "adam":
		return 2
	case t.opt.Momentum != 0:
		return 1
	}
	return 0
}

// optimizerInfo describes the trainer's optimizer to schedulers
// (core.Workload.Optimizer).
func (t *Trainer) optimizerInfo() *core.OptimizerInfo {
	return &core.OptimizerInfo{Kind: t.opt.Kind, Buffers: t.stateBuffers()}
}

// update applies one optimizer step to parameter p.
func (t *Trainer) update(k core.Kernels, p core.ParamSpec, pt, gt *core.Tensor, st [2]*core.Tensor, stepNo int) error {
	wd := float32(0)
	if p.WeightDecay {
		wd = t.opt.WeightDecay
	}
	var err error
	switch t.opt.Kind {
	case "adam":
		err = k.Adam(pt, gt, st[0], st[1], core.AdamParams{LR: t.opt.LR, Beta1: t.opt.Beta1, Beta2: t.opt.Beta2,
			Eps: t.opt.Eps, WeightDecay: wd, Step: stepNo})
	case "sgd":
		var mom *core.Tensor
		if t.opt.Momentum != 0 {
			mom = st[0]
		}
		err = k.SGD(pt, gt, mom, core.SGDParams{LR: t.opt.LR, Momentum: t.opt.Momentum, WeightDecay: wd, Step: stepNo})
	}
	if err != nil {
		return fmt.Errorf("engine: optimizer step for %s: %w", p.Name, err)
	}
	return nil
}

func sortedIDs[V any](m map[core.DeviceID]V) []core.DeviceID {
	ids := make([]core.DeviceID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

func mix(a, b uint64) uint64 {
	h := fnv.New64a()
	var buf [16]byte
	for i := 0; i < 8; i++ {
		buf[i] = byte(a >> (8 * i))
		buf[8+i] = byte(b >> (8 * i))
	}
	h.Write(buf[:])
	return h.Sum64()
}
