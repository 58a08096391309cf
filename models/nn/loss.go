package nn

import (
	"github.com/gnnkit/gnnkit/core"
)

// CrossEntropy is the loss every model ends with: the mean (or any
// Env.LossScale-weighted sum) over Env.Targets of -log softmax(logits)
// at each target's label. Forward sets Env.Loss and binds the 1 x 1 loss
// value; with no targets (evaluation) the loss is 0. It is the root of
// backward: Backward ignores any gradient of its output and produces
// dlogits = LogSoftmaxBackward(logp, dNLL).
type CrossEntropy struct {
	base
	logits, loss string
	classes      int
}

// NewCrossEntropy returns the loss over logits (N x classes), written to
// the value loss.
func NewCrossEntropy(name, logits, loss string, classes int) *CrossEntropy {
	return &CrossEntropy{base: newBase(name, core.KindLoss, []string{logits}, loss), logits: logits, loss: loss, classes: classes}
}

// logSoftmax returns a temporary log-softmax of the logits.
func (op *CrossEntropy) logSoftmax(env *core.Env, s *scratch) (*core.Tensor, error) {
	x, err := env.Value(op.logits)
	if err != nil {
		return nil, err
	}
	if err := checkShape(op.logits, x, -1, op.classes); err != nil {
		return nil, err
	}
	logp, err := s.alloc(x.Rows(), op.classes)
	if err != nil {
		return nil, err
	}
	return logp, env.K.LogSoftmax(x, logp)
}

// Forward computes the loss.
func (op *CrossEntropy) Forward(env *core.Env) error {
	s := &scratch{env: env}
	defer s.free()
	logp, err := op.logSoftmax(env, s)
	if err != nil {
		return op.errf(err)
	}
	loss := 0.0
	if len(env.Targets) > 0 {
		if loss, err = env.K.NLLLoss(logp, env.Labels, env.Targets, env.LossScale, nil); err != nil {
			return op.errf(err)
		}
	}
	env.Loss = loss
	return op.errf(output(env, op.loss, 1, 1, func(t *core.Tensor) error {
		return env.K.Map(core.MapFill, nil, nil, float32(loss), t)
	}))
}

// Backward recomputes the log-softmax and produces dlogits.
func (op *CrossEntropy) Backward(env *core.Env) error {
	if len(env.Targets) == 0 || !env.NeedsGrad(op.logits) {
		return nil
	}
	s := &scratch{env: env}
	defer s.free()
	logp, err := op.logSoftmax(env, s)
	if err != nil {
		return op.errf(err)
	}
	dnll, err := s.alloc(logp.Rows(), op.classes)
	if err != nil {
		return op.errf(err)
	}
	if _, err := env.K.NLLLoss(logp, env.Labels, env.Targets, env.LossScale, dnll); err != nil {
		return op.errf(err)
	}
	return op.errf(accum(env, op.logits, logp.Rows(), op.classes, func(dx *core.Tensor) error {
		return env.K.LogSoftmaxBackward(logp, dnll, dx)
	}))
}

// Cost counts the log-softmax (max, exp, sum, subtract) forward and again
// backward, where the loss gradient and the log-softmax backward follow;
// the logits are kept.
func (op *CrossEntropy) Cost(d core.Dims) core.Cost {
	nc := d.Nodes * int64(op.classes)
	fwd := core.Cost{FLOPs: 4 * nc, BytesMoved: f32 * 2 * nc}
	c := fwd.Add(core.Cost{ActivationBytes: f32 * nc})
	if op.gradFor(op.logits) {
		c = c.Add(fwd).Add(core.Cost{FLOPs: 4 * nc, BytesMoved: f32 * 4 * nc})
	}
	return c
}
