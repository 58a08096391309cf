package memsweep

import (
	"context"
	"fmt"
	"math"

	"github.com/gnnkit/gnnkit/core"
	"github.com/gnnkit/gnnkit/sim"
)

// Caps are n caps spaced geometrically from lo to hi, both included,
// ascending and distinct (fewer than n where the range holds fewer). The
// ones between are rounded to what core.FormatBytes prints, as
// --device-mem reads it back, so that a cap a table names gives the same
// search. lo must be positive and below hi, n at least 2.
func Caps(lo, hi int64, n int) []int64 {
	out := []int64{lo}
	r := float64(hi) / float64(lo)
	for i := 1; i < n; i++ {
		c := int64(math.Round(float64(lo) * math.Pow(r, float64(i)/float64(n-1))))
		if back, err := core.ParseBytes(core.FormatBytes(core.RoundUpShownBytes(c))); err == nil && back > 0 {
			c = back
		}
		if i == n-1 {
			c = hi
		} else if c >= hi {
			continue // rounded up to hi or past it: hi comes last
		}
		if c > out[len(out)-1] {
			out = append(out, c)
		}
	}
	return out
}

// CapText is a cap as --device-mem reads it back: its size, and its
// bytes where the size as printed would read back as another (a sweep's
// ends as given; the caps between are rounded to what prints).
func CapText(c int64) string {
	if back, err := core.ParseBytes(core.FormatBytes(c)); err == nil && back == c {
		return core.FormatBytes(c)
	}
	return fmt.Sprintf("%s (%d B)", core.FormatBytes(c), c)
}

// Row is one cap's result.
type Row struct {
	CapBytes int64 `json:"cap_bytes"`
	// The plan at this cap (absent where Error says why there is none).
	IterationMs float64 `json:"iteration_ms,omitempty"`
	PeakBytes   int64   `json:"peak_bytes,omitempty"`
	// NeedBytes: what a search must allow to keep the plan
	// (core.Alternative.NeedBytes where the scheduler says, else the
	// simulated peak).
	NeedBytes int64  `json:"need_bytes,omitempty"`
	Plan      string `json:"plan,omitempty"`
	// OverCap: the simulator found a device of the plan over the cap.
	OverCap bool   `json:"over_cap,omitempty"`
	Error   string `json:"error,omitempty"`
	// Err is the error Error says, for its type (a no-fit error's
	// figure).
	Err error `json:"-"`
	// The fastest plan found at any cap up to this one, and the cap
	// that found it: where it is not this row's own, the cap to pass
	// as --device-mem for it.
	BestCapBytes    int64   `json:"best_cap_bytes,omitempty"`
	BestIterationMs float64 `json:"best_iteration_ms,omitempty"`
}

// Fits reports whether the row has a plan that fits its cap.
func (r *Row) Fits() bool { return r.Error == "" && !r.OverCap }

// Run plans with sched at every cap (ascending) on cluster cl, every
// device held to the cap (cl's devices are set to each in turn, and
// w.Devices follows: the scheduler must plan on cl, as a pipeline
// scheduler given cl as its Cluster does), simulates each plan with prof
// (nil: the roofline), and fills in each row's fastest plan at any cap
// up to it (FillBest). A cap where the scheduler finds no plan is a row
// with its error; a cancelled context ends the sweep with its error.
// progress, if set, hears each cap done.
func Run(ctx context.Context, sched core.Scheduler, w *core.Workload, cl *sim.Cluster, prof *sim.Profile, caps []int64, progress func()) ([]Row, error) {
	var rows []Row
	for _, c := range caps {
		for i := range cl.Devices {
			cl.Devices[i].MemBytes = c
		}
		w.Devices = cl.Infos()
		row := Row{CapBytes: c}
		plan, err := sched.Schedule(ctx, w)
		if err == nil {
			err = plan.Validate(w)
			if err != nil {
				err = fmt.Errorf("scheduler %s returned a bad plan: %w", sched.Name(), err)
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var res *sim.Result
		if err != nil {
			row.Err = core.ScheduleError(sched.Name(), err)
			row.Error = row.Err.Error()
		} else if res, err = sim.Simulate(plan, w, prof, cl); err != nil {
			row.Err = fmt.Errorf("simulating the plan: %w", err)
			row.Error = row.Err.Error()
		} else {
			row.IterationMs = float64(res.Iteration) / 1e6
			for _, v := range res.PeakMem {
				row.PeakBytes = max(row.PeakBytes, v)
			}
			row.NeedBytes, row.OverCap = row.PeakBytes, len(res.OverCap) > 0
			row.Plan = count(len(plan.Units), "unit") + ", " + count(len(plan.Devices()), "device")
			if alts := plan.Alternatives; len(alts) > 0 && alts[0].Chosen {
				row.Plan = alts[0].Description
				row.NeedBytes = max(row.NeedBytes, alts[0].NeedBytes)
			}
		}
		rows = append(rows, row)
		if progress != nil {
			progress()
		}
	}
	FillBest(rows)
	return rows, nil
}

// FillBest gives each row (ascending caps) the fastest plan that fits at
// any cap up to its own: a plan found under a smaller cap fits a larger
// one. Ties go to the smaller cap.
func FillBest(rows []Row) {
	var best *Row
	for i := range rows {
		r := &rows[i]
		if r.Fits() && (best == nil || r.IterationMs < best.IterationMs) {
			best = r
		}
		if best != nil {
			r.BestCapBytes, r.BestIterationMs = best.CapBytes, best.IterationMs
		}
	}
}

// Fastest is the row of the fastest plan that fits its cap and has a
// peak under below (0: any peak), the lighter of equally fast ones, then
// the smaller cap's; nil if none.
func Fastest(rows []Row, below int64) *Row {
	var best *Row
	for i := range rows {
		r := &rows[i]
		if !r.Fits() || below > 0 && r.PeakBytes >= below {
			continue
		}
		if best == nil || r.IterationMs < best.IterationMs || r.IterationMs == best.IterationMs && r.PeakBytes < best.PeakBytes {
			best = r
		}
	}
	return best
}

// count is "1 unit", "2 units".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
