"""A sweep's points: the parameters its sweep file gives each now, and its train and evaluate jobs under its
folder, checked as any job is; `compare` draws a sweep's page only of current points."""

import argparse
from pathlib import Path

from ..artefacts.provenance import Hashes
from ..config import sweeps
from ..config.params import Params
from ..foundation import paths
from ..foundation.errors import PipelineError
from . import stage_table
from .freshness import Checker
from .jobs import Job


def point_jobs(sweep: sweeps.Sweep, point: sweeps.Point) -> list[Job]:
    """The jobs of one sweep point, under its folder."""
    return [Job(stage_table.get(name), sweep.variant, sweep.folder(point)) for name in stage_table.POINT_STAGES]


def point_checker(sweep: sweeps.Sweep, point: sweeps.Point, hashes: Hashes) -> Checker:
    """A checker of the point's jobs against the parameters the sweep gives it now."""
    return Checker(point.validated, sweeps.named(sweep.name).as_posix(), hashes)


def point_params(folder: Path, params_path: str | Path = paths.PARAMS) -> Params | str:
    """The parameters that its sweep file now gives the point whose folder is `folder` (sweeps/<sweep>/<point>), or
    why it gives none (the file is missing or not valid, or does not list the point) with the fix."""
    file = sweeps.file(folder.parent.name)
    fix = f"list the point in {file}" + (f", or delete {folder}" if folder.exists() else "")
    if not file.is_file():
        return f"{file}: missing, so no sweep lists the point '{folder.name}'; {fix}"
    try:
        sweep = sweeps.load(file, params_path)
    except PipelineError as err:
        return str(err)
    unlisted = f"{file} does not list the point '{folder.name}'; {fix}"
    return next((point.validated for point in sweep.points if sweep.folder(point) == folder), unlisted)


def check_points(name: str, params_path: str) -> tuple[sweeps.Sweep, Hashes]:
    """The sweep and its points' digests, once every point is current; else one line naming the first stale file."""
    sweep, hashes = sweeps.load(sweeps.named(name), params_path), Hashes()
    for point in sweep.points:
        checker = point_checker(sweep, point, hashes)
        for job in point_jobs(sweep, point):
            if found := checker.problems(job):
                page = (sweep.folder() / paths.COMPARE_HTML).as_posix()
                raise PipelineError(f"{found[0]}; run the sweep's points first: snakemake --cores all {page}")
    return sweep, hashes


def compare(args: argparse.Namespace) -> None:
    """`mnist-pipeline compare`: with --sweep, once every point is current."""
    checked = check_points(args.sweep, args.params) if args.sweep else None
    from ..comparison.compare import main  # pandas and matplotlib: loaded for the page only

    main(args, checked)
