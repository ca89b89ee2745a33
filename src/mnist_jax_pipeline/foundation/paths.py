"""Where every artefact lives and which stage writes it, declared once.

A `{variant}` in a path makes one artefact per training variant, written by `<made_by>@<variant>`.
A folder artefact names the files inside it that Snakemake declares (DVC tracks the folder whole).
"""

from pathlib import Path
from typing import Literal, NamedTuple


class Artefact(NamedTuple):
    path: str
    made_by: str
    files: tuple[str, ...] = ()  # a folder's files ('{variant}' inside: a per-variant folder's)
    variant_files: tuple[str, ...] = ()  # a folder's files, one per variant ('{variant}' in the name)
    folders: tuple[str, ...] = ()  # a folder's sub-folders, declared whole
    role: Literal["out", "metrics", "plots"] = "out"
    in_git: bool = False  # committed, not cached by DVC: the baseline `dvc metrics diff` compares with

    @property
    def per_variant(self) -> bool:
        return "{variant}" in self.path

    def at(self, variant: str | None = None, root: str | Path = ".") -> Path:
        """The path under `root` (a sweep point's folder, say), for one variant when it is per variant."""
        return Path(root) / (self.path.format(variant=variant) if self.per_variant else self.path)

    def stage(self, variant: str | None = None) -> str:
        """The job that writes it: 'preprocess', or 'train@jit'."""
        return job_name(self.made_by, variant if self.per_variant else None)

    def inside(self, *names: str) -> list[str]:
        return [f"{self.path}/{name}" for name in names]

    def file_names(self, variants: tuple[str, ...]) -> list[str]:
        """The files of a folder, those named per variant included."""
        return list(self.files) + [name.format(variant=v) for name in self.variant_files for v in variants]


def job_name(stage: str, variant: str | None = None) -> str:
    """A job's name, as DVC's `foreach` names a stage's jobs: 'preprocess', or 'train@jit'."""
    return f"{stage}@{variant}" if variant else stage


SPLITS = ("train", "val", "test")
MANIFEST, ARRAYS, IDX = "manifest.json", "arrays", "idx"  # the download stage's account, its .npy and its IDX files
STATS = "stats.json"  # how the processed arrays were made, and what they hold


def split_files(split: str) -> tuple[str, str]:
    """A split's images and labels: train_images.npy and train_labels.npy, say."""
    return f"{split}_images.npy", f"{split}_labels.npy"


PROCESSED_FILES = tuple(name for split in SPLITS for name in split_files(split)) + (STATS,)
SNAPSHOTS = ("init", "train_step", "evaluate")  # the profile stage's device-memory snapshots, in order
SNAPSHOT_FILE = "{point}.prof"
PROFILE_SUMMARY = "summary.json"
FIGURES = ("dataset_samples", "class_balance", "training_curves", "epoch_times", "per_class_recall", "step_timeline")
VARIANT_FIGURES = ("confusion", "misclassified")  # one of each per variant: confusion_<variant>.png
# jax.profiler's layout with fixed names: XProf and TensorBoard open `--logdir <profile folder>/trace`
TRACE_LOGDIR = "trace"
TRACE_RUNS = "plugins/profile"  # XProf's runs, inside the logdir
TRACE_SESSION = f"{TRACE_LOGDIR}/{TRACE_RUNS}/{{variant}}"
TRACE_FILES = {"perfetto": "perfetto_trace.json.gz", "chrome": "host.trace.json.gz", "xplane": "host.xplane.pb"}

RAW = Artefact("data/raw", "download", files=(MANIFEST,), folders=(ARRAYS, IDX))
PROCESSED = Artefact("data/processed", "preprocess", files=PROCESSED_FILES)
MODEL = Artefact("models/{variant}.safetensors", "train")
# DVC's metrics are the headline files (a few figures, so its tables fit a terminal); .full.json has them all
TRAIN_HEADLINE = Artefact("metrics/train/{variant}.json", "train", role="metrics", in_git=True)
TRAIN_METRICS = Artefact("metrics/train/{variant}.full.json", "train", in_git=True)
TRAIN_RUN = Artefact("metrics/train/{variant}.run.json", "train", in_git=True)
TRAIN_HISTORY = Artefact("plots/train/{variant}.csv", "train", role="plots", in_git=True)
EVAL_HEADLINE = Artefact("metrics/evaluate/{variant}.json", "evaluate", role="metrics", in_git=True)
EVAL_METRICS = Artefact("metrics/evaluate/{variant}.full.json", "evaluate", in_git=True)
EVAL_DETAILS = Artefact("metrics/evaluate/{variant}_details.json", "evaluate")
CONFUSION = Artefact("plots/confusion/{variant}.csv", "evaluate", role="plots", in_git=True)
PROFILE = Artefact(
    "reports/profile/{variant}",
    "profile",
    files=(*(SNAPSHOT_FILE.format(point=point) for point in SNAPSHOTS), PROFILE_SUMMARY)
    + tuple(f"{TRACE_SESSION}/{name}" for name in TRACE_FILES.values()),
)
VARIANTS_HISTORY = Artefact("plots/variants.csv", "report", in_git=True)  # every variant's epochs, for DVC's plots
REPORT_HTML = Artefact("reports/report.html", "report")
REPORT_MD = Artefact("reports/summary.md", "report")
REPORT_FIGURES = Artefact(
    "reports/figures",
    "report",
    files=tuple(f"{name}.png" for name in FIGURES),
    variant_files=tuple(f"{kind}_{{variant}}.png" for kind in VARIANT_FIGURES),
)
ARTEFACTS: tuple[Artefact, ...] = (RAW, PROCESSED, MODEL, TRAIN_HEADLINE, TRAIN_METRICS, TRAIN_RUN, TRAIN_HISTORY)
ARTEFACTS += (EVAL_HEADLINE, EVAL_METRICS, EVAL_DETAILS, CONFUSION, PROFILE, VARIANTS_HISTORY, REPORT_HTML, REPORT_MD)
ARTEFACTS += (REPORT_FIGURES,)

PROVENANCE = "provenance"  # each job's provenance record, beside its outputs under the same root
MARKERS = ".snakemake/provenance"  # a job's marker for Snakemake: its one input whose time is not ancient


def record(stage: str, per_variant: bool) -> Artefact:
    """The provenance record a stage writes with its outputs: provenance/train_{variant}.json, say."""
    return Artefact(f"{PROVENANCE}/{stage}{'_{variant}' if per_variant else ''}.json", stage)


SWEEPS = Path("sweeps")  # the sweep files sweeps/<sweep>.yaml, and each point's outputs in sweeps/<sweep>/<point>/
PARAMS = "params.yaml"  # the parameters: at the project root, and in each sweep point's folder
CODE = Path("src/mnist_jax_pipeline")  # the checkout's package, relative to the project root
RUNTIME_LOCK = Path("requirements/runtime.txt")  # the locked runtime versions, exported from uv.lock
COMPARE_HTML = "compare.html"  # a sweep's comparison page and table, in its folder
COMPARE_CSV = "results.csv"
COMPARE_RECORD = "compare.json"  # what the page and table were made from: {file: digest}
EXPERIMENTS_HTML = "reports/experiments.html"  # the comparison page of DVC's experiments
