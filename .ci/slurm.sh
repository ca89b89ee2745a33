#!/usr/bin/env bash
# CI: the workflow on a one-node Slurm cluster started for the purpose (root and apt needed;
# otherwise one "SKIP slurm check: <reason>" line). Run inside the CI virtual environment.
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash tests/cluster/run_slurm.sh
