"""dvc.lock kept in step with the provenance records by every Snakemake run, one with nothing to run too.

Snakemake records what it made in dvc.lock with `dvc commit` (workflow/rules/common.smk), for the
jobs that are current by content. A run with nothing to run must do the same: after `git stash` or
`git checkout dvc.lock` over a current workspace, dvc.lock names older outputs while every job is
current, and only a commit brings DVC back in line. A fingerprint of dvc.lock and of the records,
kept beside Snakemake's markers, says whether that commit is needed: it is the same as at the last
commit only while neither file changed, so a run with nothing to do costs one hash of each.
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterable
from pathlib import Path

from ..artefacts import atomic
from .freshness import Job

DVC_LOCK = Path("dvc.lock")
AGREED = Path(".snakemake/provenance/dvc.lock.agreed")  # the fingerprint at the last dvc commit
UP_TO_DATE = "dvc.lock: brought up to date with the outputs, all current by content (dvc commit)"


def fingerprint(jobs: Iterable[Job]) -> str:
    """SHA-256 of dvc.lock and of every job's provenance record, in order."""
    digest = hashlib.sha256()
    for path in (DVC_LOCK, *(job.stamp_path for job in jobs)):
        digest.update(path.as_posix().encode() + b"\0")
        try:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        except OSError:
            digest.update(b"absent")
    return digest.hexdigest()


def in_step(jobs: Iterable[Job]) -> bool:
    """Whether dvc.lock and the records are as they were when dvc.lock last recorded them."""
    try:
        return AGREED.read_text(encoding="utf-8").strip() == fingerprint(jobs)
    except OSError:
        return False


def remember(jobs: Iterable[Job]) -> None:
    """Keep the fingerprint of dvc.lock and the records as they are now, just recorded."""
    AGREED.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(AGREED, fingerprint(jobs) + "\n")


def commit(names: list[str]) -> str | None:
    """`dvc commit` of these stages; None, or the one line that says why it failed."""
    if not names:
        return None
    # In a session of its own: a Ctrl-C pressed again while it records (it reaches the whole process group)
    # must not cut dvc.lock's update short; the run stops once it is written.
    done = subprocess.run(
        ["dvc", "commit", "--force", "--quiet", *names], capture_output=True, text=True, start_new_session=True
    )
    if done.returncode == 0:
        return None
    lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    last = next((line for line in lines if line.startswith("ERROR")), lines[-1] if lines else "no message")
    return f"dvc commit failed ({last}); run `dvc commit --force` once DVC can"


def bring_up_to_date(jobs: list[Job]) -> str | None:
    """With every job current: commit them all unless dvc.lock already records them; a line to print, or None."""
    if in_step(jobs):
        return None
    before = DVC_LOCK.read_bytes() if DVC_LOCK.is_file() else b""
    failed = commit([job.name for job in jobs])
    if failed:
        return f"warning: dvc.lock: {failed}"
    remember(jobs)
    if DVC_LOCK.read_bytes() != before:
        return UP_TO_DATE
    return None
