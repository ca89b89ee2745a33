"""Benchmark the training variants side by side, in one process, against the device's GEMM peak.

    python benchmarks/bench_train.py                # readable table, real data if MNIST_MIRROR is set
    python benchmarks/bench_train.py --json         # one JSON object
    python benchmarks/bench_train.py --synthetic --examples 2048 --epochs 2   # CI smoke run

Per variant: compile seconds (apart), and the median epoch seconds over the epochs after the
first, every clock read preceded by block_until_ready(). `gemm_gflops` is the fp32 matmul
peak measured in the same run; `epoch_gflop` the training FLOPs of one epoch (forward, plus
backward without the input gradient); `roofline_ratio` = jit_scan epoch / (epoch_gflop / gemm_gflops).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mnist_jax_pipeline import loops, variants
from mnist_jax_pipeline.artefacts.storage import write_json
from mnist_jax_pipeline.config import Params, read_yaml, validate
from mnist_jax_pipeline.data.datasets import SPLIT_FILES
from mnist_jax_pipeline.data.download import mirror_from_env
from mnist_jax_pipeline.data.idx import read_pair
from mnist_jax_pipeline.dataset_facts import NUM_CLASSES
from mnist_jax_pipeline.loops.base import batch_bounds
from mnist_jax_pipeline.progress import EpochProgress
from mnist_jax_pipeline.runtime import device_info, set_numerics
from mnist_jax_pipeline.train import Dataset, initial_state, loop_inputs, run_epochs

ROOT = Path(__file__).resolve().parents[1]


def epoch_gflop(layer_sizes: list[int], examples: int) -> float:
    """Forward 2mn per layer, backward 2mn for each weight gradient and 2mn for each input
    gradient except the first layer's (the data needs none)."""
    pairs = list(zip(layer_sizes[:-1], layer_sizes[1:], strict=False))
    forward = sum(2 * m * n for m, n in pairs)
    weight_grads = forward
    input_grads = sum(2 * m * n for m, n in pairs[1:])
    return (forward + weight_grads + input_grads) * examples / 1e9


def gemm_gflops(size: int = 2048, repeats: int = 10) -> float:
    """fp32 matmul throughput of the default device (best of `repeats`)."""
    key = jax.random.PRNGKey(0)
    a = jax.random.normal(key, (size, size), jnp.float32)
    b = jax.random.normal(jax.random.fold_in(key, 1), (size, size), jnp.float32)
    matmul = jax.jit(jnp.dot)
    jax.block_until_ready(matmul(a, b))
    best = float("inf")
    for _ in range(repeats):
        jax.block_until_ready((a, b))
        start = time.perf_counter()
        jax.block_until_ready(matmul(a, b))
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def load_data(synthetic: bool, examples: int | None) -> tuple[Dataset, str]:
    """Real MNIST from MNIST_MIRROR (raw 0..255 floats, as the tutorial), else synthetic."""
    mirror = mirror_from_env()
    if not synthetic and mirror:
        images, labels = read_pair(*(Path(mirror) / name for name in SPLIT_FILES["train"]))
        source = f"MNIST train split from {mirror}"
    else:
        rng = np.random.default_rng(0)
        count = examples or 60_000
        images = rng.integers(0, 256, size=(count, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, NUM_CLASSES, size=count).astype(np.uint8)
        source = "synthetic"
    if examples:
        images, labels = images[:examples], labels[:examples]
    x = images.reshape(len(images), -1).astype(np.float32)
    y = labels.astype(np.int32)
    return Dataset(x, y, x[:0], y[:0]), source


def bench_params(batch_size: int, epochs: int) -> Params:
    """The tutorial's settings (the repository's params.yaml defaults) at this batch size and epoch count."""
    raw = read_yaml(ROOT / "params.yaml")
    raw["model"].update(layer_sizes=[784, 512, 512, 10], init_scale=0.01, seed=0)
    raw["train"].update(optimizer="sgd", step_size=0.01, schedule="constant", shuffle=False,
                        batch_size=batch_size, epochs=epochs)
    return validate(raw)


def bench_variant(variant: str, data: Dataset, params: Params, bar: str = "off") -> dict[str, Any]:
    """Compile and epoch times of one variant. `bar`: "on" draws the training progress bar as on a
    terminal (to /dev/null), "both" draws it on every other epoch, so that epochs with and without it
    alternate under the same load and their medians compare side by side."""
    inputs = loop_inputs(params, data.train_images, data.train_labels)
    loop = loops.build(variants.get(variant), inputs)
    steps = len(batch_bounds(len(data.train_labels), params.train.batch_size))
    with open(os.devnull, "w") as sink:
        progress = EpochProgress(variant, params.train.epochs, steps, lambda: loop.steps_done, sink, bar=bar != "off")

        def before(epoch: int) -> None:
            progress.bar_on = bar == "on" or (bar == "both" and epoch % 2 == 0)
            progress.epoch_started(epoch)

        try:
            run = run_epochs(loop, initial_state(params, inputs), params.train.epochs,
                             lambda epoch, seconds, _: progress.epoch_finished(epoch, seconds, 0.0, 0.0, 0.0), before)
        finally:
            progress.close()
    steady = run.epoch_seconds[1:] or run.epoch_seconds
    result = {"compile_seconds": run.compile_seconds, "first_epoch_seconds": run.epoch_seconds[0],
              "epoch_seconds": statistics.median(steady), "all_epoch_seconds": run.epoch_seconds}
    if bar == "both":  # epochs 2, 4, ... with the bar; 3, 5, ... without (the first is warm-up)
        result["epoch_seconds"] = statistics.median(run.epoch_seconds[2::2])
        result["epoch_seconds_with_bar"] = statistics.median(run.epoch_seconds[1::2])
    return result


def main(argv: list[str] | None = None) -> int:
    set_numerics()  # the pipeline's: deterministic GPU ops, full-precision float32 matmuls
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--epochs", type=int, default=4, help="epochs per variant (median over all but the first)")
    parser.add_argument("--variants", default=",".join(variants.names()))
    parser.add_argument("--synthetic", action="store_true", help="synthetic data even if MNIST_MIRROR is set")
    parser.add_argument("--examples", type=int, default=None, help="use only this many training examples")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--output", type=Path, help="also write the JSON to this file")
    parser.add_argument("--progress", choices=("off", "on", "both"), default="off",
                        help="the terminal progress bar during the timed epochs; 'both': on every other epoch, so"
                             " epochs with and without it alternate and compare side by side")
    args = parser.parse_args(argv)

    params = bench_params(args.batch_size, args.epochs)
    layer_sizes = list(params.model.layer_sizes)
    data, source = load_data(args.synthetic, args.examples)
    chosen = [v for v in args.variants.split(",") if v]
    peak = gemm_gflops()
    results = {v: bench_variant(v, data, params, bar=args.progress) for v in chosen}
    gflop = epoch_gflop(layer_sizes, len(data.train_labels))
    report: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "data": source,
        "examples": len(data.train_labels),
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "epoch_seconds": {v: round(r["epoch_seconds"], 6) for v, r in results.items()},
        "first_epoch_seconds": {v: round(r["first_epoch_seconds"], 6) for v, r in results.items()},
        "compile_seconds": {v: None if r["compile_seconds"] is None else round(r["compile_seconds"], 6)
                            for v, r in results.items()},
        "all_epoch_seconds": {v: [round(s, 4) for s in r["all_epoch_seconds"]] for v, r in results.items()},
        "progress_bar": args.progress,
        "gemm_gflops": round(peak, 2),
        "epoch_gflop": round(gflop, 3),
        "roofline_seconds": round(gflop / peak, 6),
    }
    if "jit_scan" in results:
        report["roofline_ratio"] = round(results["jit_scan"]["epoch_seconds"] / (gflop / peak), 3)
        if "jit" in results:
            report["speedup_vs_step_loop"] = round(
                results["jit"]["epoch_seconds"] / results["jit_scan"]["epoch_seconds"], 3)
    if args.progress == "both":
        report["epoch_seconds_with_bar"] = {v: round(r["epoch_seconds_with_bar"], 6) for v, r in results.items()}
        report["bar_over_no_bar"] = {v: round(r["epoch_seconds_with_bar"] / r["epoch_seconds"], 4)
                                     for v, r in results.items()}
    info = device_info()
    report.update({"device": info["device_kind"], "devices": info["devices"], "backend": info["backend"],
                   "versions": {"jax": info["jax_version"], "jaxlib": info["jaxlib_version"],
                                "python": info["python_version"]},
                   "host_cpu_count": info["host_cpu_count"]})
    if args.output:
        write_json(args.output, report)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{report['data']}: {report['examples']} examples, batch {args.batch_size}, {args.epochs} epochs"
          f" on {report['device']} ({report['backend']}), jax {info['jax_version']}")
    print(f"GEMM peak {report['gemm_gflops']:.1f} GFLOP/s; one epoch is {gflop:.1f} GFLOP,"
          f" roofline {report['roofline_seconds']:.3f} s")
    print(f"{'variant':<10}{'compile s':>11}{'first epoch s':>15}{'epoch s (median)':>18}")
    for v, r in results.items():
        compile_s = "-" if r["compile_seconds"] is None else f"{r['compile_seconds']:.3f}"
        print(f"{v:<10}{compile_s:>11}{r['first_epoch_seconds']:>15.3f}{r['epoch_seconds']:>18.3f}")
    for v, ratio_ in report.get("bar_over_no_bar", {}).items():
        print(f"{v}: median epoch with the progress bar / without: {ratio_:.4f}"
              f" ({report['epoch_seconds_with_bar'][v]:.3f} s / {report['epoch_seconds'][v]:.3f} s)")
    for key in ("roofline_ratio", "speedup_vs_step_loop"):
        if key in report:
            print(f"{key}: {report[key]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
