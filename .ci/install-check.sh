#!/usr/bin/env bash
# Install one JAX build from the lock's export into a fresh venv, hash-checked, as the image and a
# plain-pip user do, and check it starts (tests/container/check_jax.py): for the builds whose image CI
# does not build (tpu by default), this proves the export resolves and installs.
# Usage: .ci/install-check.sh EXTRA...      (uv from tools/ensure-uv.sh; its cache makes it quick)
# --no-config: a plain install of the export, as pip's, without the project's uv settings. Those
# compile the byte code of all 3.4 GB at install, which proves nothing here: 47 to 55 s against 8 s.
set -euo pipefail
cd "$(dirname "$0")/.."
UV="${UV:-$(bash tools/ensure-uv.sh)}"
for extra in "$@"; do
  venv="$(mktemp -d)/venv"
  t0=$(date +%s)
  "$UV" venv --quiet --python "$(command -v python3)" "$venv"
  VIRTUAL_ENV="$venv" "$UV" pip install --no-config --quiet --require-hashes -r "requirements/$extra.txt"
  VIRTUAL_ENV="$venv" "$UV" pip install --no-config --quiet --no-deps .
  echo "install check $extra: $("$venv/bin/python" tests/container/check_jax.py "$extra") ($(( $(date +%s) - t0 )) s)"
  rm -rf "$(dirname "$venv")"
done
