package nn

import (
	"fmt"

	"github.com/gnnkit/gnnkit/core"
)

// Compile-time checks that every op implements core.Op.
var (
	_ core.Op = (*Linear)(nil)
	_ core.Op = (*Bias)(nil)
	_ core.Op = (*Add)(nil)
	_ core.Op = (*Aggregate)(nil)
	_ core.Op = (*Activation)(nil)
	_ core.Op = (*Dropout)(nil)
	_ core.Op = (*HeadDot)(nil)
	_ core.Op = (*EdgeScore)(nil)
	_ core.Op = (*EdgeSoftmax)(nil)
	_ core.Op = (*CrossEntropy)(nil)
)

// f32 is the size of one tensor element in bytes.
const f32 = 4

// base holds what every op shares: its name, kind and value names, and
// which inputs are known never to need a gradient (for Cost only; at run
// time Env.NeedsGrad decides).
type base struct {
	name   string
	kind   core.OpKind
	ins    []string
	outs   []string
	noGrad map[string]bool
}

func newBase(name string, kind core.OpKind, ins []string, outs ...string) base {
	return base{name: name, kind: kind, ins: ins, outs: outs}
}

// Name returns the op's name, unique within its model.
func (b *base) Name() string { return b.name }

// Kind classifies the op for schedulers.
func (b *base) Kind() core.OpKind { return b.kind }

// Inputs returns the names of the values the op reads.
func (b *base) Inputs() []string { return append([]string(nil), b.ins...) }

// Outputs returns the names of the values the op writes.
func (b *base) Outputs() []string { return append([]string(nil), b.outs...) }

// gradFor reports whether Cost should count the backward work for input in.
func (b *base) gradFor(in string) bool { return !b.noGrad[in] }

func (b *base) annotate(need map[string]bool) {
	b.noGrad = map[string]bool{}
	for _, in := range b.ins {
		if !need[in] {
			b.noGrad[in] = true
		}
	}
}

// errf wraps err with the op's name.
func (b *base) errf(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("nn: op %s: %w", b.name, err)
}

// AnnotateGrads tells every op of m built by this package which of its
// inputs never need a gradient (m.NeedsGrad), so that their Cost leaves
// out backward work Backward will skip. Builders call it once the model is
// complete; it changes no run-time behaviour.
func AnnotateGrads(m *core.Model) {
	need := m.NeedsGrad()
	for _, op := range m.Ops {
		if a, ok := op.(interface{ annotate(map[string]bool) }); ok {
			a.annotate(need)
		}
	}
}

// values looks up several bound values at once.
func values(env *core.Env, names ...string) ([]*core.Tensor, error) {
	out := make([]*core.Tensor, len(names))
	for i, n := range names {
		t, err := env.Value(n)
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

// scratch tracks temporaries so every exit path frees them.
type scratch struct {
	env *core.Env
	ts  []*core.Tensor
}

func (s *scratch) alloc(rows, cols int) (*core.Tensor, error) {
	t, err := s.env.Alloc(rows, cols)
	if err != nil {
		return nil, err
	}
	s.ts = append(s.ts, t)
	return t, nil
}

// ones returns a rows x cols temporary filled with 1.
func (s *scratch) ones(rows, cols int) (*core.Tensor, error) {
	t, err := s.alloc(rows, cols)
	if err != nil {
		return nil, err
	}
	if err := s.env.K.Map(core.MapFill, nil, nil, 1, t); err != nil {
		return nil, err
	}
	return t, nil
}

func (s *scratch) free() {
	for _, t := range s.ts {
		s.env.Free(t)
	}
	s.ts = nil
}

// output allocates a rows x cols tensor, runs fill on it and binds it
// to name; on error the tensor is freed.
func output(env *core.Env, name string, rows, cols int, fill func(*core.Tensor) error) error {
	t, err := env.Alloc(rows, cols)
	if err != nil {
		return err
	}
	if err := fill(t); err != nil {
		env.Free(t)
		return err
	}
	env.SetValue(name, t)
	return nil
}

// accum allocates a rows x cols gradient, runs fill on it and hands it to
// env.AccumGrad(name); on error the tensor is freed.
func accum(env *core.Env, name string, rows, cols int, fill func(*core.Tensor) error) error {
	g, err := env.Alloc(rows, cols)
	if err != nil {
		return err
	}
	if err := fill(g); err != nil {
		env.Free(g)
		return err
	}
	return env.AccumGrad(name, g)
}

// accumCopy hands a copy of dy to env.AccumGrad(name) (AccumGrad takes
// ownership, and dy stays owned by its own value's gradient).
func accumCopy(env *core.Env, name string, dy *core.Tensor) error {
	return accum(env, name, dy.Rows(), dy.Cols(), func(g *core.Tensor) error {
		return env.K.Map(core.MapCopy, dy, nil, 0, g)
	})
}

// rowKind says what an op's rows are, for Cost: nodes or edges.
type rowKind uint8

const (
	onNodes rowKind = iota // one row per node (Dims.Nodes)
	onEdges                // one row per edge id (Dims.Edges)
)

func (r rowKind) count(d core.Dims) int64 {
	if r == onEdges {
		return d.Edges
	}
	return d.Nodes
}

// edgeRows is the row count of an edge tensor for g.
func edgeRows(g *core.Graph) int { return g.NumEdgeIDs() }

// checkShape reports, wrapping core.ErrShape, a value that is not
// rows x cols (a negative size is not checked).
func checkShape(what string, t *core.Tensor, rows, cols int) error {
	if (rows < 0 || t.Rows() == rows) && (cols < 0 || t.Cols() == cols) {
		return nil
	}
	dim := func(n int) string {
		if n < 0 {
			return "N"
		}
		return fmt.Sprint(n)
	}
	return fmt.Errorf("%w: %s is %dx%d, want %sx%s", core.ErrShape, what, t.Rows(), t.Cols(), dim(rows), dim(cols))
}
