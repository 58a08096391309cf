package data

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error of this package wraps one of them; test with
// errors.Is. Errors about a place in a file are *Error values, which also
// carry the file and line (errors.As).
var (
	// ErrMalformed reports input that does not parse or breaks the
	// format's rules: a bad line, an id out of range, NaN in features, an
	// unsorted split file.
	ErrMalformed = errors.New("data: malformed input")
	// ErrMismatch reports files that disagree with meta.json: counts,
	// sizes, class counts, the snapshot list.
	ErrMismatch = errors.New("data: files disagree with meta.json")
	// ErrChecksum reports a file whose size or sha256 differs from its
	// entry in meta.json "files".
	ErrChecksum = errors.New("data: checksum mismatch")
	// ErrMissingFile reports a file the layout needs that is absent.
	ErrMissingFile = errors.New("data: missing file")
	// ErrSpec reports a bad dataset spec or synthetic generator spec.
	ErrSpec = errors.New("data: bad dataset spec")
	// ErrNotDynamic reports a dynamic-only operation (Snapshots) on a
	// static dataset.
	ErrNotDynamic = errors.New("data: not a dynamic dataset")
)

// Error is a problem with one input file, at a line when Line > 0. It
// prints as "data: FILE:LINE: MSG" and unwraps to its Kind (a sentinel of
// this package) and to Err, the underlying cause, when there is one.
type Error struct {
	File string // the file as shown: "cora/edges.tsv"
	Line int    // 1-based; 0 when the problem is not on one line
	Msg  string // what is wrong, and what was expected
	Kind error  // ErrMalformed, ErrMismatch, ErrChecksum or ErrMissingFile
	Err  error  // the underlying cause, or nil
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("data: ")
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the sentinel kind and the cause.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// errorf is an error of the given kind not tied to a file.
func errorf(kind error, format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...), Kind: kind}
}

func malformed(file string, line int, format string, args ...any) error {
	return &Error{File: file, Line: line, Msg: fmt.Sprintf(format, args...), Kind: ErrMalformed}
}

func mismatch(file string, format string, args ...any) error {
	return &Error{File: file, Msg: fmt.Sprintf(format, args...), Kind: ErrMismatch}
}

// quote shows a line in an error message, cut to a readable length.
func quote(b []byte) string {
	const max = 60
	if len(b) > max {
		return fmt.Sprintf("%q...", b[:max])
	}
	return fmt.Sprintf("%q", b)
}
