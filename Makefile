# gnnkit — the two commands a fresh machine needs: `make run` and `make test`.
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
export CGO_ENABLED ?= 0

.PHONY: run test deps build vet fmt-check fuzz-smoke cuda-deps cuda-check gpu-bundle

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

## test: vet, format check, build (and with CGO_ENABLED=0), and every test (fuzz seed corpora included;
## the backend-plugin worker's host-side tests start real worker processes), the partitioner's
## search-time test after the others, on a machine they no longer share; then vet, build and
## compile the tests of the cuda-tagged packages (installing the CUDA headers if missing; no GPU needed)
test: deps cuda-deps fmt-check vet
	$(GO) build ./...
	CGO_ENABLED=0 $(GO) build ./...
	GNNKIT_DEFER_TIMED=1 $(GO) test -count=1 ./...
	@echo "timed alone (the other packages' tests would share its cores): the partitioner's 5 s search bound, then the measured-cost prediction of train"
	$(GO) test -count=1 -run 'TestPartitionSearchTime' -v ./schedulers/graphpipe
	$(GO) test -count=1 -run '^TestTrainMeasure$$' ./cmd/gnnkit
	$(GO) test -tags purego ./backends/cpu/...
	@if command -v gcc >/dev/null 2>&1; then \
	  echo "race detector: executor, scheduler and worker suites"; \
	  CGO_ENABLED=1 $(GO) test -race -count=1 ./engine/... ./core/... ./plugins/worker/...; \
	  echo "race detector: the pipeline search (concurrent DP tables, estimates and simulations; -short: over 10 min on 2 cores since the third DP pass)"; \
	  CGO_ENABLED=1 GNNKIT_DEFER_TIMED=1 $(GO) test -race -short -count=1 -timeout 40m ./schedulers/graphpipe; \
	else echo "gcc missing: skipping the race-detector run"; fi
	@$(MAKE) --no-print-directory cuda-check

## cuda-deps: install the CUDA headers and link stubs (Debian: nvidia-cuda-dev from non-free) when
## missing; without root or apt it says what to install (scripts/ci-cuda.sh)
cuda-deps:
	@GO=$(GO) bash scripts/ci-cuda.sh deps

## cuda-check: go vet, build and test -c (compile only) the cuda-tagged packages; skipped loudly
## without the CUDA headers
cuda-check: cuda-deps
	@GO=$(GO) bash scripts/ci-cuda.sh check

GPU_BUNDLE ?= dist/gpu

## gpu-bundle: build what scripts/gpu-check.sh runs on a GPU host without Go into $(GPU_BUNDLE):
## bin/gnnkit (CGO_ENABLED=0), bin/gnnkit-cuda (-tags cuda), cuda.test (the CUDA conformance and
## throughput tests), scripts/ (stripped; under 64 MiB)
gpu-bundle: cuda-deps
	rm -rf $(GPU_BUNDLE)
	mkdir -p $(GPU_BUNDLE)/bin $(GPU_BUNDLE)/scripts
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(GPU_BUNDLE)/bin/gnnkit ./cmd/gnnkit
	CGO_ENABLED=1 $(GO) build -tags cuda -trimpath -ldflags='-s -w' -o $(GPU_BUNDLE)/bin/gnnkit-cuda ./cmd/gnnkit-cuda
	CGO_ENABLED=1 $(GO) test -c -tags cuda -trimpath -ldflags='-s -w' -o $(GPU_BUNDLE)/cuda.test ./backends/cuda
	cp scripts/gpu-check.sh scripts/pyg_epoch.py $(GPU_BUNDLE)/scripts/
	@test -x $(GPU_BUNDLE)/cuda.test || echo "make: WARNING: backends/cuda has no tests yet, so there is no cuda.test; gpu-check.sh will report its steps as failed"
	@du -sh $(GPU_BUNDLE)
	@echo "make: bundle ready: copy the repository (or just $(GPU_BUNDLE)) to the GPU host and run scripts/gpu-check.sh there"

## fuzz-smoke: run each fuzz target briefly
fuzz-smoke:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime 10s $$pkg || exit 1; \
	  done; \
	done

.PHONY: proto

## proto: regenerate the plugin protocols' Go code, scheduler (plugins/proto/scheduler/v1) and
## backend worker (plugins/proto/backend/v1) (needs protoc, protoc-gen-go, protoc-gen-go-grpc; see plugins/doc.go)
proto:
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" $(GO) generate ./plugins/proto/...
