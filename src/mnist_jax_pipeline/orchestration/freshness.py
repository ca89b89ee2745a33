"""Whether a stage's outputs are current, decided by content, the same way for every tool.

A job (a stage, its variant, the root its outputs go under) is current when its provenance
record exists (paths.stamp), every file it lists is there with the recorded digest and no other
file is in its output folders, and what it was made from is what it would be made from now: the
same params.yaml sections, the same code, and the same input files, these being the outputs of
current jobs in turn. `problems()` says why a job is not current, in words; `check_inputs()`
refuses to run a stage on inputs that are not; `record()` writes a job's record with its outputs.
Snakemake asks `stale()` when it parses the workflow (orchestration/snakemake_rules.py), each stage
asks `check_inputs()` before it reads anything, and the end-of-run `dvc commit` records only
jobs that are current.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..artefacts import atomic, storage
from ..artefacts.provenance import Hashes, Run, Stamp
from ..config.params import Params, load
from ..foundation import paths
from ..foundation.errors import PipelineError
from ..foundation.runtime import package_version
from . import code_deps, stage_table

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the top-level package
SHARED = ("download", "preprocess")  # stages whose outputs sweep points share, under the project root
# what a record names with its version: the packages the stages import, the project itself, the tools that run it
RUNTIME_PACKAGES = (
    *("jax", "jaxlib", "numpy", "optax", "safetensors", "tensorflow-datasets", "matplotlib"),
    *("mnist-jax-pipeline", "snakemake", "dvc"),
)
SHOWN = 3  # problems named per job


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
            root = Path(".") if maker.name in SHARED else self.root
            names = ([self.variant] if self.stage.per_variant else list(variants)) if artefact.per_variant else [None]
            for variant in names:
                found.setdefault(Job(maker, variant, root), []).append(artefact.at(variant, root))
        return list(found.items())

    def fix(self) -> str:
        """The commands that re-run it."""
        if self.root != Path("."):
            return "re-run the sweep: snakemake --cores all sweeps (or dvc exp run for its point)"
        return f"re-run '{self.name}': snakemake --cores all, or dvc repro -f -s {self.name}"


def jobs(variants: Iterable[str], root: Path = Path(".")) -> list[Job]:
    """Every job of the pipeline, upstream first."""
    variants = tuple(variants)
    return [Job(stage, v, root) for stage in stage_table.STAGES for v in (variants if stage.per_variant else (None,))]


def _first_difference(old: Any, new: Any, key: str) -> str | None:
    """The dotted key of the first value that differs, with both values."""
    if isinstance(old, dict) and isinstance(new, dict):
        for name in sorted(set(old) | set(new)):
            found = _first_difference(old.get(name), new.get(name), f"{key}.{name}")
            if found:
                return found
        return None
    if old != new:
        return f"{key}: {json.dumps(old)} in the record, {json.dumps(new)} now"
    return None


def _changed(first: Path, made: str, now: dict[str, str], recorded: dict[str, str]) -> list[str]:
    """One problem naming the files whose digests differ from the record's, [] when none does."""
    changed = sorted(f for f in set(now) | set(recorded) if now.get(f) != recorded.get(f))
    if not changed:
        return []
    return [f"{first}: made {made} ({', '.join(changed[:SHOWN])}{' ...' if len(changed) > SHOWN else ''} changed)"]


@dataclass
class Checker:
    """Checks jobs against the files as they are; digests are computed once."""

    params: Params
    params_path: str = "params.yaml"
    hashes: Hashes = field(default_factory=Hashes)
    _code: dict[str, dict[str, str]] = field(default_factory=dict)
    _problems: dict[Job, list[str]] = field(default_factory=dict)

    def code(self, stage: stage_table.Stage) -> dict[str, str]:
        """{code file: digest} of what the stage runs: the checkout's package, else the installed one."""
        if stage.name not in self._code:
            root = code_deps.CODE_ROOT if code_deps.CODE_ROOT.is_dir() else PACKAGE_DIR
            files = [Path(f) for f in code_deps.code_files(stage, root)]
            self._code[stage.name] = {self._name(f, root): self.hashes.of(f) for f in files}
        return self._code[stage.name]

    @staticmethod
    def _name(file: Path, root: Path) -> str:
        """A code file's name in the record: under src/ for the package's, else as given."""
        return (code_deps.CODE_ROOT / file.relative_to(root)).as_posix() if root in file.parents else file.as_posix()

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
        stamp = self.read(job)
        first = (job.outputs() or [job.stamp_path])[0]
        if stamp is None or stamp.stage != job.name:
            found = [self._unrecorded(job, first)]
        else:
            found = [
                *self._output_problems(job, stamp),
                *self._params_problems(job, stamp, first),
                *_changed(first, "by other code", self.code(job.stage), stamp.code),
                *_changed(first, "from other inputs", self.inputs(job), stamp.inputs),
            ]
        self._problems[job] = found
        return found

    @staticmethod
    def _unrecorded(job: Job, first: Path) -> str:
        """The problem of a job with no record of its own: an output missing, else the record."""
        absent = [p for p in job.outputs() if not p.exists()]
        if absent:  # a fresh clone: the data and models are not in git (the metrics are)
            return f"{absent[0]}: missing (no provenance record {job.stamp_path})"
        return f"{first}: not recorded as made by '{job.name}' (no provenance record {job.stamp_path})"

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
        """The first difference of each params.yaml section the record's differs from."""
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

    def record(self, job: Job, inputs: dict[str, str], run: Run | None = None) -> None:
        """Write the job's record with its outputs (inside atomic.together(): the files about to be put in place)."""
        stamp = Stamp(
            stage=job.name,
            params=self.made_from(job),
            code=self.code(job.stage),
            inputs=inputs,
            outputs=self.future_outputs(job),
            versions={name: package_version(name) or "not installed" for name in RUNTIME_PACKAGES},
            run=run,
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

    def check_installed(self, stage: stage_table.Stage) -> None:
        """Refuse to run code other than the checkout's: the record would name code that did not run."""
        if not code_deps.CODE_ROOT.is_dir() or code_deps.CODE_ROOT.resolve() == PACKAGE_DIR:
            return
        for name, digest in self.code(stage).items():
            if code_deps.CODE_ROOT not in Path(name).parents:
                continue  # the lock export: not code of the package
            installed = PACKAGE_DIR / Path(name).relative_to(code_deps.CODE_ROOT)
            if not installed.is_file() or self.hashes.of(installed) != digest:
                raise PipelineError(
                    f"{name}: differs from the installed package ({installed}); install the"
                    " checkout's code: pip install -e . (or rebuild the image)"
                )


TOOL_ENV = "MNIST_PIPELINE_TOOL"  # set by the Snakemake rules' commands (orchestration/snakemake_rules.py)


def running_tool() -> str:
    """Which tool runs this stage: Snakemake (its rules set TOOL_ENV), DVC (it sets DVC_STAGE), else by hand."""
    if os.environ.get(TOOL_ENV):
        return os.environ[TOOL_ENV]
    return "dvc" if os.environ.get("DVC_STAGE") else "mnist-pipeline"


def now() -> str:
    """The time now, ISO 8601 in UTC to the millisecond."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class StageChecks:
    """A stage's checks, begun as its process starts: the files they compare are hashed on threads of their
    own while the stage imports its code (JAX: a second or more), and verified once it has. `spent` is
    how long the checks held the stage up: their start, and the wait for them after the imports."""

    checker: Checker
    job: Job
    started: str
    spent: float
    hashing: threading.Thread

    @classmethod
    def begin(cls, args: argparse.Namespace) -> StageChecks | None:
        """For a pipeline stage's command, the checks under way; else None."""
        if args.command not in {stage.command for stage in stage_table.STAGES}:
            return None
        started, clock = now(), time.perf_counter()
        checker = Checker(load(args.params), str(args.params))
        job = job_for(args, checker.params)
        if job is None:
            return None
        upstream = [path for producer in checker.ancestors(job) for path in producer.outputs()]
        hashing = threading.Thread(target=checker.hashes.prefetch, args=(upstream,), daemon=True)
        hashing.start()
        return cls(checker, job, started, time.perf_counter() - clock, hashing)

    def finish(self) -> dict[str, str]:
        """Wait for the hashes, then the checks themselves: the digests of the job's inputs, or one line."""
        clock = time.perf_counter()
        self.hashing.join()
        self.checker.check_installed(self.job.stage)
        inputs = self.checker.check_inputs(self.job)
        self.spent += time.perf_counter() - clock
        return inputs

    def record(self, inputs: dict[str, str]) -> None:
        """The job's record, with how the run went."""
        self.checker.record(
            self.job, inputs, Run(tool=running_tool(), started=self.started, ended=now(), checks_s=round(self.spent, 4))
        )


def job_for(args: argparse.Namespace, params: Params) -> Job | None:
    """The pipeline job a CLI command runs, or None (not a stage, or outputs moved off the stage table's paths)."""
    names = {stage.command: stage for stage in stage_table.STAGES}
    stage = names.get(args.command)
    if stage is None:
        return None
    defaults = {"out": stage.outputs[0].path, "raw": paths.RAW.path, "processed": paths.PROCESSED.path}
    if any(getattr(args, key, default) != default for key, default in defaults.items()):
        return None
    root = Path(getattr(args, "root", "."))
    if root == Path(".") and Path(args.params) != Path("params.yaml"):
        return None  # the project's outputs from another parameters file: no record, so no stage takes them
    variant = getattr(args, "variant", None)
    if variant is not None and variant not in params.variants:
        raise PipelineError(
            f"--variant {variant}: not among {args.params}'s variants ({', '.join(params.variants)});"
            " add it there, so that both orchestrators track its outputs"
        )
    return Job(stage, variant, root)
