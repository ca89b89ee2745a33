"""The train stage's artefacts: per-epoch history, its metrics (numbers only), and what it ran on."""

from pathlib import Path
from typing import Literal

from pydantic import Field

from ..foundation import paths
from ..foundation.errors import remake
from . import storage
from .json_model import JsonModel


class EpochRow(JsonModel):
    """One row of plots/train/<variant>.csv."""

    epoch: int = Field(ge=1)
    epoch_seconds: float
    train_loss: float
    train_accuracy: float
    test_accuracy: float


class VariantEpoch(EpochRow):
    """One row of plots/variants.csv: an epoch of one variant."""

    variant: str


class XlaAnalysis(JsonModel):
    """XLA's figures for the compiled unit of training: one step, or one epoch for jit_scan."""

    argument_bytes: int
    output_bytes: int
    alias_bytes: int
    temp_bytes: int
    generated_code_bytes: int
    peak_bytes: int | None = None
    flops: float | None = None
    bytes_accessed: float | None = None


class TrainHeadline(JsonModel):
    """metrics/train/<variant>.json, the metrics DVC lists: few and rounded, so `dvc metrics show` fits a terminal."""

    compile_s: float | None = None  # seconds; absent when nothing is compiled (nojit)
    epoch_s: float  # seconds, the median epoch after the first
    train_s: float  # seconds, every epoch, compile apart
    train_loss: float  # the last epoch's


class TrainMetrics(JsonModel):
    """metrics/train/<variant>.full.json: every figure of a training run, numbers only."""

    epochs: int
    steps_per_epoch: int
    examples_per_epoch: int
    compile_seconds: float | None = None  # absent when nothing is compiled (nojit)
    first_epoch_seconds: float
    epoch_seconds_median: float  # over the epochs after the first (the first alone if there is one)
    total_train_seconds: float
    steps_per_second: float
    examples_per_second: float
    final_train_loss: float
    final_train_accuracy: float
    final_test_accuracy: float
    peak_rss_bytes: int
    xla: XlaAnalysis | None = None  # absent when nothing is compiled (nojit)

    def headline(self) -> TrainHeadline:
        """The figures a user compares between runs, rounded to what a timing can tell apart."""
        return TrainHeadline(
            compile_s=None if self.compile_seconds is None else round(self.compile_seconds, 3),
            epoch_s=round(self.epoch_seconds_median, 3),
            train_s=round(self.total_train_seconds, 3),
            train_loss=float(f"{self.final_train_loss:.4g}"),
        )


class RunInfo(JsonModel):
    """metrics/train/<variant>.run.json: the device, versions and host of a training run, and how busy it was."""

    variant: str
    backend: str
    devices: list[str]
    device_kind: str
    device_count: int
    jax_version: str
    jaxlib_version: str | None
    host_cpu_count: int | None
    cpu_model: str
    python_version: str
    machine: str
    runtime_lock_sha256: str | None = None  # requirements/runtime.txt, the locked runtime versions
    xla_flags: str | None = None  # XLA_FLAGS in force: the deterministic GPU ops (runtime.set_numerics)
    matmul_precision: str | None = None  # float32 matmuls: "highest" is full float32 on GPU and TPU too
    timing_lock: Literal["held", "off", "not held"]  # off: MNIST_PIPELINE_LOCK=off; not held: it stopped waiting
    lock_wait_seconds: float
    loadavg_1m_at_start: float | None = None  # None where the platform has no load average
    loadavg_1m_at_end: float | None = None
    other_cpu_share: float | None = Field(default=None, ge=0, le=1)  # other processes', of all cores' time
    busy: bool  # not held, or others used more than runtime.BUSY_SHARE of the CPU


def read_metrics(variant: str, root: str | Path = ".") -> TrainMetrics:
    return storage.read_model(paths.TRAIN_METRICS.at(variant, root), TrainMetrics, paths.TRAIN_METRICS.stage(variant))


def read_run(variant: str, root: str | Path = ".") -> RunInfo:
    path, made_by = paths.TRAIN_RUN.at(variant, root), paths.TRAIN_RUN.stage(variant)
    run = storage.read_model(path, RunInfo, made_by)
    if run.variant != variant:
        raise remake(path, f"holds variant '{run.variant}', expected '{variant}'", made_by)
    return run


def read_history(variant: str, root: str | Path = ".") -> list[EpochRow]:
    path, made_by = paths.TRAIN_HISTORY.at(variant, root), paths.TRAIN_HISTORY.stage(variant)
    if not (rows := storage.read_rows(path, EpochRow, made_by)):
        raise remake(path, "no epochs", made_by)
    return rows
