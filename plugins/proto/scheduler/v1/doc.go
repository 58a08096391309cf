// Package schedulerv1 is the generated Go code of version 1 of the
// scheduler plugin protocol (scheduler.proto in this folder). Plugin authors
// do not import it; they use plugins/sdk, and the host uses plugins/host.
//
// The generated files are committed, so building gnnkit needs no protoc.
// To regenerate after editing scheduler.proto, run from the repository root
//
//	make proto
//
// which runs the go:generate line below and needs protoc (Debian:
// apt-get install protobuf-compiler), protoc-gen-go v1.36.12 and
// protoc-gen-go-grpc v1.6.2 on PATH (go install
// google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
// google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2).
package schedulerv1

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative scheduler.proto
