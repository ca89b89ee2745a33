"""The committed baseline, the DVC way: dvc.lock and the metrics and plots of a reference run are in
git (`cache: false`), so a fresh clone's `dvc repro` can be compared with them by `dvc metrics diff`
and `dvc plots diff`. On the CPU model that made the baseline no model-quality figure changes; on
another one the diff shows the drift (the test then only checks that the committed values show)."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import ROOT, mirror_dir
from mnist_jax_pipeline.foundation import paths
from mnist_jax_pipeline.foundation.runtime import cpu_model
from workspace import downloaded, make_workspace, sh

pytestmark = [pytest.mark.slow, pytest.mark.real_data]
QUALITY = (
    "test_accuracy",
    "test_loss",
    "train_loss",
    "misclassified",
    "final_test_accuracy",
    "final_train_accuracy",
    "final_train_loss",
)


def committed_text(path: str) -> str:
    return subprocess.run(["git", "show", f"HEAD:{path}"], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def committed(path: str) -> dict:
    return json.loads(committed_text(path))


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory):
    mirror_dir()  # the session's real download, then the rest of the repository's pipeline
    ws = make_workspace(tmp_path_factory.mktemp("baseline"), "clone", fast=False, start=downloaded(tmp_path_factory))
    sh(ws, "dvc", "repro")
    return ws


def test_the_baseline_is_committed():
    tracked = subprocess.run(
        ["git", "ls-files", "dvc.lock", "metrics", "plots"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert "dvc.lock" in tracked and paths.VARIANTS_HISTORY.path in tracked
    for variant in ("nojit", "jit"):
        for artefact in (
            paths.TRAIN_HEADLINE,
            paths.TRAIN_METRICS,
            paths.TRAIN_RUN,
            paths.EVAL_HEADLINE,
            paths.EVAL_METRICS,
            paths.TRAIN_HISTORY,
        ):
            assert artefact.at(variant).as_posix() in tracked


def test_metrics_diff_shows_the_committed_values_and_no_quality_change_on_the_same_cpu(reproduced):
    diff = json.loads(sh(reproduced, "dvc", "metrics", "diff", "--all", "--json").strip().splitlines()[-1])
    same_cpu = committed(paths.TRAIN_RUN.at("jit").as_posix())["cpu_model"] == cpu_model()
    for variant in ("nojit", "jit"):
        path = paths.EVAL_HEADLINE.at(variant).as_posix()
        entry = diff[path]["test_accuracy"]
        assert entry["old"] == committed(path)["test_accuracy"]
        if same_cpu:
            for key, values in {**diff[path], **diff[paths.TRAIN_HEADLINE.at(variant).as_posix()]}.items():
                if key in QUALITY:
                    assert values["old"] == values["new"], (variant, key, values)
            for full in (paths.EVAL_METRICS, paths.TRAIN_METRICS):  # the full records DVC does not list
                old, new = committed(full.at(variant).as_posix()), json.loads(full.at(variant, reproduced).read_text())
                for key in old.keys() & new.keys():
                    if key in QUALITY or key == "per_class":
                        assert old[key] == new[key], (variant, full.path, key)


def test_plots_diff_draws_the_baseline_beside_the_run(reproduced):
    out = sh(reproduced, "dvc", "plots", "diff", "HEAD", "--json")
    data = json.loads(out[out.index("{") :])
    revisions = {
        row["rev"]
        for plot in data["data"].values()
        for item in plot
        for row in item.get("content", {}).get("data", {}).get("values", [])
    }
    assert {"HEAD", "workspace"} <= revisions
    assert "failed to load" not in out


def test_the_committed_code_reproduces_the_baselines_model_bytes_on_the_same_cpu(reproduced):
    """The baseline is the committed code's: a fresh clone's `dvc repro` makes the very models dvc.lock
    records (and so the same metrics, above). On another CPU model XLA may generate other code, so the
    bytes may differ there; the test then checks only that dvc.lock names a model for every variant."""
    import hashlib

    import yaml

    lock = yaml.safe_load(committed_text("dvc.lock"))["stages"]
    same_cpu = committed(paths.TRAIN_RUN.at("jit").as_posix())["cpu_model"] == cpu_model()
    for variant in ("nojit", "jit"):
        model = paths.MODEL.at(variant).as_posix()
        recorded = next(out["md5"] for out in lock[f"train@{variant}"]["outs"] if out["path"] == model)
        made = hashlib.md5((reproduced / model).read_bytes()).hexdigest()
        if same_cpu:
            assert made == recorded, (
                f"{model}: md5 {made} from the committed code, {recorded} in dvc.lock;"
                " refresh the baseline by a real run"
            )
