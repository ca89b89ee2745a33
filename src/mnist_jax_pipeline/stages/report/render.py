"""The report stage: `reports/report.html`, one self-contained page (figures inlined as data: URIs, inline CSS,
no script, nothing fetched; its only links relative ones to the trace files and the experiments page beside
it), `reports/summary.md` for a pull-request comment, `reports/figures/*.png` and `plots/variants.csv` for DVC.
The text lives in the Jinja templates beside this module.
"""

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from ...artefacts import atomic, storage
from ...artefacts.dropped import PARKED, park
from ...artefacts.profile_summary import short_frame
from ...artefacts.training import VariantEpoch
from ...config.params import Params, load
from ...foundation import paths, variants
from ...foundation.runtime import BUSY_SHARE
from .conditions import busy_flag, calm_line, parameter_values, short_causes
from .figures import SAMPLE_DIGITS, data_uri, draw_all, ordered
from .formatting import FILTERS, href
from .inputs import Artefacts, read_all
from .memory import memory_view, origin
from .provenance import against_committed, collect

log = logging.getLogger(__name__)


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
    env.filters.update(FILTERS, origin=origin, short_frame=short_frame)
    return env


def context(art: Artefacts, params: Params, params_path: str, figures: dict[str, str]) -> dict[str, Any]:
    """Everything both templates show."""
    runs = {v.name: v.run for v in art.variants}
    baseline = next((v for v in art.variants if v.name == variants.BASELINE), None)
    experiments = Path(paths.EXPERIMENTS_HTML).is_file()
    return {
        "manifest": art.manifest,
        "stats": art.stats,
        "splits": ordered(art.stats.splits, paths.SPLITS),
        "samples_shown": min(len(art.test_images), SAMPLE_DIGITS),
        "variants": art.variants,
        "descriptions": {v.name: variants.get(v.name).description for v in art.variants},
        # the baseline's median epoch over each variant's (None without a baseline run)
        "speedups": {
            v.name: baseline.train.epoch_seconds_median / v.train.epoch_seconds_median
            if baseline and v.train.epoch_seconds_median > 0
            else None
            for v in art.variants
        },
        "busy_causes": {name: short_causes(run) for name, run in runs.items()},
        # each variant's class of lowest recall, with its scores
        "worst": {v.name: min(sorted(v.evaluation.per_class.items()), key=lambda c: c[1].recall) for v in art.variants},
        "baseline": baseline,  # the variant every speedup is measured against, or None
        "baseline_name": variants.BASELINE,
        "faster": [v for v in art.variants if baseline is not None and v is not baseline],
        "device": art.variants[0].run,
        "hungriest": max(art.variants, key=lambda v: v.train.peak_rss_bytes),  # the headline's peak memory
        "memory": memory_view(art),
        "figures": figures,
        "provenance": collect(params.digest(), params_path, art.manifest),
        "params": params,
        "params_json": json.dumps(params.to_dict(), indent=2, sort_keys=True),
        "parameter_values": parameter_values(params),
        "busy_flag": busy_flag(runs),  # one sentence when any variant trained on a busy machine, else None
        "calm": calm_line(runs),
        "busy_cpu_share": BUSY_SHARE,
        "committed": list(against_committed(art.variants)),
        "experiments_href": href(paths.EXPERIMENTS_HTML, paths.REPORT_HTML.path) if experiments else None,
    }


def render(params: Params, params_path: str) -> None:
    """Read every artefact, draw the figures, write the outputs; all rendered in memory first, so that a failure
    leaves the previous outputs intact."""
    art = read_all(params.variants)
    pngs = draw_all(art)
    values = context(art, params, params_path, {name: data_uri(data) for name, data in pngs.items()})
    html = environment(autoescape=True).get_template("report.html.j2").render(values)
    summary = environment(autoescape=False).get_template("summary.md.j2").render(values)
    figures_dir = paths.REPORT_FIGURES.path
    with atomic.atomic_dir(figures_dir) as tmp:
        for name, data in pngs.items():
            (tmp / name).write_bytes(data)
    rows = [VariantEpoch(variant=v.name, **h.model_dump()) for v in art.variants for h in v.history]
    storage.write_rows(paths.VARIANTS_HISTORY.path, rows, VariantEpoch)
    atomic.write_text(paths.REPORT_HTML.path, html)
    atomic.write_text(paths.REPORT_MD.path, summary)
    log.info("wrote %s, %s and %d figures in %s", paths.REPORT_HTML.path, paths.REPORT_MD.path, len(pngs), figures_dir)


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline report`: the dropped variants' outputs moved aside first (artefacts/dropped.py)."""
    params = load(args.params)
    dropped = park(params.variants) if Path(args.params) == Path(paths.PARAMS) else {}  # the pipeline's own run
    for variant, count in dropped.items():
        log.info("moved %d files of variant %s, not in %s, to %s/%s", count, variant, args.params, PARKED, variant)
    render(params, args.params)
