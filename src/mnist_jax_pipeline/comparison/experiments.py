"""DVC's experiments as rows, one per (experiment, variant), with the baseline (HEAD) and the workspace, read from
`dvc exp show --json`; and `mnist-pipeline show`, their table in a terminal's width. `dvc exp show` itself has a
column per parameter, dependency hash and metric (over 150 at the defaults); this keeps what a user compares.
"""

import argparse
import json
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import ValidationError

from ..artefacts.evaluation import EvalHeadline
from ..artefacts.training import TrainHeadline
from ..config.params import load
from ..foundation import paths
from ..foundation.errors import PipelineError, clip

Headline = TypeVar("Headline", TrainHeadline, EvalHeadline)
WORKSPACE = "workspace"
HEADER = ("experiment", "variant", "test acc", "loss", "epoch s", "compile s", "changed from HEAD")


def dvc(*args: str) -> str:
    """What `dvc ARGS` prints; its failure is one line with DVC's reason (its last ERROR line)."""
    try:
        done = subprocess.run(["dvc", *args], capture_output=True, text=True)
    except FileNotFoundError as err:
        raise PipelineError("dvc: not installed; install the project with its lock: uv sync --locked") from err
    if done.returncode != 0:  # a line asking for feedback may follow DVC's reason
        lines = [line for line in done.stderr.splitlines() if line.startswith("ERROR")] or done.stderr.splitlines()
        reason = clip((lines or [f"exit {done.returncode}"])[-1])
        raise PipelineError(f"`dvc {' '.join(args)}` failed ({reason}), and nothing was done; fix what DVC says")
    return done.stdout


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'train': {'epochs': 3}} -> {'train.epochs': 3}, in the tree's order (pandas.json_normalize reorders the
    keys); lists stay values."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        flat.update(flatten(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
    return flat


def same(a: Any, b: Any) -> bool:
    """Whether two parameter values are equal as JSON (a list and a tuple alike)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@dataclass(frozen=True)
class Row:
    """One variant of one experiment (or of the baseline, or of the workspace)."""

    experiment: str  # "workspace", the baseline's "HEAD (branch)", or the experiment's name
    rev: str | None  # the commit; None for the workspace
    variant: str
    params: dict[str, Any]  # flat: dotted key -> value
    train: TrainHeadline
    evaluation: EvalHeadline
    changed: dict[str, Any] = field(default_factory=dict)  # what differs from the baseline; collect fills it

    @property
    def name(self) -> str:
        return f"{self.experiment} · {self.variant}"


def _headline(metrics: dict[str, Any], artefact: paths.Artefact, model: type[Headline], variant: str) -> Headline | str:
    """One headline metrics file of a `dvc exp show --json` entry, or why it cannot be shown."""
    path = artefact.at(variant).as_posix()
    read = metrics.get(path) or {}
    error = (read.get("error") or {}).get("type")
    if error == "FileNotFoundError" or not read:  # a file that is there but holds no mapping has empty data
        return "no metrics: not run"
    fix = f"re-run the '{artefact.stage(variant)}' stage"
    if error:
        return f"{path}: damaged, {error}; {fix}"
    try:
        return model.model_validate(read["data"])
    except ValidationError:
        return f"{path}: metrics of another format; {fix}"


def _rows(name: str, rev: str | None, data: dict[str, Any], left_out: list[str]) -> list[Row]:
    """The rows of one `dvc exp show --json` entry; what cannot be read is named in `left_out`."""
    if data.get("status") in ("Queued", "Running", "Failed") or not data:
        left_out.append(f"{name} ({(data.get('status') or 'no data').lower()})")
        return []
    params = ((data.get("params") or {}).get(paths.PARAMS) or {}).get("data") or {}
    metrics = data.get("metrics") or {}
    rows = []
    for variant in params.get("variants") or []:
        train = _headline(metrics, paths.TRAIN_HEADLINE, TrainHeadline, variant)
        evaluation = _headline(metrics, paths.EVAL_HEADLINE, EvalHeadline, variant)
        if isinstance(train, str) or isinstance(evaluation, str):
            left_out.append(f"{name} · {variant} ({train if isinstance(train, str) else evaluation})")
            continue
        rows.append(Row(name, rev, variant, flatten(params), train, evaluation))
    return rows


def collect(listing: list[dict[str, Any]]) -> tuple[list[Row], list[str]]:
    """Rows from `dvc exp show --json` output: the workspace, the baseline, then its experiments, each with the
    parameters that differ from the baseline's; and what was left out, with why."""
    rows: list[Row] = []
    left_out: list[str] = []
    base: dict[str, Any] | None = None
    for entry in listing:
        workspace = entry.get("rev") == WORKSPACE
        name = WORKSPACE if workspace else f"HEAD ({entry['name']})" if entry.get("name") else "HEAD"
        head = _rows(name, None if workspace else entry.get("rev"), entry.get("data") or {}, left_out)
        base = head[0].params if base is None and head and not workspace else base
        rows += head
        for experiment in entry.get("experiments") or []:
            for rev in experiment.get("revs") or []:
                name = rev.get("name") or experiment.get("name") or str(rev.get("rev", "?"))[:7]
                data = {"status": "Failed"} if rev.get("error") else rev.get("data")  # a failed run's: the baseline's
                rows += _rows(name, rev.get("rev"), data or {}, left_out)
    base = base or {}
    for row in rows:
        row.changed.update({k: v for k, v in row.params.items() if k not in base or not same(v, base[k])})
    return rows, left_out


def from_dvc() -> tuple[list[Row], list[str]]:
    """Run `dvc exp show --json` in the project and collect its rows."""
    rows, left_out = collect(json.loads(dvc("exp", "show", "--json") or "[]"))
    if not rows:
        why = f" (left out: {', '.join(left_out)})" if left_out else ""
        raise PipelineError(
            f"no DVC experiment, baseline or workspace has metrics to show{why}; run the pipeline"
            " (dvc repro) or an experiment (dvc exp run -S train.step_size=0.02) first"
        )
    return rows, left_out


def table(rows: list[Row], width: int) -> list[str]:
    """Fixed-width lines: experiment, variant, test accuracy, the timings, and what changed (cut to fit)."""
    cells = [HEADER] + [
        (
            row.experiment,
            row.variant,
            f"{100 * row.evaluation.test_accuracy:.2f}%",
            f"{row.evaluation.test_loss:.4g}",
            f"{row.train.epoch_s:.3f}",
            "-" if row.train.compile_s is None else f"{row.train.compile_s:.3f}",
            " ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in row.changed.items()) or "-",
        )
        for row in rows
    ]
    widths = [max(map(len, column)) for column in zip(*cells, strict=True)][:-1]
    # names left-aligned, figures right; the last column is not padded but cut to fit
    pattern = "  ".join([*(f"{{:{'<' if i < 2 else '>'}{w}}}" for i, w in enumerate(widths)), "{}"])
    return [text if len(text) <= width else text[: width - 1] + "…" for text in (pattern.format(*c) for c in cells)]


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline show`: DVC's experiments, one line per variant, in the terminal's width."""
    load(args.params)
    rows, left_out = from_dvc()
    print("\n".join(table(rows, shutil.get_terminal_size((120, 24)).columns)))
    if left_out:
        print(f"left out: {', '.join(left_out)}")
