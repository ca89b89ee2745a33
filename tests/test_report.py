"""The report stage on a fake artefact tree: sections, self-containment, summary, figures."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mnist_jax_pipeline import paths
from mnist_jax_pipeline.errors import PipelineError
from mnist_jax_pipeline.report import provenance
from mnist_jax_pipeline.report.memory import clean_svg
from mnist_jax_pipeline.report.render import render

SECTIONS = ("dataset", "training", "timing", "evaluation", "memory", "provenance")
FIGURES = (
    "dataset_samples.png",
    "class_balance.png",
    "training_curves.png",
    "epoch_times.png",
    "confusion_nojit.png",
    "confusion_jit.png",
    "per_class_recall.png",
    "misclassified_nojit.png",
    "misclassified_jit.png",
)
EXTERNAL = re.compile(
    r"""(?:src|href)\s*=\s*["']?\s*(?!data:|#)[a-z]+:|url\(\s*["']?\s*(?!data:|#)""", re.I
)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _render(make_params, **overrides) -> tuple[str, str]:
    render(make_params(**overrides), "params.yaml")
    return Path(paths.REPORT_HTML).read_text(), Path(paths.REPORT_MD).read_text()


def test_html_has_every_section_and_is_self_contained(report_tree: Path, make_params) -> None:
    html, _ = _render(make_params)
    for section in SECTIONS:
        assert f'<section id="{section}">' in html
    assert "<script" not in html.lower()
    assert not EXTERNAL.search(html), EXTERNAL.search(html)
    assert "<link" not in html.lower() and "@import" not in html
    images = re.findall(r"<img [^>]*src=\"([^\"]*)\"", html)
    assert len(images) == len(FIGURES) + 1  # and the train_step call graph
    assert all(
        src.startswith(("data:image/png;base64,", "data:image/svg+xml;base64,")) for src in images
    )
    for name, text in (
        ("checksum", "1" * 64),
        ("params digest", make_params().digest()),
        ("speedup", "20.0×"),
        ("compile", "400 ms"),
        ("peak", "700.0 MiB"),
        ("explanation", "&lt;i&gt;train_step&lt;/i&gt;"),
        ("tfds", "4.9.10"),
    ):
        assert text in html, name


def test_the_inlined_call_graph_is_cleaned(report_tree: Path, make_params) -> None:
    html, _ = _render(make_params)
    uri = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', html)
    assert uri is not None
    svg = base64.b64decode(uri.group(1)).decode()
    assert "<script" not in svg and "onload" not in svg and "example.com" not in svg
    assert 'width="220pt"' in svg and 'height="90pt"' in svg and 'viewBox="0 0 220 90"' in svg
    assert "scale(0.5" not in svg and "train_step 1.2MB" in svg


def test_summary_states_accuracy_speedup_device_and_provenance(
    report_tree: Path, make_params
) -> None:
    _, summary = _render(make_params)
    assert "| `nojit` | 88.00 %" in summary and "| `jit` | 88.00 %" in summary
    assert "**20.0×**" in summary and "400 ms" in summary
    assert "cpu backend" in summary and "700.0 MiB" in summary
    assert f"params sha256 `{make_params().digest()[:12]}`" in summary
    assert "commit `unknown`" in summary  # tmp_path is no git repository


def test_figures_are_pngs_and_byte_stable(report_tree: Path, make_params) -> None:
    _render(make_params)
    first = {name: (Path(paths.FIGURES_DIR) / name).read_bytes() for name in FIGURES}
    assert all(data.startswith(PNG_MAGIC) and b"Software" not in data for data in first.values())
    _render(make_params)
    assert sorted(p.name for p in Path(paths.FIGURES_DIR).iterdir()) == sorted(FIGURES)
    assert {name: (Path(paths.FIGURES_DIR) / name).read_bytes() for name in FIGURES} == first


def test_without_profile_the_report_says_how_to_make_one(report_tree: Path, make_params) -> None:
    shutil.rmtree(report_tree / "reports" / "profile")
    html, summary = _render(make_params)
    assert "is missing; run the 'profile' stage" in html
    assert "go install github.com/google/pprof" in html  # the default install hint
    assert "no memory profile (run the `profile` stage)" in summary


def test_without_pprof_the_report_gives_the_install_hint(make_report_tree, make_params) -> None:
    make_report_tree(with_svg=False)
    html, summary = _render(make_params)
    assert "pprof is not installed" in html and "apt-get install pprof-for-tests" in html
    assert "apt-get install pprof-for-tests" in summary
    assert "data:image/svg+xml" not in html


def test_three_variants(make_report_tree, make_params) -> None:
    tree = make_report_tree(variants=("nojit", "jit", "jit_scan"))
    html, summary = _render(make_params, variants=["nojit", "jit", "jit_scan"])
    assert "| `jit_scan` | 88.00 %" in summary and "40.0×" in summary
    assert (tree / paths.FIGURES_DIR / "confusion_jit_scan.png").is_file()
    assert "lax.scan" in html


def test_without_nojit_there_is_no_speedup(make_report_tree, make_params) -> None:
    make_report_tree(variants=("jit",))
    html, summary = _render(make_params, variants=["jit"])
    assert "not computed" in summary and "was not run" in html


def test_a_missing_metrics_file_names_its_stage(report_tree: Path, make_params) -> None:
    (report_tree / "metrics" / "train" / "jit.json").unlink()
    with pytest.raises(
        PipelineError, match=r"metrics/train/jit.json: missing; run the 'train@jit' stage"
    ):
        render(make_params(), "params.yaml")
    assert not (report_tree / paths.REPORT_HTML).exists()


@pytest.mark.parametrize(
    ("path", "content", "message"),
    [
        (
            "metrics/evaluate/nojit.json",
            "{not json",
            r"nojit.json: corrupt JSON .*re-run the 'evaluate@nojit'",
        ),
        (
            "metrics/train/jit.json",
            json.dumps({"variant": "jit"}),
            r"missing key 'epochs'; re-run the 'train@jit'",
        ),
        (
            "plots/train/jit.csv",
            "epoch,epoch_seconds\n1,2\n",
            r"jit.csv: missing column 'train_loss'.*'train@jit'",
        ),
        (
            "plots/train/nojit.csv",
            "epoch,epoch_seconds,train_loss,train_accuracy,test_accuracy\n1,x,1,1,1\n",
            r"nojit.csv: line 2 is not numeric",
        ),
        (
            "data/processed/test_images.npy",
            "garbage",
            r"test_images.npy: corrupt or truncated.*'preprocess'",
        ),
        ("reports/profile/summary.json", "[", r"summary.json: corrupt JSON.*'profile'"),
        (
            "reports/profile/train_step.svg",
            "<svg",
            r"train_step.svg: not a readable SVG.*'profile'",
        ),
    ],
)
def test_corrupt_inputs_name_the_file_and_the_stage(
    report_tree: Path, make_params, path: str, content: str, message: str
) -> None:
    (report_tree / path).write_text(content)
    with pytest.raises(PipelineError, match=message):
        render(make_params(), "params.yaml")


def test_stale_details_name_the_evaluate_stage(report_tree: Path, make_params) -> None:
    details = report_tree / "metrics" / "evaluate" / "jit_details.json"
    data = json.loads(details.read_text())
    data["misclassified_indices"][0] = 10_000
    details.write_text(json.dumps(data))
    with pytest.raises(
        PipelineError, match=r"jit_details.json: misclassified indices.*'evaluate@jit'"
    ):
        render(make_params(), "params.yaml")


def test_clean_svg_keeps_drawing_and_internal_links() -> None:
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
        'viewBox="0 0 10 5"><defs><marker id="m"/></defs><path d="M0 0" marker-end="url(#m)" '
        'style="fill:url(http://x/y)" onclick="x()"/><use xlink:href="#m"/></svg>'
    )
    cleaned = clean_svg(svg)
    assert 'marker-end="url(#m)"' in cleaned and 'xlink:href="#m"' in cleaned
    assert "http://x" not in cleaned and "onclick" not in cleaned
    assert 'width="10pt"' in cleaned


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_git_state_reads_commit_and_dirty_flag(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert provenance.git_state() == {"commit": "unknown", "dirty": "unknown"}
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "a.txt").write_text("a")
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "a"], check=True)
    state = provenance.git_state()
    assert re.fullmatch(r"[0-9a-f]{40}", state["commit"]) and state["dirty"] == "no"
    (tmp_path / "a.txt").write_text("b")
    assert provenance.git_state()["dirty"] == "yes"


def test_source_date_epoch_pins_the_date(monkeypatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    assert provenance.generated_at() == "1970-01-01T00:00:00Z"
