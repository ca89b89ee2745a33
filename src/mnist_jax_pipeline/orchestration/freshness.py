"""Whether a job's outputs are current, decided by content, the same way for every tool.

A job is current when its provenance record lists exactly the files at its outputs, with their digests,
and it was made from what it would be made from now: the same params.yaml sections, code and inputs,
these being the outputs of current jobs in turn (docs/orchestrators.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..artefacts import atomic
from ..artefacts.provenance import Execution, Hashes, Stamp, files_under
from ..config.params import Params
from ..foundation.errors import PipelineError
from . import stage_table

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the package that runs
CODE_ROOT = Path("src") / PACKAGE_DIR.name  # the checkout's package, relative to the project root
RUNTIME_LOCK = Path("requirements/runtime.txt")  # the locked runtime versions: every stage's dependency
# what a record names with its version: the packages the stages import, the project itself, the tools that run it
RECORDED_VERSIONS = ("jax", "jaxlib", "numpy", "optax", "safetensors", "tensorflow-datasets", "matplotlib")
RECORDED_VERSIONS += ("mnist-jax-pipeline", "snakemake", "dvc")
SHOWN = 3  # files named per problem


@dataclass(frozen=True)
class Job:
    """One run of a stage: `train@jit` under `root` (a sweep point's folder, or the project root)."""

    stage: stage_table.Stage
    variant: str | None = None
    root: Path = Path(".")

    @property
    def name(self) -> str:
        return f"{self.stage.name}@{self.variant}" if self.variant else self.stage.name

    @property
    def stamp_path(self) -> Path:
        return self.stage.stamp.at(self.variant, self.root)

    def outputs(self) -> list[Path]:
        """The files and folders it writes, its record aside."""
        return [a.at(self.variant, self.root) for a in self.stage.artefacts]

    def producers(self, variants: Iterable[str]) -> list[tuple[Job, list[Path]]]:
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
        """The commands that run it again."""
        if self.root != Path("."):
            return "re-run the sweep: snakemake --cores all sweeps (or dvc exp run for its point)"
        return f"re-run '{self.name}': snakemake --cores all, or dvc repro -f -s {self.name}"


def jobs(variants: Iterable[str], root: Path = Path(".")) -> list[Job]:
    """Every job of the pipeline, upstream first."""
    variants = tuple(variants)
    return [Job(stage, v, root) for stage in stage_table.STAGES for v in (variants if stage.per_variant else (None,))]


def code_files(stage: stage_table.Stage, root: Path) -> list[Path]:
    """The files of the package at `root` that the stage's command runs or reads, with the __init__.py of
    every package above them (importing a module runs those)."""
    found: set[Path] = set()
    for name in f"{stage_table.CORE} {stage.code}".split():
        found.update(files_under(root / name))
        found.update(root / parent / "__init__.py" for parent in [*Path(name).parents])
    return sorted(found)


def _first_difference(old: Any, new: Any, key: str) -> str | None:
    """The dotted key of the first value that differs, with both values."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = (_first_difference(old.get(name), new.get(name), f"{key}.{name}") for name in sorted({*old, *new}))
        return next(filter(None, found), None)
    return f"{key}: {json.dumps(old)} in the record, {json.dumps(new)} now" if old != new else None


def _changed(first: Path, made: str, now: dict[str, str], recorded: dict[str, str]) -> list[str]:
    """One problem naming the files whose digests differ from the record's, [] when none does."""
    changed = sorted(f for f in {*now, *recorded} if now.get(f) != recorded.get(f))
    more = " ..." if len(changed) > SHOWN else ""
    return [f"{first}: made {made} ({', '.join(changed[:SHOWN])}{more} changed)"] if changed else []


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


@dataclass
class Checker:
    """Checks jobs against the files as they are; each digest is computed once."""

    params: Params
    params_path: str = "params.yaml"
    hashes: Hashes = field(default_factory=Hashes)
    _code: dict[str, dict[str, str]] = field(default_factory=dict)
    _problems: dict[Job, list[str]] = field(default_factory=dict)

    def code(self, stage: stage_table.Stage) -> dict[str, str]:
        """{code file: digest} of what the stage runs: the checkout's package, else the installed one."""
        if stage.name not in self._code:
            root = CODE_ROOT if CODE_ROOT.is_dir() else PACKAGE_DIR
            found = {(CODE_ROOT / f.relative_to(root)).as_posix(): self.hashes.of(f) for f in code_files(stage, root)}
            if root == CODE_ROOT and RUNTIME_LOCK.is_file():
                found[RUNTIME_LOCK.as_posix()] = self.hashes.of(RUNTIME_LOCK)
            self._code[stage.name] = found
        return self._code[stage.name]

    def inputs(self, job: Job) -> dict[str, str]:
        return self.hashes.tree(p for _, read in job.producers(self.params.variants) for p in read)

    def made_from(self, job: Job) -> dict[str, Any]:
        values = self.params.to_dict()
        return {section: values[section] for section in job.stage.params}

    def read(self, job: Job) -> Stamp | None:
        try:
            return Stamp.model_validate_json(job.stamp_path.read_bytes())
        except (OSError, ValueError, ValidationError):
            return None

    def problems(self, job: Job) -> list[str]:
        """Why the job's outputs are not current, first things first; [] when they are."""
        if job in self._problems:
            return self._problems[job]
        stamp, first = self.read(job), (job.outputs() or [job.stamp_path])[0]
        if stamp is None or stamp.stage != job.name:
            absent = [p for p in job.outputs() if not p.exists()]
            why = f"{absent[0]}: missing" if absent else f"{first}: not recorded as made by '{job.name}'"
            found = [f"{why} (no provenance record {job.stamp_path})"]
        else:
            now, found = self.hashes.tree(job.outputs()), []
            for name in sorted(f for f in {*stamp.outputs, *now} if now.get(f) != stamp.outputs.get(f)):
                if name not in now:
                    found.append(f"{name}: missing")
                elif name in stamp.outputs:
                    found.append(f"{name}: changed since '{job.name}' wrote it")
                else:
                    found.append(f"{name}: not written by '{job.name}'")
            for section, value in self.made_from(job).items():
                differs = _first_difference(stamp.params.get(section), value, section)
                if differs:
                    found.append(f"{first}: made with {differs.replace(' now', ' in ' + self.params_path)}")
            found += _changed(first, "by other code", self.code(job.stage), stamp.code)
            found += _changed(first, "from other inputs", self.inputs(job), stamp.inputs)
        self._problems[job] = found
        return found

    def ancestors(self, job: Job) -> list[Job]:
        """Every job upstream of `job`, upstream first."""
        order: list[Job] = []

        def visit(current: Job) -> None:
            for producer, _ in current.producers(self.params.variants):
                if producer not in order:
                    visit(producer)
                    order.append(producer)

        visit(job)
        return order

    def check_inputs(self, job: Job) -> dict[str, str]:
        """The digests of the job's inputs, once every job upstream is current; else one line naming the file."""
        for upstream in self.ancestors(job):
            found = self.problems(upstream)
            if found:
                raise PipelineError(f"{found[0]}; {upstream.fix()}")
        return self.inputs(job)

    def check_installed(self, stage: stage_table.Stage) -> None:
        """Refuse to run other code than the checkout's: the record would name code that did not run."""
        if not CODE_ROOT.is_dir() or CODE_ROOT.resolve() == PACKAGE_DIR:
            return
        for name, digest in self.code(stage).items():
            installed = PACKAGE_DIR / Path(name).relative_to(CODE_ROOT) if CODE_ROOT in Path(name).parents else None
            if installed is not None and (not installed.is_file() or self.hashes.of(installed) != digest):
                raise PipelineError(
                    f"{name}: differs from the installed package ({installed}); install the"
                    " checkout's code: pip install -e . (or rebuild the image)"
                )

    def write(self, job: Job, inputs: dict[str, str], execution: Execution | None = None) -> None:
        """Write the job's record, once its outputs are in place."""
        stamp = Stamp(
            stage=job.name,
            params=self.made_from(job),
            code=self.code(job.stage),
            inputs=inputs,
            outputs=self.hashes.tree(job.outputs()),
            versions={name: _version(name) for name in RECORDED_VERSIONS},
            run=execution,
        )
        atomic.write_text(job.stamp_path, stamp.model_dump_json(indent=2, exclude_none=True) + "\n")

    def stale(self, candidates: Iterable[Job]) -> dict[Job, list[str]]:
        """{job: its problems} of the jobs that are not current."""
        candidates = list(candidates)
        self.hashes.prefetch([p for job in candidates if job.stamp_path.exists() for p in job.outputs()])
        return {job: found for job in candidates if (found := self.problems(job))}
