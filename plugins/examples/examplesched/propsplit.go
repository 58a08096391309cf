package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gnnkit/gnnkit/core"
)

var (
	_ core.Scheduler             = (*PropSplit)(nil)
	_ core.SchedulerWithFeedback = (*PropSplit)(nil)
)

// PropSplit is data-parallel training on heterogeneous devices: the batch
// is cut into contiguous shares, one per device, sized in proportion to
// each device's speed (or memory); each share runs as one or more units on
// its device's stream, the gradients are reduced into the home device (the
// one with the largest share) and one optimizer step follows. Loss weights
// are |unit| / |batch|, so training is exactly full-batch training.
//
// With Adapt set, Observe measures each device's throughput in the last
// iteration and rebalances the shares when they are off by more than
// AdaptSlack of the batch.
type PropSplit struct {
	// By picks the weight of a device: "gflops" (measured GEMM speed),
	// "threads", "mem" (the memory cap, else the physical memory), "equal",
	// or "auto" (the first of gflops, threads, mem that every device
	// reports; else equal).
	By string
	// UnitsPerDevice cuts each device's share into this many units, run
	// one after another (gradient accumulation); default 1.
	UnitsPerDevice int
	// MaxDevices uses at most the first MaxDevices devices (0: all).
	MaxDevices int
	// Adapt rebalances from measured times (Observe).
	Adapt bool
	// AdaptSlack is the fraction of the batch that must move before
	// Observe returns a new plan (default 0.02).
	AdaptSlack float64

	mu     sync.Mutex
	shares map[core.DeviceID]int // of the last plan handed out, for Observe
	home   core.DeviceID         // of the last plan; a trainer keeps its home
}

// Name returns "propsplit".
func (s *PropSplit) Name() string { return "propsplit" }

// Parse reads KEY=VALUE options (how gnnkit passes --sched-opt).
func Parse(args []string) (*PropSplit, error) {
	s := &PropSplit{By: "auto", UnitsPerDevice: 1, AdaptSlack: 0.02}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return nil, fmt.Errorf("option %q: want KEY=VALUE (by, units, devices, adapt, slack)", a)
		}
		var err error
		switch k {
		case "by":
			switch v {
			case "auto", "gflops", "threads", "mem", "equal":
				s.By = v
			default:
				err = fmt.Errorf("want auto, gflops, threads, mem or equal")
			}
		case "units":
			s.UnitsPerDevice, err = strconv.Atoi(v)
			if err == nil && s.UnitsPerDevice < 1 {
				err = fmt.Errorf("want at least 1")
			}
		case "devices":
			s.MaxDevices, err = strconv.Atoi(v)
			if err == nil && s.MaxDevices < 0 {
				err = fmt.Errorf("want 0 (all) or more")
			}
		case "adapt":
			s.Adapt, err = strconv.ParseBool(v)
		case "slack":
			s.AdaptSlack, err = strconv.ParseFloat(v, 64)
		default:
			err = fmt.Errorf("unknown option (known: by, units, devices, adapt, slack)")
		}
		if err != nil {
			return nil, fmt.Errorf("option %s=%s: %v", k, v, err)
		}
	}
	return s, nil
}

// Schedule plans one iteration; it is deterministic for a workload.
func (s *PropSplit) Schedule(ctx context.Context, w *core.Workload) (*core.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	devs, err := s.devices(w)
	if err != nil {
		return nil, err
	}
	wts, err := s.weights(devs)
	if err != nil {
		return nil, err
	}
	return s.plan(w, devs, wts, ""), nil
}

// Observe rebalances from the measured busy time of each device.
func (s *PropSplit) Observe(ctx context.Context, w *core.Workload, t *core.Trace) (*core.Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !s.Adapt || t == nil || len(w.Batch) == 0 {
		return nil, nil
	}
	devs, err := s.devices(w)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	shares, home := s.shares, s.home
	s.mu.Unlock()
	busy := map[core.DeviceID]float64{}
	for _, e := range t.Events {
		if e.Cat == core.TaskForward.String() || e.Cat == core.TaskBackward.String() {
			busy[e.Device] += e.Dur.Seconds()
		}
	}
	wts := make([]float64, len(devs))
	for i, d := range devs {
		n, b := shares[d.ID], busy[d.ID]
		if n == 0 || b <= 0 {
			return nil, nil // a device was idle or unmeasured: nothing to learn from
		}
		wts[i] = float64(n) / b // nodes per second
	}
	next := apportion(len(w.Batch), wts)
	moved := 0
	for i, d := range devs {
		moved += abs(next[i] - shares[d.ID])
	}
	if float64(moved)/2 <= s.AdaptSlack*float64(len(w.Batch)) {
		return nil, nil
	}
	return s.plan(w, devs, wts, home), nil
}

func (s *PropSplit) devices(w *core.Workload) ([]core.DeviceInfo, error) {
	if len(w.Devices) == 0 {
		return nil, fmt.Errorf("propsplit: the workload has no devices")
	}
	if len(w.Ops) == 0 {
		return nil, fmt.Errorf("propsplit: the workload's model has no ops")
	}
	devs := w.Devices
	if s.MaxDevices > 0 && s.MaxDevices < len(devs) {
		devs = devs[:s.MaxDevices]
	}
	return devs, nil
}

// weights returns each device's relative speed (or memory).
func (s *PropSplit) weights(devs []core.DeviceInfo) ([]float64, error) {
	metrics := map[string]func(core.DeviceInfo) float64{
		"gflops":  func(d core.DeviceInfo) float64 { return d.GFLOPS },
		"threads": func(d core.DeviceInfo) float64 { return float64(d.Threads) },
		"mem": func(d core.DeviceInfo) float64 {
			if d.MemCap > 0 {
				return float64(d.MemCap)
			}
			return float64(d.MemTotal)
		},
		"equal": func(core.DeviceInfo) float64 { return 1 },
	}
	pick := func(by string) ([]float64, *core.DeviceInfo) {
		out := make([]float64, len(devs))
		for i, d := range devs {
			if out[i] = metrics[by](d); !(out[i] > 0) || math.IsInf(out[i], 0) {
				return nil, &devs[i]
			}
		}
		return out, nil
	}
	if s.By == "" || s.By == "auto" {
		for _, by := range []string{"gflops", "threads", "mem", "equal"} {
			if w, bad := pick(by); bad == nil {
				return w, nil
			}
		}
	}
	m, ok := metrics[s.By]
	if !ok {
		return nil, fmt.Errorf("propsplit: unknown weighting %q", s.By)
	}
	w, bad := pick(s.By)
	if bad != nil {
		return nil, fmt.Errorf("propsplit: by=%s, but device %s reports %v: %w", s.By, bad.ID, m(*bad), core.ErrUnsupported)
	}
	return w, nil
}

// apportion splits n into len(w) non-negative parts proportional to w
// (largest remainder; ties go to the earlier device).
func apportion(n int, w []float64) []int {
	sum := 0.0
	for _, x := range w {
		sum += x
	}
	out := make([]int, len(w))
	rem := make([]float64, len(w))
	left := n
	for i, x := range w {
		q := float64(n) * x / sum
		out[i] = int(math.Floor(q))
		rem[i] = q - float64(out[i])
		left -= out[i]
	}
	order := make([]int, len(w))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return rem[order[a]] > rem[order[b]] })
	for i := 0; i < left; i++ {
		out[order[i%len(order)]]++
	}
	return out
}

// plan builds the plan for the given weights: contiguous shares of the
// batch, units on stream 0 of their device, reductions and the step on the
// home device after its own units. The home stays keep if it is one of devs
// (a replan must not move the master parameters: the engine refuses a new
// home mid-training), else the device with the largest share.
func (s *PropSplit) plan(w *core.Workload, devs []core.DeviceInfo, wts []float64, keep core.DeviceID) *core.Plan {
	n := len(w.Batch)
	share := apportion(n, wts)
	home := 0
	for i := range share {
		if share[i] > share[home] {
			home = i
		}
	}
	for i, d := range devs {
		if d.ID == keep {
			home = i
		}
	}
	p := &core.Plan{Scheduler: s.Name(), Home: devs[home].ID}
	if n == 0 {
		share[home] = 0 // one empty unit on home, like the reference
	}
	k := max(s.UnitsPerDevice, 1)
	nOps := len(w.Ops)
	// Units in batch order (one copy of the batch, sliced, so the plan
	// does not alias the workload); tasks device by device, home last so
	// its reductions follow its own work on the same stream.
	batch := slices.Clone(w.Batch)
	off := 0
	unitsOf := make([][]int, len(devs))
	for i := range devs {
		parts := min(k, share[i])
		if n == 0 && i == home {
			parts = 1
		}
		for j := 0; j < parts; j++ {
			size := share[i] / parts
			if j < share[i]%parts {
				size++
			}
			u := core.Unit{ID: len(p.Units), Targets: batch[off : off+size : off+size]}
			if n > 0 {
				u.LossWeight = float64(size) / float64(n)
			} else {
				u.LossWeight = 1
			}
			unitsOf[i] = append(unitsOf[i], u.ID)
			p.Units = append(p.Units, u)
			off += size
		}
	}
	lastBwd := make([]int, len(devs))
	emit := func(i int) {
		lastBwd[i] = -1
		for _, u := range unitsOf[i] {
			f := len(p.Tasks)
			p.Tasks = append(p.Tasks,
				core.Task{ID: f, Kind: core.TaskForward, Unit: u, Device: devs[i].ID, OpLo: 0, OpHi: nOps},
				core.Task{ID: f + 1, Kind: core.TaskBackward, Unit: u, Device: devs[i].ID, OpLo: 0, OpHi: nOps, Deps: []int{f}})
			lastBwd[i] = f + 1
		}
	}
	for i := range devs {
		if i != home {
			emit(i)
		}
	}
	emit(home)
	var stepDeps []int
	if lastBwd[home] >= 0 {
		stepDeps = append(stepDeps, lastBwd[home])
	}
	for i := range devs {
		if i == home || lastBwd[i] < 0 {
			continue
		}
		id := len(p.Tasks)
		p.Tasks = append(p.Tasks, core.Task{ID: id, Kind: core.TaskReduceGrads, Unit: -1, Device: p.Home, From: devs[i].ID, Deps: []int{lastBwd[i]}})
		stepDeps = append(stepDeps, id)
	}
	p.Tasks = append(p.Tasks, core.Task{ID: len(p.Tasks), Kind: core.TaskStep, Unit: -1, Device: p.Home, Deps: stepDeps})

	shares := make(map[core.DeviceID]int, len(devs))
	for i, d := range devs {
		shares[d.ID] = share[i]
	}
	s.mu.Lock()
	s.shares, s.home = shares, p.Home
	s.mu.Unlock()
	return p
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
