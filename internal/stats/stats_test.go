package stats_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/gnnkit/gnnkit/internal/stats"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{-1, -1, 5}, -1},
	} {
		in := fmt.Sprint(c.in)
		if got := stats.Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
		if fmt.Sprint(c.in) != in {
			t.Errorf("Median reordered its input: %v", c.in)
		}
	}
	if got := stats.Median([]time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond}); got != 2500*time.Microsecond {
		t.Errorf("durations: %v, want 2.5ms", got)
	}
}

func ExampleMedian() {
	fmt.Println(stats.Median([]float64{5, 1, 4, 2}))
	fmt.Println(stats.Median([]time.Duration{3 * time.Second, time.Second, 2 * time.Second}))
	// Output:
	// 3
	// 2s
}
