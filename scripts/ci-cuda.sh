#!/usr/bin/env bash
# ci-cuda.sh — the CUDA part of `make test` (see the Makefile).
#
#   scripts/ci-cuda.sh deps    install the CUDA headers and link stubs when they are missing
#                              (Debian bookworm: nvidia-cuda-dev from non-free, about 1.5 GB
#                              downloaded and 2 minutes; build-feasibility notes §A). Idempotent:
#                              with cuda.h and libcuda.so present it does nothing. Without root
#                              or apt it says what to install and leaves the skip to `check`.
#                              CI_CUDA_FORCE_INSTALL=1 runs the install even when the headers are
#                              there (apt then finds nothing to do): a check of its idempotence.
#   scripts/ci-cuda.sh check   go vet, build and compile the tests (go test -c) of the packages
#                              behind -tags cuda (backends/cuda, cmd/gnnkit-cuda). Without the
#                              headers or a C compiler it skips them with a loud message.
#
# No GPU is needed for either: the build links against the driver API (or its stub); the
# tests themselves run on a GPU host from the bundle (make gpu-bundle, scripts/gpu-check.sh).
set -euo pipefail
GO=${GO:-go}
PKGS="./backends/cuda/... ./cmd/gnnkit-cuda"

have_cuda() {
  [ -f /usr/include/cuda.h ] || return 1
  for d in /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/local/cuda/lib64 /usr/local/cuda/lib64/stubs; do
    [ -e "$d/libcuda.so" ] && return 0
  done
  return 1
}

banner() {
  echo "=================================================================="
  echo "ci-cuda: $*"
  echo "=================================================================="
}

# enable_nonfree adds contrib and non-free to the Debian sources (deb822 and the
# one-line format), which is where nvidia-cuda-dev lives.
enable_nonfree() {
  local f=/etc/apt/sources.list.d/debian.sources
  if [ -f "$f" ] && grep -q '^Components:' "$f"; then
    sed -i -E '/^Components:/{/ contrib( |$)/!s/$/ contrib/;/ non-free( |$)/!s/$/ non-free/}' "$f"
  fi
  f=/etc/apt/sources.list
  if [ -f "$f" ] && grep -Eq '^deb .*debian' "$f"; then
    sed -i -E '/^deb .*debian/{/ contrib( |$)/!s/$/ contrib/;/ non-free( |$)/!s/$/ non-free/}' "$f"
  fi
}

# need_cc installs a C compiler for cgo when there is none (as root with apt).
need_cc() {
  if command -v gcc >/dev/null 2>&1 || command -v cc >/dev/null 2>&1; then
    return 0
  fi
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "ci-cuda: installing gcc for the cgo (cuda-tagged) build"
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends gcc libc6-dev >/tmp/ci-cuda-cc.log 2>&1 ||
      { apt-get -o DPkg::Lock::Timeout=900 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends gcc libc6-dev >>/tmp/ci-cuda-cc.log 2>&1; } ||
      banner "could not install gcc; the cuda-tagged build will be SKIPPED"
  fi
}

deps() {
  need_cc
  if have_cuda && [ -z "${CI_CUDA_FORCE_INSTALL:-}" ]; then
    echo "ci-cuda: CUDA headers and libcuda.so present"
    return 0
  fi
  local apt="apt-get -o DPkg::Lock::Timeout=900"
  if ! command -v apt-get >/dev/null 2>&1; then
    banner "no CUDA headers and no apt-get: install the CUDA toolkit's headers (cuda.h, libcuda.so); the cuda-tagged build will be SKIPPED"
    return 0
  fi
  if [ "$(id -u)" != 0 ]; then
    banner "no CUDA headers; as root run: enable contrib non-free, apt-get install --no-install-recommends nvidia-cuda-dev (the cuda-tagged build will be SKIPPED)"
    return 0
  fi
  echo "ci-cuda: installing nvidia-cuda-dev (about 1.5 GB, a few minutes)"
  export DEBIAN_FRONTEND=noninteractive
  enable_nonfree
  if ! { $apt update -qq && $apt install -y -qq --no-install-recommends nvidia-cuda-dev >/tmp/ci-cuda-apt.log 2>&1; }; then
    tail -n 20 /tmp/ci-cuda-apt.log 2>/dev/null || true
    banner "could not install nvidia-cuda-dev; the cuda-tagged build will be SKIPPED"
    return 0
  fi
  have_cuda && echo "ci-cuda: CUDA headers installed" || banner "nvidia-cuda-dev installed but cuda.h/libcuda.so not found; the cuda-tagged build will be SKIPPED"
}

check() {
  if ! have_cuda; then
    banner "SKIPPING go vet/build/test -c -tags cuda: no CUDA headers (run: scripts/ci-cuda.sh deps as root)"
    return 0
  fi
  if ! command -v gcc >/dev/null 2>&1 && ! command -v cc >/dev/null 2>&1; then
    banner "SKIPPING go vet/build/test -c -tags cuda: no C compiler (cgo)"
    return 0
  fi
  echo "ci-cuda: go vet -tags cuda $PKGS"
  CGO_ENABLED=1 $GO vet -tags cuda $PKGS
  echo "ci-cuda: go build -tags cuda $PKGS"
  CGO_ENABLED=1 $GO build -tags cuda $PKGS
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  echo "ci-cuda: go test -c -tags cuda ./backends/cuda (compile only; the tests need a GPU)"
  CGO_ENABLED=1 $GO test -c -tags cuda -o "$tmp/cuda.test" ./backends/cuda
}

case "${1:-}" in
  deps) deps ;;
  check) check ;;
  *) echo "usage: $0 deps|check" >&2; exit 2 ;;
esac
