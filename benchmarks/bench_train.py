"""Benchmark the training loops side by side in one process, and the jit_scan epoch against its roofline.

    python benchmarks/bench_train.py                # readable table, real data if MNIST_MIRROR is set
    python benchmarks/bench_train.py --json         # one JSON object
    python benchmarks/bench_train.py --synthetic --examples 2048 --rounds 3   # CI smoke run

The loops: the JAX tutorial's own jit loop (`tutorial`, tutorial_loop.py) and the pipeline's variants
(`nojit`, `jit`, `jit_scan`), on the same data with the tutorial's settings. Each compiles (timed apart;
the tutorial's loop compiles in its first epoch, as the tutorial does) and runs one warm-up epoch. Then
`--rounds` rounds, each: the roofline reference, the epoch's matrix products at the trained batch and
layer sizes, step by step in one compiled loop as jit_scan runs them, best of `--repeats` (roofline.py);
one epoch of every loop, jit_scan first; a 2048x2048 GEMM, best of `--repeats`. Every clock read follows
`block_until_ready()`. Per round:

    roofline ratio       jit_scan epoch / limit, the limit being the time of the epoch's matrix products
                         alone (>= 1: everything else the epoch does is on top)
    large-GEMM ratio     jit_scan epoch / (the same FLOPs at the 2048x2048 GEMM's speed): not a limit
    speed-ups            tutorial / jit_scan, tutorial / jit, jit / jit_scan (epoch seconds)

each reported as its median and range over the rounds. A round whose roofline ratio is below 0.95 was
most likely slowed by another job (the reference is timed apart from the epoch): its reference and
jit_scan epoch are measured again, up to RETRIES times; still below, it is kept and reported as noisy
(`noisy_rounds` in the JSON, one line on stderr). A median ratio below 0.95 means the reference is not
a limit, a bug in the reference: the benchmark says so, reports no ratio and exits with status 3.
Progress (each loop's compile and first epoch, each round) goes to stderr, --json's object to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jax
import numpy as np
import roofline
from mnist_files import read_split
from options import count, refuse_foreign
from tutorial_loop import TutorialLoop

from mnist_jax_pipeline.artefacts.storage import write_json
from mnist_jax_pipeline.config.params import Params, read_yaml, validate
from mnist_jax_pipeline.foundation import variants
from mnist_jax_pipeline.foundation.backend import start
from mnist_jax_pipeline.foundation.dataset_facts import NUM_CLASSES
from mnist_jax_pipeline.foundation.errors import PipelineError
from mnist_jax_pipeline.foundation.runtime import cpu_model, device_info
from mnist_jax_pipeline.mlp import loops
from mnist_jax_pipeline.mlp.loops.base import steps_per_epoch
from mnist_jax_pipeline.mlp.progress import EpochProgress
from mnist_jax_pipeline.stages.download.stage import mirror_from_env
from mnist_jax_pipeline.stages.train import initial_state, loop_inputs

# the docstring's first line, as a constant: python -OO drops docstrings
DESCRIPTION = "Benchmark the training loops side by side in one process, and the jit_scan epoch against its roofline."

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = "tutorial"
MIN_ROOFLINE_RATIO = 0.95
RETRIES = 2  # further measurements of a round whose roofline ratio is below MIN_ROOFLINE_RATIO
LARGE_GEMM = 2048


def load_data(synthetic: bool, examples: int | None) -> tuple[np.ndarray, np.ndarray, str]:
    """uint8 images (N, 28, 28) and labels: MNIST's training split from MNIST_MIRROR, else synthetic."""
    mirror = mirror_from_env()
    if not synthetic and mirror:
        images, labels = read_split(Path(mirror), "train")
        source = f"MNIST train split from {mirror}"
    else:
        rng = np.random.default_rng(0)
        count = examples or 60_000
        images = rng.integers(0, 256, size=(count, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, NUM_CLASSES, size=count).astype(np.uint8)
        source = "synthetic"
    if examples:
        images, labels = images[:examples], labels[:examples]
    return images, labels, source


def bench_params(batch_size: int, epochs: int) -> Params:
    """The tutorial's settings (the repository's params.yaml defaults) at this batch size and epoch count."""
    raw = read_yaml(ROOT / "params.yaml")
    raw["model"].update(layer_sizes=[784, 512, 512, 10], init_scale=0.01, seed=0)
    raw["train"].update(
        optimizer="sgd", step_size=0.01, schedule="constant", shuffle=False, batch_size=batch_size, epochs=epochs
    )
    return validate(raw)


class VariantRunner:
    """A pipeline variant's loop and state, one timed epoch at a time (raw 0..255 float pixels, as the tutorial)."""

    def __init__(self, name: str, images: np.ndarray, labels: np.ndarray, params: Params, epochs: int):
        inputs = loop_inputs(params, images.reshape(len(images), -1).astype(np.float32), labels.astype(np.int32))
        self.loop = loops.build(variants.get(name), inputs)
        self.state = jax.block_until_ready(self.loop.place(initial_state(params, inputs)))
        steps = steps_per_epoch(len(labels), params.train.batch_size)
        self.sink = open(os.devnull, "w")  # noqa: SIM115 (closed by close())
        self.progress = EpochProgress(name, epochs, steps, lambda: self.loop.steps_done, self.sink, bar=False)

    def compile(self) -> float | None:
        return self.loop.compile(self.state)

    def epoch(self, epoch: int, bar: bool) -> float:
        """Run epoch `epoch` (the training progress bar drawn to /dev/null when `bar`); its seconds."""
        self.progress.bar_on = bar
        self.progress.epoch_started(epoch)
        jax.block_until_ready(self.state)
        start = time.perf_counter()
        self.state = jax.block_until_ready(self.loop.run_epoch(self.state, epoch))
        seconds = time.perf_counter() - start
        self.progress.epoch_finished(epoch, seconds, 0.0, 0.0, 0.0)
        return seconds

    def close(self) -> None:
        self.progress.close()
        self.sink.close()


class TutorialRunner:
    """The tutorial's own loop (tutorial_loop.py): no separate compile, no progress bar."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, params: Params):
        self.loop = TutorialLoop(
            images,
            labels,
            list(params.model.layer_sizes),
            params.train.batch_size,
            params.train.step_size,
            params.model.seed,
        )

    def compile(self) -> None:
        return None  # `update` compiles in the first epoch, as in the tutorial

    def epoch(self, epoch: int, bar: bool) -> float:
        jax.block_until_ready(self.loop.params)
        start = time.perf_counter()
        jax.block_until_ready(self.loop.run_epoch())
        return time.perf_counter() - start

    def close(self) -> None:
        pass


def spread(values: list[float], digits: int = 4) -> dict[str, Any]:
    """Median, min, max and every value, rounded."""
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
        "values": [round(v, digits) for v in values],
    }


def noisy(seconds: dict[str, float], reference: dict[str, Any]) -> bool:
    """Whether a round's jit_scan epoch beat its reference's limit: another job slowed the reference."""
    return "jit_scan" in seconds and seconds["jit_scan"] / reference["limit_seconds"] < MIN_ROOFLINE_RATIO


def run_rounds(
    names: list[str],
    images: np.ndarray,
    labels: np.ndarray,
    params: Params,
    rounds: int,
    repeats: int,
    bar: str,
    log: Callable[[str], None],
    retries: int = RETRIES,
) -> dict[str, Any]:
    """Compile and warm every loop, then `rounds` rounds of the reference and one epoch per loop; a noisy
    round (noisy()) is measured again, at most `retries` more times."""
    epochs_at_most = 1 + rounds * (1 + retries)
    runners = {
        name: TutorialRunner(images, labels, params)
        if name == TUTORIAL
        else VariantRunner(name, images, labels, params, epochs_at_most)
        for name in names
    }
    products = roofline.EpochProducts(params.model.layer_sizes, len(labels), params.train.batch_size)
    try:
        compile_seconds, first = {}, {}
        for name, runner in runners.items():
            compile_seconds[name] = runner.compile()
            first[name] = runner.epoch(1, bar == "on")
            compiled = compile_seconds[name]
            said = f"compiled in {compiled:.3f} s, " if compiled is not None else ""
            log(f"{name}: {said}first epoch {first[name]:.3f} s")
        epochs: dict[str, list[float]] = {name: [] for name in names}
        with_bar: list[bool] = []
        references, large, loads, measured_again = [], [], [], []
        epoch = 1
        for index in range(rounds):
            shown = bar == "on" or (bar == "both" and index % 2 == 0)
            with_bar.append(shown)
            seconds: dict[str, float] = {}
            for attempt in range(retries + 1):
                epoch += 1
                reference = products.measure(repeats)  # right before the jit_scan epoch it is the limit of
                # a round measured again: the reference and jit_scan, the two its ratio compares (the other
                # loops' epochs stand; on a GPU, nojit's would cost seconds each time)
                again = ["jit_scan"] if attempt else sorted(runners, key=lambda n: n != "jit_scan")
                seconds = seconds | {name: runners[name].epoch(epoch, shown) for name in again}
                load = round(os.getloadavg()[0], 2)
                if attempt == retries or not noisy(seconds, reference):
                    break
                log(
                    f"round {index + 1}/{rounds}: jit_scan {seconds['jit_scan']:.3f} s beat the limit"
                    f" {reference['limit_seconds']:.3f} s (load {load}): noisy, measuring it again"
                )
            measured_again.append(attempt)
            references.append(reference)
            for name, value in seconds.items():
                epochs[name].append(value)
            large.append(roofline.large_gemm_gflops(LARGE_GEMM, repeats))
            loads.append(load)
            log(
                f"round {index + 1}/{rounds}: "
                + ", ".join(f"{n} {s[-1]:.3f} s" for n, s in epochs.items())
                + f", limit {references[-1]['limit_seconds']:.3f} s, load {loads[-1]}"
            )
    finally:
        for runner in runners.values():
            runner.close()
    return {
        "compile_seconds": compile_seconds,
        "first_epoch_seconds": first,
        "epochs": epochs,
        "with_bar": with_bar,
        "references": references,
        "large_gemm_gflops": large,
        "loads": loads,
        "measured_again": measured_again,
    }


def ratios(epochs: dict[str, list[float]], limits: list[float], large_limits: list[float]) -> dict[str, list[float]]:
    """Every per-round ratio the chosen loops allow."""
    out: dict[str, list[float]] = {}
    scan = epochs.get("jit_scan")
    if scan:
        out["roofline"] = [s / limit for s, limit in zip(scan, limits, strict=True)]
        out["large_gemm"] = [s / limit for s, limit in zip(scan, large_limits, strict=True)]
    for name, (slow, fast) in {
        "speedup_jit_scan_vs_tutorial": (TUTORIAL, "jit_scan"),
        "speedup_jit_vs_tutorial": (TUTORIAL, "jit"),
        "speedup_jit_scan_vs_jit": ("jit", "jit_scan"),
    }.items():
        if slow in epochs and fast in epochs:
            out[name] = [a / b for a, b in zip(epochs[slow], epochs[fast], strict=True)]
    return out


def host() -> dict[str, Any]:
    """What the run ran on: the CPU named as precisely as /proc/cpuinfo allows, its vector units and cores."""
    return {
        "cpu": cpu_model(),
        "isa": roofline.cpu_isa(),
        "cores": roofline.usable_cores(),
        "cpu_count": os.cpu_count(),
    }


def build_report(
    args: argparse.Namespace, params: Params, source: str, examples: int, measured: dict[str, Any]
) -> dict[str, Any]:
    epochs, bar = measured["epochs"], measured["with_bar"]
    gflop = roofline.epoch_gflop(params.model.layer_sizes, examples)
    limits = [r["limit_seconds"] for r in measured["references"]]
    large_limits = [gflop / g for g in measured["large_gemm_gflops"]]
    per_round = ratios(epochs, limits, large_limits)
    timed = {
        name: [s for s, shown in zip(seconds, bar, strict=True) if not shown or args.progress == "on"]
        for name, seconds in epochs.items()
    }
    info = device_info()
    report: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "data": source,
        "examples": examples,
        "batch_size": args.batch_size,
        "rounds": args.rounds,
        "repeats": args.repeats,
        "layer_sizes": list(params.model.layer_sizes),
        "progress_bar": args.progress,
        "epoch_seconds": {name: round(statistics.median(s), 6) for name, s in timed.items()},
        "epoch_seconds_range": {name: [round(min(s), 6), round(max(s), 6)] for name, s in timed.items()},
        "first_epoch_seconds": {name: round(s, 6) for name, s in measured["first_epoch_seconds"].items()},
        "compile_seconds": {
            name: None if s is None else round(s, 6) for name, s in measured["compile_seconds"].items()
        },
        "all_epoch_seconds": {name: [round(s, 4) for s in seconds] for name, seconds in epochs.items()},
        "epoch_gflop": round(gflop, 3),
        "steps": {str(rows): steps for rows, steps in roofline.batch_counts(examples, args.batch_size).items()},
        "limit_seconds": spread(limits),
        "limit_gflops": spread([gflop / limit for limit in limits], 1),
        "large_gemm": {"size": LARGE_GEMM, "gflops": spread(measured["large_gemm_gflops"], 1)},
        "ratios": {name: spread(values, 3) for name, values in per_round.items()},
        "host": host(),
        "load_average_1min": measured["loads"],  # after each round, this run's own load included
        "device": info["device_kind"],
        "devices": info["devices"],
        "backend": info["backend"],
        "host_cpu_count": info["host_cpu_count"],
        "host_cpu": info["cpu_model"],
        "versions": {"jax": info["jax_version"], "jaxlib": info["jaxlib_version"], "python": info["python_version"]},
    }
    roof = per_round.get("roofline")
    if roof:
        low = [(i + 1, r) for i, r in enumerate(roof) if r < MIN_ROOFLINE_RATIO]
        median = statistics.median(roof)
        again = measured["measured_again"]
        report["measured_again"] = again  # per round: how many times it was measured again
        report["noisy_rounds"] = [i for i, _ in low]
        report["noisy"] = bool(low)
        report["roofline_ratio"] = None if median < MIN_ROOFLINE_RATIO else round(median, 3)
        if median < MIN_ROOFLINE_RATIO:
            report["roofline_error"] = (
                f"the jit_scan epoch ran faster than the reference's limit: median ratio {median:.3f} <"
                f" {MIN_ROOFLINE_RATIO} over {len(roof)} rounds, each measured up to {max(again) + 1} times:"
                " the reference is not a limit, a bug in the reference (roofline.py), not a result"
            )
        elif low:
            report["noisy_note"] = (
                f"noisy: round(s) {[i for i, _ in low]} beat the reference's limit (ratio"
                f" {min(r for _, r in low):.3f} < {MIN_ROOFLINE_RATIO}) however often measured again; another job"
                f" most likely slowed its reference; kept beside the others, the median ({median:.3f}) holds"
            )
    if "speedup_jit_scan_vs_tutorial" in per_round:
        report["speedup_vs_tutorial"] = round(statistics.median(per_round["speedup_jit_scan_vs_tutorial"]), 3)
    if "speedup_jit_scan_vs_jit" in per_round:
        report["speedup_vs_step_loop"] = round(statistics.median(per_round["speedup_jit_scan_vs_jit"]), 3)
    if args.progress == "both":
        shown = {
            name: [s for s, on in zip(seconds, bar, strict=True) if on]
            for name, seconds in epochs.items()
            if name != TUTORIAL
        }
        report["epoch_seconds_with_bar"] = {name: round(statistics.median(s), 6) for name, s in shown.items()}
        report["bar_over_no_bar"] = {
            name: round(report["epoch_seconds_with_bar"][name] / report["epoch_seconds"][name], 4) for name in shown
        }
    return report


RATIO_LABELS = {
    "roofline": "roofline ratio, jit_scan epoch / limit",
    "large_gemm": f"jit_scan epoch / its FLOPs at the {LARGE_GEMM}x{LARGE_GEMM} GEMM's speed (not a limit)",
    "speedup_jit_scan_vs_tutorial": "speed-up of jit_scan over the tutorial's loop",
    "speedup_jit_vs_tutorial": "speed-up of jit over the tutorial's loop",
    "speedup_jit_scan_vs_jit": "speed-up of jit_scan over jit",
}


def print_text(report: dict[str, Any]) -> None:
    machine = report["host"]
    isa = machine["isa"]
    units = ", ".join(
        f"{name} {'yes' if isa[key] else 'no'}"
        for key, name in (("avx2", "AVX2"), ("avx512f", "AVX-512"), ("amx", "AMX"))
    )
    loads = report["load_average_1min"]
    print(
        f"{report['data']}: {report['examples']} examples, batch {report['batch_size']}, {report['rounds']} rounds"
        f" on {report['device']} ({report['backend']}), jax {report['versions']['jax']}"
    )
    print(f"host: {machine['cpu']}, {machine['cores']} cores; {units}; 1-minute load {min(loads)}-{max(loads)}")
    steps = ", ".join(f"{n} of {rows} rows" for rows, n in report["steps"].items())
    limit, speed = report["limit_seconds"], report["limit_gflops"]
    print(f"one epoch: {report['epoch_gflop']:.1f} GFLOP of matrix products in {steps}")
    print(
        f"limit (the epoch's products alone, step by step): {limit['median']:.3f} s"
        f" ({limit['min']:.3f}-{limit['max']:.3f}), {speed['median']:.0f} GFLOP/s;"
        f" {LARGE_GEMM}x{LARGE_GEMM} GEMM beside it: {report['large_gemm']['gflops']['median']:.0f} GFLOP/s"
    )
    print(f"{'loop':<10}{'compile s':>11}{'first epoch s':>15}{'epoch s median (range)':>26}")
    for name, seconds in report["epoch_seconds"].items():
        compiled = report["compile_seconds"][name]
        low, high = report["epoch_seconds_range"][name]
        print(
            f"{name:<10}{'-' if compiled is None else f'{compiled:.3f}':>11}"
            f"{report['first_epoch_seconds'][name]:>15.3f}{f'{seconds:.3f} ({low:.3f}-{high:.3f})':>26}"
        )
    for name, ratio in report.get("bar_over_no_bar", {}).items():
        print(f"{name}: median epoch with the progress bar / without: {ratio:.4f}")
    for name, values in report["ratios"].items():
        if name == "roofline" and report.get("roofline_error"):
            print(f"{RATIO_LABELS[name]}: none; {report['roofline_error']}")
            continue
        print(f"{RATIO_LABELS[name]}: {values['median']:.3f} median ({values['min']:.3f}-{values['max']:.3f})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--rounds", type=count, default=5, help="rounds of the reference and one epoch per loop (>= 1)")
    parser.add_argument(
        "--repeats", type=count, default=7, help="timed calls of the reference and the large GEMM (the best counts)"
    )
    parser.add_argument(
        "--variants",
        default=",".join([TUTORIAL, *variants.names()]),
        help=f"loops to time: {TUTORIAL} (the JAX tutorial's) and the pipeline's variants",
    )
    parser.add_argument("--synthetic", action="store_true", help="synthetic data even if MNIST_MIRROR is set")
    parser.add_argument("--examples", type=count, default=None, help="use only this many training examples")
    parser.add_argument("--batch-size", type=count, default=128)
    parser.add_argument("--output", type=Path, help="also write the JSON to this file")
    parser.add_argument(
        "--progress",
        choices=("off", "on", "both"),
        default="off",
        help="the training progress bar of the pipeline's loops during the timed epochs; 'both':"
        " in every other round, so epochs with and without it compare side by side",
    )
    args = parser.parse_args(argv)
    refuse_foreign(args.output, '"all_epoch_seconds"')
    names = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(names) - {TUTORIAL, *variants.names()})
    if unknown or not names:
        parser.error(
            f"--variants: unknown {unknown or 'none given'}; choose from {TUTORIAL}, {', '.join(variants.names())}"
        )
    if args.rounds < 1 or args.repeats < 1 or (args.progress == "both" and args.rounds < 2):
        parser.error("--rounds and --repeats must be at least 1 (--rounds at least 2 with --progress both)")
    start()  # JAX as the stages start it: deterministic GPU ops, full-precision float32 matmuls

    load_start = [round(x, 2) for x in os.getloadavg()]
    params = bench_params(args.batch_size, 1 + args.rounds * (1 + RETRIES))  # every epoch a retry may run
    images, labels, source = load_data(args.synthetic, args.examples)
    measured = run_rounds(
        names,
        images,
        labels,
        params,
        args.rounds,
        args.repeats,
        args.progress,
        lambda line: print(line, file=sys.stderr, flush=True),  # progress on stderr, --json's object alone on stdout
    )
    report = build_report(args, params, source, len(labels), measured)
    report["load_average_start"] = load_start  # 1, 5 and 15 minutes, before this run began
    if args.output:
        write_json(args.output, report)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_text(report)
    if report.get("noisy_note"):
        print(report["noisy_note"], file=sys.stderr)
    if report.get("roofline_error"):
        print(f"error: {report['roofline_error']}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except PipelineError as err:  # a backend JAX cannot start, a refused parameter: one line, as the pipeline says it
        sys.exit(f"error: {err}")
