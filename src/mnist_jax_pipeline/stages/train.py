"""The train stage: one variant of the tutorial MLP, trained and timed, then its model, metrics (numbers only),
run environment and per-epoch history written. Every clock read follows `block_until_ready()`, compiling is
timed apart from the epochs, and each epoch's loss and accuracies are taken outside its timing."""

import argparse
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np

from ..artefacts import storage
from ..artefacts.dataset import load_split
from ..artefacts.model_file import ModelMetadata, save_model
from ..artefacts.training import EpochRow, RunInfo, TrainMetrics, XlaAnalysis
from ..config.params import Params, load, steps_per_epoch
from ..foundation import backend, console, paths, variants
from ..foundation.errors import PipelineError
from ..foundation.runtime import device_info, peak_rss_bytes, timing_lock
from ..mlp import loops
from ..mlp.loops.base import TrainState, loop_inputs, make_optimizer
from ..mlp.model import init_params, loss_and_accuracy
from ..mlp.progress import EpochProgress


class Dataset(NamedTuple):
    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray


class TrainingResult(NamedTuple):
    state: TrainState
    compile_seconds: float | None
    epoch_seconds: list[float]
    analysis: XlaAnalysis | None


def load_dataset(processed_dir: str | Path) -> Dataset:
    return Dataset(*load_split(processed_dir, "train"), *load_split(processed_dir, "test"))


def initial_state(params: Params, inputs: loops.LoopInputs) -> TrainState:
    """The parameters drawn from PRNGKey(model.seed) (the tutorial's, by default) and a fresh optimizer state."""
    m = params.model
    weights = init_params(m.layer_sizes, jax.random.PRNGKey(m.seed), m.init_scale, m.init, m.output_init)
    return TrainState(weights, make_optimizer(params.train, len(inputs.images)).init(weights))


def run_epochs(
    loop: loops.TrainingLoop,
    state: TrainState,
    epochs: int,
    after_epoch: Callable[[int, float, TrainState], None] = lambda *_: None,
    before_epoch: Callable[[int], None] = lambda _: None,
) -> TrainingResult:
    """Compile (timed apart), then run and time `epochs` epochs; `before_epoch` and `after_epoch` run untimed."""
    state = jax.block_until_ready(loop.place(state))
    compile_seconds = loop.compile(state)
    epoch_seconds: list[float] = []
    for epoch in range(1, epochs + 1):
        before_epoch(epoch)
        jax.block_until_ready(state)
        start = time.perf_counter()
        state = jax.block_until_ready(loop.run_epoch(state, epoch))
        epoch_seconds.append(time.perf_counter() - start)
        after_epoch(epoch, epoch_seconds[-1], state)
    return TrainingResult(state, compile_seconds, epoch_seconds, loop.analysis())


def train(
    params: Params, variant_name: str, data: Dataset, *, label: str = "", source: str | Path = paths.PARAMS
) -> tuple[TrainingResult, list[EpochRow]]:
    """Train one variant, its progress named `label` (by default `train@<variant>`); the run and its per-epoch
    history. A non-finite loss stops it, with a line naming `source`, the parameters file."""
    variant = variants.get(variant_name)
    inputs = loop_inputs(params, data.train_images, data.train_labels)
    loop = loops.build(variant, inputs)
    steps = steps_per_epoch(len(data.train_labels), params.train.batch_size)
    job = paths.job_name("train", variant.name)
    bar = EpochProgress(label or job, params.train.epochs, steps, lambda: loop.steps_done)
    history: list[EpochRow] = []

    def after_epoch(epoch: int, seconds: float, state: TrainState) -> None:
        train_loss, train_acc = loss_and_accuracy(state.params, data.train_images, data.train_labels)
        _, test_acc = loss_and_accuracy(state.params, data.test_images, data.test_labels)
        if not math.isfinite(train_loss):
            raise PipelineError(
                f"{job}: the loss became {train_loss} at epoch {epoch}; lower train.step_size"
                f" (now {params.train.step_size}) in {source}. No model was written"
            )
        row = EpochRow(
            epoch=epoch,
            epoch_seconds=round(seconds, 6),
            train_loss=train_loss,
            train_accuracy=train_acc,
            test_accuracy=test_acc,
        )
        history.append(row)
        bar.epoch_finished(epoch, seconds, train_loss, train_acc, test_acc)

    try:
        run = run_epochs(loop, initial_state(params, inputs), params.train.epochs, after_epoch, bar.epoch_started)
    finally:
        bar.close()
    return run, history


def summarize(run: TrainingResult, history: list[EpochRow], examples: int, batch_size: int) -> TrainMetrics:
    """The run's figures: the median epoch (of those after the first), totals and the last epoch's accuracies."""
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
    source = paths.SWEEPS / f"{Path(root).parent.name}.yaml" if paths.SWEEPS in Path(root).parents else args.params
    with timing_lock(paths.job_name("train", variant)) as conditions:
        backend.start()
        run, history = train(params, variant, data, label=console.job_label("train", variant, root), source=source)
    metrics = summarize(run, history, len(data.train_labels), params.train.batch_size)
    metadata = ModelMetadata(
        variant=variant,
        layer_sizes=list(params.model.layer_sizes),
        params_sha256=params.digest("model", "train"),
        jax_version=jax.__version__,
    )
    save_model(paths.MODEL.at(variant, root), [(np.asarray(w), np.asarray(b)) for w, b in run.state.params], metadata)
    storage.write_model(paths.TRAIN_HEADLINE.at(variant, root), metrics.headline())
    storage.write_model(paths.TRAIN_METRICS.at(variant, root), metrics)
    run_info = RunInfo(variant=variant, **device_info(), **conditions.fields())
    storage.write_model(paths.TRAIN_RUN.at(variant, root), run_info)
    storage.write_rows(paths.TRAIN_HISTORY.at(variant, root), history, EpochRow)
