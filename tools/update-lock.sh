#!/usr/bin/env bash
# The one command that updates the project's lock and everything derived from it:
#
#   tools/update-lock.sh                          re-lock after a change to pyproject.toml (locked
#                                                 versions are kept where they still fit), re-export
#   tools/update-lock.sh --upgrade                every package to its newest allowed version
#   tools/update-lock.sh --upgrade-package jax    one package (any other `uv lock` option works too)
#   tools/update-lock.sh --check                  change nothing: exit 1 with one line when uv.lock
#                                                 does not match pyproject.toml or an export does not
#                                                 match uv.lock (.ci/run and tests/test_lock.py)
#
# uv.lock: the runtime and every extra, for every platform and every Python the project allows,
# with hashes. requirements/<name>.txt: the same pins and hashes for plain pip
# (`pip install -r requirements/<name>.txt`, hash-checked), one per install the project documents:
# runtime (the pipeline on the CPU; the `cpu` image), cuda12, cuda13 and tpu (the runtime with that
# JAX extra; the images of the same name), dev (the runtime with the dev extra).
# Needs the package index to re-lock; --check works offline. Commit uv.lock and requirements/.
set -euo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,/^set -euo/{/^# \{0,1\}/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
  exit 0
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.."

UV="$(bash tools/ensure-uv.sh)"
# name:extra of every export (no extra: the runtime alone; @dev: the dev dependency group)
EXPORTS=(runtime: cuda12:cuda12 cuda13:cuda13 tpu:tpu dev:@dev)
FIX="run tools/update-lock.sh and commit uv.lock and requirements/"

export_lock() {  # export_lock EXTRA: the export for that extra on stdout
  local args=(export --frozen --no-emit-project --no-default-groups)
  case "$1" in
    "") ;;
    @*) args+=(--group "${1#@}") ;;
    *) args+=(--extra "$1") ;;
  esac
  "$UV" "${args[@]}"
}

if [ "${1:-}" = "--check" ]; then
  if ! "$UV" lock --check --offline >/dev/null 2>&1; then
    echo "error: uv.lock does not match pyproject.toml; $FIX" >&2
    exit 1
  fi
  fresh="$(mktemp)"
  trap 'rm -f "$fresh"' EXIT
  for entry in "${EXPORTS[@]}"; do
    name="${entry%%:*}"
    file="requirements/$name.txt"
    if ! export_lock "${entry#*:}" >"$fresh" 2>/dev/null || ! cmp -s "$file" "$fresh"; then
      echo "error: $file does not match uv.lock; $FIX" >&2
      exit 1
    fi
  done
  echo "uv.lock matches pyproject.toml and requirements/ matches uv.lock"
  exit 0
fi

"$UV" lock "$@"
mkdir -p requirements
for entry in "${EXPORTS[@]}"; do
  name="${entry%%:*}"
  export_lock "${entry#*:}" >"requirements/$name.txt.tmp"
  mv "requirements/$name.txt.tmp" "requirements/$name.txt"
done
echo "uv.lock: $(grep -c '^\[\[package\]\]' uv.lock) packages; exported: ${EXPORTS[*]%%:*}"
