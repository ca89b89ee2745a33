#!/usr/bin/env bash
# An offline bundle for tools/device-run.sh (wheels and data/raw), with the project's python; --help says how.
set -euo pipefail
exec "${PYTHON:-python}" "$(dirname "${BASH_SOURCE[0]}")/device_bundle.py" "$@"
