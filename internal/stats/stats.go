package stats

import "slices"

// Median returns the median of xs (the mean of the two middle values for
// an even count), or 0 for none. xs is not modified.
func Median[T ~int64 | ~float64](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	c := slices.Clone(xs)
	slices.Sort(c)
	if n := len(c); n%2 == 1 {
		return c[n/2]
	}
	n := len(c)
	return (c[n/2-1] + c[n/2]) / 2
}
