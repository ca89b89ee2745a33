"""Where every artefact lives, which stage writes it, and how DVC shows it: one declaration each.

The stage table (stages.py) takes each stage's outputs from here, the CLI its default paths,
and the readers the stage to name when a file is missing or damaged. A `{variant}` in a path
makes one artefact per training variant, written by the stage `<made_by>@<variant>`.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal


@dataclass(frozen=True)
class Plot:
    """A DVC plot of a CSV artefact: columns and title (`{variant}` filled in)."""

    x: str
    y: str
    title: str
    template: str | None = None


@dataclass(frozen=True)
class Artefact:
    """A file, or a folder DVC tracks whole while Snakemake compares the files named inside."""

    path: str
    made_by: str
    files: tuple[str, ...] = ()  # inside a folder: the files Snakemake declares ({variant}: a per-variant folder's)
    variant_files: tuple[str, ...] = ()  # inside a folder: one file per variant ('{variant}' in the name)
    folders: tuple[str, ...] = ()  # inside a folder: sub-folders Snakemake declares as directory()
    role: Literal["out", "metrics", "plots"] = "out"
    plot: Plot | None = None
    in_git: bool = False  # committed, not cached by DVC: the baseline `dvc metrics/plots diff` compares with

    @property
    def per_variant(self) -> bool:
        return "{variant}" in self.path

    def at(self, variant: str | None = None, root: str | Path = ".") -> Path:
        """The path under `root` (a sweep point's folder, say), for one variant when it is per variant."""
        return Path(root) / (self.path.format(variant=variant) if self.per_variant else self.path)

    def stage(self, variant: str | None = None) -> str:
        """The DVC stage name that writes it: 'preprocess', or 'train@jit' for a per-variant artefact."""
        return f"{self.made_by}@{variant}" if self.per_variant else self.made_by

    def inside(self, *names: str) -> list[str]:
        """Paths of files inside this folder."""
        return [f"{self.path}/{name}" for name in names]

    def files_at(self, variant: str, root: str | Path = ".") -> list[Path]:
        """The declared files of one variant's folder (a per-variant folder artefact)."""
        return [self.at(variant, root) / name.format(variant=variant) for name in self.files]

    def file_names(self, variants: tuple[str, ...]) -> list[str]:
        """The files of a folder, those named per variant included."""
        return list(self.files) + [name.format(variant=v) for name in self.variant_files for v in variants]


SPLITS = ("train", "val", "test")
PROCESSED_FILES = tuple(f"{split}_{kind}.npy" for split in SPLITS for kind in ("images", "labels")) + ("stats.json",)
SNAPSHOTS = ("init", "train_step", "evaluate")  # the profile stage's device-memory snapshots, in order
FIGURES = ("dataset_samples", "class_balance", "training_curves", "epoch_times", "per_class_recall", "step_timeline")
VARIANT_FIGURES = ("confusion", "misclassified")  # one of each per variant: confusion_<variant>.png

RAW = Artefact("data/raw", "download", files=("manifest.json",), folders=("arrays", "idx"))
PROCESSED = Artefact("data/processed", "preprocess", files=PROCESSED_FILES)
MODEL = Artefact("models/{variant}.safetensors", "train")
# DVC lists the headline files as metrics (a few figures each, so its tables fit a terminal); the
# full records beside them hold every figure the report and the comparison pages read.
TRAIN_HEADLINE = Artefact("metrics/train/{variant}.json", "train", role="metrics", in_git=True)
TRAIN_METRICS = Artefact("metrics/train/{variant}.full.json", "train", in_git=True)
TRAIN_RUN = Artefact("metrics/train/{variant}.run.json", "train", in_git=True)
TRAIN_HISTORY = Artefact(
    "plots/train/{variant}.csv",
    "train",
    role="plots",
    in_git=True,
    plot=Plot("epoch", "test_accuracy", "Test accuracy per epoch ({variant})", template="epochs"),
)
EVAL_HEADLINE = Artefact("metrics/evaluate/{variant}.json", "evaluate", role="metrics", in_git=True)
EVAL_METRICS = Artefact("metrics/evaluate/{variant}.full.json", "evaluate", in_git=True)
EVAL_DETAILS = Artefact("metrics/evaluate/{variant}_details.json", "evaluate")
CONFUSION = Artefact(
    "plots/confusion/{variant}.csv",
    "evaluate",
    role="plots",
    in_git=True,
    plot=Plot("predicted", "actual", "Confusion matrix ({variant})", template="confusion_log"),
)
# The execution trace, laid out as jax.profiler writes it, with fixed names in place of its timestamped
# session folder and host name (XProf and TensorBoard open `--logdir <profile folder>/trace`).
TRACE_LOGDIR = "trace"
TRACE_SESSION = f"{TRACE_LOGDIR}/plugins/profile/{{variant}}"
TRACE_FILES = {"perfetto": "perfetto_trace.json.gz", "chrome": "host.trace.json.gz", "xplane": "host.xplane.pb"}
PROFILE = Artefact(
    "reports/profile/{variant}",
    "profile",
    files=tuple(f"{point}.prof" for point in SNAPSHOTS)
    + ("summary.json",)
    + tuple(f"{TRACE_SESSION}/{name}" for name in TRACE_FILES.values()),
)
VARIANTS_HISTORY = Artefact("plots/variants.csv", "report", in_git=True)  # every variant's epochs, for DVC's overlays
REPORT_HTML = Artefact("reports/report.html", "report")
REPORT_MD = Artefact("reports/summary.md", "report")
REPORT_FIGURES = Artefact(
    "reports/figures",
    "report",
    files=tuple(f"{name}.png" for name in FIGURES),
    variant_files=tuple(f"{kind}_{{variant}}.png" for kind in VARIANT_FIGURES),
)

ARTEFACTS = (
    RAW,
    PROCESSED,
    MODEL,
    TRAIN_HEADLINE,
    TRAIN_METRICS,
    TRAIN_RUN,
    TRAIN_HISTORY,
    EVAL_HEADLINE,
    EVAL_METRICS,
    EVAL_DETAILS,
    CONFUSION,
    PROFILE,
    VARIANTS_HISTORY,
    REPORT_HTML,
    REPORT_MD,
    REPORT_FIGURES,
)

# Each stage's provenance record (artefacts/provenance.py), beside its outputs under the same root.
PROVENANCE = "provenance"


def stamp(stage: str, per_variant: bool) -> Artefact:
    """The provenance record a stage writes with its outputs: provenance/train_{variant}.json, say."""
    return Artefact(f"{PROVENANCE}/{stage}{'_{variant}' if per_variant else ''}.json", stage)


POINT_PARAMS = "params.yaml"  # a sweep point's parameters, in its folder (sweeps.py)
COMPARE_HTML = "compare.html"  # a sweep's comparison page and table, in its folder
COMPARE_CSV = "results.csv"
EXPERIMENTS_HTML = "reports/experiments.html"  # the comparison page of DVC's experiments

# Tracked files that a run itself rewrites (dvc.lock, the committed baseline's metrics and plots):
# the report's provenance does not count them as changes. Patterns, `*` for a variant.
# dvc.lock, the artefacts kept in git, and the .gitignore files DVC writes beside its outputs
PIPELINE_WRITES = (
    "dvc.lock",
    *(a.path.replace("{variant}", "*") for a in ARTEFACTS if a.in_git),
    *sorted({f"{Path(a.path).parent.as_posix()}/.gitignore" for a in ARTEFACTS} | {f"{PROVENANCE}/.gitignore"}),
)

# Columns of VARIANTS_HISTORY that dvc.yaml's top-level plots draw, one line per variant, as {column:
# (title, template)}: .dvc/plots/variants.json colours by variant, shapes and dashes by revision;
# variants_log.json does the same on a log scale (nojit's and jit's seconds differ about 100x).
HISTORY_PLOTS = {
    "train_loss": ("Training loss per epoch", "variants"),
    "test_accuracy": ("Test accuracy per epoch", "variants"),
    "epoch_seconds": ("Seconds per epoch", "variants_log"),
}


def owner(path: str | Path) -> str | None:
    """The stage whose output `path` is, or lies inside (any variant), under the project root; else None.
    A command's --out or --root must not name one: it would write over what the stage owns."""
    relative = Path(os.path.relpath(Path(path).resolve(), Path.cwd().resolve()))
    if relative.parts[:1] == ("..",):
        return None
    candidates = [relative, *relative.parents]
    for artefact in (*ARTEFACTS, Artefact(f"{PROVENANCE}/*", "the pipeline")):
        pattern = artefact.path.replace("{variant}", "*")
        if any(fnmatch.fnmatchcase(p.as_posix(), pattern) for p in candidates if p != Path(".")):
            return artefact.made_by
    return None
