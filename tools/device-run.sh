#!/usr/bin/env bash
# A GPU run of record in one command on the device machine; see --help.
set -euo pipefail

usage() {
  cat <<'TEXT'
usage: tools/device-run.sh OUT_DIR [--smoke] [--keep] [--only PARTS]

The GPU run of record, in one command on a machine with an NVIDIA GPU and no network. Into OUT_DIR
(empty; at most 6 files, each under 16 MiB) it writes manifest.json (each step's command, exit code
and seconds; the versions: python, jax, jaxlib, numpy, the CUDA plugin; the device: jax.devices(),
nvidia-smi, the CPU; the determinism verdict; the accelerator tier's counts), bench-train.json,
bench-time-to-accuracy.json, and results.tar.xz (every step's log, params.yaml, metrics/, plots/,
provenance/, the report), models.tar.xz and profile.tar.xz.

What it runs, each step recorded (a failed step does not stop the rest; exit status 1 if any failed):
  a venv over the image's python3 (--system-site-packages: its jax and CUDA plugin) with the carried
  wheels (pip --no-index), the checkout's code on PYTHONPATH; data/raw unpacked from .device/raw.tar.xz
  into a work folder whose params.yaml is the checkout's with variants [nojit, jit, jit_scan], so
  every stage writes its provenance record and checks the ones upstream, as under Snakemake or DVC;
  mnist-pipeline preprocess; train, evaluate, profile --variant nojit|jit|jit_scan; report;
  train --variant jit again in a second folder (the same model bytes? sha256);
  pytest -m accelerator tests/test_accelerator.py;
  benchmarks/bench_train.py --json (real MNIST from the carried IDX files);
  benchmarks/bench_time_to_accuracy.py --raw <data/raw> --json (the preset, 10 seeds).
The whole run keeps within DEVICE_RUN_BUDGET_S seconds (default 560); steps past it are recorded
as not run. On an NVIDIA H200 (2026-11-27) the set-up, the stages, the determinism check and the
accelerator tier took 388 s (train --variant nojit 136 s, the tier 170 s) and bench_train.py did not
finish in the 214 s left in a second call: give the benchmarks a call of their own (--only benchmarks).

Before the call, here (with the project's environment and the download stage's data/raw):
  tools/device-prepare.sh        # fills .device/: wheels (cp312) of what the image lacks, at the
                                 # lock's versions, and data/raw + its record as raw.tar.xz; checks
                                 # that the checkout and .device/ fit the 64 MiB a call carries
The call (the device tool; carry the one ignored folder):
  run  command: bash tools/device-run.sh "$OUT"   carry: [".device"]
After it, here:
  python tools/device-import.py RESULTS_DIR      # into benchmarks/results/, README's "Verified on", a commit

--smoke   tiny settings (a 784-32-10 MLP, 1 epoch, small benchmarks): checks the script anywhere
          (JAX_PLATFORMS=cpu too); its results are not a run of record
--keep    keep the work folder (printed)
--only    comma-separated parts to run after the set-up: pipeline, determinism (needs pipeline),
          accelerator, benchmarks (default: all); e.g. a second call for what the first one's budget cut
Environment: DEVICE_RUN_BUDGET_S (seconds, default 560).
TEXT
}

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  ""|-*) usage >&2; echo "error: give the output folder first: tools/device-run.sh OUT_DIR" >&2; exit 2 ;;
esac
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec python3 "$here/device_run.py" run "$@"
