"""The comparison page: one self-contained HTML page of many runs, a sweep's points or DVC's experiments, with the
numbers `dvc exp show` lists: a table best first, test accuracy against training seconds, the training curves
overlaid, and only the parameters that differ. Runs whose plotted values are identical are drawn once, labelled
with every name, and named in a note.
"""

import argparse
import csv
import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
from matplotlib import style as mpl_style
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from pydantic import ValidationError

from ..artefacts import atomic, evaluation, training
from ..artefacts.evaluation import EvalHeadline
from ..artefacts.provenance import Hashes
from ..config import sweeps
from ..config.params import load
from ..foundation import paths
from ..foundation.errors import PipelineError
from ..stages.report.conditions import short_causes
from ..stages.report.figures import STYLE, data_uri, laid_out, png_bytes
from ..stages.report.provenance import generated_at, git
from ..stages.report.render import environment
from ..stages.report.ticks import log_axis, within
from . import experiments
from .experiments import flatten, same

log = logging.getLogger(__name__)
GENERATOR = "mnist-pipeline compare"  # the page's generator tag: how --out recognises a page of its own
SIGNATURE = f'<meta name="generator" content="{GENERATOR}">'
SHAPES = ("o", "s", "^", "D", "v", "P", "X", "*")  # matplotlib markers: a new shape for each further ten runs
COLUMNS = (  # results.csv's columns before the parameters
    "name",
    "test_accuracy",
    "test_loss",
    "total_train_seconds",
    "epoch_seconds_median",
    "compile_seconds",
    "epochs",
)


class Run(NamedTuple):
    """One point of a sweep, or one variant of a DVC experiment, the baseline or the workspace."""

    name: str
    params: dict[str, Any]  # flat: dotted key -> value
    train: training.TrainHeadline
    evaluation: EvalHeadline
    history: list[training.EpochRow]
    busy: str | None = None  # what made the machine busy while it trained; None: calm, or unknown (an experiment's)


def differing(runs: list[Run]) -> list[str]:
    """The parameters whose values are not the same in every run, in params.yaml's order."""
    keys = list(dict.fromkeys(key for run in runs for key in run.params))
    return [key for key in keys if any(not same(run.params.get(key), runs[0].params.get(key)) for run in runs)]


def from_sweep(sweep: sweeps.Sweep) -> list[Run]:
    """Every point of a sweep, read from its folder (the `compare` command checked each is current)."""
    return [
        Run(
            point.name,
            flatten(sweep.params(point)),
            training.read_metrics(sweep.variant, root).headline(),
            evaluation.read_metrics(sweep.variant, root).headline(),
            training.read_history(sweep.variant, root),
            short_causes(training.read_run(sweep.variant, root)),
        )
        for point, root in zip(sweep.points, map(sweep.folder, sweep.points), strict=True)
    ]


def _history(rev: str | None, variant: str) -> list[training.EpochRow]:
    """A variant's epochs as a commit holds them (the workspace's where `rev` is None); none if unreadable."""
    path = paths.TRAIN_HISTORY.at(variant).as_posix()
    if rev is None:
        text = Path(path).read_text(encoding="utf-8") if Path(path).is_file() else ""
    else:
        text = git("show", f"{rev}:{path}") or ""
    try:
        return [training.EpochRow.model_validate(row, strict=False) for row in csv.DictReader(text.splitlines())]
    except ValidationError:
        return []


def from_dvc() -> tuple[list[Run], list[str], list[str]]:
    """Every variant of DVC's experiments of this commit, the baseline's and the workspace's, as runs; the
    parameters that differ from the baseline; and what was left out, with why."""
    rows, left_out = experiments.from_dvc()
    runs = [Run(row.name, row.params, row.train, row.evaluation, _history(row.rev, row.variant)) for row in rows]
    return runs, list(dict.fromkeys(key for row in rows for key in row.changed)), left_out


def look(index: int) -> dict[str, Any]:
    """A run's colour and marker: ten colours, then the same colours with the next marker."""
    return {"color": f"C{index}", "marker": SHAPES[(index // 10) % len(SHAPES)]}


def point(run: Run) -> tuple[float, float]:
    """Where a run lies in the scatter: training seconds, test accuracy."""
    return run.train.train_s, run.evaluation.test_accuracy


def curve(run: Run) -> list[tuple[int, float, float]]:
    """What the curves draw of a run: epoch, training loss, test accuracy."""
    return [(h.epoch, h.train_loss, h.test_accuracy) for h in run.history]


def alike(runs: list[Run], plotted: Callable[[Run], Any]) -> list[list[int]]:
    """The runs in sets of the same plotted values, as indices, in run order; a run with nothing to plot is
    alone in its set."""
    sets: dict[str, list[int]] = {}
    for i, run in enumerate(runs):
        values = plotted(run)
        sets.setdefault(json.dumps(values) if values else f"#{i}", []).append(i)
    return list(sets.values())


def identical_notes(runs: list[Run]) -> dict[str, list[str]]:
    """The sets of runs the notes name, each 'a = b': "results" (the same point and curves), "point" and
    "curve" (the same in that figure only)."""

    def same_names(plotted: Callable[[Run], Any]) -> list[str]:
        return [" = ".join(runs[i].name for i in group) for group in alike(runs, plotted) if len(group) > 1]

    results = same_names(lambda run: [point(run), curve(run)])
    return {
        "results": results,
        "point": [names for names in same_names(point) if names not in results],
        "curve": [names for names in same_names(curve) if names not in results],
    }


def figures(runs: list[Run]) -> dict[str, Figure]:
    """The scatter of accuracy against time, and the curves overlaid; runs with the same plotted values are
    drawn once, under a label that names them all ('a = b'). Call inside the pinned style (figures.STYLE)."""

    def drawn(plotted: Callable[[Run], Any]) -> list[tuple[int, Run, str]]:
        return [(g[0], runs[g[0]], " = ".join(runs[i].name for i in g)) for g in alike(runs, plotted)]

    scatter, ax = laid_out((6.5, 4))
    for i, run, label in drawn(point):
        ax.scatter(run.train.train_s, 100 * run.evaluation.test_accuracy, **look(i), label=label, s=36, zorder=3)
    ax.set(
        xlabel="training seconds (all epochs, compile apart)",
        ylabel="test accuracy (%)",
        title="test accuracy against training time",
        xlim=within([run.train.train_s for run in runs]),
        ylim=within([100 * run.evaluation.test_accuracy for run in runs], top=100),
    )
    scatter.legend(loc="outside right upper", fontsize=7)
    curves, (loss_ax, acc_ax) = laid_out((9, 3.4), 2)
    for i, run, label in drawn(curve):
        epochs = [h.epoch for h in run.history]
        loss_ax.plot(epochs, [h.train_loss for h in run.history], **look(i), markersize=3, label=label)
        acc_ax.plot(epochs, [100 * h.test_accuracy for h in run.history], **look(i), markersize=3)
    loss_ax.set(title="training loss (log)", xlabel="epoch", ylabel="loss")
    log_axis(loss_ax, "y", [h.train_loss for run in runs for h in run.history])
    acc_ax.set(title="test accuracy", xlabel="epoch", ylabel="%")
    if accuracies := [100 * h.test_accuracy for run in runs for h in run.history]:
        acc_ax.set_ylim(*within(accuracies, top=100))
    for axis in (loss_ax, acc_ax):
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    curves.legend(loc="outside right upper", fontsize=7)
    return {"scatter": scatter, "curves": curves}


def frame(runs: list[Run], keys: list[str]) -> pd.DataFrame:
    """A row per run, best test accuracy first (then the shorter training): COLUMNS, `busy` and the given
    parameters, each value as the run holds it (None, a list, an int)."""
    records = []
    for run in runs:
        train, tested = run.train, run.evaluation
        results = [run.name, tested.test_accuracy, tested.test_loss, train.train_s, train.epoch_s, train.compile_s]
        records.append([*results, run.params.get("train.epochs"), run.busy, *(run.params.get(key) for key in keys)])
    data = pd.DataFrame(records, columns=[*COLUMNS, "busy", *keys], dtype=object)
    return data.sort_values(["test_accuracy", "total_train_seconds"], ascending=[False, True], ignore_index=True)


def write(
    runs: list[Run],
    keys: list[str],
    title: str,
    source: str,
    html_path: Path,
    csv_path: Path | None,
    against: str,
    notes: tuple[str, ...] = (),
) -> dict[str, str]:
    """Render the page (and the table as CSV) atomically; `keys` are the parameters that differ `against`
    something ("between the points", "from the baseline (HEAD)"). {file: digest} of what it wrote."""
    data = frame(runs, keys)
    with mpl_style.context(["default", STYLE]):
        pictures = {name: data_uri(png_bytes(fig)) for name, fig in figures(runs).items()}
    template = environment(autoescape=True).get_template("compare.html.j2")
    html = template.render(
        title=title,
        source=source,
        keys=keys,
        rows=[{**row, "params": {key: row[key] for key in keys}} for row in data.to_dict("records")],
        figures=pictures,
        identical=identical_notes(runs),
        date=generated_at(),
        notes=notes,
        against=against,
        generator=GENERATOR,
    )
    written = {html_path: html}
    if csv_path is not None:
        written[csv_path] = data[[*COLUMNS, *keys]].to_csv(index=False, lineterminator="\n")
    for path, text in written.items():
        atomic.write_text(path, text)
    return {path.as_posix(): hashlib.sha256(text.encode()).hexdigest() for path, text in written.items()}


def main(args: argparse.Namespace, checked: tuple[sweeps.Sweep, Hashes] | None) -> None:
    """`mnist-pipeline compare --sweep NAME` or `mnist-pipeline compare --dvc`; `checked` (with --sweep): the sweep
    and the digests of its points, taken when they were checked."""
    if bool(args.sweep) == bool(args.dvc):
        raise PipelineError("compare: give either --sweep NAME or --dvc")
    sweep, hashes = checked or (None, Hashes())
    default = sweep.folder() / paths.COMPARE_HTML if sweep is not None else paths.EXPERIMENTS_HTML
    html_path = Path(args.out or default)  # a file there that it did not make is refused, --out or not
    atomic.claim(html_path, option="--out" if args.out else "", command="compare", signature=SIGNATURE)
    if args.out.endswith("/") or html_path.is_dir():
        raise PipelineError(f"--out {args.out}: a folder; give the page's file, such as {Path(args.out) / 'page.html'}")
    if sweep is not None:
        made = hashes.tree(sweep.compared_from())  # before the points are read
        folder, runs = sweep.folder(), from_sweep(sweep)
        own = html_path == folder / paths.COMPARE_HTML  # the table and the record go with the sweep's own page
        csv_path = folder / paths.COMPARE_CSV if own else None
        if own:  # the table and the record beside the page: new, or written by compare
            atomic.claim(folder / paths.COMPARE_CSV, command="compare", signature=",".join(COLUMNS))
            atomic.claim(folder / paths.COMPARE_RECORD, command="compare", signature=f'"{html_path.as_posix()}"')
        source = f"{sweeps.file(sweep.name)} ({sweep.variant})"
        made |= write(runs, differing(runs), f"sweep {sweep.name}", source, html_path, csv_path, "between the points")
        if own:  # the Snakefile checks the page against it
            atomic.write_text(folder / paths.COMPARE_RECORD, json.dumps(made, indent=2) + "\n")
        log.info("wrote %s (%d points of sweep %s)", html_path, len(runs), sweep.name)
        return
    load(args.params)
    runs, keys, left_out = from_dvc()
    notes = (f"Left out: {', '.join(left_out)}.",) if left_out else ()
    source = "dvc exp show: the workspace, the baseline (HEAD) and its experiments, one row per variant"
    write(runs, keys, "DVC experiments", source, html_path, None, "from the baseline (HEAD)", notes)
    skipped = f"; left out: {', '.join(left_out)}" if left_out else ""
    log.info("wrote %s (%d rows, one per experiment and variant%s)", html_path, len(runs), skipped)
