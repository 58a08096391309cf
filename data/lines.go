package data

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"strconv"
)

// maxLine is the longest line any text parser accepts.
const maxLine = 1 << 20

// utf8BOM is the byte-order mark some editors put at the start of a UTF-8
// file. The readers drop it there: it is no part of the data.
var utf8BOM = []byte("\xef\xbb\xbf")

// lines reads a text file line by line, counting lines for messages. A
// trailing "\r" is dropped, so CRLF files read like LF files, and so is a
// UTF-8 byte-order mark at the start of the file.
type lines struct {
	sc   *bufio.Scanner
	file string
	n    int // number of the line last returned
	err  error
}

func newLines(r io.Reader, file string) *lines {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	return &lines{sc: sc, file: file}
}

// next returns the next line; false at the end or on a read error (see
// Err).
func (l *lines) next() ([]byte, bool) {
	if !l.sc.Scan() {
		if err := l.sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				l.err = malformed(l.file, l.n+1, "line longer than %d bytes", maxLine)
			} else {
				l.err = &Error{File: l.file, Line: l.n + 1, Msg: "read failed", Kind: ErrMalformed, Err: err}
			}
		}
		return nil, false
	}
	l.n++
	b := l.sc.Bytes()
	if l.n == 1 {
		b = bytes.TrimPrefix(b, utf8BOM)
	}
	return b, true
}

// Err is the error that stopped next, or nil at a clean end.
func (l *lines) Err() error { return l.err }

// errf is an ErrMalformed error at the current line.
func (l *lines) errf(format string, args ...any) error {
	return malformed(l.file, l.n, format, args...)
}

// splitTabs splits b at TABs into dst (reused) and returns the fields.
func splitTabs(dst [][]byte, b []byte) [][]byte {
	dst = dst[:0]
	start := 0
	for i, c := range b {
		if c == '\t' {
			dst = append(dst, b[start:i])
			start = i + 1
		}
	}
	return append(dst, b[start:])
}

// splitLoose splits b at runs of spaces, TABs and commas, ignoring leading
// and trailing separators.
func splitLoose(dst [][]byte, b []byte) [][]byte {
	dst = dst[:0]
	start := -1
	for i, c := range b {
		if c == ' ' || c == '\t' || c == ',' {
			if start >= 0 {
				dst = append(dst, b[start:i])
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		dst = append(dst, b[start:])
	}
	return dst
}

// parseInt parses a decimal integer with an optional sign, nothing else
// (no spaces, no underscores, no base prefix).
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	neg := false
	switch b[0] {
	case '-':
		neg = true
		b = b[1:]
	case '+':
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	var v uint64
	for _, c := range b {
		d := uint64(c - '0')
		if d > 9 {
			return 0, false
		}
		if v > (limit-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	if neg {
		return -int64(v), true // v == 1<<63 wraps to MinInt64, as wanted
	}
	return int64(v), true
}

// parseFloat parses a finite float32 value: an integer, or anything
// strconv.ParseFloat accepts other than NaN and infinities.
func parseFloat(b []byte) (float32, bool) {
	if v, ok := parseInt(b); ok && v > -1<<24 && v < 1<<24 {
		return float32(v), true
	}
	f, err := strconv.ParseFloat(string(b), 32)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return float32(f), true
}
