"""The jobs of the last run, read from their provenance records alone, each checked against the disk."""

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from ...artefacts.provenance import Hashes, Stamp
from ...config import sweeps
from ...foundation import paths
from ...foundation.errors import PipelineError
from .. import stage_table
from ..jobs import Job

RERUN = "snakemake --cores all, or dvc repro"


@dataclass(frozen=True, kw_only=True)
class RecordedJob(Job):
    """A job (`train@jit` under the project root, or a sweep point's folder) with its record."""

    record: Stamp

    @property
    def label(self) -> str:
        """'train@jit', or 'train@jit [sweeps/tiny/step_size=0.1]' for a sweep point's job."""
        return self.name + ("" if self.root == Path(".") else f" [{self.root.as_posix()}]")


def read(path: Path, hashes: Hashes) -> RecordedJob | str:
    """The job a record describes, or why it is left out (one line): unreadable, not this job's, or a file it
    names now missing or changed."""
    try:
        record = Stamp.model_validate_json(path.read_bytes())
    except (OSError, ValueError, ValidationError):
        return f"{path}: not a provenance record (unreadable or damaged); re-run the stage that wrote it"
    name, _, variant = record.stage.partition("@")
    stage = next((stage for stage in stage_table.STAGES if stage.name == name), None)
    job = RecordedJob(stage, variant or None, path.parent.parent, record=record) if stage else None
    if job is None or job.stamp_path != path:
        return f"{path}: names the job '{record.stage}', which does not write this record; delete it"
    for file, digest in sorted({**record.code, **record.inputs, **record.outputs}.items()):
        if not Path(file).is_file() or hashes.of(Path(file)) != digest:
            state = f"changed since '{record.stage}' recorded it" if Path(file).is_file() else "missing"
            return f"{job.label} left out: {file}: {state}; re-run it to describe it ({RERUN})"
    return job


def recorded_jobs(hashes: Hashes) -> tuple[list[RecordedJob], list[str]]:
    """The jobs whose files all match their records (under the project root and every sweep point's folder), and
    one warning line for each record left out."""
    found = sorted(Path(paths.PROVENANCE).glob("*.json")) + sorted(sweeps.FOLDER.glob(f"*/*/{paths.PROVENANCE}/*.json"))
    if not found:
        raise PipelineError(
            f"{paths.PROVENANCE}/: no provenance records; run the pipeline first ({RERUN}), then mnist-pipeline crate"
        )
    results = [read(path, hashes) for path in found]
    jobs = [job for job in results if isinstance(job, RecordedJob)]
    warnings = [line for line in results if isinstance(line, str)]
    if not jobs:
        raise PipelineError(f"{warnings[0]}; no job's files match its record, so the crate would be empty")
    return jobs, warnings
