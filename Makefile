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

## deps: install what the tests need when it is missing (Go modules; no system packages yet)
deps:
	@$(GO) version >/dev/null 2>&1 || { echo "make: Go 1.26 is required (https://go.dev/dl)"; exit 1; }
	$(GO) mod download

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

## test: vet, format check, build with CGO_ENABLED=0, and every test (fuzz seed corpora included)
test: deps fmt-check vet
	$(GO) build ./...
	$(GO) test -count=1 ./...

## fuzz-smoke: run each fuzz target briefly
fuzz-smoke:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime 10s $$pkg || exit 1; \
	  done; \
	done
