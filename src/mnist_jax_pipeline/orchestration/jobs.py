"""A job, one run of a stage, and its provenance record: the code it runs, what it reads and writes."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..artefacts import atomic
from ..artefacts.provenance import Execution, Hashes, Record, file_sha256, files_under
from ..config.params import Params
from ..foundation import LOADED_NS, versions
from ..foundation.errors import PipelineError, read_text
from ..foundation.paths import CODE, PARAMS, RUNTIME_LOCK, SWEEPS, job_name
from . import stage_table

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the package that runs


@dataclass(frozen=True)
class Job:
    """One run of a stage: `train@jit` under `root` (a sweep point's folder, or the project root)."""

    stage: stage_table.Stage
    variant: str | None = None
    root: Path = Path(".")

    @property
    def name(self) -> str:
        return job_name(self.stage.name, self.variant)

    @property
    def record_path(self) -> Path:
        return self.stage.record.at(self.variant, self.root)

    def read_record(self) -> Record | None:
        """Its record, or None where there is none that can be read."""
        try:
            return Record.model_validate_json(read_text(self.record_path))
        except (PipelineError, ValueError):  # pydantic's ValidationError is a ValueError
            return None

    def outputs(self) -> list[Path]:
        return [a.at(self.variant, self.root) for a in self.stage.artefacts]

    def producers(self, variants: Iterable[str]) -> "list[tuple[Job, list[Path]]]":
        """The jobs whose outputs it reads, each with the paths it reads of them."""
        found: dict[Job, list[Path]] = {}
        for artefact in self.stage.inputs:
            maker = stage_table.get(artefact.made_by)
            root = Path(".") if maker.name in stage_table.SHARED else self.root
            names = ([self.variant] if self.stage.per_variant else list(variants)) if artefact.per_variant else [None]
            for variant in names:
                found.setdefault(Job(maker, variant, root), []).append(artefact.at(variant, root))
        return list(found.items())

    def fix(self) -> str:
        if SWEEPS in self.root.parents:
            return "re-run the sweep: snakemake --cores all sweeps (or dvc exp run for its point)"
        if self.root != Path("."):
            return f"re-run it: {self.stage.cmd(self.variant or '')} --root {self.root}"
        return f"re-run '{self.name}': snakemake --cores all, or dvc repro -f -s {self.name}"


def all_jobs(variants: Sequence[str], root: Path = Path(".")) -> list[Job]:
    """Every job of the pipeline, upstream first."""
    return [Job(stage, v, root) for stage in stage_table.STAGES for v in (variants if stage.per_variant else (None,))]


def loaded(name: str) -> Path:
    """The file of the package that runs for a checkout's code file (the runtime lock: itself)."""
    return PACKAGE_DIR / Path(name).relative_to(CODE) if CODE in Path(name).parents else Path(name)


def code_files(stage: stage_table.Stage, root: Path) -> list[Path]:
    """The files of the package at `root` the stage's command runs, with every package's __init__.py above."""
    found: set[Path] = set()
    for name in f"{stage_table.CORE} {stage.code}".split():
        found.update(files_under(root / name))
        found.update(root / parent / "__init__.py" for parent in Path(name).parents)
    return sorted(found)


@dataclass
class Recorder:
    """A job's record: the digests of its code and inputs (each computed once), read or written."""

    params: Params
    params_path: str = PARAMS
    hashes: Hashes = field(default_factory=Hashes)
    _code: dict[str, dict[str, str]] = field(default_factory=dict)

    def code(self, stage: stage_table.Stage) -> dict[str, str]:
        """{code file: digest} of what the stage runs: the checkout's package, else the installed one."""
        if stage.name not in self._code:
            root = CODE if CODE.is_dir() else PACKAGE_DIR
            found = {(CODE / f.relative_to(root)).as_posix(): self.hashes.of(f) for f in code_files(stage, root)}
            if root == CODE and RUNTIME_LOCK.is_file():
                found[RUNTIME_LOCK.as_posix()] = self.hashes.of(RUNTIME_LOCK)
            self._code[stage.name] = found
        return self._code[stage.name]

    def inputs(self, job: Job) -> dict[str, str]:
        return self.hashes.tree(p for _, read in job.producers(self.params.variants) for p in read)

    def made_from(self, job: Job) -> dict[str, Any]:
        values = self.params.to_dict()
        return {section: values[section] for section in job.stage.params}

    def check_installed(self, stage: stage_table.Stage) -> None:
        """Refuse to run other code than the checkout's: the record would name code that did not run."""
        if not CODE.is_dir() or CODE.resolve() == PACKAGE_DIR:
            return
        for name, digest in self.code(stage).items():
            installed = loaded(name)
            if installed != Path(name) and (not installed.is_file() or self.hashes.of(installed) != digest):
                raise PipelineError(
                    f"{name}: differs from the installed package ({installed}); install the"
                    " checkout's code: uv sync (or pip install -e ., or rebuild the image)"
                )

    def check_unchanged(self, job: Job) -> None:
        """Refuse to record code that may not be what ran: a code file changed since the package began to
        load (its status time), or since its digest was taken."""
        for name, digest in self.code(job.stage).items():
            path = loaded(name)
            try:
                changed = (path != Path(name) and path.stat().st_ctime_ns > LOADED_NS) or file_sha256(path) != digest
            except OSError:
                changed = True
            if changed:
                raise PipelineError(
                    f"{name}: changed while '{job.name}' ran, so its record would name code that did not run;"
                    f" nothing was replaced, run it again"
                )

    def write(self, job: Job, inputs: dict[str, str], execution: Execution) -> None:
        """Write the job's record, once its outputs are in place."""
        record = Record(
            stage=job.name,
            params=self.made_from(job),
            code=self.code(job.stage),
            inputs=inputs,
            outputs=self.hashes.tree(job.outputs()),
            versions=versions(),
            run=execution,
        )
        atomic.write_text(job.record_path, record.model_dump_json(indent=2, exclude_none=True) + "\n")
