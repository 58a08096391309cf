package errcode

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"

	"github.com/gnnkit/gnnkit/core"
)

// Entry is one sentinel: its name on the wire and the status code used for
// it (the code is a fallback for clients that ignore the detail).
type Entry struct {
	Name string
	Err  error
	Code codes.Code
}

// Table is searched in order; the first sentinel the error matches wins,
// so more specific sentinels come first.
var Table = []Entry{
	{"canceled", context.Canceled, codes.Canceled},
	{"deadline_exceeded", context.DeadlineExceeded, codes.DeadlineExceeded},
	{"out_of_memory", core.ErrOutOfMemory, codes.ResourceExhausted},
	{"invalid_plan", core.ErrInvalidPlan, codes.FailedPrecondition},
	{"shape", core.ErrShape, codes.InvalidArgument},
	{"invalid_graph", core.ErrInvalidGraph, codes.InvalidArgument},
	{"not_built", core.ErrNotBuilt, codes.Unimplemented},
	{"unsupported", core.ErrUnsupported, codes.Unimplemented},
	// A plain errors.ErrUnsupported comes back as core.ErrUnsupported,
	// which wraps it, so errors.Is holds for both.
	{"unsupported", errors.ErrUnsupported, codes.Unimplemented},
	{"unknown_model", core.ErrUnknownModel, codes.NotFound},
	{"unknown_backend", core.ErrUnknownBackend, codes.NotFound},
	{"unknown_scheduler", core.ErrUnknownScheduler, codes.NotFound},
}

// Classify returns the table entry err matches, if any.
func Classify(err error) (Entry, bool) {
	for _, e := range Table {
		if errors.Is(err, e.Err) {
			return e, true
		}
	}
	return Entry{}, false
}

// ByName returns the sentinel with the given wire name (the first entry).
func ByName(name string) (Entry, bool) {
	for _, e := range Table {
		if e.Name == name {
			return e, true
		}
	}
	return Entry{}, false
}

// ByCode returns the sentinel for a status code that arrived without a
// detail (a plugin not built with gnnkit's SDK), if the code implies one.
func ByCode(c codes.Code) (Entry, bool) {
	switch c {
	case codes.Canceled:
		return Table[0], true
	case codes.DeadlineExceeded:
		return Table[1], true
	case codes.ResourceExhausted:
		return Table[2], true
	case codes.Unimplemented:
		return ByName("unsupported")
	}
	return Entry{}, false
}
