package bench

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/cpuid/v2"

	"github.com/gnnkit/gnnkit/backends/cpu"
	"github.com/gnnkit/gnnkit/core"
)

// Machine is the fingerprint of the machine a results file was made on.
type Machine struct {
	Host      string   `json:"host"`
	OS        string   `json:"os"`
	Arch      string   `json:"arch"`
	CPU       string   `json:"cpu"`
	CPUVendor string   `json:"cpu_vendor"`
	CPUFamily int      `json:"cpu_family"`
	CPUModel  int      `json:"cpu_model"`
	Features  []string `json:"cpu_features"`
	// Level is the x86-64 micro-architecture level (1-4; 0 elsewhere).
	Level         int   `json:"x86_64_level,omitempty"`
	PhysicalCores int   `json:"physical_cores"`
	LogicalCores  int   `json:"logical_cores"`
	MemBytes      int64 `json:"mem_bytes"`
	// GPUs lists NVIDIA GPUs (nvidia-smi) with their driver; GPUNote says
	// why the list is empty.
	GPUs    []GPU  `json:"gpus"`
	GPUNote string `json:"gpu_note,omitempty"`
	// Accelerators are the devices of the registered non-CPU backends that
	// opened here (e.g. an OpenCL CPU or GPU device).
	Accelerators []core.DeviceInfo `json:"accelerators,omitempty"`
	GoVersion    string            `json:"go_version"`
	Gnnkit       string            `json:"gnnkit_version"`
	Commit       string            `json:"gnnkit_commit,omitempty"`
	Dirty        bool              `json:"gnnkit_dirty,omitempty"`
}

// GPU is one GPU as the driver reports it.
type GPU struct {
	Name     string `json:"name"`
	Driver   string `json:"driver"`
	MemBytes int64  `json:"mem_bytes,omitempty"`
}

// Label is a short name for reports: the host and CPU.
func (m Machine) Label() string { return m.Host }

// Fingerprint describes this machine. It never fails: what it cannot
// find it leaves empty (and says why for GPUs).
func Fingerprint(ctx context.Context) Machine {
	m := Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, GoVersion: runtime.Version(),
		CPU: strings.TrimSpace(cpuid.CPU.BrandName), CPUVendor: cpuid.CPU.VendorString,
		CPUFamily: cpuid.CPU.Family, CPUModel: cpuid.CPU.Model, Features: cpuid.CPU.FeatureSet(),
		Level: cpuid.CPU.X64Level(), PhysicalCores: cpuid.CPU.PhysicalCores, LogicalCores: cpuid.CPU.LogicalCores}
	m.Host, _ = os.Hostname()
	if m.LogicalCores == 0 {
		m.LogicalCores = runtime.NumCPU()
	}
	if m.PhysicalCores == 0 {
		m.PhysicalCores = m.LogicalCores
	}
	m.MemBytes = cpu.MemTotal()
	m.GPUs, m.GPUNote = nvidiaGPUs(ctx)
	for _, name := range core.Backends() {
		if name == "cpu" {
			continue
		}
		be, err := core.OpenBackend(name, core.BackendOptions{})
		if err != nil {
			continue
		}
		for _, d := range be.Devices() {
			m.Accelerators = append(m.Accelerators, d.Info())
		}
		be.Close()
	}
	m.Gnnkit, m.Commit, m.Dirty = version(ctx)
	return m
}

func nvidiaGPUs(ctx context.Context) ([]GPU, string) {
	if _, err := exec.LookPath("nvidia-smi"); err != nil {
		return nil, "none found: nvidia-smi is not installed"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader,nounits").Output()
	if err != nil {
		return nil, "none found: nvidia-smi failed: " + err.Error()
	}
	var gpus []GPU
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, ",")
		if len(f) < 2 {
			continue
		}
		g := GPU{Name: strings.TrimSpace(f[0]), Driver: strings.TrimSpace(f[1])}
		if len(f) > 2 {
			mib, _ := strconv.ParseInt(strings.TrimSpace(f[2]), 10, 64)
			g.MemBytes = mib << 20
		}
		gpus = append(gpus, g)
	}
	if len(gpus) == 0 {
		return nil, "none found: nvidia-smi lists no GPU"
	}
	return gpus, ""
}

// version returns gnnkit's module version and VCS commit from the build
// info, falling back to `git rev-parse HEAD` (builds with -buildvcs=false
// and `go test` carry no VCS stamp).
func version(ctx context.Context) (ver, commit string, dirty bool) {
	ver = "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			ver = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if commit == "" {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output(); err == nil {
			commit = strings.TrimSpace(string(out))
			if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
				dirty = len(strings.TrimSpace(string(st))) > 0
			}
		}
	}
	return ver, commit, dirty
}
