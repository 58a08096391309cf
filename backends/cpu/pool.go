package cpu

import (
	"sync"
	"sync/atomic"
)

// runner is one kernel call's work, split into pieces. Kernels pass a
// pointer to a pooled state struct (see statePool), so handing work to
// the pool allocates nothing.
type runner interface{ run(piece int) }

// pool is a device's workers. Unpinned, threads-1 goroutines help the
// calling goroutine run the pieces of one kernel call; pinned (Config.Pin),
// threads goroutines locked to their own CPUs do all of it while the
// caller waits. A call never has more than threads goroutines working on
// it. A worker is claimed with a compare-and-swap on its idle flag and
// clears that flag before it reports its piece done, so back-to-back
// kernel calls always find every worker of the previous call free;
// concurrent callers on one device never wait on each other (a caller
// that finds no idle worker does its pieces itself) and never deadlock.
type pool struct {
	threads int
	pinned  bool
	workers []*worker
	done    chan struct{}
	once    sync.Once
	pinErr  atomic.Pointer[error]
}

type worker struct {
	busy atomic.Bool
	jobs chan *job // capacity 1: a claimed worker never blocks the caller
}

// job is one kernel call split into n pieces, handed out by an atomic
// counter to the caller and its helpers.
type job struct {
	r    runner
	n    int64
	next atomic.Int64
	wg   sync.WaitGroup
}

var jobs = sync.Pool{New: func() any { return new(job) }}

// newPool starts the workers; with cpus set (pinning), worker i is locked
// to an OS thread bound to cpus[i%len(cpus)].
func newPool(threads int, cpus []int) *pool {
	p := &pool{threads: threads, pinned: len(cpus) > 0, done: make(chan struct{})}
	n := threads - 1
	if p.pinned {
		n = threads
	}
	for i := range n {
		w := &worker{jobs: make(chan *job, 1)}
		p.workers = append(p.workers, w)
		cpu := -1
		if p.pinned {
			cpu = cpus[i%len(cpus)]
		}
		go p.work(w, cpu)
	}
	return p
}

func (p *pool) work(w *worker, cpu int) {
	if cpu >= 0 {
		if err := pinThread(cpu); err != nil {
			p.pinErr.CompareAndSwap(nil, &err)
		}
	}
	for {
		select {
		case j := <-w.jobs:
			j.work()
			w.busy.Store(false)
			j.wg.Done()
		case <-p.done:
			return
		}
	}
}

func (p *pool) close() { p.once.Do(func() { close(p.done) }) }

func (j *job) work() {
	for {
		i := j.next.Add(1) - 1
		if i >= j.n {
			return
		}
		j.r.run(int(i))
	}
}

// run calls r.run(0), ..., r.run(n-1), each exactly once, spread over at
// most p.threads goroutines. Pieces must write disjoint memory; which
// goroutine runs a piece is unspecified, so results must not depend on it.
func (p *pool) run(n int, r runner) {
	if n <= 0 {
		return
	}
	want := min(len(p.workers), n)
	if !p.pinned {
		want = min(len(p.workers), n-1)
	}
	if want <= 0 || n == 1 {
		for i := range n {
			r.run(i)
		}
		return
	}
	j := jobs.Get().(*job)
	j.r, j.n = r, int64(n)
	j.next.Store(0)
	got := 0
	for _, w := range p.workers {
		if got == want {
			break
		}
		if w.busy.CompareAndSwap(false, true) {
			j.wg.Add(1)
			w.jobs <- j
			got++
		}
	}
	if !p.pinned || got == 0 {
		j.work()
	}
	j.wg.Wait()
	j.r = nil
	jobs.Put(j)
}

// piecesPerThread is how many pieces a kernel is cut into per thread at
// most. Pieces are handed out dynamically, so more of them balance
// better, but each restarts its stream (prefetches, non-temporal clears
// of whole buffers); measured on the 100k-node GCN epoch, 16 per thread
// was 5-15% slower than 4.
const piecesPerThread = 4

// pieces returns how many pieces to split work over n items into: at
// most n, at most piecesPerThread per thread, and none smaller than
// about minWork units (so tiny kernels stay on the caller).
func (p *pool) pieces(n int, work int64) int {
	const minWork = 1 << 14
	k := min(int64(n), int64(piecesPerThread*p.threads), max(1, work/minWork))
	if p.threads == 1 {
		k = 1
	}
	return int(max(k, 1))
}

// statePool recycles one kernel's per-call state (its runner), so a call
// allocates nothing once warm.
type statePool[T any] struct{ p sync.Pool }

func (s *statePool[T]) get() *T {
	if v, ok := s.p.Get().(*T); ok {
		return v
	}
	return new(T)
}

// put clears v (dropping references to tensors) and recycles it.
func (s *statePool[T]) put(v *T) {
	var zero T
	*v = zero
	s.p.Put(v)
}
