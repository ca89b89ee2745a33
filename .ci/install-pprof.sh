#!/usr/bin/env bash
# Install the pprof tool (github.com/google/pprof) and Graphviz, offline from Debian packages.
# Idempotent: does nothing when a working `pprof` is already on PATH. Needs root (apt-get).
# Debian's `google-pprof` (gperftools) cannot read JAX's gzip-compressed profile.proto; not used.
set -euo pipefail

PPROF_BIN="${PPROF_BIN:-/usr/local/bin/pprof}"

if command -v pprof >/dev/null 2>&1 && pprof -h >/dev/null 2>&1 && command -v dot >/dev/null 2>&1; then
  echo "pprof already installed: $(command -v pprof)"
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends golang-go golang-github-google-pprof-dev graphviz \
    >/dev/null 2>&1; then
  apt-get update >/dev/null
  apt-get install -y --no-install-recommends golang-go golang-github-google-pprof-dev graphviz >/dev/null
fi

if ! command -v pprof >/dev/null 2>&1 || ! pprof -h >/dev/null 2>&1; then
  GOCACHE="$(mktemp -d)"
  trap 'rm -rf "$GOCACHE"' EXIT
  GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$GOCACHE" GOFLAGS= \
    go build -o "$PPROF_BIN" github.com/google/pprof
fi

pprof -h >/dev/null 2>&1
echo "pprof installed: $(command -v pprof) (graphviz $(dot -V 2>&1 | awk '{print $5}'))"
