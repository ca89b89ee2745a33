"""The profile stage's summary.json: the parsed device-memory snapshots and peak memory."""

from __future__ import annotations

from pathlib import Path

from .. import paths
from . import storage
from .record import Record


class Allocation(Record):
    """One sample of a snapshot: bytes and count of live buffers sharing labels and stack."""

    bytes: int
    count: int
    labels: dict[str, str | int]
    stack: list[str]  # 'function /path/file.py:line', innermost first
    origin: str | None  # the innermost frame of the caller's own code


class Snapshot(Record):
    file: str
    total_bytes: int
    total_allocations: int
    samples: int
    explanation: str  # the largest allocation in model terms
    top: list[Allocation]


class PeakMemory(Record):
    bytes: int
    source: str  # device memory_stats, or the process's peak RSS


class PprofTools(Record):
    available: bool
    binary: str | None
    dot: str | None
    rendered: list[str]
    install_hint: str


class ProfileSummary(Record):
    device: str
    device_kind: str
    backend: str
    jax_version: str
    model: str
    batch_size: int
    layer_sizes: list[int]
    expected_bytes: dict[str, int]
    points: dict[str, Snapshot]
    peak_memory: PeakMemory
    pprof: PprofTools


def summary_path(profile_dir: str | Path = paths.PROFILE.path) -> Path:
    return Path(profile_dir) / "summary.json"


def read_summary(profile_dir: str | Path = paths.PROFILE.path) -> ProfileSummary | None:
    """The summary, or None when the profile stage has not run (the report says how to run it)."""
    path = summary_path(profile_dir)
    if not path.is_file():
        return None
    return storage.read_model(path, ProfileSummary, paths.PROFILE.made_by)
