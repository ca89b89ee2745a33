"""jit_scan's epoch with XLA's GPU command buffers for while loops off and on, each in a fresh process.

    python benchmarks/bench_command_buffers.py --processed data/processed --json

Each setting adds flags to XLA_FLAGS in a process of its own (XLA reads them when the backend starts):
`default` adds none; `while` adds --xla_gpu_enable_command_buffer=+WHILE; `while+unroll` adds
--xla_gpu_command_buffer_unroll_loops=true too. A setting whose flags this XLA does not know is
reported as not accepted, with XLA's own line. Each process trains jit_scan with params.yaml's
settings (compile timed apart, every clock read after block_until_ready()) and reports the median
epoch after the first, and the SHA-256 of the trained weights, so a setting that changes the
arithmetic shows. On a CPU the flags are accepted and do nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import options  # beside this script

SETTINGS = {
    "default": [],
    "while": ["--xla_gpu_enable_command_buffer=+WHILE"],
    "while+unroll": ["--xla_gpu_enable_command_buffer=+WHILE", "--xla_gpu_command_buffer_unroll_loops=true"],
}


def child(processed: Path, params_path: Path, epochs: int) -> dict[str, Any]:
    """Train jit_scan once in this process; its figures."""
    from mnist_jax_pipeline.foundation.backend import start
    from mnist_jax_pipeline.foundation.runtime import device_info

    start()
    import numpy as np

    from mnist_jax_pipeline.config.params import read_yaml, validate
    from mnist_jax_pipeline.stages.train import load_dataset, train

    raw = read_yaml(params_path)
    raw["train"]["epochs"] = epochs
    run, _ = train(validate(raw, str(params_path)), "jit_scan", load_dataset(processed))
    digest = hashlib.sha256()
    for w, b in run.state.params:
        digest.update(np.asarray(w).tobytes() + np.asarray(b).tobytes())
    info = device_info()
    return {
        "device_kind": info["device_kind"],
        "xla_flags": info["xla_flags"],
        "compile_seconds": round(run.compile_seconds or 0.0, 4),
        "first_epoch_seconds": round(run.epoch_seconds[0], 5),
        "epoch_seconds_median": round(statistics.median(run.epoch_seconds[1:] or run.epoch_seconds), 5),
        "epoch_seconds": [round(s, 5) for s in run.epoch_seconds],
        "weights_sha256": digest.hexdigest(),
    }


def measure(name: str, flags: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """One setting in a fresh process: its figures, or why it did not run."""
    env = {**os.environ, "XLA_FLAGS": " ".join([os.environ.get("XLA_FLAGS", ""), *flags]).strip()}
    command = [sys.executable, __file__, "--child", "--processed", str(args.processed), "--params", str(args.params)]
    done = subprocess.run(
        [*command, "--epochs", str(args.epochs)], env=env, capture_output=True, text=True, timeout=args.timeout
    )
    print(f"{name}: exit {done.returncode}", file=sys.stderr)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        unknown = next((line for line in lines if "Unknown flag" in line or "unknown flag" in line), None)
        return {"flags": flags, "accepted": unknown is None, "error": (unknown or (lines[-1] if lines else ""))[:300]}
    return {"flags": flags, "accepted": True, **json.loads(done.stdout.strip().splitlines()[-1])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--processed", type=Path, default=Path("data/processed"), help="the preprocess stage's folder")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--epochs", type=options.count, default=6, help="epochs per setting; the first is the warm-up")
    parser.add_argument("--settings", default=",".join(SETTINGS), help=f"some of {','.join(SETTINGS)}")
    parser.add_argument("--timeout", type=options.seconds, default=300, help="seconds per setting")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--output", type=Path, help="also write the JSON to this file")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    options.refuse_foreign(args.output, "XLA command buffers for while loops")
    if args.child:
        print(json.dumps(child(args.processed, args.params, args.epochs)))
        return 0
    names = args.settings.split(",")
    if unknown := [name for name in names if name not in SETTINGS]:
        parser.error(f"--settings: unknown {', '.join(unknown)}; choose from {','.join(SETTINGS)}")
    results = {name: measure(name, SETTINGS[name], args) for name in names}
    ran = [r for r in results.values() if "weights_sha256" in r]
    summary = {
        "what": "jit_scan epoch with XLA command buffers for while loops (benchmarks/bench_command_buffers.py)",
        "epochs": args.epochs,
        "settings": results,
        "same_weights": len({r["weights_sha256"] for r in ran}) == 1 if ran else None,
    }
    text = json.dumps(summary, indent=2)
    if args.output:
        args.output.write_text(text + "\n", encoding="utf-8")
    if args.json:
        print(text)
    else:
        for name, result in results.items():
            if "epoch_seconds_median" in result:
                print(
                    f"{name:<13} epoch {1000 * result['epoch_seconds_median']:8.2f} ms  "
                    f"compile {result['compile_seconds']:.2f} s  weights {result['weights_sha256'][:12]}"
                )
            else:
                print(f"{name:<13} {'not accepted' if not result['accepted'] else 'failed'}: {result['error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
