#!/usr/bin/env bash
# Container check, run by .ci/run after the unit tests: build the Dockerfile's `cpu` target with
# rootful Podman and run `snakemake --cores all` inside it on a fresh copy of this checkout.
# Prints "container check OK: ..." with the build and run times, or exactly one line
# "SKIP container check: <reason>" (exit 0) where Podman cannot run here.
# Usage: .ci/container.sh     (CONTAINER_TARGETS="cpu cuda12 cuda13 tpu" to build the other targets too;
#                              see tests/container/run_podman.sh for the other settings)
set -euo pipefail
exec "$(dirname "${BASH_SOURCE[0]}")/../tests/container/run_podman.sh" "$@"
