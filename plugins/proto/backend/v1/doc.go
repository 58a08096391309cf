// Package backendv1 is the generated Go code of version 1 of the
// backend-plugin worker protocol (backend.proto in this folder). It imports
// the scheduler protocol's messages for plans, traces, device descriptions
// and errors. Neither side imports it directly: workers call
// plugins/worker.Serve and hosts plugins/worker.Start.
//
// The generated files are committed, so building gnnkit needs no protoc.
// To regenerate after editing backend.proto, run from the repository root
//
//	make proto
//
// which runs the go:generate line below and needs protoc (Debian:
// apt-get install protobuf-compiler), protoc-gen-go v1.36.12 and
// protoc-gen-go-grpc v1.6.2 on PATH (see plugins/doc.go).
package backendv1

//go:generate protoc -I . -I ../../scheduler/v1 --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative backend.proto
