package cpu

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// pinThread locks the calling goroutine to its OS thread and binds that
// thread to one CPU.
func pinThread(cpu int) error {
	runtime.LockOSThread()
	var s unix.CPUSet
	s.Set(cpu)
	return unix.SchedSetaffinity(0, &s)
}

// allowedCPUs lists the CPUs this process may run on, in order.
func allowedCPUs() []int {
	var s unix.CPUSet
	if err := unix.SchedGetaffinity(0, &s); err != nil {
		return nil
	}
	var cpus []int
	for i := range 1024 {
		if s.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus
}
