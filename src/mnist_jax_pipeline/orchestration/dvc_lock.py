"""DVC's side of a Snakemake run: DVC's repository lock held while jobs run, and dvc.lock kept in step
with the provenance records by every run, one with nothing to run too.

Snakemake records what it made in dvc.lock with `dvc commit` (`record_run`), for the jobs that are
current by content. A run with nothing to run must do the same: after `git stash` or
`git checkout dvc.lock` over a current workspace, dvc.lock names older outputs while every job is
current, and only a commit brings DVC back in line. A fingerprint of dvc.lock and of the records,
kept beside Snakemake's markers, says whether that commit is needed: it is the same as at the last
commit only while neither file changed, so a run with nothing to do costs one hash of each.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from ..artefacts import atomic
from .freshness import Checker, Job

DVC_LOCK = Path("dvc.lock")
REPOSITORY_LOCK = Path(".dvc/tmp/lock")  # DVC's own: one DVC command at a time in a checkout
BUSY = "error: a DVC command is running in this checkout ({}); wait for it to end, then run snakemake again"
COMMIT_ENV = "MNIST_PIPELINE_DVC_COMMIT"  # 0: a Snakemake run leaves dvc.lock alone
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


def committing() -> bool:
    """Whether Snakemake runs record in dvc.lock: a DVC project, and MNIST_PIPELINE_DVC_COMMIT is not 0."""
    return Path(".dvc").is_dir() and os.environ.get(COMMIT_ENV, "1") != "0"


class RepositoryLock:
    """DVC's repository lock, held while a Snakemake run's jobs run, so `dvc repro` (or `dvc exp run`)
    cannot run the same stages beside it, and it does not start beside one of them."""

    def __init__(self, path: Path = REPOSITORY_LOCK) -> None:
        self.path = path
        self.held: list[object] = []

    def hold(self) -> None:
        """Take the lock, or stop with one line naming what holds it (a DVC command, or a stage it runs)."""
        if not self.path.parent.parent.is_dir():  # no .dvc: not a DVC project
            return
        import zc.lockfile

        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.held.append(zc.lockfile.LockFile(str(self.path)))
        except zc.lockfile.LockError:
            raise SystemExit(BUSY.format(f"{self.path} is held")) from None
        running = self.stage_runs()
        if running:
            self.release()
            raise SystemExit(BUSY.format(f"pid {running[0]} runs a stage"))

    def stage_runs(self) -> list[int]:
        """Processes that run a DVC stage now: DVC lets go of its repository lock while a stage's command
        runs, and holds read and write locks on the stage's paths in .dvc/tmp/rwlock instead."""
        import psutil

        try:
            locks = json.loads((self.path.parent / "rwlock").read_text())
        except (OSError, ValueError):
            return []
        infos = [*locks.get("write", {}).values(), *(i for group in locks.get("read", {}).values() for i in group)]
        pids = {info.get("pid", 0) for info in infos}
        return sorted(pid for pid in pids if pid and pid != os.getpid() and psutil.pid_exists(pid))

    def release(self) -> None:
        while self.held:
            self.held.pop().close()  # type: ignore[attr-defined]


def record_run(checker: Checker, jobs: list[Job], ran: set[str]) -> str | None:
    """`dvc commit` the jobs of a run's DAG (`ran`: their names) whose outputs are current by content:
    dvc.lock never names an output under parameters, code or inputs it was not made from. Jobs that are
    not current are named in one line on stderr. None, or the line that says why the commit failed."""
    current: list[tuple[str, list[str]]] = []
    left: list[tuple[str, list[str]]] = []
    for job in jobs:
        if job.name in ran:
            problems = checker.problems(job)
            (left if problems else current).append((job.name, problems[:1]))
    if left:  # one line: after a failed or stopped run, every job after the failed one is here
        first, (problem,) = left[0]
        others = f" (and {', '.join(name for name, _ in left[1:])})" if left[1:] else ""
        print(f"dvc.lock: not current, so not recorded: {first}: {problem}{others}", file=sys.stderr)
    failed = commit([name for name, _ in current])
    if failed:
        return failed
    if not left and {job.name for job in jobs} <= ran:
        remember(jobs)
    return None
