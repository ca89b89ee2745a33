"""The train stage: one variant of the tutorial MLP (variants.py), trained and timed honestly.

All variants share keys, data order and arithmetic; they differ only in their loop (loops/).
Every clock read is preceded by `block_until_ready()`, compilation is measured apart from the
epochs, and the per-epoch loss and accuracies are computed outside the timed region.
Writes the model file, the metrics (numbers only), the run's environment and the history.
"""

from __future__ import annotations

import argparse
import logging
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np

from ..artefacts import storage
from ..artefacts.dataset import load_split
from ..artefacts.model_file import ModelMetadata, save_model
from ..artefacts.training import EpochRecord, RunInfo, TrainMetrics, XlaAnalysis
from ..config.params import Params, load
from ..foundation import console, paths, variants
from ..foundation.errors import PipelineError
from ..foundation.runtime import device_info, peak_rss_bytes, timing_lock
from ..mlp import loops
from ..mlp.loops.base import LoopInputs, TrainState, loop_inputs, make_optimizer, steps_per_epoch
from ..mlp.model import init_params, loss_and_accuracy
from ..mlp.progress import EpochProgress

log = logging.getLogger(__name__)

AfterEpoch = Callable[[int, float, TrainState], None]
BeforeEpoch = Callable[[int], None]


@dataclass(frozen=True)
class Dataset:
    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray


@dataclass(frozen=True)
class Run:
    state: TrainState
    compile_seconds: float | None
    epoch_seconds: list[float]
    analysis: XlaAnalysis | None


def load_dataset(processed_dir: str | Path) -> Dataset:
    train_x, train_y = load_split(processed_dir, "train")
    test_x, test_y = load_split(processed_dir, "test")
    return Dataset(train_x, train_y, test_x, test_y)


def initial_state(params: Params, inputs: LoopInputs) -> TrainState:
    """The initial parameters from PRNGKey(model.seed) (the tutorial's, by default) and a fresh optimizer state."""
    m = params.model
    weights = init_params(m.layer_sizes, jax.random.PRNGKey(m.seed), m.init_scale, m.init, m.output_init)
    return TrainState(weights, make_optimizer(params.train, len(inputs.images)).init(weights))


def run_epochs(
    loop: loops.TrainingLoop,
    state: TrainState,
    epochs: int,
    after_epoch: AfterEpoch | None = None,
    before_epoch: BeforeEpoch | None = None,
) -> Run:
    """Compile (timed apart), then run and time `epochs` epochs; `before_epoch` and `after_epoch` run untimed."""
    state = jax.block_until_ready(loop.place(state))
    compile_seconds = loop.compile(state)
    epoch_seconds = []
    for epoch in range(1, epochs + 1):
        if before_epoch is not None:
            before_epoch(epoch)
        jax.block_until_ready(state)
        start = time.perf_counter()
        state = jax.block_until_ready(loop.run_epoch(state, epoch))
        seconds = time.perf_counter() - start
        epoch_seconds.append(seconds)
        if after_epoch is not None:
            after_epoch(epoch, seconds, state)
    return Run(state, compile_seconds, epoch_seconds, loop.analysis())


def train(params: Params, variant_name: str, data: Dataset, *, label: str = "") -> tuple[Run, list[EpochRecord]]:
    """Train one variant; return the run and its per-epoch history. Stops on a non-finite loss.
    `label` names the job on its progress bar (console.job_label; default `train@<variant>`)."""
    variant = variants.get(variant_name)
    if data.train_images.shape[1] != params.model.layer_sizes[0]:
        raise PipelineError(
            f"{paths.PROCESSED.path}: images have {data.train_images.shape[1]} pixels but"
            f" model.layer_sizes starts at {params.model.layer_sizes[0]}; re-run 'preprocess'"
        )
    inputs = loop_inputs(params, data.train_images, data.train_labels)
    loop = loops.build(variant, inputs)
    steps = steps_per_epoch(len(data.train_labels), params.train.batch_size)
    bar = EpochProgress(
        label or console.job_label("train", variant.name), params.train.epochs, steps, lambda: loop.steps_done
    )
    history: list[EpochRecord] = []

    def after_epoch(epoch: int, seconds: float, state: TrainState) -> None:
        train_loss, train_acc = loss_and_accuracy(state.params, data.train_images, data.train_labels)
        _, test_acc = loss_and_accuracy(state.params, data.test_images, data.test_labels)
        if not math.isfinite(train_loss):
            raise PipelineError(
                f"train@{variant.name}: the loss became {train_loss} at epoch {epoch}; lower train.step_size"
                f" (now {params.train.step_size}) in params.yaml. No model was written"
            )
        history.append(
            EpochRecord(
                epoch=epoch,
                epoch_seconds=round(seconds, 6),
                train_loss=train_loss,
                train_accuracy=train_acc,
                test_accuracy=test_acc,
            )
        )
        bar.epoch_finished(epoch, seconds, train_loss, train_acc, test_acc)

    try:
        run = run_epochs(loop, initial_state(params, inputs), params.train.epochs, after_epoch, bar.epoch_started)
    finally:
        bar.close()
    return run, history


def summarize(run: Run, history: list[EpochRecord], examples: int, batch_size: int) -> TrainMetrics:
    """The run's figures: per-epoch medians (over the epochs after the first), totals and final accuracies."""
    seconds = [h.epoch_seconds for h in history]
    median = statistics.median(seconds[1:] or seconds)
    steps = steps_per_epoch(examples, batch_size)
    return TrainMetrics(
        epochs=len(history),
        steps_per_epoch=steps,
        examples_per_epoch=examples,
        compile_seconds=None if run.compile_seconds is None else round(run.compile_seconds, 6),
        first_epoch_seconds=seconds[0],
        epoch_seconds_median=round(median, 6),
        total_train_seconds=round(sum(seconds), 6),
        steps_per_second=round(steps / median, 3),
        examples_per_second=round(examples / median, 1),
        final_train_loss=history[-1].train_loss,
        final_train_accuracy=history[-1].train_accuracy,
        final_test_accuracy=history[-1].test_accuracy,
        peak_rss_bytes=peak_rss_bytes(),
        xla=run.analysis,
    )


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline train --variant V`: train, then write the model, metrics, run info and history."""
    params, variant, root = load(args.params), args.variant, args.root
    data = load_dataset(args.processed)
    with timing_lock(f"train@{variant}") as conditions:
        run, history = train(params, variant, data, label=console.job_label("train", variant, root))
    metrics = summarize(run, history, len(data.train_labels), params.train.batch_size)
    weights = [(np.asarray(w), np.asarray(b)) for w, b in run.state.params]
    metadata = ModelMetadata(
        variant=variant,
        layer_sizes=list(params.model.layer_sizes),
        params_sha256=params.digest("model", "train"),
        jax_version=jax.__version__,
    )
    save_model(paths.MODEL.at(variant, root), weights, metadata)
    storage.write_model(paths.TRAIN_HEADLINE.at(variant, root), metrics.headline())
    storage.write_model(paths.TRAIN_METRICS.at(variant, root), metrics)
    storage.write_model(
        paths.TRAIN_RUN.at(variant, root), RunInfo(variant=variant, **device_info(), **conditions.fields())
    )
    storage.write_rows(paths.TRAIN_HISTORY.at(variant, root), history, EpochRecord)
