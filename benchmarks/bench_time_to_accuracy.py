"""Time to accuracy: train a preset for its fixed epoch budget over several seeds; report accuracy and time.

    # the preset, seeds 0..9, on the download stage's MNIST (data/raw); without --raw: MNIST_MIRROR's files
    python benchmarks/bench_time_to_accuracy.py --json --raw data/raw
    # tuning: evaluate on a held-out validation split, never on the test split
    python benchmarks/bench_time_to_accuracy.py --raw data/raw --set preprocess.validation_fraction=0.1666667
    # CI smoke run
    python benchmarks/bench_time_to_accuracy.py --synthetic --examples 2048 --seeds 0,1 --json

For each seed (model.seed = train.shuffle_seed = seed) the preset's MLP is trained with the
pipeline's own code: the params file validated by `config.validate`, the preprocess stage's
split and pixel transform, and `train.loop_inputs`, `initial_state` and `run_epochs` with the
`jit_scan` loop. With `--raw` (the download stage's output folder) the examples are exactly the
pipeline's, in its order (TFDS's, which differs from the IDX files'), so `train@jit_scan` with
the preset reproduces seed 0; without it the IDX files of MNIST_MIRROR are read in file order.
The training time is the sum of the timed epochs (compilation apart, every clock read after
`block_until_ready()`); evaluation runs outside the clock. The preset passes when every seed's
accuracy reaches the target (the report gives the min, mean and max); `median_train_seconds` is
the median over the seeds of the training time of the whole epoch budget (not a time at which the
target was crossed: accuracy is measured once, after the last epoch).
With `preprocess.validation_fraction` > 0 the accuracy is measured on the validation split and
the test split is not read: that is the mode for tuning.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from mnist_files import read_split
from options import accuracy, count, numbers, refuse_foreign
from ruamel.yaml import YAML

from mnist_jax_pipeline.artefacts.dataset import load_raw_split, read_manifest
from mnist_jax_pipeline.artefacts.storage import write_json
from mnist_jax_pipeline.config.params import Params, read_yaml, validate
from mnist_jax_pipeline.foundation import variants
from mnist_jax_pipeline.foundation.backend import start
from mnist_jax_pipeline.foundation.dataset_facts import NUM_CLASSES
from mnist_jax_pipeline.foundation.errors import PipelineError
from mnist_jax_pipeline.foundation.runtime import cpu_model, device_info
from mnist_jax_pipeline.mlp import loops
from mnist_jax_pipeline.mlp.model import loss_and_accuracy
from mnist_jax_pipeline.stages.preprocess import deskew, pixel_moments, split_indices, transform
from mnist_jax_pipeline.stages.train import initial_state, loop_inputs, run_epochs

# the docstring's first line, as a constant: python -OO drops docstrings
DESCRIPTION = (
    "Time to accuracy: train a preset for its fixed epoch budget over several seeds; report accuracy and time."
)

ROOT = Path(__file__).resolve().parents[1]
PRESET = ROOT / "presets" / "time-to-accuracy.yaml"
TARGET = 0.985
SEEDS = ",".join(map(str, range(10)))
VARIANT = "jit_scan"


@dataclass(frozen=True)
class Data:
    train_images: np.ndarray  # float32, preprocessed as the preprocess stage would
    train_labels: np.ndarray
    eval_images: np.ndarray
    eval_labels: np.ndarray
    eval_split: str  # "test" or "val"
    source: str


def synthetic_digits(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Learnable fake digits: each class lights a different band of rows, plus noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, NUM_CLASSES, size=count).astype(np.uint8)
    images = rng.integers(0, 60, size=(count, 28, 28)).astype(np.uint8)
    for label in range(NUM_CLASSES):
        images[labels == label, 2 * label + 4 : 2 * label + 7, 4:24] = 250
    return images, labels


def raw_splits(
    synthetic: bool, examples: int | None, raw_dir: Path | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str]:
    """uint8 train and test images (N, 28, 28) and labels: the download stage's arrays in `raw_dir`,
    else MNIST_MIRROR's IDX files, else synthetic."""
    mirror = os.environ.get("MNIST_MIRROR")
    if raw_dir is not None and not synthetic:
        train_x, train_y = load_raw_split(raw_dir, "train")
        test_x, test_y = load_raw_split(raw_dir, "test")
        if examples:
            train_x, train_y = train_x[:examples], train_y[:examples]
        return train_x, train_y, test_x, test_y, f"{read_manifest(raw_dir).dataset} from {raw_dir} (the download stage)"
    if synthetic or not mirror:
        count = examples or 60_000
        train_x, train_y = synthetic_digits(count, 1)
        test_x, test_y = synthetic_digits(max(count // 6, 1), 2)
        return train_x, train_y, test_x, test_y, "synthetic"
    train_x, train_y = read_split(Path(mirror), "train")
    test_x, test_y = read_split(Path(mirror), "test")
    if examples:
        train_x, train_y = train_x[:examples], train_y[:examples]
    return train_x, train_y, test_x, test_y, f"MNIST from {mirror}"


def prepare(params: Params, synthetic: bool = False, examples: int | None = None, raw_dir: Path | None = None) -> Data:
    """The preprocess stage's deskewing, split and transform (mean/std of the kept training pixels), in memory."""
    train_x, train_y, test_x, test_y, source = raw_splits(synthetic, examples, raw_dir)
    config = params.preprocess
    if config.deskew:
        train_x, test_x = deskew(train_x), deskew(test_x)
    if not config.flatten:
        raise SystemExit("error: preprocess.flatten must be true: the MLP takes 784-vectors")
    train_idx, val_idx = split_indices(len(train_y), config)
    mean, std = 0.0, 1.0
    if config.normalize == "standardize":
        mean, std = pixel_moments(train_x[train_idx])
        std = std or 1.0
    if len(val_idx):
        eval_x, eval_y, split = train_x[val_idx], train_y[val_idx], "val"
    else:
        eval_x, eval_y, split = test_x, test_y, "test"
    return Data(
        transform(train_x[train_idx], config, mean, std),
        train_y[train_idx].astype(np.int32),
        transform(eval_x, config, mean, std),
        eval_y.astype(np.int32),
        split,
        source,
    )


def load_params(path: Path, overrides: list[str]) -> dict[str, Any]:
    """The params file as a dict, with `section.key=value` overrides (values read as YAML)."""
    raw = read_yaml(path)
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or "." not in key:
            raise SystemExit(f"error: --set {item!r}: write section.key=value")
        section, name = key.split(".", 1)
        raw.setdefault(section, {})[name] = YAML(typ="safe").load(io.StringIO(text))
    return raw


def seeded(raw: dict[str, Any], seed: int, source: str) -> Params:
    """The params with model.seed and train.shuffle_seed set to `seed`, validated as the pipeline does."""
    return validate(
        {**raw, "model": {**raw["model"], "seed": seed}, "train": {**raw["train"], "shuffle_seed": seed}}, source
    )


def run_seed(params: Params, data: Data) -> dict[str, Any]:
    """Train once with the jit_scan loop; time the epochs only, then evaluate."""
    inputs = loop_inputs(params, data.train_images, data.train_labels)
    loop = loops.build(variants.get(VARIANT), inputs)
    run = run_epochs(loop, initial_state(params, inputs), params.train.epochs)
    loss, accuracy = loss_and_accuracy(run.state.params, data.eval_images, data.eval_labels)
    return {
        "seed": params.model.seed,
        "accuracy": accuracy,
        "loss": loss,
        "train_seconds": sum(run.epoch_seconds),
        "epoch_seconds": [round(s, 4) for s in run.epoch_seconds],
        "compile_seconds": None if run.compile_seconds is None else round(run.compile_seconds, 4),
        "load_1min": round(os.getloadavg()[0], 2),
    }


def rounded(run: dict[str, Any]) -> dict[str, Any]:
    """One seed's figures as reported."""
    return {**run, "accuracy": round(run["accuracy"], 6), "train_seconds": round(run["train_seconds"], 4)}


def summary(runs: list[dict[str, Any]], split: str, target: float) -> dict[str, Any]:
    """Min, mean and max accuracy over the seeds, the seeds below the target, median and range of the
    training seconds. `passed` (on the test split only): every seed reached the target."""
    accuracies = [r["accuracy"] for r in runs]
    seconds = [r["train_seconds"] for r in runs]
    name = "test" if split == "test" else "validation"
    out: dict[str, Any] = {
        f"min_{name}_accuracy": round(min(accuracies), 6),
        f"mean_{name}_accuracy": round(statistics.fmean(accuracies), 6),
        f"max_{name}_accuracy": round(max(accuracies), 6),
        "seeds_below_target": [r["seed"] for r in runs if r["accuracy"] < target],
        "median_train_seconds": round(statistics.median(seconds), 4),
        "train_seconds_range": [round(min(seconds), 4), round(max(seconds), 4)],
    }
    if split == "test":
        out["passed"] = not out["seeds_below_target"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--params", type=Path, default=PRESET, help="the preset (a complete params.yaml)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one parameter (repeatable), e.g. train.epochs=2",
    )
    parser.add_argument(
        "--seeds", type=numbers, default=SEEDS, help="comma-separated seeds (model.seed and shuffle_seed)"
    )
    parser.add_argument("--target", type=accuracy, default=TARGET, help="the test accuracy every seed must reach")
    parser.add_argument("--synthetic", action="store_true", help="synthetic data even if MNIST_MIRROR is set")
    parser.add_argument("--examples", type=count, default=None, help="use only this many training examples")
    parser.add_argument("--raw", type=Path, help="the download stage's output folder (data/raw): the pipeline's data")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--output", type=Path, help="also write the JSON to this file")
    args = parser.parse_args(argv)
    refuse_foreign(args.output, '"per_seed"')
    start()  # JAX as the stages start it: deterministic GPU ops, full-precision float32 matmuls

    raw = load_params(args.params, args.set)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    base = seeded(raw, seeds[0], str(args.params))
    data = prepare(base, args.synthetic, args.examples, args.raw)
    load_start = [round(x, 2) for x in os.getloadavg()]
    runs = [run_seed(seeded(raw, seed, str(args.params)), data) for seed in seeds]
    info = device_info()
    report: dict[str, Any] = {
        "target": args.target,
        "seeds": len(seeds),
        "epochs": base.train.epochs,
        **summary(runs, data.eval_split, args.target),
        "device": info["device_kind"],
        "evaluated_on": data.eval_split,
        "per_seed": [rounded(r) for r in runs],
        "loop": VARIANT,
        "data": data.source,
        "train_examples": len(data.train_labels),
        "eval_examples": len(data.eval_labels),
        "params_file": str(args.params.relative_to(ROOT) if args.params.is_relative_to(ROOT) else args.params),
        "overrides": args.set,
        "config": {key: value for key, value in base.to_dict().items() if key in ("preprocess", "model", "train")},
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "load_average_start": load_start,
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "devices": info["devices"],
        "backend": info["backend"],
        "host_cpu_count": info["host_cpu_count"],
        "host_cpu": cpu_model(),
        "versions": {"jax": info["jax_version"], "jaxlib": info["jaxlib_version"], "python": info["python_version"]},
    }
    if args.output:
        write_json(args.output, report)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    name = "test" if data.eval_split == "test" else "validation"
    print(
        f"{report['params_file']} {' '.join(args.set)}: {report['epochs']} epochs, {len(seeds)} seeds,"
        f" {report['train_examples']} training examples ({data.source}), {report['device']}"
    )
    for r in runs:
        print(
            f"  seed {r['seed']}: {name} {100 * r['accuracy']:.2f}%  train {r['train_seconds']:.3f} s"
            f"  (epochs {r['epoch_seconds']}, load {r['load_1min']})"
        )
    low, high = report["train_seconds_range"]
    below = report["seeds_below_target"]
    print(
        f"{name} accuracy min {100 * report[f'min_{name}_accuracy']:.2f}%, mean"
        f" {100 * report[f'mean_{name}_accuracy']:.3f}%, max {100 * report[f'max_{name}_accuracy']:.2f}%;"
        f" training {report['median_train_seconds']:.3f} s median ({low:.3f}-{high:.3f}); seeds below"
        f" {100 * args.target:g}%: {below or 'none'}" + (f"; passed: {report['passed']}" if "passed" in report else "")
    )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except PipelineError as err:  # a backend JAX cannot start, a refused parameter: one line, as the pipeline says it
        sys.exit(f"error: {err}")
