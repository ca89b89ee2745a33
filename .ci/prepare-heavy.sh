#!/usr/bin/env bash
# What the heavy checks need before they run, done by .ci/run beside the tests at the lowest CPU and
# I/O priority (the tests keep the machine; this takes what they leave idle): Slurm's packages, the
# container images (Podman installed, the base image, the cpu and cuda12 builds and their checks; the
# pipeline is not run here) and the tpu install check. One line per step with its duration; the
# first failure stops it with that step's exit status, and .ci/run reports it after the tests.
# Usage: .ci/prepare-heavy.sh          (UV: the uv to use; CONTAINER_TARGETS as .ci/container.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

step() {  # step NAME COMMAND...
  local name=$1 t0 rc=0
  shift
  t0=$(date +%s)
  "$@" || rc=$?
  echo "prepared: $name ($(( $(date +%s) - t0 ))s, exit $rc)"
  return "$rc"
}

step "Slurm packages" env SLURM_INSTALL_ONLY=1 bash tests/cluster/run_slurm.sh
step "container images" env CONTAINER_RUN_PIPELINE=0 CONTAINER_TARGETS="${CONTAINER_TARGETS-cuda12}" \
  bash .ci/container.sh
step "TPU check" bash .ci/install-check.sh tpu
