package core

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Sentinel errors. Wrap them with %w; test with errors.Is.
var (
	// ErrUnsupported is returned by a kernel or backend that declines an
	// operation it does not implement; it wraps errors.ErrUnsupported.
	ErrUnsupported = fmt.Errorf("core: unsupported: %w", errors.ErrUnsupported)
	// ErrNotBuilt is returned by a backend compiled without its build tag.
	ErrNotBuilt = errors.New("core: backend not built into this binary")
	// ErrShape reports tensors whose shapes do not fit an operation.
	ErrShape = errors.New("core: shape mismatch")
	// ErrOutOfMemory reports an allocation over a device's memory cap.
	// The concrete error is an *OOMError.
	ErrOutOfMemory = errors.New("core: out of device memory")
	// ErrUnknownBackend, ErrUnknownScheduler and ErrUnknownModel report a
	// registry miss.
	ErrUnknownBackend   = errors.New("core: unknown backend")
	ErrUnknownScheduler = errors.New("core: unknown scheduler")
	ErrUnknownModel     = errors.New("core: unknown model")
	// ErrInvalidPlan reports a plan that fails Plan.Validate.
	ErrInvalidPlan = errors.New("core: invalid plan")
	// ErrInvalidGraph reports malformed graph structure.
	ErrInvalidGraph = errors.New("core: invalid graph")
)

// OOMError is the error returned when an allocation would exceed a device's
// memory cap. errors.Is(err, ErrOutOfMemory) holds for it.
type OOMError struct {
	Device DeviceID
	Need   int64 // bytes requested
	Free   int64 // bytes free under the cap at the time
	Cap    int64 // the cap
	Used   int64 // bytes in use at the time
	What   string
}

func (e *OOMError) Error() string {
	what := ""
	if e.What != "" {
		what = " for " + e.What
	}
	return fmt.Sprintf("%s: out of memory: allocating %s%s, but only %s of %s is free (%s in use); "+OOMHint,
		e.Device, FormatBytes(e.Need), what, FormatBytes(e.Free), FormatBytes(e.Cap), FormatBytes(e.Used))
}

// OOMHint ends an OOMError's message: what to do. A command that knows
// better advice for its case replaces it in the message it shows.
const OOMHint = "raise --device-mem, or train in micro-batches with --scheduler cherry"

// Is makes errors.Is(err, ErrOutOfMemory) true.
func (e *OOMError) Is(target error) bool { return target == ErrOutOfMemory }

// FormatBytes renders n with a binary unit (KiB, MiB, GiB).
func FormatBytes(n int64) string {
	div, exp := bytesUnit(n)
	if div == 1 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// RoundUpShownBytes rounds n up to the last digit FormatBytes shows (a
// tenth of its unit), so that a figure a user copies from a message is
// not below n.
func RoundUpShownBytes(n int64) int64 {
	div, _ := bytesUnit(n)
	if div == 1 {
		return n
	}
	step := float64(div) / 10
	return int64(math.Ceil(math.Ceil(float64(n)/step) * step))
}

// bytesUnit is the unit FormatBytes writes n in: 1 (bytes), or 1024^(exp+1)
// (KiB for exp 0, MiB for 1, …).
func bytesUnit(n int64) (div int64, exp int) {
	const unit = 1024
	if n < unit && n > -unit {
		return 1, 0
	}
	div = unit
	for m := n / unit; m >= unit || m <= -unit; m /= unit {
		div *= unit
		exp++
	}
	return div, exp
}

// ScheduleError is err from scheduler name's Schedule, prefixed with
// "scheduler NAME: " unless it already starts with "NAME: " (it names
// itself).
func ScheduleError(name string, err error) error {
	if strings.HasPrefix(err.Error(), name+": ") {
		return err
	}
	return fmt.Errorf("scheduler %s: %w", name, err)
}
