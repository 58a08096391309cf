//go:build !linux

package cpu

import (
	"errors"
	"runtime"
)

func pinThread(int) error {
	return errors.New("cpu: thread pinning is implemented on linux only")
}

// allowedCPUs numbers the CPUs 0..NumCPU-1 (pinning then fails per thread).
func allowedCPUs() []int {
	cpus := make([]int, runtime.NumCPU())
	for i := range cpus {
		cpus[i] = i
	}
	return cpus
}
