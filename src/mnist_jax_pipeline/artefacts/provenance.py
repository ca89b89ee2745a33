"""The provenance record: what a stage's outputs were made from, by content, and their own digests.

Every stage run through the CLI writes one record (`provenance/<stage>.json`, see paths.stamp)
together with its outputs: the params.yaml sections it read, as values; the SHA-256 of every
code file it ran; of every input file it read; and of every file it wrote. A consumer, and the
workflow when it decides what is stale, compares these with the files as they are now: a file
time is never evidence.
"""

from __future__ import annotations

import hashlib
import mmap
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .atomic import TMP_PREFIX
from .record import Record

# Never part of an artefact: atomic writes' temporaries, the folder marker Snakemake writes, byte code.
IGNORED_NAMES = (".snakemake_timestamp", "__pycache__", ".gitignore")


class Execution(Record):
    """How the job ran: which tool ran it, when, and what its checks cost (none of it decides freshness)."""

    tool: str  # "snakemake", "dvc", or "mnist-pipeline" (run by hand)
    started: str  # ISO 8601, UTC, to the millisecond
    ended: str
    checks_s: float  # seconds spent checking the records upstream and the code before the stage's own work


class Stamp(Record):
    """One stage run's provenance (file -> SHA-256 maps use paths relative to the project root)."""

    stage: str  # 'preprocess', 'train@jit'
    params: dict[str, Any]  # the params.yaml sections the stage read
    code: dict[str, str]
    inputs: dict[str, str]
    outputs: dict[str, str]
    versions: dict[str, str]  # the runtime it ran on, for the record (the lock file is an input)
    run: Execution | None = None


MAPPED = 1 << 20  # files this large or larger are hashed through a memory map (about 10% less CPU)


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, through symbolic links (Snakemake's output cache links its files); a link
    that leads nowhere, or into a loop, by the path it names."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < MAPPED:
                return hashlib.file_digest(handle, "sha256").hexdigest()
            # mapped: hashed straight from the page cache, without copying it into a buffer first
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                return hashlib.sha256(mapped).hexdigest()
    except OSError:
        if not path.is_symlink():
            raise
        return "symlink:" + hashlib.sha256(os.fsencode(os.readlink(path))).hexdigest()


def ignored(name: str) -> bool:
    return name.startswith(TMP_PREFIX) or name in IGNORED_NAMES or name.endswith(".pyc")


def files_under(path: Path) -> list[Path]:
    """The file itself, or every file below a folder, sorted; links are followed once (a link back into a
    folder already walked counts as a file, so a loop ends)."""
    if path.is_file() or (path.is_symlink() and not path.is_dir()):
        return [path]
    if not path.is_dir():
        return []
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
        found += [Path(folder) / name for name in sorted(names) if not ignored(name)]
    return sorted(found)


def _digest_or_none(path: Path) -> str | None:
    try:
        return file_sha256(path)
    except OSError:
        return None


class Hashes:
    """File digests, each computed once per process (a stage and the workflow read many files twice)."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, int, int, int, int], str] = {}

    def of(self, path: Path) -> str:
        key = self._key(path)
        if key not in self._known:
            self._known[key] = file_sha256(path)
        return self._known[key]

    def prefetch(self, paths: Iterable[Path]) -> None:
        """Hash every file of `paths` not hashed yet, largest first, on as many threads as there are cores
        (hashlib lets go of the GIL while it hashes): what a check is about to ask for, at once."""
        todo: dict[tuple[str, int, int, int, int], Path] = {}
        for path in paths:
            for file in files_under(path):
                try:
                    key = self._key(file)
                except OSError:
                    continue
                if key not in self._known:
                    todo[key] = file
        if len(todo) < 2:
            return
        ordered = sorted(todo.items(), key=lambda item: -item[0][2])
        with ThreadPoolExecutor(max_workers=min(len(ordered), os.cpu_count() or 1)) as pool:
            digests = pool.map(lambda item: _digest_or_none(item[1]), ordered)
            for (key, _), digest in zip(ordered, digests, strict=True):
                if digest is not None:
                    self._known[key] = digest

    @staticmethod
    def _key(path: Path) -> tuple[str, int, int, int, int]:
        stat = path.lstat()
        return (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)

    def tree(self, paths: Iterable[Path], rename: Mapping[Path, Path] | None = None) -> dict[str, str]:
        """{file: digest} for every file of `paths`; `rename` maps a temporary path to the final one it stands for."""
        found: dict[str, str] = {}
        for path in paths:
            final = (rename or {}).get(path, path)
            for file in files_under(path):
                found[(final / file.relative_to(path)).as_posix() if file != path else final.as_posix()] = self.of(file)
        return found
