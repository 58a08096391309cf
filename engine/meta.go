package engine

import (
	"context"
	"fmt"

	"github.com/gnnkit/gnnkit/core"
)

// metaDevice has shapes and a memory accountant but no storage and no
// arithmetic: running a unit on it replays the exact allocation sequence
// the executor makes, which is how Estimate predicts memory.
type metaDevice struct {
	id   core.DeviceID
	mem  *core.MemAccountant
	live map[*core.Tensor]int64
}

type metaBuf struct {
	n   int
	dev core.DeviceID
}

func (b *metaBuf) Device() core.DeviceID { return b.dev }
func (b *metaBuf) Len() int              { return b.n }

func newMeta(id core.DeviceID) *metaDevice {
	return &metaDevice{id: id, mem: core.NewMemAccountant(id, 0), live: map[*core.Tensor]int64{}}
}

func (m *metaDevice) ID() core.DeviceID { return m.id }
func (m *metaDevice) Info() core.DeviceInfo {
	return core.DeviceInfo{ID: m.id, Backend: "meta", Name: "meta"}
}
func (m *metaDevice) Kernels() core.Kernels { return metaKernels{} }
func (m *metaDevice) NewStream() core.Stream {
	return metaStream{}
}
func (m *metaDevice) Mem() *core.MemAccountant { return m.mem }

func (m *metaDevice) Alloc(shape ...int) (*core.Tensor, error) {
	for _, d := range shape {
		if d < 0 {
			return nil, fmt.Errorf("%w: meta: negative dimension in %v", core.ErrShape, shape)
		}
	}
	t := &core.Tensor{Shape: append([]int(nil), shape...), Buf: &metaBuf{n: core.NumElems(shape), dev: m.id}}
	if err := m.mem.ReserveTensor(t.Bytes(), shape); err != nil {
		return nil, err
	}
	m.live[t] = t.Bytes()
	return t, nil
}

func (m *metaDevice) Free(t *core.Tensor) {
	if n, ok := m.live[t]; ok {
		delete(m.live, t)
		m.mem.Release(n)
	}
}

func (m *metaDevice) Upload(*core.Tensor, []float32) error   { return nil }
func (m *metaDevice) Download([]float32, *core.Tensor) error { return nil }

type metaStream struct{}

func (metaStream) Record() core.Event { return core.DoneEvent{} }
func (metaStream) Wait(core.Event)    {}
func (metaStream) Sync() error        { return nil }

// metaKernels do nothing: only allocation matters on the meta device.
type metaKernels struct{}

func (metaKernels) GEMM(bool, bool, float32, *core.Tensor, *core.Tensor, float32, *core.Tensor) error {
	return nil
}
func (metaKernels) SpMM(*core.Graph, core.Reduce, *core.Tensor, *core.Tensor, *core.Tensor) error {
	return nil
}
func (metaKernels) SDDMM(*core.Graph, core.EdgeOp, *core.Tensor, *core.Tensor, *core.Tensor) error {
	return nil
}
func (metaKernels) EdgeSoftmax(*core.Graph, *core.Tensor, *core.Tensor) error { return nil }
func (metaKernels) EdgeSoftmaxBackward(*core.Graph, *core.Tensor, *core.Tensor, *core.Tensor) error {
	return nil
}
func (metaKernels) Gather(*core.Tensor, []int32, *core.Tensor) error     { return nil }
func (metaKernels) ScatterAdd(*core.Tensor, []int32, *core.Tensor) error { return nil }
func (metaKernels) Map(core.MapOp, *core.Tensor, *core.Tensor, float32, *core.Tensor) error {
	return nil
}
func (metaKernels) Reduce(core.ReduceAxis, *core.Tensor, *core.Tensor) error          { return nil }
func (metaKernels) LogSoftmax(*core.Tensor, *core.Tensor) error                       { return nil }
func (metaKernels) LogSoftmaxBackward(*core.Tensor, *core.Tensor, *core.Tensor) error { return nil }
func (metaKernels) NLLLoss(*core.Tensor, []int32, []int32, float32, *core.Tensor) (float64, error) {
	return 0, nil
}
func (metaKernels) Dropout(*core.Tensor, float32, uint64, []int32, *core.Tensor, *core.Tensor) error {
	return nil
}
func (metaKernels) Adam(*core.Tensor, *core.Tensor, *core.Tensor, *core.Tensor, core.AdamParams) error {
	return nil
}
func (metaKernels) SGD(*core.Tensor, *core.Tensor, *core.Tensor, core.SGDParams) error { return nil }

// Estimate predicts the memory of training units of batch b one after
// another on one stream of dev: the resident bytes (parameters, their
// gradients, the optimizer's moments, and the batch data kept on the
// device for units that compute the whole batch graph) and the largest
// transient bytes (activations, gradients, temporaries, the unit's own
// inputs) of any one unit. It runs the units' forward and backward passes
// on a meta device, so it makes exactly the executor's allocations.
func (t *Trainer) Estimate(b *Batch, units []core.Unit, dev core.DeviceInfo) (resident, unitPeak int64, err error) {
	if err := t.prepare(b); err != nil {
		return 0, 0, err
	}
	md, r, err := t.metaReplica(dev.ID)
	if err != nil {
		return 0, 0, err
	}
	for _, u := range units {
		if !u.Subgraph {
			if _, err := t.batchInputs(r, b, false); err != nil {
				return 0, 0, err
			}
			break
		}
	}
	resident = md.mem.Stats().Used + t.optimizerStateBytes()
	for _, u := range units {
		md.mem.ResetPeak()
		base := md.mem.Stats().Used
		env, err := t.unitEnv(r, b, u, true, false)
		if err != nil {
			return 0, 0, err
		}
		err = forward(context.Background(), t.model.Ops, env)
		if err == nil {
			err = backward(context.Background(), t.model.Ops, env)
		}
		env.Release()
		if err != nil {
			return 0, 0, fmt.Errorf("engine: estimate unit %d: %w", u.ID, err)
		}
		unitPeak = max(unitPeak, md.mem.Stats().Peak-base)
	}
	return resident, unitPeak, nil
}

// metaReplica is a replica of every parameter and gradient accumulator on
// a new meta device: the home's resident state, for estimates.
func (t *Trainer) metaReplica(id core.DeviceID) (*metaDevice, *replica, error) {
	md := newMeta(id)
	r := &replica{dev: md, params: map[string]*core.Tensor{}, grads: map[string]*core.Tensor{}, inputs: map[string]*core.Tensor{}}
	for _, p := range t.model.Params {
		var err error
		if r.params[p.Name], err = md.Alloc(p.Shape...); err != nil {
			return nil, nil, err
		}
		if r.grads[p.Name], err = md.Alloc(p.Shape...); err != nil {
			return nil, nil, err
		}
	}
	return md, r, nil
}

// optimizerStateBytes is the memory the optimizer keeps for the model's
// parameters (momentOn allocates exactly this).
func (t *Trainer) optimizerStateBytes() int64 {
	return int64(t.stateBuffers()) * t.model.ParamBytes()
}
