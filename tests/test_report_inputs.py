"""The report stage when its inputs change or are damaged: a variant or the profile missing, other
variants, one-epoch runs, corrupt or stale files named with the stage to re-run (tests/test_report.py
has the default report)."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import FAKE_SVG, TINY_VARIANTS
from mnist_jax_pipeline.artefacts import storage, training
from mnist_jax_pipeline.config.params import load
from mnist_jax_pipeline.foundation import paths
from mnist_jax_pipeline.foundation.errors import PipelineError
from mnist_jax_pipeline.stages.report import memory
from mnist_jax_pipeline.stages.report.render import render
from test_report import GIT, PNG_MAGIC, _figures, _render


def test_the_inlined_call_graph_is_cleaned(report_tree: Path) -> None:
    (paths.PROFILE.at("jit", report_tree) / "evaluate.svg").write_text(FAKE_SVG)
    html, _ = _render(report_tree)
    uris = re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', html)
    svg = next(text for text in (base64.b64decode(u).decode() for u in uris) if "train_step 1.2MB" in text)
    assert "<script" not in svg and "onload" not in svg and "example.com" not in svg
    assert 'width="220pt"' in svg and 'height="90pt"' in svg and 'viewBox="0 0 220 90"' in svg
    assert "scale(0.5" not in svg


def test_without_profile_the_report_says_how_to_make_one(report_tree: Path) -> None:
    shutil.rmtree(report_tree / "reports" / "profile")
    html, summary = _render(report_tree)
    assert "is missing; run the 'profile' stage" in html
    assert re.search(r"<details><summary>[^<]*</summary><p>go install github.com/google/pprof", html)  # folded
    assert "no memory profile (run the `profile` stage)" in summary


@pytest.mark.slow
def test_without_pprof_the_report_gives_the_install_hint(report_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for variant in TINY_VARIANTS:
        summary_path = paths.PROFILE.at(variant, report_tree) / "summary.json"
        data = json.loads(summary_path.read_text())
        data["pprof"].update(available=False, install_hint="apt-get install pprof-for-tests")
        data["pprof"].pop("binary", None), data["pprof"].pop("dot", None)
        summary_path.write_text(json.dumps(data))
    for svg in (report_tree / "reports" / "profile").rglob("*.svg"):
        svg.unlink()
    html, summary = _render(report_tree)
    # the icicles stand in for every call graph, so the install hint stays folded
    assert re.search(
        r"<details><summary>[^<]*pprof is not installed[^<]*</summary>\s*<p>apt-get install pprof-for", html
    )
    assert not re.search(r'class="notice">[^<]*pprof', html)
    assert "apt-get install pprof-for-tests" in summary
    assert "data:image/svg+xml" not in html
    icicles = re.findall(r'<img src="(data:image/png;base64,[^"]+)" alt="icicle of (\w+) (\w+)"', html)
    assert sorted((v, p) for _, v, p in icicles) == sorted((v, p) for v in TINY_VARIANTS for p in paths.SNAPSHOTS)
    assert all(base64.b64decode(uri.split(",", 1)[1]).startswith(PNG_MAGIC) for uri, _, _ in icicles)
    _render(report_tree)  # the icicles are byte-stable too
    assert re.findall(
        r'<img src="(data:image/png;base64,[^"]+)" alt="icicle', Path(paths.REPORT_HTML.path).read_text()
    ) == [uri for uri, _, _ in icicles]
    monkeypatch.setattr(memory, "icicle_rows", lambda snapshot: [])  # no graph of any kind
    html, _ = _render(report_tree)
    assert re.search(
        r'<p class="notice">pprof is not installed and some snapshots have no call graph; [^<]*pprof-for', html
    )


@pytest.mark.slow
def test_a_variant_without_a_profile_is_named(report_tree: Path) -> None:
    shutil.rmtree(paths.PROFILE.at("jit_scan", report_tree))
    html, _ = _render(report_tree)
    assert "No trace of jit_scan: run its 'profile' stage." in html
    assert "No device-memory profile of jit_scan: run its 'profile' stage." in html
    assert "<summary>Op table of jit: " in html and "<summary>Op table of jit_scan: " not in html


def test_a_summary_of_another_variant_names_its_stage(report_tree: Path) -> None:
    shutil.copy(
        paths.PROFILE.at("jit", report_tree) / "summary.json", paths.PROFILE.at("nojit", report_tree) / "summary.json"
    )
    with pytest.raises(
        PipelineError,
        match=r"nojit/summary.json: holds variant 'jit', expected 'nojit'; re-run the"
        r" 'profile@nojit' stage",
    ):
        render(load("params.yaml"), "params.yaml")


def test_two_variants(report_tree: Path) -> None:
    html, summary = _render(report_tree, ["nojit", "jit"])
    assert "`jit_scan`" not in summary and "jit_scan" not in html
    assert sorted(p.name for p in Path(paths.REPORT_FIGURES.path).iterdir()) == sorted(_figures(["nojit", "jit"]))


def test_without_the_baseline_there_is_no_speedup(report_tree: Path) -> None:
    html, summary = _render(report_tree, ["jit"])
    assert "not computed" in summary and "was not run" in html
    assert "speedup vs" not in html and "speedup vs" not in summary  # no column of dashes for it


def test_a_missing_metrics_file_names_its_stage(report_tree: Path) -> None:
    Path(paths.TRAIN_METRICS.at("jit")).unlink()
    with pytest.raises(PipelineError, match=r"metrics/train/jit.full.json: missing; run the 'train@jit' stage"):
        render(load("params.yaml"), "params.yaml")
    assert not (report_tree / paths.REPORT_HTML.path).exists()


@pytest.mark.parametrize(
    ("path", "content", "message"),
    [
        (
            "metrics/evaluate/nojit.full.json",
            "{not json",
            r"nojit.full.json: corrupt JSON; re-run the 'evaluate@nojit'",
        ),
        (
            "metrics/train/jit.full.json",
            json.dumps({"epochs": 2}),
            r"jit.full.json: 'steps_per_epoch': field"
            r" required; re-run the 'train@jit'",
        ),
        ("metrics/train/jit.run.json", json.dumps({"variant": "jit"}), r"jit.run.json: .*re-run the 'train@jit'"),
        ("plots/train/jit.csv", "epoch,epoch_seconds\n1,2\n", r"jit.csv: missing column 'train_loss'.*'train@jit'"),
        (
            "plots/train/nojit.csv",
            "epoch,epoch_seconds,train_loss,train_accuracy,test_accuracy\n1,x,1,1,1\n",
            r"nojit.csv: line 2, column 'epoch_seconds'",
        ),
        ("data/processed/test_images.npy", "garbage", r"test_images.npy: corrupt or truncated.*'preprocess'"),
        ("data/raw/manifest.json", json.dumps({"dataset": "mnist"}), r"manifest.json: .*re-run the 'download'"),
        ("data/processed/stats.json", "[]", r"stats.json: .*re-run the 'preprocess'"),
        ("reports/profile/jit/summary.json", "[", r"jit/summary.json: corrupt JSON.*'profile@jit'"),
        ("reports/profile/jit_scan/evaluate.svg", "<svg", r"evaluate.svg: not a readable SVG.*'profile@jit_scan'"),
        (
            "reports/profile/nojit/summary.json",
            json.dumps({"variant": "nojit"}),
            r"nojit/summary.json: 'device': field required; re-run the 'profile@nojit' stage",
        ),
    ],
)
def test_corrupt_inputs_name_the_file_and_the_stage(report_tree: Path, path: str, content: str, message: str) -> None:
    (report_tree / path).write_text(content)
    with pytest.raises(PipelineError, match=message) as err:
        render(load("params.yaml"), "params.yaml")
    assert "\n" not in str(err.value)


def test_stale_details_name_the_evaluate_stage(report_tree: Path) -> None:
    details = report_tree / paths.EVAL_DETAILS.at("jit")
    data = json.loads(details.read_text())
    data["misclassified_indices"] = [10_000]
    data["true"], data["predicted"] = [1], [2]
    details.write_text(json.dumps(data))
    with pytest.raises(PipelineError, match=r"jit_details.json: misclassified indices.*'evaluate@jit'"):
        render(load("params.yaml"), "params.yaml")


@pytest.mark.slow
def test_report_lists_the_modified_files(report_tree: Path) -> None:
    subprocess.run([*GIT, "init", "-q"], check=True)
    subprocess.run([*GIT, "add", "params.yaml"], check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "a"], check=True)
    html, _ = _render(report_tree)
    assert "no tracked file modified" in html
    (report_tree / "params.yaml").write_text((report_tree / "params.yaml").read_text() + "# edited\n")
    html, summary = _render(report_tree)
    assert "with changes to <code>params.yaml</code>" in html and "changes to params.yaml" in summary


def test_a_one_epoch_speedup_says_it_includes_the_first_epoch(report_tree: Path) -> None:
    metrics = training.read_metrics("nojit")
    storage.write_model(paths.TRAIN_METRICS.at("nojit"), metrics.model_copy(update={"epochs": 1}))
    html, summary = _render(report_tree)
    assert "One epoch only" in html and "One epoch only" in summary
