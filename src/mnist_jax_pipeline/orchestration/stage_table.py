"""The stage table: each stage's command, parameters, inputs and code, declared once for both tools.

`mnist-pipeline generate` writes dvc.yaml and the Snakemake rules (workflow/rules/) from it; outputs
come from paths.py. `code` lists the package files a stage's command runs, relative to the package;
tests/test_stages.py checks it against the modules the command imports.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.params import SECTIONS
from ..foundation import paths

# What every stage's command runs: the entry point, its checks and records, the parameters.
CORE = (
    "__init__.py",
    "cli.py",
    "artefacts/__init__.py",
    "artefacts/atomic.py",
    "artefacts/provenance.py",
    "artefacts/record.py",
    "artefacts/storage.py",
    "config/__init__.py",
    "config/params.py",
    "foundation/__init__.py",
    "foundation/console.py",
    "foundation/dataset_facts.py",
    "foundation/errors.py",
    "foundation/numerics.py",
    "foundation/paths.py",
    "foundation/variants.py",
    "orchestration/__init__.py",
    "orchestration/commands.py",
    "orchestration/freshness.py",
    "orchestration/run.py",
    "orchestration/stage_table.py",
)
LOOPS = ("mlp/__init__.py", "mlp/loops", "mlp/model.py")
TIMED = ("foundation/runtime.py",)  # device facts and the timing lock


@dataclass(frozen=True)
class Stage:
    name: str
    command: str  # the `mnist-pipeline` command it runs (commands.COMMANDS)
    params: tuple[str, ...]  # params.yaml sections it reads (whole sections, as DVC tracks them)
    code: tuple[str, ...]  # package files and folders its command runs or reads, beside CORE
    inputs: tuple[paths.Artefact, ...] = ()  # what upstream stages wrote
    per_variant: bool = False  # one job per variant in params.yaml: `<name>@<variant>`
    whole_file: bool = False  # DVC tracks all of params.yaml, not only `params`

    @property
    def outputs(self) -> tuple[paths.Artefact, ...]:
        """What it writes: its artefacts, then its provenance record."""
        return (*self.artefacts, self.stamp)

    @property
    def artefacts(self) -> tuple[paths.Artefact, ...]:
        return tuple(a for a in paths.ARTEFACTS if a.made_by == self.name)

    @property
    def stamp(self) -> paths.Artefact:
        return paths.stamp(self.name, self.per_variant)

    def cmd(self, variant: str) -> str:
        """The command line; `variant` is the placeholder (or name) filled in for a per-variant stage."""
        return f"mnist-pipeline {self.command}" + (f" --variant {variant}" if self.per_variant else "")


STAGES: tuple[Stage, ...] = (
    # params.yaml checked whole: DVC tracks the whole file for it, so any edit runs it under both tools
    Stage("check", "check", SECTIONS, code=(), whole_file=True),
    Stage(
        "download",
        "download",
        ("data",),
        code=("artefacts/dataset.py", "stages/__init__.py", "stages/download"),
    ),
    Stage(
        "preprocess",
        "preprocess",
        ("preprocess",),
        code=("artefacts/dataset.py", "stages/__init__.py", "stages/preprocess.py"),
        inputs=(paths.RAW,),
    ),
    Stage(
        "train",
        "train",
        ("model", "train"),
        code=(
            *TIMED,
            *LOOPS,
            "artefacts/dataset.py",
            "artefacts/model_file.py",
            "artefacts/training.py",
            "mlp/progress.py",
            "stages/__init__.py",
            "stages/train.py",
        ),
        inputs=(paths.PROCESSED,),
        per_variant=True,
    ),
    Stage(
        "evaluate",
        "evaluate",
        (),
        code=(
            *TIMED,
            "artefacts/dataset.py",
            "artefacts/evaluation.py",
            "artefacts/model_file.py",
            "mlp/__init__.py",
            "mlp/model.py",
            "stages/__init__.py",
            "stages/evaluate.py",
        ),
        inputs=(paths.PROCESSED, paths.MODEL),
        per_variant=True,
    ),
    Stage(
        "profile",
        "profile",
        ("model", "train", "profile"),
        code=(
            *TIMED,
            *LOOPS,
            "artefacts/dataset.py",
            "artefacts/model_file.py",
            "artefacts/profile_summary.py",
            "artefacts/training.py",
            "stages/__init__.py",
            "stages/profile/__init__.py",
            "stages/profile/hlo.py",
            "stages/profile/op_table.py",
            "stages/profile/pprof.py",
            "stages/profile/stage.py",
            "stages/profile/trace_files.py",
        ),
        inputs=(paths.PROCESSED, paths.MODEL),
        per_variant=True,
    ),
    Stage(
        "report",
        "report",
        SECTIONS,
        code=(
            *TIMED,
            "artefacts/dataset.py",
            "artefacts/dropped.py",
            "artefacts/evaluation.py",
            "artefacts/profile_summary.py",
            "artefacts/training.py",
            "stages/__init__.py",
            "stages/report",
        ),
        inputs=(
            paths.RAW,
            paths.PROCESSED,
            paths.PROFILE,
            paths.TRAIN_METRICS,
            paths.TRAIN_RUN,
            paths.TRAIN_HISTORY,
            paths.EVAL_METRICS,
            paths.EVAL_DETAILS,
        ),
    ),
)
SHARED = ("download", "preprocess")  # what every sweep point reads from the project root
POINT_STAGES = ("train", "evaluate")  # what each sweep point runs, under its own folder


def get(name: str) -> Stage:
    return next(stage for stage in STAGES if stage.name == name)
