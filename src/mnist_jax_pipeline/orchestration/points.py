"""A sweep's points as jobs: each point's train and evaluate under its folder, checked as any job is; `compare`
draws a sweep's page only of current points."""

import argparse

from ..artefacts.provenance import Hashes
from ..config import sweeps
from ..config.params import validate
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
    params = validate(sweep.params(point), str(sweep.folder(point) / "params.yaml"))
    return Checker(params, sweeps.named(sweep.name).as_posix(), hashes)


def check_points(name: str, params_path: str) -> None:
    """Refuse to compare a sweep whose points are not current, in one line naming the first stale file."""
    sweep, hashes = sweeps.load(sweeps.named(name), params_path), Hashes()
    for point in sweep.points:
        checker = point_checker(sweep, point, hashes)
        for job in point_jobs(sweep, point):
            if found := checker.problems(job):
                page = (sweep.folder() / paths.COMPARE_HTML).as_posix()
                raise PipelineError(f"{found[0]}; run the sweep's points first: snakemake --cores all {page}")


def compare(args: argparse.Namespace) -> None:
    """`mnist-pipeline compare`: with --sweep, once every point is current."""
    if args.sweep:
        check_points(args.sweep, args.params)
    from ..comparison.compare import main  # pandas and matplotlib: loaded for the page only

    main(args)
