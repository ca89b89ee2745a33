"""DVC's experiments as rows: one per (experiment, variant), with the baseline (HEAD) and the workspace,
read from `dvc exp show --json`, and `mnist-pipeline show`, the table of them that fits a terminal.

`dvc exp show` itself lists every parameter, dependency hash and metric as a column (over 150 at the
defaults); this view keeps what a user compares: test accuracy, the timings, and what each experiment
changed from the baseline.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd
from pydantic import ValidationError

from ..artefacts.evaluation import EvalHeadline
from ..artefacts.training import TrainHeadline
from ..config.params import DEFAULT_PARAMS, load
from ..foundation import paths
from ..foundation.errors import PipelineError

WORKSPACE = "workspace"


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'train': {'epochs': 3}} -> {'train.epochs': 3}; lists stay values."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{dotted}."))
        else:
            flat[dotted] = value
    return flat


@dataclass(frozen=True)
class Row:
    """One variant of one experiment (or of the baseline, or of the workspace)."""

    experiment: str  # "workspace", the baseline's "HEAD (branch)", or the experiment's name
    rev: str | None  # the commit; None for the workspace
    variant: str
    params: dict[str, Any]  # flat: dotted key -> value
    train: TrainHeadline
    evaluation: EvalHeadline
    changed: dict[str, Any] = field(default_factory=dict)  # the parameters that differ from the baseline

    @property
    def name(self) -> str:
        return f"{self.experiment} · {self.variant}"


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _rows(name: str, rev: str | None, data: dict[str, Any], left_out: list[str]) -> list[Row]:
    """The rows of one `dvc exp show --json` entry; what cannot be read is named in `left_out`."""
    if data.get("status") in ("Queued", "Running", "Failed") or not data:
        left_out.append(f"{name} ({(data.get('status') or 'no data').lower()})")
        return []
    params = ((data.get("params") or {}).get(DEFAULT_PARAMS.name) or {}).get("data") or {}
    metrics = {path: (value or {}).get("data") for path, value in (data.get("metrics") or {}).items()}
    rows = []
    for variant in params.get("variants") or []:
        train = metrics.get(paths.TRAIN_HEADLINE.at(variant).as_posix())
        evaluation = metrics.get(paths.EVAL_HEADLINE.at(variant).as_posix())
        if not train or not evaluation:
            left_out.append(f"{name} · {variant} (no metrics: not run)")
            continue
        try:
            rows.append(
                Row(
                    experiment=name,
                    rev=rev,
                    variant=variant,
                    params=flatten(params),
                    train=TrainHeadline.model_validate(train),
                    evaluation=EvalHeadline.model_validate(evaluation),
                )
            )
        except ValidationError:
            left_out.append(f"{name} · {variant} (metrics of an older format)")
    return rows


def collect(listing: list[dict[str, Any]]) -> tuple[list[Row], list[str]]:
    """Rows from `dvc exp show --json` output: the workspace, the baseline, then its experiments, each
    with the parameters that differ from the baseline's; and what was left out, with why."""
    rows: list[Row] = []
    left_out: list[str] = []
    baseline_params: dict[str, Any] | None = None
    for entry in listing:
        data = entry.get("data") or {}
        if entry.get("rev") == WORKSPACE:
            rows += _rows(WORKSPACE, None, data, left_out)
            continue
        head = _rows(f"HEAD ({entry['name']})" if entry.get("name") else "HEAD", entry.get("rev"), data, left_out)
        rows += head
        if baseline_params is None and head:
            baseline_params = head[0].params
        for experiment in entry.get("experiments") or []:
            for rev in experiment.get("revs") or []:
                name = rev.get("name") or experiment.get("name") or str(rev.get("rev", "?"))[:7]
                rows += _rows(name, rev.get("rev"), rev.get("data") or {}, left_out)
    base = baseline_params or {}
    changed = [
        replace(
            row,
            changed={key: value for key, value in row.params.items() if key not in base or not _same(value, base[key])},
        )
        for row in rows
    ]
    return changed, left_out


def from_dvc() -> tuple[list[Row], list[str]]:
    """Run `dvc exp show --json` in the project and collect its rows."""
    try:
        done = subprocess.run(["dvc", "exp", "show", "--json"], capture_output=True, text=True)
    except FileNotFoundError as err:
        raise PipelineError("dvc: not installed; install the project with its lock: uv sync --locked") from err
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise PipelineError(f"dvc exp show failed: {last}")
    rows, left_out = collect(json.loads(done.stdout or "[]"))
    if not rows:
        why = f" (left out: {', '.join(left_out)})" if left_out else ""
        raise PipelineError(
            f"no DVC experiment, baseline or workspace has metrics to show{why}; run the pipeline"
            " (dvc repro) or an experiment (dvc exp run -S train.step_size=0.02) first"
        )
    return rows, left_out


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


HEADER = ("experiment", "variant", "test acc", "loss", "epoch s", "compile s", "changed from HEAD")


def frame(rows: list[Row]) -> pd.DataFrame:
    """A row per experiment and variant: its figures, and what it changed from the baseline as text."""
    return pd.DataFrame(
        {
            "experiment": [row.experiment for row in rows],
            "variant": [row.variant for row in rows],
            "test_accuracy": [row.evaluation.test_accuracy for row in rows],
            "test_loss": [row.evaluation.test_loss for row in rows],
            "epoch_s": [row.train.epoch_s for row in rows],
            "compile_s": [row.train.compile_s for row in rows],  # None (NaN here) where nothing is compiled
            "changed": [
                " ".join(f"{key}={_value(value)}" for key, value in row.changed.items()) or "-" for row in rows
            ],
        }
    )


def table(rows: list[Row], width: int) -> list[str]:
    """Fixed-width lines: experiment, variant, test accuracy, the timings, and what changed (cut to fit)."""
    data = frame(rows)
    cells = pd.concat(
        [
            pd.DataFrame([HEADER], columns=HEADER),
            pd.DataFrame(
                {
                    HEADER[0]: data.experiment,
                    HEADER[1]: data.variant,
                    HEADER[2]: (100 * data.test_accuracy).map("{:.2f}%".format),
                    HEADER[3]: data.test_loss.map("{:.4g}".format),
                    HEADER[4]: data.epoch_s.map("{:.3f}".format),
                    HEADER[5]: data.compile_s.map(lambda value: "-" if pd.isna(value) else f"{value:.3f}"),
                    HEADER[6]: data.changed,
                }
            ),
        ],
        ignore_index=True,
    )
    for i, column in enumerate(HEADER[:-1]):  # names left-aligned, figures right; the last column is cut instead
        text = cells[column].str
        cells[column] = text.rjust(text.len().max()) if i > 1 else text.ljust(text.len().max())
    return [line if len(line) <= width else line[: width - 1] + "…" for line in cells.agg("  ".join, axis=1)]


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline show`: DVC's experiments, one line per variant, in the terminal's width."""
    load(args.params)
    rows, left_out = from_dvc()
    width = shutil.get_terminal_size((120, 24)).columns
    print("\n".join(table(rows, width)))
    if left_out:
        print(f"left out: {', '.join(left_out)}")
