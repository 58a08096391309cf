package nn

import (
	"fmt"

	"github.com/gnnkit/gnnkit/core"
)

var _ core.Op = (*Embedding)(nil)

// Embedding looks up one row of a table per sample: y[r] = table[idx(r)],
// the categorical input of a DLRM-style model. The categories are
// synthetic and deterministic: idx(r) hashes the row's global id
// (Env.NodeIDs, or the row index) with the op's salt into [0, rows), so
// every micro-batch of the same samples reads the same rows. x is read
// only for its row count (and orders the op after x in the DAG).
type Embedding struct {
	base
	x, table, y string
	rows, dim   int
	salt        uint64
}

// NewEmbedding returns y = table[idx(r)] for each row r of x; table is a
// rows x dim parameter.
func NewEmbedding(name, x, table, y string, rows, dim int, salt uint64) *Embedding {
	return &Embedding{base: newBase(name, core.KindGather, []string{x, table}, y), x: x, table: table, y: y,
		rows: rows, dim: dim, salt: salt}
}

// indices returns idx(r) for the n rows of the unit.
func (op *Embedding) indices(env *core.Env, n int) []int32 {
	idx := make([]int32, n)
	for r := range idx {
		id := uint64(r)
		if env.NodeIDs != nil {
			id = uint64(env.NodeIDs[r])
		}
		z := id*0x9E3779B97F4A7C15 + op.salt
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		z ^= z >> 31
		idx[r] = int32(z % uint64(op.rows))
	}
	return idx
}

// Forward gathers the rows.
func (op *Embedding) Forward(env *core.Env) error {
	x, err := env.Value(op.x)
	if err != nil {
		return op.errf(err)
	}
	t, err := env.Value(op.table)
	if err != nil {
		return op.errf(err)
	}
	if err := checkShape(op.table, t, op.rows, op.dim); err != nil {
		return op.errf(err)
	}
	if env.NodeIDs != nil && len(env.NodeIDs) != x.Rows() {
		return op.errf(fmt.Errorf("%d row ids for %d rows", len(env.NodeIDs), x.Rows()))
	}
	idx := op.indices(env, x.Rows())
	return op.errf(output(env, op.y, x.Rows(), op.dim, func(y *core.Tensor) error {
		return env.K.Gather(t, idx, y)
	}))
}

// Backward scatters dy back into the table's gradient.
func (op *Embedding) Backward(env *core.Env) error {
	dy := env.Grad(op.y)
	if dy == nil || !env.NeedsGrad(op.table) {
		return nil
	}
	idx := op.indices(env, dy.Rows())
	return op.errf(accum(env, op.table, op.rows, op.dim, func(g *core.Tensor) error {
		return env.K.ScatterAdd(dy, idx, g)
	}))
}

// Cost counts the gathered and scattered rows.
func (op *Embedding) Cost(d core.Dims) core.Cost {
	nd := d.Nodes * int64(op.dim)
	return core.Cost{FLOPs: nd, BytesMoved: f32 * 4 * nd, ActivationBytes: 0, WeightBytes: f32 * int64(op.rows*op.dim)}
}
