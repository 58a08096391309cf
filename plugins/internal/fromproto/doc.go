// Package fromproto converts the messages of the scheduler plugin protocol
// (plugins/proto/scheduler/v1) back into gnnkit's core data and errors. Its
// inverse is toproto.
//
// Every function checks what it can without the workload (enum values in
// range, integers that fit); the semantic checks of a plan are
// core.Plan.Validate's, which the host runs on everything a plugin sends.
// The core values alias the messages' slices.
package fromproto
