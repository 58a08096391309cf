package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/gnnkit/gnnkit/core"
)

// Predict returns the arg-max class of each of the given nodes (global
// ids), computed in evaluation mode (no dropout) over the full dataset
// graph on the home device, or staged over the last plan's devices when
// the home has a memory cap (stagedPlacement). It runs one full-graph
// pass; if that does not fit in memory it computes the nodes' receptive
// fields in chunks, halving the chunk until each fits. If even that runs
// out of memory and the trainer has a Config.EvalDevice, it evaluates
// there.
func (t *Trainer) Predict(ctx context.Context, nodes []int32) ([]int32, error) {
	if len(nodes) == 0 {
		return nil, nil
	}
	if len(t.reps) == 0 {
		return nil, errors.New("engine: predict before the first iteration")
	}
	var preds []int32
	var err error
	if place := t.stagedPlacement(); place != nil {
		preds, err = t.predictStaged(ctx, place, nodes)
	} else {
		preds, err = t.predictHome(ctx, nodes)
	}
	if errors.Is(err, core.ErrOutOfMemory) && t.evalDev != nil {
		if preds, err = t.predictOn(ctx, t.evalDev, nodes); err == nil {
			t.evalFallbacks++
		}
	}
	return preds, err
}

// EvalFallbacks is how many evaluations ran on Config.EvalDevice because
// the training devices ran out of memory.
func (t *Trainer) EvalFallbacks() int { return t.evalFallbacks }

// predictHome is Predict on the home device.
func (t *Trainer) predictHome(ctx context.Context, nodes []int32) ([]int32, error) {
	if _, err := t.syncHome(); err != nil {
		return nil, err
	}
	r := t.reps[t.home]
	// The plan's ops on the home device may read only some inputs (a
	// pipeline's later stage): free the rest the evaluation brought,
	// which training's memory plan does not hold.
	defer r.trimInputs()
	return t.chunked(nodes, func(u core.Unit, out []int32) error { return t.predictChunk(ctx, r, u, out) },
		r.releaseInputs) // make room: the chunks bring their own inputs
}

// predictOn is Predict on dev, a device outside the trainer's: a replica
// there gets the current parameters (from home, or the replica holding
// a newer value) and is freed after.
func (t *Trainer) predictOn(ctx context.Context, dev core.Device, nodes []int32) ([]int32, error) {
	r := &replica{dev: dev, params: map[string]*core.Tensor{}, grads: map[string]*core.Tensor{}, inputs: map[string]*core.Tensor{}}
	defer r.free()
	for _, p := range t.model.Params {
		src := t.home
		if d, ok := t.newest[p.Name]; ok {
			src = d
		}
		from := t.reps[src]
		x, err := dev.Alloc(p.Shape...)
		if err != nil {
			return nil, fmt.Errorf("engine: evaluate on the evaluation device (%s): placing %s: %w", dev.ID(), p.Name, err)
		}
		r.params[p.Name] = x
		if err := MoveTensor(from.dev, dev, from.params[p.Name], x); err != nil {
			return nil, fmt.Errorf("engine: evaluate on the evaluation device (%s): copying %s from %s: %w", dev.ID(), p.Name, src, err)
		}
	}
	preds, err := t.chunked(nodes, func(u core.Unit, out []int32) error { return t.predictChunk(ctx, r, u, out) }, r.releaseInputs)
	if err != nil {
		return nil, fmt.Errorf("engine: evaluate on the evaluation device (%s), the training devices having run out of memory: %w", dev.ID(), err)
	}
	return preds, nil
}

// chunked evaluates nodes with eval: all of them in one unit computing
// the whole graph, else, out of memory, after release, in subgraph units
// of halving chunks until each fits (a chunk computes only its nodes'
// receptive fields).
func (t *Trainer) chunked(nodes []int32, eval func(u core.Unit, out []int32) error, release func()) ([]int32, error) {
	preds := make([]int32, len(nodes))
	err := eval(core.Unit{Targets: nodes}, preds)
	if !errors.Is(err, core.ErrOutOfMemory) || t.model.Config.Layers <= 0 {
		return preds, err
	}
	release()
	for chunk := (len(nodes) + 1) / 2; ; chunk = (chunk + 1) / 2 {
		err = nil
		for lo := 0; lo < len(nodes) && err == nil; lo += chunk {
			hi := min(len(nodes), lo+chunk)
			err = eval(core.Unit{Targets: nodes[lo:hi], Subgraph: true}, preds[lo:hi])
		}
		if !errors.Is(err, core.ErrOutOfMemory) || chunk == 1 {
			return preds, err
		}
	}
}

// stagedPlacement is the last plan's placement of the ops (Trainer.place)
// when Predict should follow it: the home device has a memory cap, and
// the ops ran on several devices, all of them local. Else nil: Predict
// runs on the home device.
func (t *Trainer) stagedPlacement() []core.DeviceID {
	if t.place == nil || t.reps[t.home].dev.Mem().Stats().Cap <= 0 {
		return nil
	}
	several := false
	for _, d := range t.place {
		r := t.reps[d]
		if r == nil || t.devs[d] == nil {
			return nil // a worker's device, or one the trainer no longer holds
		}
		several = several || d != t.home
	}
	if !several {
		return nil
	}
	return t.place
}

// predictStaged is Predict over placement place: each op runs on its
// device with that replica's parameters, brought up to the current step
// first, reading values other devices computed through copies (as
// pipeline stages do). The whole graph in one pass, else subgraph chunks
// of the nodes, halved until each fits.
func (t *Trainer) predictStaged(ctx context.Context, place []core.DeviceID, nodes []int32) ([]int32, error) {
	names := map[core.DeviceID]map[string]bool{}
	for o, d := range place {
		if names[d] == nil { // every device of the placement, with parameters or none
			names[d] = map[string]bool{}
		}
		for _, p := range t.opPar[o] {
			addTo(names, d, p)
		}
	}
	devs := sortedIDs(names)
	// What evaluating brought stays only where training keeps it: whole
	// units keep their batch inputs resident; subgraph units bring their
	// own each time.
	defer func() {
		for _, d := range devs {
			if t.wholeUnits {
				t.reps[d].trimInputs()
			} else {
				t.reps[d].releaseInputs()
			}
		}
	}()
	for _, d := range devs {
		if _, err := t.refresh(t.reps[d], names[d]); err != nil {
			return nil, fmt.Errorf("engine: evaluate: %w", err)
		}
	}
	return t.chunked(nodes, func(u core.Unit, out []int32) error { return t.predictStagedChunk(ctx, place, u, out) },
		func() {
			for _, d := range devs {
				t.reps[d].releaseInputs() // make room: the chunks bring their own inputs
			}
		})
}

// predictStagedChunk evaluates unit u over placement place and writes
// the arg-max class of each target to preds.
func (t *Trainer) predictStagedChunk(ctx context.Context, place []core.DeviceID, u core.Unit, preds []int32) error {
	envs := map[core.DeviceID]*core.Env{}
	defer func() {
		for _, env := range envs {
			env.Release()
		}
	}()
	ops := t.model.Ops
	for o, d := range place {
		if err := ctx.Err(); err != nil {
			return err
		}
		env := envs[d]
		if env == nil {
			in, err := t.unitView(t.full, u)
			if err != nil {
				return err
			}
			// Only the inputs the plan's ops there read, as in training.
			if env, err = t.unitEnvSel(t.reps[d], t.full, u, in, false, false, true); err != nil {
				return err
			}
			env.Targets = nil
			envs[d] = env
		}
		for _, v := range ops[o].Inputs() {
			p, ok := t.producer[v]
			if !ok || place[p] == d {
				continue
			}
			if _, err := env.Value(v); err == nil {
				continue // copied already
			}
			from := envs[place[p]]
			x, err := from.Value(v)
			if err != nil {
				return err
			}
			y, _, err := copyTensor(from.Dev, x, env)
			if err != nil {
				return fmt.Errorf("engine: evaluate: moving %s from %s to %s: %w", v, place[p], d, err)
			}
			env.SetValue(v, y)
		}
		if err := ops[o].Forward(env); err != nil {
			return fmt.Errorf("engine: evaluate: forward %s on %s: %w", ops[o].Name(), d, err)
		}
	}
	return t.writePreds(envs[place[t.producer[t.model.Output]]], u, preds)
}

// predictChunk evaluates unit u (targets are global ids) and writes the
// arg-max class of each target to preds.
func (t *Trainer) predictChunk(ctx context.Context, r *replica, u core.Unit, preds []int32) error {
	env, err := t.unitEnv(r, t.full, u, false, false)
	if err != nil {
		return err
	}
	defer env.Release()
	env.Targets = nil
	if err := forward(ctx, t.model.Ops, env); err != nil {
		return fmt.Errorf("engine: evaluate: %w", err)
	}
	return t.writePreds(env, u, preds)
}

// writePreds writes to preds the arg-max class of each of unit u's
// targets, from the model's output in env.
func (t *Trainer) writePreds(env *core.Env, u core.Unit, preds []int32) error {
	out, err := env.Value(t.model.Output)
	if err != nil {
		return err
	}
	buf := make([]float32, out.Len())
	if err := env.Dev.Download(buf, out); err != nil {
		return err
	}
	c := out.Cols()
	for i, n := range u.Targets {
		row := int(n)
		if u.Subgraph {
			row = i // seeds come first in a subgraph unit
		}
		preds[i] = argmax(buf[row*c : (row+1)*c])
	}
	return nil
}

func argmax(row []float32) int32 {
	best := 0
	for c := 1; c < len(row); c++ {
		if row[c] > row[best] {
			best = c
		}
	}
	return int32(best)
}

// Accuracy is the share of nodes whose prediction equals their label.
func Accuracy(preds []int32, labels []int32, nodes []int32) float64 {
	if len(nodes) == 0 {
		return 0
	}
	correct := 0
	for i, n := range nodes {
		if preds[i] == labels[n] {
			correct++
		}
	}
	return float64(correct) / float64(len(nodes))
}
