package gradcheck

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/gnnkit/gnnkit/core"
)

// Data is a host tensor: a shape and its row-major values.
type Data struct {
	Shape []int
	V     []float32
}

// Rand returns a tensor of the given shape with values uniform in
// [-1,1), or in ±[min,1) when min > 0 (away from the kinks of ReLU-like
// functions).
func Rand(r *rand.Rand, min float64, shape ...int) *Data {
	d := &Data{Shape: shape, V: make([]float32, core.NumElems(shape))}
	for i := range d.V {
		v := min + (1-min)*r.Float64()
		if r.IntN(2) == 0 {
			v = -v
		}
		d.V[i] = float32(v)
	}
	return d
}

// Clone returns a deep copy.
func (d *Data) Clone() *Data {
	return &Data{Shape: append([]int(nil), d.Shape...), V: append([]float32(nil), d.V...)}
}

// Case is a piece of a model to check: ops run over bound values, params
// and graphs. The scalar checked is L = sum over Seeds of <out, R>, plus
// Env.Loss when a loss op runs.
type Case struct {
	Dev    core.Device
	Ops    []core.Op
	Graphs map[string]*core.Graph
	Values map[string]*Data // bound with Env.SetValue
	Params map[string]*Data // bound as the device's params
	// NeedGrad lists the values and params backward must produce
	// gradients for (and their descendants); nil: derived from the ops
	// as core.Model.NeedsGrad does, with every Value and Param needing one.
	NeedGrad map[string]bool
	// Seeds are gradient seeds: output value name -> R.
	Seeds map[string]*Data

	Training  bool
	Seed      uint64
	Labels    []int32
	Targets   []int32
	LossScale float32
}

func (c *Case) needGrad() map[string]bool {
	if c.NeedGrad != nil {
		need := map[string]bool{}
		for k, v := range c.NeedGrad {
			need[k] = v
		}
		c.propagate(need)
		return need
	}
	need := map[string]bool{}
	for k := range c.Values {
		need[k] = true
	}
	for k := range c.Params {
		need[k] = true
	}
	c.propagate(need)
	return need
}

func (c *Case) propagate(need map[string]bool) {
	for _, op := range c.Ops {
		any := false
		for _, in := range op.Inputs() {
			any = any || need[in]
		}
		if any {
			for _, out := range op.Outputs() {
				need[out] = true
			}
		}
	}
}

func upload(dev core.Device, d *Data) (*core.Tensor, error) {
	t, err := dev.Alloc(d.Shape...)
	if err != nil {
		return nil, err
	}
	if err := dev.Upload(t, d.V); err != nil {
		dev.Free(t)
		return nil, err
	}
	return t, nil
}

func download(dev core.Device, t *core.Tensor) ([]float32, error) {
	out := make([]float32, t.Len())
	return out, dev.Download(out, t)
}

// Run evaluates the case once: forward, the scalar L and, when grads is
// set, backward and the gradients of every Value and Param that needs one
// (nil where none flowed).
func (c *Case) Run(grads bool) (loss float64, g map[string][]float32, err error) {
	dev := c.Dev
	params, pgrads := map[string]*core.Tensor{}, map[string]*core.Tensor{}
	defer func() {
		for _, m := range []map[string]*core.Tensor{params, pgrads} {
			for _, t := range m {
				dev.Free(t)
			}
		}
	}()
	for name, d := range c.Params {
		t, err := upload(dev, d)
		if err != nil {
			return 0, nil, err
		}
		params[name] = t
		z, err := dev.Alloc(d.Shape...)
		if err != nil {
			return 0, nil, err
		}
		pgrads[name] = z
	}
	need := c.needGrad()
	env := core.NewEnv(dev, params, pgrads, need)
	defer env.Release()
	env.Graphs = c.Graphs
	env.Training, env.Seed = c.Training, c.Seed
	env.Labels, env.Targets, env.LossScale = c.Labels, c.Targets, c.LossScale
	for name, d := range c.Values {
		t, err := upload(dev, d)
		if err != nil {
			return 0, nil, err
		}
		env.Adopt(t)
		env.SetValue(name, t)
	}
	for _, op := range c.Ops {
		if err := op.Forward(env); err != nil {
			return 0, nil, fmt.Errorf("forward %s: %w", op.Name(), err)
		}
	}
	loss = env.Loss
	for name, r := range c.Seeds {
		t, err := env.Value(name)
		if err != nil {
			return 0, nil, err
		}
		v, err := download(dev, t)
		if err != nil {
			return 0, nil, err
		}
		if len(v) != len(r.V) {
			return 0, nil, fmt.Errorf("seed %s has %d values, output has %d", name, len(r.V), len(v))
		}
		for i := range v {
			loss += float64(v[i]) * float64(r.V[i])
		}
	}
	if !grads {
		return loss, nil, nil
	}
	for name, r := range c.Seeds {
		t, err := upload(dev, r)
		if err != nil {
			return 0, nil, err
		}
		env.Adopt(t)
		env.SetGrad(name, t)
	}
	for i := len(c.Ops) - 1; i >= 0; i-- {
		if err := c.Ops[i].Backward(env); err != nil {
			return 0, nil, fmt.Errorf("backward %s: %w", c.Ops[i].Name(), err)
		}
	}
	g = map[string][]float32{}
	for name := range c.Values {
		if t := env.Grad(name); t != nil && need[name] {
			if g[name], err = download(dev, t); err != nil {
				return 0, nil, err
			}
		}
	}
	for name, t := range pgrads {
		if need[name] {
			if g[name], err = download(dev, t); err != nil {
				return 0, nil, err
			}
		}
	}
	return loss, g, nil
}

// Result is the comparison for one checked tensor.
type Result struct {
	Name string
	// MaxRel is the largest elementwise |analytic - numeric| /
	// max(|analytic|, |numeric|, Floor).
	MaxRel float64
	// MaxAbs is the largest |analytic - numeric| and Scale the largest
	// |numeric|, for a normwise view: MaxAbs/Scale.
	MaxAbs, Scale float64
	// Bad lists the elements outside the tolerance.
	Bad []string
}

// Options tune a check.
type Options struct {
	Eps  float64 // step; default 1e-2
	RTol float64 // relative tolerance; default 1e-2
	// ATol is an absolute tolerance as a fraction of the tensor's largest
	// numeric gradient; default 1e-3.
	ATol float64
	// Only restricts the check to these names (default: every Value and
	// Param that needs a gradient).
	Only []string
}

// Check compares the analytic gradient of every Value and Param that
// needs one against central differences of L. An element outside the
// tolerance is retried with a step 4 and 16 times smaller (a step across
// a ReLU kink is the usual cause) before it is reported.
func Check(c *Case, o Options) ([]Result, error) {
	if o.Eps == 0 {
		o.Eps = 1e-2
	}
	if o.RTol == 0 {
		o.RTol = 1e-2
	}
	if o.ATol == 0 {
		o.ATol = 1e-3
	}
	_, an, err := c.Run(true)
	if err != nil {
		return nil, err
	}
	names := o.Only
	if names == nil {
		need := c.needGrad()
		for n := range c.Values {
			if need[n] {
				names = append(names, n)
			}
		}
		for n := range c.Params {
			if need[n] {
				names = append(names, n)
			}
		}
		sort.Strings(names)
	}
	var res []Result
	for _, name := range names {
		d := c.Values[name]
		if d == nil {
			d = c.Params[name]
		}
		if d == nil {
			return nil, fmt.Errorf("gradcheck: %q is neither a value nor a param", name)
		}
		a := an[name]
		if a == nil {
			a = make([]float32, len(d.V)) // no gradient flowed: zero
		}
		num := make([]float64, len(d.V))
		scale := 0.0
		for k := range d.V {
			if num[k], err = c.central(d, k, o.Eps); err != nil {
				return nil, err
			}
			scale = math.Max(scale, math.Abs(num[k]))
		}
		floor := o.ATol*scale + 1e-6
		r := Result{Name: name, Scale: scale}
		for k := range d.V {
			n := num[k]
			ok, rel := within(float64(a[k]), n, o.RTol, floor)
			for _, div := range []float64{4, 16} {
				if ok {
					break
				}
				n2, err := c.central(d, k, o.Eps/div)
				if err != nil {
					return nil, err
				}
				if ok2, rel2 := within(float64(a[k]), n2, o.RTol, floor); ok2 {
					ok, rel, n = true, rel2, n2
				}
			}
			r.MaxRel = math.Max(r.MaxRel, rel)
			r.MaxAbs = math.Max(r.MaxAbs, math.Abs(float64(a[k])-n))
			if !ok {
				r.Bad = append(r.Bad, fmt.Sprintf("[%d] analytic %.6g numeric %.6g", k, a[k], num[k]))
			}
		}
		res = append(res, r)
	}
	return res, nil
}

func within(a, n, rtol, floor float64) (bool, float64) {
	diff := math.Abs(a - n)
	rel := diff / math.Max(math.Max(math.Abs(a), math.Abs(n)), floor)
	return diff <= rtol*math.Max(math.Abs(a), math.Abs(n))+floor, rel
}

// central is (L(v+eps) - L(v-eps)) / 2eps for element k of d.
func (c *Case) central(d *Data, k int, eps float64) (float64, error) {
	v := d.V[k]
	defer func() { d.V[k] = v }()
	d.V[k] = v + float32(eps)
	lp, _, err := c.Run(false)
	if err != nil {
		return 0, err
	}
	d.V[k] = v - float32(eps)
	lm, _, err := c.Run(false)
	if err != nil {
		return 0, err
	}
	step := float64(v+float32(eps)) - float64(v-float32(eps)) // the step float32 really took
	return (lp - lm) / step, nil
}
