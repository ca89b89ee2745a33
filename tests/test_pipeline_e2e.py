"""Both orchestrators on the real MNIST, with a fast setting (2,000 training examples, 1 epoch).

Each runs in its own fresh copy of the repository: they must produce the same files (the
same model bytes), a second run must do nothing, and a preprocess change must re-run
preprocess and what follows it, never download.
"""

from __future__ import annotations

import json
import zipfile

import pytest

from conftest import mirror_dir
from workspace import (
    artefacts,
    copy_workspace,
    dvc_ran,
    fast_dvc_run,
    make_workspace,
    set_params,
    sh,
    snakemake_planned,
)

pytestmark = [pytest.mark.slow, pytest.mark.real_data]
# a parameter change also runs `check`, which checks params.yaml whole
DOWNSTREAM_OF_PREPROCESS = {"check", "preprocess", "train", "evaluate", "profile", "report"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    mirror_dir()
    parent = tmp_path_factory.mktemp("e2e")
    snake = make_workspace(parent, "snakemake")
    sh(snake, "snakemake", "--cores", "all")
    # the session's `dvc repro` in a fresh copy (shared with test_s3_remote.py); this module's tests change it
    dvc = copy_workspace(fast_dvc_run(tmp_path_factory), parent, "dvc")
    return snake, dvc


def test_both_orchestrators_produce_the_same_files(runs):
    snake, dvc = runs
    a, b = artefacts(snake), artefacts(dvc)
    assert set(a) == set(b)
    for required in (
        "reports/report.html",
        "reports/summary.md",
        "models/jit.safetensors",
        "models/nojit.safetensors",
        "data/processed/train_images.npy",
        "reports/profile/jit/summary.json",
        "reports/profile/nojit/summary.json",
        "reports/profile/jit/trace/plugins/profile/jit/host.xplane.pb",
    ):
        assert required in a
    for rel in (
        "models/jit.safetensors",
        "models/nojit.safetensors",
        "data/processed/train_images.npy",
        "data/raw/arrays/train_images.npy",
        "plots/confusion/jit.csv",
    ):
        assert a[rel].read_bytes() == b[rel].read_bytes(), f"{rel} differs between the orchestrators"
    # what each output was made from is recorded the same way by both (the records also hash the
    # metrics, whose timings differ from run to run)
    for record in ("provenance/preprocess.json", "provenance/train_jit.json"):
        x, y = (json.loads((ws / record).read_text()) for ws in runs)
        assert (x["params"], x["code"], x["inputs"]) == (y["params"], y["code"], y["inputs"]), record
    model = "models/jit.safetensors"
    assert (
        json.loads((snake / "provenance/train_jit.json").read_text())["outputs"][model]
        == json.loads((dvc / "provenance/train_jit.json").read_text())["outputs"][model]
    )


def test_second_runs_do_nothing(runs):
    snake, dvc = runs
    assert snakemake_planned(snake) == set()
    assert "Data and pipelines are up to date" in sh(dvc, "dvc", "status")
    assert dvc_ran(sh(dvc, "dvc", "repro")) == set()


def test_snakemake_report_bundles_the_outputs(runs):
    snake, _ = runs
    sh(snake, "snakemake", "--cores", "all", "--report", "report.zip")
    with zipfile.ZipFile(snake / "report.zip") as bundle:
        names = bundle.namelist()
    assert any(name.endswith("report.html") for name in names)
    assert any(name.endswith("training_curves.png") for name in names)


def test_dvc_metrics_list_both_variants(runs):
    _, dvc = runs
    shown = sh(dvc, "dvc", "metrics", "show")
    for variant in ("nojit", "jit"):
        assert f"metrics/evaluate/{variant}.json" in shown
    assert "test_accuracy" in shown


def test_dvc_plots_render_curves_and_confusion_matrices(runs):
    _, dvc = runs
    output = sh(dvc, "dvc", "plots", "show", "-o", "dvc_plots")
    assert "failed to load" not in output
    page = (dvc / "dvc_plots" / "index.html").read_text()
    for title in (
        "Training loss per epoch",
        "Seconds per epoch",
        "Confusion matrix (jit)",
        "Confusion matrix (nojit)",
        "Test accuracy per epoch (jit)",
    ):
        assert title in page


def test_dvc_experiment_reruns_train_and_what_follows(runs):
    _, dvc = runs
    ran = dvc_ran(sh(dvc, "dvc", "exp", "run", "--set-param", "train.epochs=2"))
    assert ran == {"check", "train", "evaluate", "profile", "report"}
    assert "epochs: 2" in (dvc / "params.yaml").read_text()


def test_preprocess_change_reruns_preprocess_and_what_follows(runs):
    snake, dvc = runs
    for ws in runs:
        set_params(ws, **{"preprocess.seed": 1})
    assert snakemake_planned(snake) == DOWNSTREAM_OF_PREPROCESS
    ran = dvc_ran(sh(dvc, "dvc", "repro"))
    assert ran == DOWNSTREAM_OF_PREPROCESS
