package cpu

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/gnnkit/gnnkit/backends/cpu/internal/kern"
)

// PeakFLOPS measures the machine's float32 arithmetic peak with a kernel
// variant's register-only FMA loop (no memory traffic) run on threads
// goroutines at once, each locked to an OS thread and, with pin, bound to
// its own CPU. It returns the best of reps runs of about 50 ms, in FLOP/s.
func PeakFLOPS(variant string, threads int, pin bool, reps int) (float64, error) {
	v, ok := kern.Lookup(variant)
	if !ok || !v.Usable() || v.FMAPeak == nil {
		return 0, fmt.Errorf("cpu: no usable variant %q with an FMA loop", variant)
	}
	if threads > MaxThreads {
		return 0, fmt.Errorf("cpu: %d threads asked of PeakFLOPS, each an OS thread of its own; at most %d (MaxThreads)", threads, MaxThreads)
	}
	threads = max(threads, 1)
	var cpus []int
	if pin {
		cpus = allowedCPUs()
	}
	// iterations for about 50 ms per run, from a short calibration
	t0 := time.Now()
	v.FMAPeak(1 << 16)
	iters := max(1<<16, int(float64(1<<16)*0.05/max(time.Since(t0).Seconds(), 1e-6)))
	best := 0.0
	for range max(reps, 1) {
		var wg sync.WaitGroup
		start := make(chan struct{})
		times := make([]time.Duration, threads)
		for t := range threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				if len(cpus) > 0 {
					_ = pinThread(cpus[t%len(cpus)])
				}
				v.FMAPeak(1000) // warm up the vector unit
				<-start
				t0 := time.Now()
				v.FMAPeak(iters)
				times[t] = time.Since(t0)
			}()
		}
		close(start)
		wg.Wait()
		var flops float64
		for _, d := range times {
			flops += float64(v.PeakFLOPs) * float64(iters) / d.Seconds()
		}
		best = max(best, flops)
	}
	return best, nil
}

// CopyBandwidth measures memory copy bandwidth over two buffers of bytes
// each (first touched before timing), split over threads goroutines:
// (bytes read + bytes written) / time, for each of reps copies, sorted.
func CopyBandwidth(bytes int64, threads, reps int) []float64 {
	n := int(bytes / 4)
	src, dst := make([]float32, n), make([]float32, n)
	for i := range src {
		src[i] = 1
	}
	threads = max(threads, 1)
	cp := func() time.Duration {
		t0 := time.Now()
		var wg sync.WaitGroup
		for t := range threads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lo, hi := t*n/threads, (t+1)*n/threads
				copy(dst[lo:hi], src[lo:hi])
			}()
		}
		wg.Wait()
		return time.Since(t0)
	}
	cp() // first touch of dst
	out := make([]float64, max(reps, 1))
	for i := range out {
		out[i] = float64(8*n) / cp().Seconds()
	}
	sort.Float64s(out)
	return out
}
