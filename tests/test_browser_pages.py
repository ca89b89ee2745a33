"""The comparison page and DVC's plots page in a real headless Chromium, offline: everything draws,
nothing is fetched."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from browser import open_offline
from conftest import ROOT, TINY_VARIANTS
from mnist_jax_pipeline.artefacts import evaluation, training
from mnist_jax_pipeline.config import load
from mnist_jax_pipeline.report import compare
from mnist_jax_pipeline.report.render import render

BIN = Path(sys.executable).parent


def test_the_comparison_page_opens_offline_with_every_figure(report_tree: Path) -> None:
    params = compare.flatten(load("params.yaml").to_dict())
    runs = [compare.Run(name=v, params={**params, "variant": v}, train=training.read_metrics(v).headline(),
                        evaluation=evaluation.read_metrics(v).headline(), history=training.read_history(v),
                        ran_alone=True)
            for v in TINY_VARIANTS]
    page = report_tree / "compare.html"
    compare.write(runs, compare.differing(runs), "tiny variants", "test", page, None, "between the runs")
    visit = open_offline(page, "compare.png", "() => document.querySelectorAll('#table tr').length")
    assert "tiny variants" in visit.title
    assert len(visit.images) == 2 and all(i["complete"] and i["width"] > 0 and i["scheme"] == "data"
                                          for i in visit.images)
    assert visit.found == len(runs) + 1  # the header and one row per run
    assert not visit.outside and not visit.failed


def test_dvc_plots_render_offline_with_the_project_template(report_tree: Path) -> None:
    render(load("params.yaml"), "params.yaml")  # writes plots/variants.csv
    for command in (["git", "init", "-q"], [str(BIN / "dvc"), "init", "-q"]):
        subprocess.run(command, cwd=report_tree, check=True, capture_output=True)
    shutil.copytree(ROOT / ".dvc" / "plots", report_tree / ".dvc" / "plots")
    subprocess.run([str(BIN / "dvc"), "config", "plots.html_template", "plots/offline.html"], cwd=report_tree,
                   check=True, capture_output=True)
    plots = yaml.safe_load((ROOT / "dvc.yaml").read_text())["plots"]
    (report_tree / "dvc.yaml").write_text(yaml.safe_dump({"plots": plots}))
    done = subprocess.run([str(BIN / "dvc"), "plots", "show", "-o", "dvc_plots"], cwd=report_tree,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "failed to load" not in done.stdout + done.stderr, done.stderr
    page = report_tree / "dvc_plots" / "index.html"
    assert "cdn.jsdelivr.net" not in page.read_text()
    drawn = ("() => [...document.querySelectorAll('div[id]')].filter(d => d.querySelector('svg, canvas'))"
             ".map(d => d.id)")
    visit = open_offline(page, "dvc_plots.png", drawn, wait_for=f"({drawn})().length >= {len(plots)}")
    assert len(visit.found) == len(plots)
    assert not visit.outside and not visit.failed
