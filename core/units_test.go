package core

import (
	"strings"
	"testing"
)

func TestParseBytes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1MiB", 1 << 20, true}, {"256MiB", 256 << 20, true}, {"1.5GiB", 3 << 29, true},
		{"512MB", 512e6, true}, {"64k", 64 << 10, true}, {"1048576", 1 << 20, true}, {" 2 gib ", 2 << 30, true},
		{"", 0, false}, {"MiB", 0, false}, {"12 parsecs", 0, false}, {"1e400", 0, false}, {"1..2MiB", 0, false},
		{"1PiB", 1 << 50, true}, {"2 EiB", 2 << 60, true}, {"1.0 PiB", 1 << 50, true}, {"3PB", 3e15, true}, {"-5MiB", 0, false}, {"8EiB", 0, false},
	} {
		got, err := ParseBytes(c.in)
		if (err == nil) != c.ok || (c.ok && got != c.want) {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
	if _, err := ParseBytes("-5MiB"); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("ParseBytes(-5MiB): %v, want an error saying it is negative", err)
	}
	// What FormatBytes writes reads back (to its precision).
	for _, n := range []int64{1 << 10, 5 << 30, 3 << 40, 1 << 50, 3 << 60} {
		if got, err := ParseBytes(FormatBytes(n)); err != nil || got != n {
			t.Errorf("ParseBytes(FormatBytes(%d) = %q) = %d, %v", n, FormatBytes(n), got, err)
		}
	}
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"1MiB", "256MiB", "0.5GB", "", "9999999999999TiB", "-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBytes(s)
		if err == nil && n < 0 {
			t.Errorf("ParseBytes(%q) = %d < 0", s, n)
		}
	})
}

func TestFormatBytes(t *testing.T) {
	for in, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 3 << 20: "3.0 MiB", 5 << 30: "5.0 GiB"} {
		if got := FormatBytes(in); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestRoundUpShownBytes(t *testing.T) {
	for _, n := range []int64{0, 1000, 1024, 1025, 8074035, 8116000, 7<<20 + 1, 1<<30 - 1, 1 << 30, 5<<40 + 3} {
		r := RoundUpShownBytes(n)
		shown, err := ParseBytes(strings.ReplaceAll(FormatBytes(r), " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		if r < n || shown < n || float64(r-n) > float64(n)/10 {
			t.Errorf("RoundUpShownBytes(%d) = %d, shown %s (%d)", n, r, FormatBytes(r), shown)
		}
	}
}
