#!/usr/bin/env bash
# The run of record on a machine with a GPU, with its python3 (or $PYTHON); --help says how.
set -euo pipefail
exec "${PYTHON:-python3}" "$(dirname "${BASH_SOURCE[0]}")/device_run.py" "$@"
