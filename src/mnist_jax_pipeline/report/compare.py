"""The comparison page: one self-contained HTML page of many runs, from a sweep's points or from
DVC's experiments, with the same numbers `dvc exp show` lists.

It holds a table sorted by test accuracy, test accuracy against training seconds, the training
curves overlaid, and each run's parameters, showing only those that differ between runs.
"""

from __future__ import annotations

import argparse
import base64
import csv
import io
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib import style as mpl_style
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from pydantic import ValidationError

from .. import paths, sweeps
from ..artefacts import evaluation, storage, training
from ..artefacts.evaluation import EvalMetrics
from ..artefacts.training import EpochRecord, TrainMetrics
from ..config import load
from ..errors import PipelineError
from .figures import STYLE, png_bytes, variant_color
from .provenance import generated_at
from .render import environment
from .ticks import cap_axis, log_axis


@dataclass(frozen=True)
class Run:
    """One point of a sweep, or one DVC experiment."""

    name: str
    params: dict[str, Any]  # flat: dotted key -> value
    train: TrainMetrics
    evaluation: EvalMetrics
    history: list[EpochRecord]
    ran_alone: bool | None  # None where unknown (an experiment's run info stays in DVC's cache)


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


def differing(runs: list[Run]) -> list[str]:
    """The parameters whose values are not the same in every run, in params.yaml's order."""
    keys = list(dict.fromkeys(key for run in runs for key in run.params))
    return [key for key in keys if len({json.dumps(run.params.get(key), sort_keys=True) for run in runs}) > 1]


def from_sweep(sweep: sweeps.Sweep) -> list[Run]:
    """Every point of a sweep, read from its folder."""
    runs = []
    for point in sweep.points:
        root, variant = sweep.folder(point), sweep.variant
        if not (root / paths.EVAL_METRICS.at(variant)).is_file():
            raise PipelineError(f"{root}: this point has not run; run `snakemake --cores all sweeps` (or"
                                f" `snakemake --cores all sweeps/{sweep.name}/{paths.COMPARE_HTML}`) first")
        runs.append(Run(name=point.name, params=flatten(sweep.params(point)),
                        train=training.read_metrics(variant, root), evaluation=evaluation.read_metrics(variant, root),
                        history=training.read_history(variant, root),
                        ran_alone=training.read_run(variant, root).ran_alone))
    return runs


def _git_show(rev: str, path: str) -> str | None:
    done = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def _history(rev: str, variant: str) -> list[EpochRecord]:
    text = _git_show(rev, paths.TRAIN_HISTORY.at(variant).as_posix())
    if text is None:
        return []
    try:
        return [EpochRecord.model_validate(row, strict=False) for row in csv.DictReader(io.StringIO(text))]
    except ValidationError:
        return []


def _experiment(entry: dict[str, Any]) -> Run | None:
    """A `dvc exp show --json` entry of a finished experiment, or None (failed, queued, other variant)."""
    data = entry.get("data") or {}
    params = (data.get("params") or {}).get("params.yaml", {}).get("data") or {}
    variant_list = params.get("variants") or []
    if len(variant_list) != 1:
        return None
    variant = variant_list[0]
    metrics = {path: (value or {}).get("data") for path, value in (data.get("metrics") or {}).items()}
    train_data = metrics.get(paths.TRAIN_METRICS.at(variant).as_posix())
    eval_data = metrics.get(paths.EVAL_METRICS.at(variant).as_posix())
    if not train_data or not eval_data:
        return None
    try:
        return Run(name=entry.get("name") or data.get("rev") or "?", params=flatten(params),
                   train=TrainMetrics.model_validate(train_data), evaluation=EvalMetrics.model_validate(eval_data),
                   history=_history(data.get("rev") or entry.get("rev", ""), variant), ran_alone=None)
    except ValidationError:
        return None


def from_dvc() -> list[Run]:
    """DVC's experiments of this commit that trained one variant, as `dvc exp show --json` lists them."""
    done = subprocess.run(["dvc", "exp", "show", "--json"], capture_output=True, text=True)
    if done.returncode != 0:
        raise PipelineError(f"dvc exp show failed: {done.stderr.strip().splitlines()[-1:] or ['no output']}")
    runs = []
    for baseline in json.loads(done.stdout or "[]"):
        for experiment in baseline.get("experiments") or []:
            for rev in experiment.get("revs") or []:
                run = _experiment({**rev, "name": rev.get("name") or experiment.get("name")})
                if run is not None:
                    runs.append(run)
    if not runs:
        raise PipelineError("no finished DVC experiment that trained one variant; queue some with"
                            " `mnist-pipeline sweep-queue --file sweeps/NAME.yaml` and run `dvc queue start`")
    return runs


def _uri(fig: Figure) -> str:
    return "data:image/png;base64," + base64.b64encode(png_bytes(fig)).decode("ascii")


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")  # a new marker for each further ten runs


def _look(index: int) -> dict[str, Any]:
    """A run's colour and marker: ten colours, then the same colours with the next marker."""
    return {"color": variant_color(index), "marker": MARKERS[(index // 10) % len(MARKERS)]}


def figures(runs: list[Run]) -> dict[str, str]:
    """The scatter of accuracy against time, and the curves overlaid, as data: URIs."""
    with mpl_style.context(["default", STYLE]):
        scatter = Figure(figsize=(6.5, 4), layout="constrained")
        ax = scatter.subplots()
        for i, run in enumerate(runs):
            ax.scatter(run.train.total_train_seconds, 100 * run.evaluation.test_accuracy, **_look(i),
                       label=run.name, s=36, zorder=3)
        ax.set(xlabel="training seconds (all epochs, compile apart)", ylabel="test accuracy (%)",
               title="test accuracy against training time")
        cap_axis(ax, 100)
        scatter.legend(loc="outside right upper", fontsize=7)
        curves = Figure(figsize=(9, 3.4), layout="constrained")
        loss_ax, acc_ax = curves.subplots(1, 2)
        for i, run in enumerate(runs):
            epochs = [h.epoch for h in run.history]
            loss_ax.plot(epochs, [h.train_loss for h in run.history], **_look(i), markersize=3, label=run.name)
            acc_ax.plot(epochs, [100 * h.test_accuracy for h in run.history], **_look(i), markersize=3)
        loss_ax.set(title="training loss (log)", xlabel="epoch", ylabel="loss")
        log_axis(loss_ax, "y", [h.train_loss for run in runs for h in run.history])
        acc_ax.set(title="test accuracy", xlabel="epoch", ylabel="%")
        cap_axis(acc_ax, 100)
        for axis in (loss_ax, acc_ax):
            axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        curves.legend(loc="outside right upper", fontsize=7)
        return {"scatter": _uri(scatter), "curves": _uri(curves)}


def table(runs: list[Run]) -> tuple[list[str], list[dict[str, Any]]]:
    """The rows, best test accuracy first, with the differing parameters as columns."""
    keys = differing(runs)
    rows = [{"name": run.name, "test_accuracy": run.evaluation.test_accuracy, "test_loss": run.evaluation.test_loss,
             "total_train_seconds": run.train.total_train_seconds,
             "epoch_seconds_median": run.train.epoch_seconds_median, "compile_seconds": run.train.compile_seconds,
             "epochs": run.train.epochs, "ran_alone": run.ran_alone,
             "params": {key: run.params.get(key) for key in keys}}
            for run in sorted(runs, key=lambda r: (-r.evaluation.test_accuracy, r.train.total_train_seconds))]
    return keys, rows


def write(runs: list[Run], title: str, source: str, html_path: Path, csv_path: Path | None) -> None:
    """Render the page (and the table as CSV) atomically."""
    keys, rows = table(runs)
    html = environment(autoescape=True).get_template("compare.html.j2").render(
        title=title, source=source, keys=keys, rows=rows, figures=figures(runs), date=generated_at())
    storage.write_text(html_path, html)
    if csv_path is not None:
        out = io.StringIO()
        columns = ["name", "test_accuracy", "test_loss", "total_train_seconds", "epoch_seconds_median",
                   "compile_seconds", "epochs", *keys]
        writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows({**{k: row[k] for k in columns if k in row}, **row["params"]} for row in rows)
        storage.write_text(csv_path, out.getvalue())


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline compare --sweep NAME` or `mnist-pipeline compare --dvc`."""
    if bool(args.sweep) == bool(args.dvc):
        raise PipelineError("compare: give either --sweep NAME or --dvc")
    if args.sweep:
        sweep = sweeps.load(sweeps.FOLDER / f"{args.sweep}.yaml", args.params)
        folder = sweeps.FOLDER / sweep.name
        write(from_sweep(sweep), f"sweep {sweep.name}", f"sweeps/{sweep.name}.yaml ({sweep.variant})",
              Path(args.out or folder / paths.COMPARE_HTML), folder / paths.COMPARE_CSV)
        return
    load(args.params)
    write(from_dvc(), "DVC experiments", "dvc exp show", Path(args.out or paths.EXPERIMENTS_HTML), None)
