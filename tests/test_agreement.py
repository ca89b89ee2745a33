"""Snakemake and DVC agree on what is up to date, whichever ran last (fast setting, real MNIST).

Design (docs/orchestrators.md): each stage's provenance record decides, by content, what is stale;
Snakemake's closing `dvc commit` records in dvc.lock the jobs that are current. File times decide
nothing: after `dvc checkout` gives restored files new times in any order, neither tool re-runs.
"""

from __future__ import annotations

import pytest

from conftest import mirror_dir
from workspace import downloaded, dvc_ran, make_workspace, set_params, sh, snakemake_planned

pytestmark = [pytest.mark.slow, pytest.mark.real_data]
TEMPLATE = "src/mnist_jax_pipeline/stages/report/templates/report.html.j2"


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    mirror_dir()
    return tmp_path_factory.mktemp("agree")


@pytest.fixture(scope="module")
def dvc_first(parent, tmp_path_factory):
    """DVC ran every stage (the download in the shared start); the Snakemake-first run downloads for itself."""
    ws = make_workspace(parent, "dvc_first", start=downloaded(tmp_path_factory), variants=["jit"])
    sh(ws, "dvc", "repro")
    return ws


@pytest.fixture(scope="module")
def snakemake_first(parent):
    ws = make_workspace(parent, "snakemake_first", variants=["jit"])
    sh(ws, "snakemake", "--cores", "all")
    return ws


def test_1_dvc_repro_then_snakemake_has_nothing_to_do(dvc_first):
    assert snakemake_planned(dvc_first) == set()


def test_2_snakemake_then_dvc_status_is_up_to_date(snakemake_first):
    assert "Data and pipelines are up to date" in sh(snakemake_first, "dvc", "status")
    lock = (snakemake_first / "dvc.lock").read_text()
    for stage in ("download:", "preprocess:", "train@jit:", "evaluate@jit:", "profile@jit:", "report:"):
        assert stage in lock
    assert dvc_ran(sh(snakemake_first, "dvc", "repro")) == set()


def test_3_checkout_of_old_parameters_reruns_nothing(snakemake_first):
    ws = snakemake_first
    sh(ws, "git", "add", "-A")
    sh(ws, "git", "commit", "-qm", "first run")
    set_params(ws, **{"train.epochs": 2})
    assert dvc_ran(sh(ws, "dvc", "repro")) == {"check", "train", "evaluate", "profile", "report"}
    sh(ws, "git", "checkout", "--", "params.yaml", "dvc.lock", "metrics", "plots")  # git keeps the baseline files
    sh(ws, "dvc", "checkout")
    assert "Data and pipelines are up to date" in sh(ws, "dvc", "status")
    assert snakemake_planned(ws) == set()
    assert "Data and pipelines are up to date" in sh(ws, "dvc", "status")


def test_4_template_edit_reruns_report_only(dvc_first, snakemake_first):
    for ws in (dvc_first, snakemake_first):
        template = ws / TEMPLATE
        template.write_text(template.read_text().replace("</body>", "<!-- edited --></body>"))
    assert snakemake_planned(snakemake_first) == {"report"}
    assert snakemake_planned(dvc_first) == {"report"}
    assert dvc_ran(sh(dvc_first, "dvc", "repro")) == {"report"}
    assert "edited" in (dvc_first / "reports/report.html").read_text()
