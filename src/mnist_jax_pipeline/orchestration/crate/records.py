"""The jobs of the last run, read from their provenance records alone, each checked against the disk."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from ...artefacts.provenance import Hashes, Stamp
from ...config import sweeps
from ...foundation import paths
from ...foundation.errors import PipelineError
from .. import stage_table

NO_RECORDS = (
    f"{paths.PROVENANCE}/: no provenance records; run the pipeline first (snakemake --cores all, or"
    " dvc repro), then mnist-pipeline crate"
)


@dataclass(frozen=True)
class RecordedJob:
    """One job's record: `train@jit` under `root` (the project root, or a sweep point's folder)."""

    record: Stamp
    record_path: Path  # relative to the project root
    root: Path
    stage: stage_table.Stage

    @property
    def variant(self) -> str | None:
        return self.record.stage.partition("@")[2] or None

    @property
    def label(self) -> str:
        """'train@jit', or 'train@jit [sweeps/tiny/step_size=0.1]' for a sweep point's job."""
        return self.record.stage + ("" if self.root == Path(".") else f" [{self.root.as_posix()}]")

    def files(self) -> dict[str, str]:
        """{file: digest} of every file the record names: code, inputs and outputs."""
        return {**self.record.code, **self.record.inputs, **self.record.outputs}


def record_paths() -> list[Path]:
    """The records under the project root and under every sweep point's folder, in a stable order."""
    found = sorted(Path(paths.PROVENANCE).glob("*.json"))
    return found + sorted(sweeps.FOLDER.glob(f"*/*/{paths.PROVENANCE}/*.json"))


def read(path: Path) -> RecordedJob | str:
    """The job a record describes, or why it cannot be used (one line)."""
    try:
        record = Stamp.model_validate_json(path.read_bytes())
    except (OSError, ValueError, ValidationError):
        return f"{path}: not a provenance record (unreadable or damaged); re-run the stage that wrote it"
    root = path.parent.parent
    name, _, variant = record.stage.partition("@")
    known = {stage.name: stage for stage in stage_table.STAGES}
    if name not in known or known[name].stamp.at(variant or None, root) != path:
        return f"{path}: names the job '{record.stage}', which does not write this record; delete it"
    return RecordedJob(record, path, root, known[name])


def changed(job: RecordedJob, hashes: Hashes) -> str | None:
    """The first file of the job whose content now differs from its record, as one line; None if none does."""
    for name, digest in sorted(job.files().items()):
        path = Path(name)
        if not path.is_file():
            return f"{name}: missing"
        if hashes.of(path) != digest:
            return f"{name}: changed since '{job.record.stage}' recorded it"
    return None


def recorded_jobs(hashes: Hashes) -> tuple[list[RecordedJob], list[str]]:
    """The jobs whose files all match their records, and one warning line for each record left out."""
    found = record_paths()
    if not found:
        raise PipelineError(NO_RECORDS)
    jobs: list[RecordedJob] = []
    warnings: list[str] = []
    for path in found:
        job = read(path)
        if isinstance(job, str):
            warnings.append(job)
            continue
        problem = changed(job, hashes)
        if problem:
            warnings.append(
                f"{job.label} left out: {problem}; re-run it to describe it (snakemake --cores all, or dvc repro)"
            )
        else:
            jobs.append(job)
    if not jobs:
        raise PipelineError(f"{warnings[0]}; no job's files match its record, so the crate would be empty")
    return jobs, warnings
