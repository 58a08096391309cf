//go:build cuda

package cuda

import (
	"errors"
	"runtime"
	"sync"

	"gorgonia.org/cu"
)

// errClosed is returned by a device used after its backend was closed.
var errClosed = errors.New("cuda: device closed")

// worker owns one device's CUDA context: a goroutine locked to its OS
// thread, with the device's primary context current on that thread for
// its whole life, runs the closures sent to it one at a time. Every
// driver call that enqueues work or changes state on the device (memory,
// modules, launches, copies, events, streams) is such a closure, so
// calls never race for the context and never run on a thread where it is
// not current.
//
// Why not gorgonia.org/cu's own Ctx or BatchedContext: cu.NewContext
// creates a separate (non-primary) context with cuCtxCreate and panics
// when that fails, sets a finalizer that destroys the context when the
// *Ctx is garbage collected, closes its work channel in Close while a
// concurrent Do may still send on it (a panic), and its void methods
// (LaunchKernel, MemFree, ...) store their error in one shared field, so
// concurrent callers read each other's errors. BatchedContext queues calls
// in C and reports errors later, to save cgo overhead that is noise next
// to a ~5 µs kernel launch. We need errors per call, no panics, the
// primary context (shared with any other CUDA user in the process, and
// what the driver JIT caches against) and a Close that waits for callers:
// this type is those ~60 lines.
//
// Blocking waits (an event or the stream reaching a point) are the one
// exception: waitOn runs them on the caller's own locked thread with the
// context pushed, so a goroutine waiting for the GPU does not stop other
// goroutines from enqueueing work on the same device.
type worker struct {
	ctx  cu.CUContext
	reqs chan func()

	// mu is held for reading by every call in flight and for writing by
	// close, which so waits for them and makes later calls fail.
	mu     sync.RWMutex
	closed bool
}

// startWorker starts the device's thread and makes dev's primary context
// current on it.
func startWorker(dev cu.Device) (*worker, error) {
	w := &worker{reqs: make(chan func())}
	ready := make(chan error, 1)
	go func() {
		// Never unlocked: when the loop ends the goroutine exits locked
		// and the runtime retires the thread with the context on it.
		runtime.LockOSThread()
		ctx, err := dev.RetainPrimaryCtx()
		if err == nil {
			if err = cu.SetCurrentContext(ctx); err != nil {
				_ = dev.ReleasePrimaryCtx()
			}
		}
		w.ctx = ctx
		ready <- err
		if err != nil {
			return
		}
		for f := range w.reqs {
			f()
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return w, nil
}

// do runs f on the device's thread and returns its error, or errClosed
// after close. f must not call do (it would wait for itself).
func (w *worker) do(f func() error) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return errClosed
	}
	done := make(chan error, 1)
	w.reqs <- func() { done <- f() }
	return <-done
}

// close waits for the calls in flight, runs last on the device's thread
// (the device's teardown) and stops the thread. Later calls return
// errClosed. It reports whether this call closed the worker.
func (w *worker) close(last func() error) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false, nil
	}
	done := make(chan error, 1)
	w.reqs <- func() { done <- last() }
	err := <-done
	w.closed = true
	close(w.reqs)
	return true, err
}

// isClosed reports whether close has run.
func (w *worker) isClosed() bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.closed
}

// hold runs f on the calling goroutine with the worker held open (close
// waits for it), or returns errClosed.
func (w *worker) hold(f func() error) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return errClosed
	}
	return f()
}

// waitOn runs a blocking driver wait f on the calling goroutine, locked
// to its thread with the device's context pushed for the call (see
// worker). It holds the read lock, so close waits for it.
func (w *worker) waitOn(f func() error) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return errClosed
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.PushCurrentCtx(w.ctx); err != nil {
		return err
	}
	err := f()
	if _, perr := cu.PopCurrentCtx(); err == nil {
		err = perr
	}
	return err
}
