"""The markers that let Snakemake re-run a job by content, not by file times.

Each job's provenance record is compared with the files, params.yaml and code as they are now
(freshness.py). A job that is not current gets a marker (.snakemake/provenance/<job>) with new
content and a time after its outputs': its one input that is not ancient(). A current job's marker
gets the oldest time. Every other input is ancient(), so a file time alone never re-runs a job.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from .freshness import Job

MARKERS = Path(".snakemake/provenance")


def marker(job: Job) -> Path:
    """The job's marker file."""
    return MARKERS / job.root / job.stage.stamp.at(job.variant).name


def mark(jobs: Iterable[Job], stale: Mapping[Job, list[str]]) -> None:
    """A stale job's marker gets new content and a time after its outputs'; a current one's the oldest time."""
    for job in jobs:
        mark_one(marker(job), stale.get(job), [*job.outputs(), job.stamp_path])


def mark_one(path: Path, reasons: list[str] | None, outputs: list[Path]) -> None:
    """Mark `path` stale (`reasons`) or current; `outputs` are what the job it stands for writes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if reasons:
        newest = max((p.stat().st_mtime for p in outputs if p.exists()), default=0.0)
        # New content each time (Snakemake takes an input whose content it saw at the job's last run as
        # unchanged), except when the job has no output at all: then Snakemake runs it anyway, and the
        # same content in every fresh checkout keeps the between-workflow cache's key the same.
        fresh = not any(p.exists() for p in outputs)
        path.write_text("\n".join(["missing"] if fresh else [*reasons, str(time.time_ns())]) + "\n", encoding="utf-8")
        moment = max(time.time(), newest + 1)
        os.utime(path, (moment, moment))
    else:
        if not path.exists():
            path.write_text("current\n", encoding="utf-8")
        os.utime(path, (0, 0))


def settle(jobs: Iterable[Job]) -> None:
    """Provenance records get an old time (1 s after the epoch, after the markers of current jobs): they
    link each job to the jobs it reads (so a job that re-runs re-runs those after it), but their time
    never makes a job stale. Not 0: Snakemake reads an output time of 0 as none."""
    for job in jobs:
        with contextlib.suppress(OSError):
            os.utime(job.stamp_path, (1, 1))
