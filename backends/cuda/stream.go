//go:build cuda

package cuda

import (
	"runtime"
	"sync"

	"gorgonia.org/cu"

	"github.com/gnnkit/gnnkit/core"
)

// NewStream returns a stream on the device. core.Kernels calls carry no
// stream, so every stream of a device is a view of the device's one
// driver stream, where all its work runs in the order it was queued;
// events are driver events recorded on it.
func (d *Device) NewStream() core.Stream { return &Stream{d: d} }

// Stream is an in-order view of the device's driver stream.
type Stream struct{ d *Device }

// Record records a driver event on the device's stream and returns it:
// it passes once all work queued on the device before it is done. On a
// closed device it returns an event that has passed.
func (s *Stream) Record() core.Event {
	d := s.d
	h := &eventHandle{d: d}
	err := d.w.do(func() error {
		ev, err := cu.MakeEvent(cu.DisableTiming)
		if err != nil {
			return err
		}
		if err := ev.Record(d.stream); err != nil {
			_ = cu.DestroyEvent(&ev)
			return err
		}
		h.ev, h.ok = ev, true
		return nil
	})
	if err != nil {
		// closed, or the driver failed: wait for everything instead
		_ = s.Sync()
		return core.DoneEvent{}
	}
	d.mu.Lock()
	d.events[h] = struct{}{}
	d.mu.Unlock()
	e := &Event{h: h}
	runtime.AddCleanup(e, (*eventHandle).release, h)
	return e
}

// Wait makes later work on the stream wait for e: nothing to do for an
// event of the same device (its stream is in order), a wait queued on
// the GPU (cuStreamWaitEvent) for an event of another CUDA device, and a
// host wait for any other event.
func (s *Stream) Wait(e core.Event) {
	if e == nil {
		return
	}
	oe, ok := e.(*Event)
	if !ok {
		e.Wait()
		return
	}
	if oe.h.d == s.d {
		return
	}
	// hold the event's device open while its event is used
	err := oe.h.d.w.hold(func() error {
		ev, ok := oe.h.get()
		if !ok {
			return nil // released: it has passed
		}
		return s.d.w.do(func() error { return s.d.stream.Wait(ev, 0) })
	})
	if err != nil {
		oe.Wait() // fall back to waiting on the host
	}
	runtime.KeepAlive(oe)
}

// Sync blocks until all work queued on the device has completed. It
// returns the driver's error, if a kernel failed; nil on a closed device.
func (s *Stream) Sync() error {
	d := s.d
	err := d.w.waitOn(d.stream.Synchronize)
	if err == errClosed {
		return nil
	}
	return err
}

// Event is a driver event recorded on a device's stream.
type Event struct{ h *eventHandle }

// eventHandle owns the driver event; it is destroyed when the Event is
// garbage collected, or when its device is closed.
type eventHandle struct {
	d  *Device
	mu sync.Mutex
	ev cu.Event
	ok bool // ev is live
}

// Wait blocks until the event has passed (at once after its device was
// closed). It waits on the calling goroutine, not the device's thread.
func (e *Event) Wait() {
	h := e.h
	_ = h.d.w.waitOn(func() error {
		ev, ok := h.get()
		if !ok {
			return nil
		}
		return ev.Synchronize()
	})
	runtime.KeepAlive(e)
}

// get returns the driver event, and whether it is still live.
func (h *eventHandle) get() (cu.Event, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ev, h.ok
}

// release destroys the driver event (the Event's cleanup).
func (h *eventHandle) release() {
	h.d.mu.Lock()
	delete(h.d.events, h)
	h.d.mu.Unlock()
	_ = h.d.w.do(func() error {
		h.mu.Lock()
		h.destroyOnWorker()
		h.mu.Unlock()
		return nil
	})
}

// destroyOnWorker destroys the event; on the worker, with h.mu held.
func (h *eventHandle) destroyOnWorker() {
	if h.ok {
		_ = cu.DestroyEvent(&h.ev)
		h.ok = false
	}
}
