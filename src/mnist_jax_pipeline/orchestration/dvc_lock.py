"""DVC's side of a Snakemake run: DVC's own repository lock held while jobs run, and dvc.lock brought in
step with the provenance records by `dvc commit`, also by a run with nothing to run (after
`git checkout dvc.lock`, say). A fingerprint of dvc.lock and the records says when that is needed.
The commit hashes every file's bytes: DVC's cache of digests, keyed by inode, time and size, is emptied first.
"""

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from ..artefacts import atomic
from ..foundation import paths
from .freshness import Checker
from .jobs import Job

DVC_LOCK = Path("dvc.lock")
REPOSITORY_LOCK = Path(".dvc/tmp/lock")  # DVC's own: one DVC command at a time in a checkout
BUSY = "error: a DVC command is running in this checkout ({}); wait for it to end, then run snakemake again"
AGREED = Path(paths.MARKERS) / "dvc.lock.agreed"  # the fingerprint at the last dvc commit
UP_TO_DATE = "dvc.lock: brought up to date with the outputs, all current by content (dvc commit)"
CONFLICT = "resolve the merge conflict in dvc.lock first (edit it, or keep one side: git checkout --theirs dvc.lock)"
NO_GIT = "make the project a git repository first (git init, or clone it with git): DVC keeps dvc.lock in one"
# `dvc commit` with DVC's cache of digests emptied first, so that DVC hashes the bytes as they are
COMMIT = """import sys
from dvc.cli import main
from dvc.repo import Repo
try:
    with Repo() as repo:
        repo.state.hashes.clear()
except Exception as err:
    sys.exit(f"ERROR: {err}")
sys.exit(main(["commit", "--force", *sys.argv[1:]]))
"""


def fingerprint(jobs: Iterable[Job]) -> str:
    """SHA-256 of dvc.lock and of every job's provenance record, in order."""
    digest = hashlib.sha256()
    for path in (DVC_LOCK, *(job.record_path for job in jobs)):
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
    atomic.write_text(AGREED, fingerprint(jobs) + "\n")


def commit(names: list[str]) -> str | None:
    """`dvc commit` of these stages, every file hashed afresh; None, or one line: DVC's reason and what to do."""
    if not names:
        return None
    # its own session: a second Ctrl-C, which reaches the process group, must not cut dvc.lock's update short
    ran = subprocess.run([sys.executable, "-c", COMMIT, *names], capture_output=True, text=True, start_new_session=True)
    if ran.returncode == 0:
        return None
    lines = [line.strip() for line in (ran.stderr + ran.stdout).splitlines() if line.strip()]
    reason = next((line for line in lines if line.startswith("ERROR")), lines[0] if lines else "no message")
    conflicted = DVC_LOCK.is_file() and re.search(rb"^<<<<<<<", DVC_LOCK.read_bytes(), re.M)
    reason = reason.removeprefix("ERROR: ").rstrip(".")
    fix = CONFLICT if conflicted else NO_GIT if "not a git repository" in reason else "fix what DVC names"
    return f"dvc.lock was not updated, DVC says: {reason}; {fix}, then run snakemake --cores all again"


def bring_up_to_date(jobs: list[Job]) -> str | None:
    """With every job current: commit them all unless dvc.lock already records them; a line to print, or None."""
    if in_step(jobs):
        return None
    before = DVC_LOCK.read_bytes() if DVC_LOCK.is_file() else b""
    if failed := commit([job.name for job in jobs]):
        return f"warning: {failed}"
    remember(jobs)
    return UP_TO_DATE if DVC_LOCK.read_bytes() != before else None


def committing() -> bool:
    """Whether this is a DVC project, whose dvc.lock a Snakemake run keeps in step."""
    return Path(".dvc").is_dir()


class RepositoryLock:
    """DVC's repository lock, held while a Snakemake run's jobs run: `dvc repro` cannot start beside them,
    and they do not start beside a DVC command, nor beside a stage DVC runs."""

    def __init__(self) -> None:
        self.held: list[object] = []

    def hold(self) -> None:
        """Take the lock, or stop with one line naming what holds it."""
        if not committing():
            return
        import zc.lockfile

        REPOSITORY_LOCK.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.held.append(zc.lockfile.LockFile(str(REPOSITORY_LOCK)))
        except zc.lockfile.LockError:
            raise SystemExit(BUSY.format(f"{REPOSITORY_LOCK} is held")) from None
        if running := self.stage_runs():
            self.release()
            raise SystemExit(BUSY.format(f"pid {running[0]} runs a stage"))

    def stage_runs(self) -> list[int]:
        """Processes running a DVC stage now: DVC lets go of its repository lock while a stage's command runs,
        and keeps the stage's path locks in .dvc/tmp/rwlock instead."""
        import psutil

        try:
            locks = json.loads((REPOSITORY_LOCK.parent / "rwlock").read_text())
        except (OSError, ValueError):
            return []
        infos = [*locks.get("write", {}).values(), *(i for group in locks.get("read", {}).values() for i in group)]
        pids = {info.get("pid", 0) for info in infos}
        return sorted(pid for pid in pids if pid and pid != os.getpid() and psutil.pid_exists(pid))

    def release(self) -> None:
        while self.held:
            self.held.pop().close()  # type: ignore[attr-defined]


def commit_current(checker: Checker, jobs: list[Job], ran: set[str], succeeded: bool = True) -> str | None:
    """`dvc commit` the jobs of a run (`ran`: their names) whose outputs are current by content, so dvc.lock
    never names an output made from other inputs; after a run that succeeded, the others are named in one
    line. None, or why the commit failed."""
    problems = {job.name: checker.problems(job) for job in jobs if job.name in ran}
    left = [name for name, found in problems.items() if found]
    if left and succeeded:  # after a failed run, the failure says why
        others = f" (and {', '.join(left[1:])})" if left[1:] else ""
        print(f"dvc.lock: {left[0]} not recorded, not current: {problems[left[0]][0]}{others}", file=sys.stderr)
    if failed := commit([name for name, found in problems.items() if not found]):
        return f"the jobs succeeded, but {failed}" if succeeded else failed
    if not left and {job.name for job in jobs} <= ran:
        remember(jobs)
    return None
