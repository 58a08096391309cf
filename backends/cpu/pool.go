package cpu

import (
	"sync"
	"sync/atomic"
)

// pool is a device's workers: threads-1 goroutines that help the calling
// goroutine run the pieces of one kernel call. A call never has more
// than threads goroutines working on it, and helpers are only taken when
// idle (a non-blocking send), so concurrent callers on one device never
// wait on each other and never deadlock.
type pool struct {
	threads int
	jobs    chan *job
	done    chan struct{}
	once    sync.Once
}

// job is one kernel call split into n pieces, handed out by an atomic
// counter to the caller and its helpers.
type job struct {
	fn   func(piece int)
	n    int64
	next atomic.Int64
	wg   sync.WaitGroup
}

var jobs = sync.Pool{New: func() any { return new(job) }}

func newPool(threads int) *pool {
	p := &pool{threads: threads, jobs: make(chan *job), done: make(chan struct{})}
	for range threads - 1 {
		go p.worker()
	}
	return p
}

func (p *pool) worker() {
	for {
		select {
		case j := <-p.jobs:
			j.work()
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
		j.fn(int(i))
	}
}

// run calls fn(0), ..., fn(n-1), each exactly once, spread over at most
// p.threads goroutines (the caller included). Pieces must write disjoint
// memory; which goroutine runs a piece is unspecified, so results must
// not depend on it.
func (p *pool) run(n int, fn func(piece int)) {
	if n <= 0 {
		return
	}
	helpers := min(p.threads-1, n-1)
	if helpers <= 0 {
		for i := range n {
			fn(i)
		}
		return
	}
	j := jobs.Get().(*job)
	j.fn, j.n = fn, int64(n)
	j.next.Store(0)
offer:
	for range helpers {
		j.wg.Add(1)
		select {
		case p.jobs <- j:
		default: // no idle worker: the caller does the rest
			j.wg.Done()
			break offer
		}
	}
	j.work()
	j.wg.Wait()
	j.fn = nil
	jobs.Put(j)
}

// pieces returns how many pieces to split work over n items into: at
// most n, at most 4 per thread, and none smaller than about minWork
// units (so tiny kernels stay on the caller).
func (p *pool) pieces(n int, work int64) int {
	const minWork = 1 << 14
	k := min(int64(n), int64(4*p.threads), max(1, work/minWork))
	if p.threads == 1 {
		k = 1
	}
	return int(max(k, 1))
}
