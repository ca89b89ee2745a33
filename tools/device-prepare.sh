#!/usr/bin/env bash
# Fill .device/ for tools/device-run.sh: the wheels the GPU image lacks and the download stage's data/raw.
set -euo pipefail

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  cat <<'TEXT'
usage: tools/device-prepare.sh [--from DIR] [--dest DIR]

Fills .device/ (git-ignored), the one folder a device call carries besides the checkout:
  .device/wheels/        cp312 manylinux wheels, at the lock's versions (requirements/runtime.txt), of
                         what the stages import and the GPU image lacks (pydantic and its parts,
                         ruamel.yaml, protobuf): pip download --only-binary=:all: --platform
                         manylinux2014_x86_64 --python-version 3.12 --implementation cp --abi cp312
  .device/raw.tar.xz     DIR's data/raw and provenance/download.json (the download stage's output and
                         record, checked current first)
  .device/prepared.json  when, the commit, whether the tree was dirty
and checks that the checkout and .device/ together fit the 64 MiB a call carries.
--from DIR   where the download stage ran (default: this checkout; `mnist-pipeline download` first,
             MNIST_MIRROR=../shared/data/mnist offline)
--dest DIR   the folder to fill (default: .device)
Run it with the project's environment active, just before the call (tools/device-run.sh --help).
TEXT
  exit 0
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec python "$here/device_run.py" prepare "$@"
