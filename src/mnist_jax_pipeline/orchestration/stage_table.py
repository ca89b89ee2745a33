"""The stage table: each stage's command, parameters, inputs and code, declared once for both tools.

`mnist-pipeline generate` writes dvc.yaml and workflow/rules/*.smk from it; outputs come from
paths.py. `code` names the package files a stage's command runs beside CORE (a folder: all of it;
each package's __init__.py is implied); tests/test_stages.py checks it against the imports.
"""

from typing import NamedTuple

from ..config.params import SECTIONS
from ..foundation import paths

CORE = (
    "cli.py artefacts/atomic.py artefacts/dropped.py artefacts/json_model.py artefacts/ownership.py"
    " artefacts/provenance.py config/params.py config/refusals.py foundation/console.py foundation/dataset_facts.py"
    " foundation/errors.py foundation/paths.py foundation/stops.py foundation/variants.py"
    " orchestration/commands.py orchestration/freshness.py orchestration/jobs.py orchestration/run.py"
    " orchestration/stage_table.py"
)
DATA = "artefacts/dataset.py artefacts/storage.py"
RUNTIME = "foundation/backend.py foundation/runtime.py"
TIMED = f"{DATA} {RUNTIME} artefacts/model_file.py"
LOOPS = "mlp/loops mlp/model.py artefacts/training.py"


class Stage(NamedTuple):
    name: str  # and the `mnist-pipeline` command it runs (commands.COMMANDS)
    params: tuple[str, ...]  # params.yaml sections it reads (whole sections, as DVC tracks them)
    code: str  # package files and folders its command runs beside CORE, separated by spaces
    inputs: tuple[paths.Artefact, ...] = ()  # what upstream stages wrote
    per_variant: bool = False  # one job per variant in params.yaml: `<name>@<variant>`
    whole_file: bool = False  # DVC tracks all of params.yaml, not only `params`

    @property
    def outputs(self) -> tuple[paths.Artefact, ...]:
        """What it writes: its artefacts, then its provenance record."""
        return (*self.artefacts, self.record)

    @property
    def artefacts(self) -> tuple[paths.Artefact, ...]:
        return tuple(a for a in paths.ARTEFACTS if a.made_by == self.name)

    @property
    def record(self) -> paths.Artefact:
        return paths.record(self.name, self.per_variant)

    def cmd(self, variant: str) -> str:
        """The command line; `variant` is the placeholder (or name) filled in for a per-variant stage."""
        return f"mnist-pipeline {self.name}" + (f" --variant {variant}" if self.per_variant else "")


STAGES: tuple[Stage, ...] = (
    # params.yaml checked whole: DVC tracks the whole file for it, so any edit runs it under both tools
    Stage("check", SECTIONS, "", whole_file=True),
    Stage("download", ("data",), f"{DATA} foundation/terminal.py stages/download"),
    Stage("preprocess", ("preprocess",), f"{DATA} stages/preprocess.py", (paths.RAW,)),
    Stage(
        "train",
        ("model", "train"),
        f"{TIMED} {LOOPS} foundation/terminal.py mlp/progress.py stages/train.py",
        (paths.PROCESSED,),
        per_variant=True,
    ),
    Stage(
        "evaluate",
        (),
        f"{TIMED} artefacts/evaluation.py mlp/model.py stages/evaluate.py",
        (paths.PROCESSED, paths.MODEL),
        per_variant=True,
    ),
    Stage(
        "profile",
        ("model", "train", "profile"),
        f"{TIMED} {LOOPS} artefacts/profile_summary.py stages/profile/hlo.py stages/profile/op_table.py"
        " stages/profile/pprof.py stages/profile/stage.py stages/profile/trace_files.py",
        (paths.PROCESSED, paths.MODEL),
        per_variant=True,
    ),
    Stage(
        "report",
        SECTIONS,
        f"{DATA} {RUNTIME} artefacts/evaluation.py artefacts/profile_summary.py artefacts/training.py stages/report",
        (
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
