package cpu

import "testing"

// TestSizeClass: a buffer's capacity class is at most 25% over its
// length, a class is its own class, and nearby lengths share one (so a
// buffer freed at one sampled mini-batch's size serves the next's).
func TestSizeClass(t *testing.T) {
	for n := 1; n < 1<<20; n += 1 + n/97 {
		c := sizeClass(n)
		if c < n || float64(c) > 1.25*float64(n) || sizeClass(c) != c {
			t.Fatalf("sizeClass(%d) = %d (its class %d): want n ≤ c ≤ 1.25n, a fixed point", n, c, sizeClass(c))
		}
	}
	if sizeClass(1000) != sizeClass(1010) || sizeClass(5000) != sizeClass(5100) {
		t.Errorf("nearby lengths in different classes: %d %d, %d %d", sizeClass(1000), sizeClass(1010), sizeClass(5000), sizeClass(5100))
	}
}

// TestCacheReusesNearbySizes: a freed buffer is reused for a nearby
// length (its contents cleared for Alloc), and a full cache is emptied
// rather than refusing new buffers, so it holds what recent iterations
// use.
func TestCacheReusesNearbySizes(t *testing.T) {
	c := &bufCache{free: map[int][][]float32{}, limit: 64 << 10}
	b := make([]float32, 1000, sizeClass(1000))
	c.put(b)
	got := c.take(1010)
	if got == nil || len(got) != 1010 || &got[0] != &b[0] {
		t.Fatalf("take(1010) after freeing 1000 elements: %v", got != nil)
	}
	// Fill the cache with one class, then free another: it is kept.
	for range 15 {
		c.put(make([]float32, 1000, sizeClass(1000)))
	}
	c.put(make([]float32, 4000, sizeClass(4000)))
	if c.take(4000) == nil {
		t.Errorf("a buffer freed into a full cache was not kept")
	}
	if c.bytes < 0 || c.bytes > c.limit {
		t.Errorf("cache holds %d bytes, limit %d", c.bytes, c.limit)
	}
}
