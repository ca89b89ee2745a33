"""The comparison page and DVC's plots page in a real headless Chromium, offline: everything draws,
nothing is fetched."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from browser import open_offline
from conftest import ROOT, TINY_VARIANTS
from mnist_jax_pipeline.artefacts import evaluation, training
from mnist_jax_pipeline.comparison import compare
from mnist_jax_pipeline.config.params import load
from mnist_jax_pipeline.stages.report.render import render

BIN = Path(sys.executable).parent
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


def test_the_comparison_page_opens_offline_with_every_figure(report_tree: Path) -> None:
    params = compare.flatten(load("params.yaml").to_dict())
    runs = [
        compare.Run(
            name=v,
            params={**params, "variant": v},
            train=training.read_metrics(v).headline(),
            evaluation=evaluation.read_metrics(v).headline(),
            history=training.read_history(v),
            busy=None,
        )
        for v in TINY_VARIANTS
    ]
    page = report_tree / "compare.html"
    compare.write(runs, compare.differing(runs), "tiny variants", "test", page, None, "between the runs")
    visit = open_offline(page, "compare.png", "() => document.querySelectorAll('#table tr').length")
    assert "tiny variants" in visit.title
    assert len(visit.images) == 2 and all(
        i["complete"] and i["width"] > 0 and i["scheme"] == "data" for i in visit.images
    )
    assert visit.found == len(runs) + 1  # the header and one row per run
    assert not visit.outside and not visit.failed


LEGENDS = """async specs => {
  const drawn = [...document.querySelectorAll('div[id]')].filter(d => d.querySelector('svg, canvas')).map(d => d.id);
  const plots = [];
  for (const spec of specs) {  // drawn again as SVG, off the page, to read the legends' symbols
    const box = document.createElement('div');
    await vegaEmbed(box, spec, {renderer: 'svg', actions: false});
    plots.push({title: typeof spec.title === 'string' ? spec.title : spec.title.text,
      legends: [...box.querySelectorAll('.role-legend')].map(legend => ({
        title: [...legend.querySelectorAll('.role-legend-title text')].map(t => t.textContent).join(' '),
        // shape and colour: a dash pattern does not show on a legend's small symbol
        symbols: [...legend.querySelectorAll('.role-legend-symbol path')].map(p => ['d', 'fill', 'stroke']
          .map(name => p.getAttribute(name)).join('|'))}))});
  }
  return {drawn, plots};
}"""


def _dvc_plots(variants: list[str]) -> list[dict]:
    """dvc.yaml's plots: the top-level ones, and each stage's per-variant plot as a top-level entry."""
    document = yaml.safe_load((ROOT / "dvc.yaml").read_text())
    plots = list(document["plots"])
    for stage in document["stages"].values():
        for entry in stage.get("do", stage).get("plots", []):
            for path, options in entry.items():
                shown = {key: value for key, value in options.items() if key not in ("cache", "persist")}
                plots += [
                    {
                        path.replace("${item}", v): {
                            key: value.replace("${item}", v) if isinstance(value, str) else value
                            for key, value in shown.items()
                        }
                    }
                    for v in variants
                ]
    return plots


def _change_workspace(tree: Path) -> None:
    """Another run in the workspace than at HEAD: other losses and accuracies, other confusions."""
    for path in [tree / "plots" / "variants.csv", *(tree / "plots" / "train").glob("*.csv")]:
        rows = list(csv.DictReader(path.open()))
        for row in rows:
            row.update({key: str(float(row[key]) * 0.9) for key in ("train_loss", "test_accuracy", "epoch_seconds")})
        with path.open("w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    for path in (tree / "plots" / "confusion").glob("*.csv"):
        rows = list(csv.DictReader(path.open()))
        for row in rows[:20]:
            row["predicted"] = str((int(row["actual"]) + 1) % 10)
        with path.open("w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=["actual", "predicted"])
            writer.writeheader()
            writer.writerows(rows)


@pytest.mark.slow
def test_dvc_plots_diff_renders_offline_and_tells_revisions_apart(report_tree: Path) -> None:
    render(load("params.yaml"), "params.yaml")  # writes plots/variants.csv
    dvc = str(BIN / "dvc")
    for command in (["git", "init", "-q"], [dvc, "init", "-q"]):
        subprocess.run(command, cwd=report_tree, check=True, capture_output=True)
    shutil.copytree(ROOT / ".dvc" / "plots", report_tree / ".dvc" / "plots")
    subprocess.run(
        [dvc, "config", "plots.html_template", "plots/offline.html"], cwd=report_tree, check=True, capture_output=True
    )
    plots = _dvc_plots(TINY_VARIANTS)
    (report_tree / "dvc.yaml").write_text(yaml.safe_dump({"plots": plots}))
    for command in (["git", "add", "dvc.yaml", ".dvc", "plots"], [*GIT, "commit", "-qm", "baseline"]):
        subprocess.run(command, cwd=report_tree, check=True, capture_output=True)
    _change_workspace(report_tree)
    done = subprocess.run(
        [dvc, "plots", "diff", "HEAD", "-o", "dvc_plots"], cwd=report_tree, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and "failed to load" not in done.stdout + done.stderr, done.stderr
    page = report_tree / "dvc_plots" / "index.html"
    text = page.read_text()
    assert "cdn.jsdelivr.net" not in text
    specs = [json.loads(spec) for spec in re.findall(r"var spec = (\{.*?\});\s*vegaEmbed", text, re.S)]
    assert len(specs) == len(plots)
    visit = open_offline(
        page,
        "dvc_plots.png",
        LEGENDS,
        argument=specs,
        wait_for=f"document.querySelectorAll('div[id] canvas, div[id] svg').length >= {len(plots)}",
    )
    assert len(visit.found["drawn"]) == len(plots)
    assert not visit.outside and not visit.failed
    warnings = [line for line in visit.console if "WARN" in line or "Infinite extent" in line]
    assert not warnings, warnings  # e.g. "Infinite extent for field 'epoch'" from a template's empty layer
    for spec, plot in zip(specs, visit.found["plots"], strict=True):  # legends tell revisions apart by symbol
        if "facet" in spec:  # a confusion matrix: one panel per revision, headed by its name
            assert spec["facet"]["column"]["field"] == "rev"
            continue
        revisions = [legend for legend in plot["legends"] if "revision" in legend["title"]]
        assert revisions, (plot["title"], plot["legends"])
        for legend in revisions:
            assert len(legend["symbols"]) == 2 and len(set(legend["symbols"])) == 2, (plot["title"], legend)
    seconds = [spec for spec in specs if spec.get("title") == "Seconds per epoch"]
    assert len(seconds) == 1 and seconds[0]["encoding"]["y"]["scale"]["type"] == "log"  # nojit vs jit: ~100x
    confusions = [spec for spec in specs if "facet" in spec]
    assert len(confusions) == len(TINY_VARIANTS)
    for spec in confusions:  # as the report draws it: actual on y, predicted on x, a log colour scale
        encoding = spec["spec"]["encoding"]
        assert (encoding["x"]["field"], encoding["y"]["field"]) == ("predicted", "actual")
        assert spec["spec"]["layer"][0]["encoding"]["color"]["scale"]["type"] == "log"
