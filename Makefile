# gnnkit — the two commands a fresh machine needs: `make run` and `make test`.
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
export CGO_ENABLED ?= 0

.PHONY: run test deps build vet fmt-check fuzz-smoke

## run: train GCN on the embedded Cora (200 epochs) with the default CLI
run:
	$(GO) run ./cmd/gnnkit train

## build: build the gnnkit binary into ./bin
build:
	$(GO) build -o bin/gnnkit ./cmd/gnnkit

## deps: install what the tests need when it is missing: Go modules, and an OpenCL ICD loader with
## PoCL (a CPU OpenCL device) so the OpenCL backend's tests run; without root it says what to install
## and the OpenCL tests skip
deps:
	@$(GO) version >/dev/null 2>&1 || { echo "make: Go 1.26 is required (https://go.dev/dl)"; exit 1; }
	$(GO) mod download
	@pkgs="pocl-opencl-icd ocl-icd-libopencl1 clinfo"; \
	if { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } | grep -q 'libOpenCL\.so\.1' && \
	   { [ -n "$${OCL_ICD_VENDORS:-}" ] || ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1; }; then \
	  :; \
	elif ! command -v apt-get >/dev/null 2>&1; then \
	  echo "make: no OpenCL ICD found; install an ICD loader and PoCL ($$pkgs on Debian/Ubuntu), or the OpenCL tests skip"; \
	elif [ "$$(id -u)" != 0 ]; then \
	  echo "make: no OpenCL ICD found; as root run: apt-get install -y --no-install-recommends $$pkgs (the OpenCL tests skip until then)"; \
	else \
	  echo "make: no OpenCL ICD found; installing $$pkgs for the OpenCL backend's tests"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends $$pkgs || \
	  { apt-get -o DPkg::Lock::Timeout=600 update && apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends $$pkgs; } || \
	  echo "make: could not install $$pkgs; the OpenCL tests will skip"; \
	fi

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

## test: vet, format check, build with CGO_ENABLED=0, and every test (fuzz seed corpora included)
test: deps fmt-check vet
	$(GO) build ./...
	$(GO) test -count=1 ./...
	$(GO) test -tags purego ./backends/cpu/...
	@if command -v gcc >/dev/null 2>&1; then \
	  echo "race detector: executor and scheduler suites"; \
	  CGO_ENABLED=1 $(GO) test -race -count=1 ./engine/... ./core/...; \
	else echo "gcc missing: skipping the race-detector run"; fi

## fuzz-smoke: run each fuzz target briefly
fuzz-smoke:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime 10s $$pkg || exit 1; \
	  done; \
	done

.PHONY: proto

## proto: regenerate the scheduler plugin protocol's Go code (needs protoc, protoc-gen-go, protoc-gen-go-grpc; see plugins/doc.go)
proto:
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" $(GO) generate ./plugins/proto/...
