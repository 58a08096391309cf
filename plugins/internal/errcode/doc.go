// Package errcode is the one table that maps gnnkit's sentinel errors to
// gRPC status codes and wire names, shared by toproto (core error → gRPC
// status) and fromproto (gRPC status → an error that errors.Is matches
// against the same sentinel).
package errcode
