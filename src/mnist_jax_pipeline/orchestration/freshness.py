"""Whether a job's outputs are current, decided by content, the same way for every tool.

A job is current when its provenance record lists exactly the files at its outputs, with their
digests, and what it was made from is what it would be made from now: the same params.yaml sections,
code and input files, these being the outputs of current jobs in turn (docs/architecture.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..artefacts import atomic, storage
from ..artefacts.provenance import Execution, Hashes, Stamp, files_under
from ..config.params import Params
from ..foundation.errors import PipelineError
from . import stage_table

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the package that runs
CODE_ROOT = Path("src") / PACKAGE_DIR.name  # the checkout's package, relative to the project root
RUNTIME_LOCK = Path("requirements/runtime.txt")  # the locked runtime versions: every stage's dependency
# what a record names with its version: the packages the stages import, the project itself, the tools that run it
RECORDED_VERSIONS = (
    *("jax", "jaxlib", "numpy", "optax", "safetensors", "tensorflow-datasets", "matplotlib"),
    *("mnist-jax-pipeline", "snakemake", "dvc"),
)
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
    """The files of the package at `root` that the stage's command runs or reads."""
    found: set[Path] = set()
    for name in (*stage_table.CORE, *stage.code):
        found.update(files_under(root / name) if (root / name).is_dir() else [root / name])
    return sorted(f for f in found if f.suffix != ".pyc")


def _first_difference(old: Any, new: Any, key: str) -> str | None:
    """The dotted key of the first value that differs, with both values."""
    if isinstance(old, dict) and isinstance(new, dict):
        for name in sorted(set(old) | set(new)):
            found = _first_difference(old.get(name), new.get(name), f"{key}.{name}")
            if found:
                return found
        return None
    return f"{key}: {json.dumps(old)} in the record, {json.dumps(new)} now" if old != new else None


def _changed(first: Path, made: str, now: dict[str, str], recorded: dict[str, str]) -> list[str]:
    """One problem naming the files whose digests differ from the record's, [] when none does."""
    changed = sorted(f for f in set(now) | set(recorded) if now.get(f) != recorded.get(f))
    if not changed:
        return []
    return [f"{first}: made {made} ({', '.join(changed[:SHOWN])}{' ...' if len(changed) > SHOWN else ''} changed)"]


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
        if job not in self._problems:
            stamp = self.read(job)
            first = (job.outputs() or [job.stamp_path])[0]
            if stamp is None or stamp.stage != job.name:
                absent = [p for p in job.outputs() if not p.exists()]
                found = [
                    f"{absent[0]}: missing (no provenance record {job.stamp_path})"
                    if absent
                    else f"{first}: not recorded as made by '{job.name}' (no provenance record {job.stamp_path})"
                ]
            else:
                found = [
                    *self._output_problems(job, stamp),
                    *self._params_problems(job, stamp, first),
                    *_changed(first, "by other code", self.code(job.stage), stamp.code),
                    *_changed(first, "from other inputs", self.inputs(job), stamp.inputs),
                ]
            self._problems[job] = found
        return self._problems[job]

    def _output_problems(self, job: Job, stamp: Stamp) -> list[str]:
        """The outputs missing, not in the record, or changed since the record, by name."""
        now = self.hashes.tree(job.outputs())
        found = []
        for name in sorted(set(stamp.outputs) | set(now)):
            if name not in now:
                found.append(f"{name}: missing")
            elif name not in stamp.outputs:
                found.append(f"{name}: not written by '{job.name}'")
            elif now[name] != stamp.outputs[name]:
                found.append(f"{name}: changed since '{job.name}' wrote it")
        return found

    def _params_problems(self, job: Job, stamp: Stamp, first: Path) -> list[str]:
        """The first difference of each params.yaml section that differs from the record's."""
        found = []
        for section, value in self.made_from(job).items():
            differs = _first_difference(stamp.params.get(section), value, section)
            if differs:
                found.append(f"{first}: made with {differs.replace(' now', ' in ' + self.params_path)}")
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
        ancestors = self.ancestors(job)
        self.hashes.prefetch([p for upstream in ancestors for p in upstream.outputs()])
        for upstream in ancestors:
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
        """Write the job's record with its outputs (inside atomic.together(): as they will be once in place)."""
        stamp = Stamp(
            stage=job.name,
            params=self.made_from(job),
            code=self.code(job.stage),
            inputs=inputs,
            outputs=self.future_outputs(job),
            versions={name: _version(name) for name in RECORDED_VERSIONS},
            run=execution,
        )
        storage.write_model(job.stamp_path, stamp)

    def future_outputs(self, job: Job) -> dict[str, str]:
        """{file: digest} of the job's outputs as they will be once the pending writes are in place."""
        pending = atomic.pending()
        found: dict[str, str] = {}
        for out in job.outputs():
            whole = [tmp for tmp, final in pending.items() if final == out]
            found |= self._future(whole[-1] if whole else out, out, pending)
        return found

    def _future(self, disk: Path, logical: Path, pending: dict[Path, Path]) -> dict[str, str]:
        """The files at `disk`, named as under `logical`, with the pending writes into it laid over them."""
        entries = self.hashes.tree([disk], {disk: logical})
        for tmp, final in pending.items():
            if disk in final.parents:
                target = logical / final.relative_to(disk)
                prefix = target.as_posix()
                entries = {k: v for k, v in entries.items() if k != prefix and not k.startswith(prefix + "/")}
                entries |= self._future(tmp, target, pending)
        return entries

    def stale(self, candidates: Iterable[Job]) -> dict[Job, list[str]]:
        """{job: its problems} of the jobs that are not current."""
        candidates = list(candidates)
        self.hashes.prefetch([p for job in candidates if job.stamp_path.exists() for p in job.outputs()])
        return {job: found for job in candidates if (found := self.problems(job))}
