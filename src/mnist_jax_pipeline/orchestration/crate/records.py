"""The jobs of the last run, read from their provenance records, each checked against the disk, the project's
variants and its sweep files."""

from dataclasses import dataclass
from datetime import datetime
from itertools import groupby
from pathlib import Path, PurePosixPath
from typing import Any

from ...artefacts.provenance import Hashes, Record
from ...config import sweeps
from ...config.params import load
from ...foundation import paths
from ...foundation.errors import PipelineError, clip, read_text
from .. import stage_table
from ..jobs import Job, Recorder, all_jobs
from ..points import point_params

RERUN = "snakemake --cores all, or dvc repro"


@dataclass(frozen=True, kw_only=True)
class RecordedJob(Job):
    """A job (`train@jit` under the project root, or a sweep point's folder) with its record."""

    record: Record

    @property
    def label(self) -> str:
        """'train@jit', or 'train@jit [sweeps/tiny/step_size=0.1]' for a sweep point's job."""
        return self.name + ("" if self.root == Path(".") else f" [{self.root.as_posix()}]")


def when(text: object) -> datetime | None:
    """`text` as an ISO 8601 time with its zone; None when it is not one."""
    try:
        time = datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return time if time and time.tzinfo else None


def untimely(times: dict[str, Any], start: str = "startTime", end: str = "endTime") -> list[str]:
    """A line for each of the times (by key) that is not an ISO 8601 time with its zone, and one for an end (the
    time at `end`) before its start (at `start`)."""
    found = [
        f"{key} '{clip(str(text), 40)}' is not an ISO 8601 time with its zone"
        for key, text in times.items()
        if not when(text)
    ]
    started, ended = when(times.get(start)), when(times.get(end))
    if started and ended and ended < started:
        found.append(f"it ends ({times[end]}) before it starts ({times[start]})")
    return found


def untrue(record: Record) -> str | None:
    """The first thing the record states that cannot be so: a time that is not an ISO 8601 time with its zone, an
    end before its start, a file outside the project (absolute, or through '..'); None when there is nothing."""
    found = untimely({"run.started": record.run.started, "run.ended": record.run.ended}, "run.started", "run.ended")
    for name in sorted({*record.code, *record.inputs, *record.outputs}):
        path = PurePosixPath(name)
        if not path.parts or path.is_absolute() or ".." in path.parts or path.as_posix() != name:
            found.append(f"it names '{clip(name, 60)}', which is no file inside the project")
    return found[0] if found else None


def read(path: Path, hashes: Hashes) -> RecordedJob | str:
    """The job a record describes, or why it is left out (one line): unreadable, not this job's, stating what cannot
    be so, or a file it names now missing or changed."""
    try:
        record = Record.model_validate_json(read_text(path))
    except (PipelineError, ValueError):  # pydantic's ValidationError is a ValueError
        return f"{path}: not a provenance record (unreadable or damaged); re-run the stage that wrote it"
    name, _, variant = record.stage.partition("@")
    stage = next((stage for stage in stage_table.STAGES if stage.name == name), None)
    job = RecordedJob(stage, variant or None, path.parent.parent, record=record) if stage else None
    if job is None or job.record_path != path:
        return f"{path}: names the job '{record.stage}', which does not write this record; delete it"
    if wrong := untrue(record):
        return f"{job.label} left out: {path}: {wrong}; {job.fix()}"
    for file, digest in sorted({**record.code, **record.inputs, **record.outputs}.items()):
        if not Path(file).is_file() or hashes.of(Path(file)) != digest:
            state = f"changed since '{record.stage}' recorded it" if Path(file).exists() else "missing"
            return f"{job.label} left out: {file}: {state}; {job.fix()}"
    return job


def _stale_point(folder: Path, jobs: list[RecordedJob]) -> str | None:
    """Why the point's jobs are not of the last run (its sweep file does not list it, or gives a job of its variant
    other parameters now); None when they are. A job of another variant stays, as the project root's do."""
    if isinstance(now := point_params(folder), str):
        return f"{folder} left out: {now}"
    for job in jobs:
        if job.variant in now.variants and job.record.params != Recorder(now).made_from(job):
            return (
                f"{folder} left out: {sweeps.file(folder.parent.name)} now gives '{job.name}' other parameters;"
                " re-run the sweep (snakemake --cores all sweeps)"
            )
    return None


def _unrecorded(found: list[Path]) -> list[str]:
    """A line for each job of params.yaml's variants that has no record, or one saying params.yaml is not valid."""
    try:
        variants = load(paths.PARAMS).variants
    except PipelineError as err:
        return [f"{err}; jobs without a record are not named"]
    missing = [job for job in all_jobs(variants) if job.record_path not in found]
    return [f"{job.name}: no record ({job.record_path}), so not in the crate; run it ({RERUN})" for job in missing]


def recorded_jobs(hashes: Hashes) -> tuple[list[RecordedJob], list[str]]:
    """The jobs whose records hold and whose files all match them (under the project root and every folder of a
    point its sweep file lists as recorded), and one warning line for each record or point left out and each job of
    params.yaml's variants without a record."""
    found = sorted(Path(paths.PROVENANCE).glob("*.json")) + sorted(paths.SWEEPS.glob(f"*/*/{paths.PROVENANCE}/*.json"))
    if not found:
        raise PipelineError(
            f"{paths.PROVENANCE}/: no provenance records; run the pipeline first ({RERUN}), then mnist-pipeline crate"
        )
    results = [read(path, hashes) for path in found]
    jobs = [job for job in results if isinstance(job, RecordedJob)]
    warnings = [line for line in results if isinstance(line, str)]
    for folder, group in groupby([job for job in jobs if job.root != Path(".")], key=lambda job: job.root):
        if stale := _stale_point(folder, list(group)):
            warnings.append(stale)
            jobs = [job for job in jobs if job.root != folder]
    warnings += _unrecorded(found)
    if not jobs:
        raise PipelineError(f"{warnings[0]}; no job's files match its record, so the crate would be empty")
    return jobs, warnings
