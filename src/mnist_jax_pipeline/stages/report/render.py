"""The report stage: one self-contained HTML page, a Markdown summary and the figures as PNG.

Outputs (paths.py): `reports/report.html` (figures inlined as data: URIs, inline CSS, no script,
nothing loaded from elsewhere, so it opens offline; its only links are relative ones to the trace
files and, where it exists, the experiments page beside it), `reports/summary.md` (for a pull-request
comment) and `reports/figures/*.png`.
The text lives in Jinja templates under `report/templates/`.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from ...artefacts import atomic, storage
from ...artefacts.dataset import Stats
from ...artefacts.dropped import PARKED, park
from ...artefacts.training import VariantEpoch
from ...config.params import Params, load
from ...foundation import paths, variants
from ...foundation.dataset_facts import NUM_CLASSES
from ...foundation.runtime import BUSY_SHARE
from .conditions import busy_flag, calm_line, parameter_values, short_causes
from .figures import SAMPLE_DIGITS, draw_all, draw_icicles, ordered_splits
from .formatting import FILTERS, href
from .inputs import Artefacts, VariantResults, read_all
from .memory import memory_view, missing_graphs
from .provenance import against_committed, collect

log = logging.getLogger(__name__)

DEVICE_KEYS = (
    "backend",
    "device_kind",
    "device_count",
    "devices",
    "jax_version",
    "jaxlib_version",
    "host_cpu_count",
    "cpu_model",
    "machine",
    "python_version",
)


def environment(autoescape: bool) -> Environment:
    """Templates from the package data; HTML ones escape every value."""
    env = Environment(
        loader=PackageLoader(__package__, "templates"),
        autoescape=autoescape,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(FILTERS)
    return env


def speedups(results: tuple[VariantResults, ...]) -> dict[str, float | None]:
    """Median epoch time of the baseline variant over each variant's (None without a baseline run)."""
    base = next((v for v in results if v.name == variants.BASELINE), None)
    return {
        v.name: base.train.epoch_seconds_median / v.train.epoch_seconds_median
        if base and v.train.epoch_seconds_median > 0
        else None
        for v in results
    }


def _variant_row(v: VariantResults, speedup: float | None) -> dict[str, Any]:
    recalls = {c: scores.recall for c, scores in sorted(v.evaluation.per_class.items())}
    worst = min(recalls, key=recalls.__getitem__)
    return {
        "name": v.name,
        "description": variants.get(v.name).description,
        "train": v.train,
        "run": v.run,
        "evaluation": v.evaluation,
        "speedup": speedup,
        "busy_causes": short_causes(v.run),
        "epochs_timed": len(v.history),
        "worst_class": worst,
        "worst_recall": recalls[worst],
        "per_class": v.evaluation.per_class,
        "device": {key: getattr(v.run, key) for key in DEVICE_KEYS},
    }


def _class_rows(stats: Stats) -> tuple[list[str], list[dict[str, Any]]]:
    """Non-empty splits and, per class, the count and share in each."""
    splits = [name for name, s in ordered_splits(stats) if s.count]
    rows = []
    for c in range(NUM_CLASSES):
        row: dict[str, Any] = {"class": c}
        for name in splits:
            split = stats.splits[name]
            row[name] = (split.label_histogram[c], split.class_balance[c])
        rows.append(row)
    return splits, rows


def _uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def context(
    art: Artefacts,
    params: Params,
    params_path: str,
    figures: dict[str, str],
    icicles: dict[tuple[str, str], str] | None = None,
) -> dict[str, Any]:
    """Everything both templates show."""
    ratios = speedups(art.variants)
    rows = [_variant_row(v, ratios[v.name]) for v in art.variants]
    splits, class_rows = _class_rows(art.stats)
    baseline = next((row for row in rows if row["name"] == variants.BASELINE), None)
    hungriest = max(art.variants, key=lambda v: v.train.peak_rss_bytes)
    runs = {v.name: v.run for v in art.variants}
    experiments = art.root / paths.EXPERIMENTS_HTML
    return {
        "dataset": art.manifest.dataset,
        "manifest": art.manifest,
        "stats": art.stats,
        "all_splits": ordered_splits(art.stats),
        "splits": splits,
        "class_rows": class_rows,
        "samples_shown": min(len(art.test_images), SAMPLE_DIGITS),
        "variants": rows,
        "baseline": baseline,  # the row of the variant every speedup is measured against, or None
        "baseline_name": variants.BASELINE,
        "faster": [row for row in rows if baseline is not None and row is not baseline],
        "device": rows[0]["device"],
        "peak_rss": hungriest.train.peak_rss_bytes,  # the headline's peak memory: training's, where it was largest
        "peak_rss_variant": hungriest.name,
        "memory": memory_view(art, icicles),
        "figures": figures,
        "provenance": collect(params.digest(), params_path, art.manifest),
        "params_json": json.dumps(params.to_dict(), indent=2, sort_keys=True),
        "parameter_values": parameter_values(params),
        "validation_fraction": params.preprocess.validation_fraction,
        "busy_flag": busy_flag(runs),  # one sentence when any variant trained on a busy machine, else None
        "calm": calm_line(runs),
        "busy_cpu_share": BUSY_SHARE,
        "committed": against_committed(art.variants),
        "experiments_href": href(paths.EXPERIMENTS_HTML, paths.REPORT_HTML.path) if experiments.is_file() else None,
    }


def render(params: Params, params_path: str) -> None:
    """Run the report stage: read every artefact, draw the figures, write HTML and Markdown.

    Everything is rendered in memory first, so a failure leaves the previous outputs intact.
    """
    art = read_all(params.variants)
    pngs = draw_all(art)
    uris = {name: _uri(data) for name, data in pngs.items()}
    icicles = {key: _uri(data) for key, data in draw_icicles(art, missing_graphs(art)).items()}  # inlined only
    values = context(art, params, params_path, uris, icicles)
    html = environment(autoescape=True).get_template("report.html.j2").render(values)
    summary = environment(autoescape=False).get_template("summary.md.j2").render(values)
    with atomic.atomic_dir(paths.REPORT_FIGURES.path) as tmp:
        for name, data in pngs.items():
            (tmp / name).write_bytes(data)
    rows = [VariantEpoch(variant=v.name, **h.model_dump()) for v in art.variants for h in v.history]
    storage.write_rows(paths.VARIANTS_HISTORY.path, rows, VariantEpoch)
    atomic.write_text(paths.REPORT_HTML.path, html)
    atomic.write_text(paths.REPORT_MD.path, summary)
    log.info(
        "wrote %s, %s and %d figures in %s",
        paths.REPORT_HTML.path,
        paths.REPORT_MD.path,
        len(pngs),
        paths.REPORT_FIGURES.path,
    )


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline report`: the dropped variants' outputs moved aside first (artefacts/dropped.py)."""
    params = load(args.params)
    dropped = park(params.variants) if Path(args.params) == Path("params.yaml") else {}  # the pipeline's own run
    for variant, count in dropped.items():
        log.info(
            "moved %d files of variant %s, no longer in %s, to %s/%s", count, variant, args.params, PARKED, variant
        )
    render(params, args.params)
