package core

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseBytes reads a size such as "256MiB", "1.5GiB", "512MB", "64k" or
// "1048576". Binary (KiB, MiB, GiB, TiB, PiB, EiB: every unit
// FormatBytes writes) and decimal (KB, MB, GB, TB, PB, EB) units are
// accepted, case-insensitively; a bare K/M/G/T/P/E is binary. A negative
// size is refused as such.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("core: empty size; want e.g. 256MiB")
	}
	if t[0] == '-' {
		return 0, fmt.Errorf("core: size %q is negative; want a positive size, e.g. 256MiB", s)
	}
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("core: size %q: want a number and a unit, e.g. 256MiB", s)
	}
	mult := map[string]float64{
		"": 1, "b": 1,
		"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
		"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
		"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
		"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
		"p": 1 << 50, "pib": 1 << 50, "pb": 1e15, // FormatBytes writes them
		"e": 1 << 60, "eib": 1 << 60, "eb": 1e18,
	}
	m, ok := mult[unit]
	if !ok {
		return 0, fmt.Errorf("core: size %q: unknown unit %q (use B, KiB, MiB, GiB, TiB, PiB, EiB, KB, MB, GB, TB, PB or EB)", s, t[i:])
	}
	b := v * m
	if b > math.MaxInt64/2 || math.IsInf(b, 0) || math.IsNaN(b) {
		return 0, fmt.Errorf("core: size %q is too large", s)
	}
	return int64(b), nil
}
