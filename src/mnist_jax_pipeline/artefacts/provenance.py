"""A job's provenance record, `provenance/<stage>[_<variant>].json`: the params.yaml sections it read, and
the SHA-256 of every code, input and output file (paths relative to the project); and those digests."""

import contextlib
import hashlib
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .atomic import TMP_PREFIX
from .json_model import JsonModel

IGNORED = (".snakemake_timestamp", "__pycache__", ".gitignore")  # never part of an output: tools' own files


class Execution(JsonModel):
    """How the job ran: which tool ran it, when, and what its checks cost (none of it decides freshness)."""

    tool: str  # "snakemake", "dvc", or "mnist-pipeline" (run by hand)
    started: str  # ISO 8601, UTC, to the millisecond
    ended: str
    checks_s: float  # seconds spent checking the records upstream before the stage's own work


class Record(JsonModel):
    stage: str  # 'preprocess', 'train@jit'
    params: dict[str, Any]  # the params.yaml sections the stage read
    code: dict[str, str]
    inputs: dict[str, str]
    outputs: dict[str, str]
    versions: dict[str, str]  # the runtime it ran on, for the reader (the lock file is among the code)
    run: Execution


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, through symbolic links; a link that leads nowhere, by the path it names; a pipe
    or a device, which need not end, by the path it is at."""
    if path.exists() and not (path.is_file() or path.is_dir()):
        return "special:" + hashlib.sha256(os.fsencode(os.path.realpath(path))).hexdigest()
    try:
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        if not path.is_symlink():
            raise
        return "symlink:" + hashlib.sha256(os.fsencode(os.readlink(path))).hexdigest()


def changed_files(now: dict[str, str], recorded: dict[str, str]) -> list[str]:
    """The files whose digests differ between two {file: digest} maps, sorted."""
    return sorted(f for f in {*now, *recorded} if now.get(f) != recorded.get(f))


def ignored(name: str) -> bool:
    return name.startswith(TMP_PREFIX) or name in IGNORED or name.endswith(".pyc")


def files_under(path: Path) -> list[Path]:
    """The file itself, or every file below a folder, sorted; a link back into a folder already walked
    counts as a file, so a loop ends."""
    if (path.exists() or path.is_symlink()) and not path.is_dir():
        return [path]
    found: list[Path] = []
    seen = {os.path.realpath(path)}
    for folder, dirs, names in os.walk(path, followlinks=True):
        kept = []
        for name in sorted(d for d in dirs if not ignored(d)):
            real = os.path.realpath(Path(folder) / name)
            if real in seen:
                found.append(Path(folder) / name)  # a loop: the link itself
            else:
                seen.add(real)
                kept.append(name)
        dirs[:] = kept
        found += [Path(folder) / name for name in names if not ignored(name)]
    return sorted(found)


class Hashes:
    """File digests, each computed once per process and state of the file."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, int, int, int, int], str] = {}

    def of(self, path: Path) -> str:
        stat = path.lstat()
        key = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
        if key not in self._known:
            self._known[key] = file_sha256(path)
        return self._known[key]

    def prefetch(self, paths: Iterable[Path]) -> None:
        """Hash the files of `paths` on as many threads as there are cores (hashlib lets go of the GIL)."""
        files = [f for path in paths for f in files_under(path) if f.exists() or f.is_symlink()]
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            list(pool.map(self._quietly, sorted(files, key=lambda f: -f.lstat().st_size)))

    def _quietly(self, path: Path) -> None:
        with contextlib.suppress(OSError):  # a file that went meanwhile: the check says so
            self.of(path)

    def tree(self, paths: Iterable[Path]) -> dict[str, str]:
        """{file: digest} for every file of `paths`."""
        return {file.as_posix(): self.of(file) for path in paths for file in files_under(path)}
