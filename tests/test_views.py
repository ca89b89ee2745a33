"""The everyday views of DVC's data at the defaults: `dvc metrics show` and `dvc metrics diff` fit a
120-column terminal with test accuracy in sight, `mnist-pipeline show` lists every variant of every
experiment with what it changed, and `compare --dvc` takes a default two-variant experiment."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from conftest import write_raw
from mnist_jax_pipeline.artefacts.evaluation import EvalHeadline
from mnist_jax_pipeline.artefacts.training import EpochRow, TrainHeadline
from mnist_jax_pipeline.comparison import compare, experiments
from mnist_jax_pipeline.foundation import paths
from mnist_jax_pipeline.stages.report.ticks import within
from workspace import env, make_workspace, sh

WIDTH = 120
STEP = "train.step_size=0.02"


def _entry(
    rev: str, name: str | None, step: float, accuracy: float | None, variants: list[str], status: str | None = None
) -> dict:
    metrics = (
        {}
        if accuracy is None
        else {
            **{
                paths.TRAIN_HEADLINE.at(v).as_posix(): {"data": {"epoch_s": 1.5, "train_s": 3.0, "train_loss": 0.1}}
                for v in variants
            },
            **{
                paths.EVAL_HEADLINE.at(v).as_posix(): {"data": {"test_accuracy": accuracy, "test_loss": 0.2}}
                for v in variants
            },
        }
    )
    data = {
        "rev": rev,
        "params": {"params.yaml": {"data": {"train": {"step_size": step, "epochs": 2}, "variants": variants}}},
        "metrics": metrics,
    }
    return {"rev": rev, "name": name, "data": {**data, **({"status": status} if status else {})}}


def test_rows_are_every_variant_of_every_experiment_with_what_it_changed():
    head = _entry("abc", "main", 0.01, 0.95, ["nojit", "jit"])
    head["experiments"] = [
        {"name": "exp-two", "revs": [_entry("def", "exp-two", 0.02, 0.97, ["nojit", "jit"])]},
        {"name": "exp-one", "revs": [_entry("123", "exp-one", 0.03, 0.96, ["jit"])]},
        {"name": "exp-failed", "revs": [_entry("456", "exp-failed", 0.5, None, ["jit"], status="Failed")]},
        {"name": "exp-error", "revs": [_entry("789", "exp-error", 1e308, 0.95, ["jit"])]},  # the baseline's metrics
    ]
    head["experiments"][-1]["revs"][0]["error"] = {"msg": "Experiment run failed", "type": ""}  # as DVC 3 gives it
    rows, left_out = experiments.collect([_entry("workspace", None, 0.01, 0.95, ["nojit", "jit"]), head])
    assert [row.name for row in rows] == [
        "workspace · nojit",
        "workspace · jit",
        "HEAD (main) · nojit",
        "HEAD (main) · jit",
        "exp-two · nojit",
        "exp-two · jit",
        "exp-one · jit",
    ]
    assert rows[0].changed == rows[2].changed == {}
    assert rows[4].changed == {"train.step_size": 0.02}
    assert rows[6].changed == {"train.step_size": 0.03, "variants": ["jit"]}
    assert left_out == ["exp-failed (failed)", "exp-error (failed)"]
    lines = experiments.table(rows, 60)
    assert len(lines) == 1 + len(rows) and all(len(line) <= 60 for line in lines)
    assert "97.00%" in lines[5]


def test_a_damaged_metrics_file_is_called_damaged_and_named_with_the_stage_that_remakes_it():
    workspace = _entry("workspace", None, 0.01, 0.95, ["nojit", "jit", "jit_scan"])
    metrics = workspace["data"]["metrics"]
    # as `dvc exp show --json` gives a metrics file that does not parse, or is not there
    metrics[paths.EVAL_HEADLINE.at("jit").as_posix()] = {"error": {"type": "JSONFileCorruptedError", "msg": "x"}}
    metrics[paths.TRAIN_HEADLINE.at("nojit").as_posix()] = {"error": {"type": "FileNotFoundError", "msg": "x"}}
    metrics[paths.TRAIN_HEADLINE.at("jit_scan").as_posix()] = {"data": {"epoch_s": "fast"}}
    rows, left_out = experiments.collect([workspace])
    assert rows == [] and len(left_out) == 3
    nojit, jit, jit_scan = left_out
    assert nojit.startswith("workspace · nojit") and "not run" in nojit
    assert jit.startswith("workspace · jit (metrics/evaluate/jit.json: damaged") and "not run" not in jit
    assert jit.endswith("re-run the 'evaluate@jit' stage)")
    assert "metrics/train/jit_scan.json" in jit_scan and jit_scan.endswith("re-run the 'train@jit_scan' stage)")


def test_a_metrics_file_that_holds_no_mapping_is_of_another_format_and_one_not_listed_is_not_run():
    workspace = _entry("workspace", None, 0.01, 0.95, ["nojit", "jit"])
    metrics = workspace["data"]["metrics"]
    metrics[paths.EVAL_HEADLINE.at("jit").as_posix()] = {"data": {}}  # as `dvc exp show --json` gives `[1]`
    del metrics[paths.TRAIN_HEADLINE.at("nojit").as_posix()]
    rows, left_out = experiments.collect([workspace])
    assert rows == [] and len(left_out) == 2
    assert left_out[0] == "workspace · nojit (no metrics: not run)"
    assert left_out[1] == (
        "workspace · jit (metrics/evaluate/jit.json: metrics of another format; re-run the 'evaluate@jit' stage)"
    )


def test_accuracy_axes_stay_within_the_data():
    low, high = within([96.5, 99.9], top=100)
    assert 96 < low < 96.5 and 99.9 < high <= 100
    assert within([97.0], top=100)[1] <= 100  # one run: a margin, still not past 100%


def _run(name: str, train_s: float, accuracy: float, losses: list[float]) -> compare.Run:
    history = [
        EpochRow(epoch=i, epoch_seconds=1.0, train_loss=loss, train_accuracy=accuracy, test_accuracy=accuracy)
        for i, loss in enumerate(losses, start=1)
    ]
    return compare.Run(
        name=name,
        params={"train.step_size": 0.01, "variant": "jit"},
        train=TrainHeadline(epoch_s=train_s / 2, train_s=train_s, train_loss=losses[-1]),
        evaluation=EvalHeadline(test_accuracy=accuracy, test_loss=0.1),
        history=history,
        busy=None,
    )


def test_identical_runs_are_drawn_once_and_named(tmp_path):
    runs = [
        _run("workspace · jit", 3.0, 0.97, [0.5, 0.2]),
        _run("HEAD (main) · jit", 3.0, 0.97, [0.5, 0.2]),  # the same results as the workspace
        _run("exp-a · jit", 2.0, 0.95, [0.6, 0.3]),
        _run("exp-b · jit", 2.0, 0.95, [0.7, 0.3]),  # exp-a's point, other curves
    ]
    scatter, curves = compare.figures(runs).values()
    page = tmp_path / "compare.html"
    compare.write(runs, [], "identical", "test", page, None, "between the runs")
    assert [t.get_text() for t in scatter.legends[0].get_texts()] == [
        "workspace · jit = HEAD (main) · jit",
        "exp-a · jit = exp-b · jit",
    ]
    assert len(scatter.axes[0].collections) == 2  # one dot per legend entry
    assert [t.get_text() for t in curves.legends[0].get_texts()] == [
        "workspace · jit = HEAD (main) · jit",
        "exp-a · jit",
        "exp-b · jit",
    ]
    html = page.read_text()
    said = re.sub(r"\s+", " ", html)
    assert (
        "<strong>Identical results:</strong> <code>workspace · jit = HEAD (main) · jit</code> (the same test accuracy,"
        " training seconds and curves)"
    ) in said
    assert "<code>exp-a · jit = exp-b · jit</code>: one point, the same test accuracy and training seconds." in said
    assert ": one line, the same curves." not in said


@pytest.fixture(scope="module")
def experimented(tmp_path_factory):
    """A default two-variant baseline in git and one `dvc exp run -S train.step_size=0.02` (tiny data)."""
    ws = make_workspace(
        tmp_path_factory.mktemp("views"),
        "ws",
        fast=False,
        **{"model.layer_sizes": [784, 32, 10], "train.epochs": 2, "profile.trace_steps": 2},
    )
    write_raw(ws / paths.RAW.path)
    for folder in paths.RAW.folders:
        (ws / paths.RAW.path / folder).mkdir(exist_ok=True)
    sh(ws, "dvc", "commit", "--force", "--quiet", "download")  # the tiny data stands for the download
    sh(ws, "dvc", "repro")
    sh(ws, "git", "add", "-A")
    sh(ws, "git", "commit", "-qm", "baseline")
    sh(ws, "dvc", "exp", "run", "-S", STEP)
    return ws


def _terminal(ws, *args: str) -> list[str]:
    done = subprocess.run(
        args, cwd=ws, env={**env(ws), "COLUMNS": str(WIDTH)}, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return [line.rstrip() for line in done.stdout.splitlines() if line.strip()]


@pytest.mark.slow
def test_dvc_metrics_show_and_diff_fit_a_terminal_with_test_accuracy(experimented):
    shown = _terminal(experimented, "dvc", "metrics", "show")
    assert "test_accuracy" in shown[0] and len(shown) == 1 + 4  # a line per variant's train and evaluate file
    assert max(map(len, shown)) <= WIDTH, shown
    diff = _terminal(experimented, "dvc", "metrics", "diff", "HEAD")  # the figures that changed
    assert 1 < len(diff) <= 1 + 2 * 6 and max(map(len, diff)) <= WIDTH  # at most every headline figure
    every = _terminal(experimented, "dvc", "metrics", "diff", "HEAD", "--all")
    assert sum("test_accuracy" in line for line in every) == 2 and max(map(len, every)) <= WIDTH


@pytest.mark.slow
def test_show_lists_the_workspace_the_baseline_and_each_variant_of_the_experiment(experimented):
    lines = _terminal(experimented, "mnist-pipeline", "show")
    assert max(map(len, lines)) <= WIDTH
    body = lines[1:]
    assert [line.split()[0] for line in body][:2] == ["workspace", "workspace"]
    assert sum(line.startswith("HEAD") for line in body) == 2
    changed = [line for line in body if line.rstrip().endswith(STEP)]
    assert len(changed) == 4  # the experiment's two variants, and the workspace it was applied to
    assert all(re.search(r"\d+\.\d\d%", line) for line in body)


@pytest.mark.slow
def test_compare_dvc_takes_a_default_two_variant_experiment(experimented):
    out = sh(experimented, "mnist-pipeline", "compare", "--dvc")
    assert f"wrote {paths.EXPERIMENTS_HTML} (6 rows" in out
    html = (experimented / paths.EXPERIMENTS_HTML).read_text()
    assert html.count("<tr>") == 1 + 6 and "HEAD" in html and "workspace · nojit" in html
    assert "<code>train.step_size</code>" in html and "<code>train.epochs</code>" not in html
    assert os.path.getsize(experimented / paths.EXPERIMENTS_HTML) > 10_000
