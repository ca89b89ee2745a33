"""What each lever of the time-to-accuracy preset buys, on the validation split, side by side in one process.

    python benchmarks/ablation_time_to_accuracy.py --json-output A.json --markdown-output A.md
    # CI smoke run: two rows, one seed, 600 synthetic examples
    python benchmarks/ablation_time_to_accuracy.py --synthetic --examples 600 --seeds 0 --only 0,7

Every configuration is the preset (presets/time-to-accuracy.yaml) with a few keys changed, trained
with bench_time_to_accuracy.py's code (the jit_scan loop, the preprocess stage's deskewing and
transform) on the training split less a held-out validation split of 10,000 examples, and evaluated
on that validation split only: each row gives the min, mean and max over the seeds (0-9 unless
--seeds says otherwise), since the target is every seed. Seeds run interleaved (seed 0 of every
configuration, then seed 1, ...) so that the machine's load falls alike on all of them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_time_to_accuracy as tta  # noqa: E402
from options import count, numbers, refuse_foreign  # noqa: E402

from mnist_jax_pipeline.artefacts.storage import write_json  # noqa: E402
from mnist_jax_pipeline.foundation.runtime import device_info  # noqa: E402
from mnist_jax_pipeline.mlp.loops.base import steps_per_epoch  # noqa: E402

# the docstring's first line, as a constant: python -OO drops docstrings
DESCRIPTION = (
    "What each lever of the time-to-accuracy preset buys, on the validation split, side by side in one process."
)

SEEDS = tta.SEEDS  # 0..9
VALIDATION = {"preprocess.validation_fraction": 0.1666667}  # 10,000 of the 60,000 training examples
NO_DESKEW = {"preprocess.deskew": False}
TUTORIAL = {
    **NO_DESKEW,
    "preprocess.normalize": "none",
    "model.init": "normal",
    "model.output_init": "same",
    "train.optimizer": "sgd",
    "train.step_size": 0.01,
    "train.momentum": 0.9,
    "train.beta2": 0.999,
    "train.nesterov": False,
    "train.schedule": "constant",
    "train.label_smoothing": 0.0,
    "train.batch_size": 128,
    "train.epochs": 10,
    "train.shuffle": False,
}
PLAIN_ADAM = {
    **NO_DESKEW,
    "model.init": "normal",
    "model.output_init": "same",
    "train.step_size": 0.001,
    "train.momentum": 0.9,
    "train.beta2": 0.999,
    "train.nesterov": False,
    "train.schedule": "constant",
    "train.label_smoothing": 0.0,
}
ONECYCLE = {"train.step_size": 0.005, "train.schedule": "onecycle"}
PLAIN_BETAS = {"train.momentum": 0.9, "train.beta2": 0.999}

# (name, group, changes from the preset). The chain adds one lever at a time, from plain Adam to the preset,
# deskewing last: the row before it is the recipe of 2026-11-22 at the preset's budget.
CONFIGS: list[tuple[str, str, dict[str, Any]]] = [
    ("tutorial defaults (params.yaml: SGD 0.01, batch 128, 10 epochs, raw pixels)", "reference", TUTORIAL),
    ("Adam 1e-3 constant, standardised inputs, batch 256, 2 epochs, shuffled", "chain", PLAIN_ADAM),
    ("+ onecycle to 5e-3 (warm-up 40%)", "chain", {**PLAIN_ADAM, **ONECYCLE}),
    ("+ label smoothing 0.1", "chain", {**PLAIN_ADAM, **ONECYCLE, "train.label_smoothing": 0.1}),
    ("+ He-normal init", "chain", {**NO_DESKEW, **PLAIN_BETAS, "model.output_init": "same", "train.nesterov": False}),
    ("+ zero output layer", "chain", {**NO_DESKEW, **PLAIN_BETAS, "train.nesterov": False}),
    ("+ Nesterov", "chain", {**NO_DESKEW, **PLAIN_BETAS}),
    ("+ Adam b1 0.8, b2 0.95 (the levers of 2026-11-22)", "chain", NO_DESKEW),
    ("+ deskewed inputs = the preset", "chain", {}),
    ("preset, no label smoothing", "leave one out", {"train.label_smoothing": 0.0}),
    ("preset, normal init 0.01 (tutorial's)", "leave one out", {"model.init": "normal"}),
    ("preset, output layer initialised like the others", "leave one out", {"model.output_init": "same"}),
    ("preset, no Nesterov", "leave one out", {"train.nesterov": False}),
    ("preset, Adam b1 0.9, b2 0.999", "leave one out", PLAIN_BETAS),
    ("preset, cosine decay from 5e-3 (no warm-up)", "leave one out", {"train.schedule": "cosine"}),
    ("preset, warm-up 20%", "leave one out", {"train.warmup_fraction": 0.2}),
    ("preset, warm-up 30%", "leave one out", {"train.warmup_fraction": 0.3}),
    ("preset, peak 3e-3", "leave one out", {"train.step_size": 0.003}),
    ("preset, peak 8e-3", "leave one out", {"train.step_size": 0.008}),
    ("preset, inputs 0..1 (unit) instead of standardised", "leave one out", {"preprocess.normalize": "unit"}),
    ("preset, batch 128", "budget", {"train.batch_size": 128}),
    ("preset, batch 512", "budget", {"train.batch_size": 512}),
    ("preset, 1 epoch", "budget", {"train.epochs": 1}),
    ("preset, 3 epochs", "budget", {"train.epochs": 3}),
    ("the preset of 2026-11-22 (3 epochs, no deskewing)", "budget", {**NO_DESKEW, "train.epochs": 3}),
    ("tutorial defaults with deskewed inputs", "reference", {**TUTORIAL, "preprocess.deskew": True}),
]


def with_changes(raw: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = {section: dict(values) if isinstance(values, dict) else values for section, values in raw.items()}
    for key, value in changes.items():
        section, name = key.split(".", 1)
        out[section][name] = value
    return out


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Time to accuracy: ablation on the validation split ({report['date'][:10]})",
        "",
        f"`{report['command']}` on {report['host_cpu']} ({report['host_cpu_count']} CPUs),"
        f" jax {report['versions']['jax']}."
        f" Training on {report['train_examples']:,} examples, validation on the {report['eval_examples']:,} held out"
        f" (`preprocess.validation_fraction: {VALIDATION['preprocess.validation_fraction']}`); the test split is"
        f" not read. Seeds {report['seed_list']} (model.seed = train.shuffle_seed), interleaved across the"
        " configurations in one process. Seconds: training only (compile apart), median and range over the"
        " seeds; the machine is shared, so compare times within this table and read the 1-minute load.",
        "",
        "| configuration | group | epochs | batch | steps | val min % | val mean % | val max % |"
        " train s median (range) | load |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        low, high = row["train_seconds_range"]
        lines.append(
            f"| {row['name']} | {row['group']} | {row['epochs']} | {row['batch_size']} | {row['steps']} |"
            f" {100 * row['min_validation_accuracy']:.2f} | {100 * row['mean_validation_accuracy']:.3f} |"
            f" {100 * row['max_validation_accuracy']:.2f} | {row['median_train_seconds']:.2f}"
            f" ({low:.2f}-{high:.2f}) |"
            f" {min(row['loads']):.1f}-{max(row['loads']):.1f} |"
        )
    return "\n".join(lines) + "\n"


def command(args: argparse.Namespace) -> str:
    """The command line of this run as the report shows it (options left at their defaults left out)."""
    parts = ["python benchmarks/ablation_time_to_accuracy.py"]
    if args.params != tta.PRESET:
        parts.append(f"--params {args.params}")
    if args.seeds != SEEDS:
        parts.append(f"--seeds {args.seeds}")
    if args.synthetic:
        parts.append("--synthetic")
    if args.examples:
        parts.append(f"--examples {args.examples}")
    if args.raw:
        parts.append(f"--raw {args.raw}")
    if args.only:
        parts.append(f"--only {args.only}")
    return " ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--params", type=Path, default=tta.PRESET)
    parser.add_argument("--seeds", type=numbers, default=SEEDS)
    parser.add_argument("--only", type=numbers, help="comma-separated row numbers to run (default: all)")
    parser.add_argument("--synthetic", action="store_true")
    parser.add_argument("--examples", type=count, default=None)
    parser.add_argument("--raw", type=Path, help="the download stage's output folder (data/raw)")
    parser.add_argument("--json-output", type=Path)
    parser.add_argument("--markdown-output", type=Path)
    args = parser.parse_args(argv)
    refuse_foreign(args.json_output, '"rows"', "--json-output")
    refuse_foreign(args.markdown_output, "# Time to ", "--markdown-output")

    raw = with_changes(tta.load_params(args.params, []), VALIDATION)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    chosen = [int(i) for i in args.only.split(",")] if args.only else list(range(len(CONFIGS)))
    if wrong := [i for i in chosen if i >= len(CONFIGS)]:
        parser.error(f"--only {wrong[0]}: no such row; the rows are 0 to {len(CONFIGS) - 1}")
    configs = [(i, *CONFIGS[i]) for i in chosen]
    source = str(args.params)
    data: dict[str, tta.Data] = {}
    runs: dict[int, list[dict[str, Any]]] = {i: [] for i, *_ in configs}
    for seed in seeds:
        for i, name, _, changes in configs:
            params = tta.seeded(with_changes(raw, changes), seed, source)
            key = params.preprocess.model_dump_json()
            if key not in data:
                data[key] = tta.prepare(params, args.synthetic, args.examples, args.raw)
            result = tta.run_seed(params, data[key])
            runs[i].append(result)
            print(
                f"seed {seed} [{i}] {name}: {100 * result['accuracy']:.2f}% {result['train_seconds']:.3f} s"
                f" load {result['load_1min']}",
                file=sys.stderr,
                flush=True,
            )
    first = next(iter(data.values()))
    info = device_info()
    rows = []
    for i, name, group, changes in configs:
        params = tta.seeded(with_changes(raw, changes), seeds[0], source)
        steps = steps_per_epoch(len(first.train_labels), params.train.batch_size) * params.train.epochs
        rows.append(
            {
                "name": name,
                "group": group,
                "changes": changes,
                "epochs": params.train.epochs,
                "batch_size": params.train.batch_size,
                "steps": steps,
                **tta.summary(runs[i], "val", tta.TARGET),
                "loads": [r["load_1min"] for r in runs[i]],
                "per_seed": [tta.rounded(r) for r in runs[i]],
            }
        )
    report = {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command(args),
        "params_file": source,
        "evaluated_on": "val",
        "seed_list": seeds,
        "data": first.source,
        "train_examples": len(first.train_labels),
        "eval_examples": len(first.eval_labels),
        "device": info["device_kind"],
        "host_cpu_count": info["host_cpu_count"],
        "host_cpu": tta.cpu_model(),
        "loop": tta.VARIANT,
        "versions": {"jax": info["jax_version"], "jaxlib": info["jaxlib_version"], "python": info["python_version"]},
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "rows": rows,
    }
    if args.json_output:
        write_json(args.json_output, report)
    text = markdown(report)
    if args.markdown_output:
        args.markdown_output.write_text(text)
    print(
        text
        if not args.json_output and not args.markdown_output
        else json.dumps(
            {
                r["name"]: [r["min_validation_accuracy"], r["mean_validation_accuracy"], r["median_train_seconds"]]
                for r in rows
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
