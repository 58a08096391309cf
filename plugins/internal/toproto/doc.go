// Package toproto converts gnnkit's core data (Workload, Plan, Trace) and
// errors into the messages of the scheduler plugin protocol
// (plugins/proto/scheduler/v1). Its inverse is fromproto.
//
// To keep a large workload cheap to send, the messages alias the slices of
// the core values they were made from (a batch of a million node ids is
// not copied before marshalling); do not modify either while the message
// is in use.
package toproto
