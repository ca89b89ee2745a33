"""The stage table: each stage's command, params, inputs and code, declared once for both tools.

Snakemake reads this table when it parses the workflow (workflow/rules/*.smk, through
snakemake_paths.py); `dvc.yaml` is generated from it (generate.py, `mnist-pipeline generate`; a
test fails when the committed file is stale), and so is the JSON schema of params.yaml. Outputs
come from paths.py (each artefact names the stage that writes it). Code deps are complete by
construction (code_deps.py): they are the package modules the stage's command imports, followed
transitively through every `import` statement, plus the package data the stage reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.params import Params
from ..foundation import paths

ALL_PARAMS = tuple(Params.model_fields)  # the params.yaml sections


@dataclass(frozen=True)
class Stage:
    name: str
    command: str  # the `mnist-pipeline` command it runs (commands.COMMANDS)
    params: tuple[str, ...]  # params.yaml sections it reads (whole sections; DVC tracks them as such)
    inputs: tuple[paths.Artefact, ...] = ()  # what upstream stages wrote
    per_variant: bool = False  # one stage per variant in params.yaml: `<name>@<variant>`
    data: tuple[str, ...] = ()  # package data it reads, relative to the package (folders or files)
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
    # params.yaml checked whole, by the rules every stage applies: DVC tracks the whole file for it, so an
    # edit anywhere (an unknown section too) runs it, and is refused under `dvc repro` as under `snakemake`
    Stage("check", "check", params=ALL_PARAMS, whole_file=True),
    Stage("download", "download", params=("data",)),
    Stage("preprocess", "preprocess", params=("preprocess",), inputs=(paths.RAW,)),
    Stage("train", "train", params=("model", "train"), inputs=(paths.PROCESSED,), per_variant=True),
    Stage("evaluate", "evaluate", params=(), inputs=(paths.PROCESSED, paths.MODEL), per_variant=True),
    Stage(
        "profile",
        "profile",
        params=("model", "train", "profile"),
        inputs=(paths.PROCESSED, paths.MODEL),
        per_variant=True,
    ),
    Stage(
        "report",
        "report",
        params=ALL_PARAMS,
        data=("stages/report/templates",),
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


def get(name: str) -> Stage:
    return next(stage for stage in STAGES if stage.name == name)
