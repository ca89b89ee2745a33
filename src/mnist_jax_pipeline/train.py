"""The train stage: the tutorial's SGD loop run op by op (`nojit`), compiled per step (`jit`),
or as one compiled `lax.scan` per epoch over device-resident data (`jit_scan`).

All variants share keys, data order and arithmetic. Timing is honest: every clock read is
preceded by `block_until_ready()`, compilation is measured apart from the epochs, and the
per-epoch loss and accuracies are computed outside the timed region.
"""

from __future__ import annotations

import csv
import io as _io
import logging
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import io
from .config import NUM_CLASSES, Params, TrainConfig
from .data.preprocess import load_split
from .errors import PipelineError
from .evaluate import loss_and_accuracy
from .model import MLPParams, init_params, loss, one_hot, to_named_arrays
from .runtime import device_info, exclusive, peak_rss_bytes

log = logging.getLogger(__name__)

VARIANTS = ("nojit", "jit", "jit_scan")
Update = Callable[[MLPParams, Any, jax.Array, jax.Array], tuple[MLPParams, Any]]


@dataclass(frozen=True)
class Dataset:
    train_images: np.ndarray
    train_labels: np.ndarray
    test_images: np.ndarray
    test_labels: np.ndarray


def load_dataset(processed_dir: str | Path) -> Dataset:
    train_x, train_y = load_split(processed_dir, "train")
    test_x, test_y = load_split(processed_dir, "test")
    return Dataset(train_x, train_y, test_x, test_y)


def make_optimizer(config: TrainConfig, steps_per_epoch: int) -> optax.GradientTransformation:
    """Plain SGD by default (w - step_size * grad, as in the tutorial); momentum or Adam on request."""
    rate: float | optax.Schedule = config.step_size
    if config.schedule == "cosine":
        rate = optax.cosine_decay_schedule(config.step_size, decay_steps=steps_per_epoch * config.epochs)
    if config.optimizer == "momentum":
        return optax.sgd(rate, momentum=config.momentum)
    if config.optimizer == "adam":
        return optax.adam(rate)
    return optax.sgd(rate)


def make_update(optimizer: optax.GradientTransformation) -> Update:
    """One SGD step: gradients of the tutorial loss, then the optimizer's update."""

    def update(params: MLPParams, opt_state: Any, images: jax.Array, targets: jax.Array) -> tuple[MLPParams, Any]:
        grads = jax.grad(loss)(params, images, targets)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    return update


def epoch_order(count: int, config: TrainConfig, epoch: int) -> np.ndarray | None:
    """The example order of one epoch: None (data order), or a permutation from (shuffle_seed, epoch)."""
    if not config.shuffle:
        return None
    key = jax.random.fold_in(jax.random.PRNGKey(config.shuffle_seed), epoch)
    return np.asarray(jax.random.permutation(key, count))


def batch_bounds(count: int, batch_size: int) -> list[tuple[int, int]]:
    """[start, stop) of every batch; the last one may be partial, as in the tutorial."""
    return [(start, min(start + batch_size, count)) for start in range(0, count, batch_size)]


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """Run `fn`, block on its result, and return (result, seconds)."""
    start = time.perf_counter()
    result = jax.block_until_ready(fn())
    return result, time.perf_counter() - start


class StepLoop:
    """`nojit` and `jit`: a Python loop over host batches, one update call per batch."""

    host_order = True

    def __init__(self, update: Update, compiled: bool):
        self.update = update
        self.compiled = compiled
        self.executables: dict[tuple[int, ...], Any] = {}

    def prepare(self, params: MLPParams, opt_state: Any, data: Dataset, batch_size: int) -> float | None:
        """Compile the step for every batch shape ahead of time (jit); return the seconds it took."""
        if not self.compiled:
            return None
        jitted = jax.jit(self.update)
        sizes = {stop - start for start, stop in batch_bounds(len(data.train_labels), batch_size)}
        start = time.perf_counter()
        for size in sorted(sizes):
            x = jax.ShapeDtypeStruct((size, data.train_images.shape[1]), jnp.float32)
            y = jax.ShapeDtypeStruct((size, NUM_CLASSES), jnp.float32)
            self.executables[(size,)] = jitted.lower(params, opt_state, x, y).compile()
        return time.perf_counter() - start

    def place(self, tree: Any) -> Any:
        return tree

    def step_fn(self, size: int) -> Update:
        return self.executables[(size,)] if self.compiled else self.update

    def run_epoch(self, params: MLPParams, opt_state: Any, data: Dataset, targets: np.ndarray,
                  order: np.ndarray | None, batch_size: int, epoch: int = 1) -> tuple[MLPParams, Any]:
        images = data.train_images
        for start, stop in batch_bounds(len(images), batch_size):
            if order is None:  # contiguous slices are views: no copy, as in the tutorial
                x, y = images[start:stop], targets[start:stop]
            else:
                x, y = images[order[start:stop]], targets[order[start:stop]]
            params, opt_state = self.step_fn(stop - start)(params, opt_state, x, y)
        return params, opt_state


def make_loop(variant: str, optimizer: optax.GradientTransformation, config: TrainConfig) -> Any:
    """The training loop of a variant: StepLoop (nojit, jit) or ScanLoop (jit_scan)."""
    if variant == "jit_scan":
        from .fused import ScanLoop

        return ScanLoop(make_update(optimizer), config)
    return StepLoop(make_update(optimizer), compiled=variant == "jit")


@dataclass
class Run:
    params: MLPParams
    compile_seconds: float | None
    epoch_seconds: list[float]


def run_epochs(variant: str, optimizer: optax.GradientTransformation, params: MLPParams, data: Dataset,
               targets: np.ndarray, config: TrainConfig, epochs: int,
               after_epoch: Callable[[int, float, MLPParams], None] | None = None) -> Run:
    """Compile (timed apart), then run and time `epochs` epochs; `after_epoch` runs untimed."""
    loop = make_loop(variant, optimizer, config)
    opt_state = optimizer.init(params)
    params, opt_state = loop.place(params), loop.place(opt_state)
    jax.block_until_ready((params, opt_state))
    compile_seconds = loop.prepare(params, opt_state, data, config.batch_size)
    epoch_seconds = []
    for epoch in range(1, epochs + 1):
        order = epoch_order(len(data.train_labels), config, epoch) if loop.host_order else None
        jax.block_until_ready((params, opt_state))
        start = time.perf_counter()
        params, opt_state = loop.run_epoch(params, opt_state, data, targets, order, config.batch_size, epoch)
        jax.block_until_ready((params, opt_state))
        seconds = time.perf_counter() - start
        epoch_seconds.append(seconds)
        if after_epoch is not None:
            after_epoch(epoch, seconds, params)
    return Run(params, compile_seconds, epoch_seconds)


def _history_csv(history: list[dict[str, Any]]) -> str:
    out = _io.StringIO()
    fields = ["epoch", "epoch_seconds", "train_loss", "train_accuracy", "test_accuracy"]
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(history)
    return out.getvalue()


def train(params_cfg: Params, variant: str, processed_dir: str | Path, model_path: str | Path,
          metrics_path: str | Path, history_path: str | Path) -> dict[str, Any]:
    """Run the train stage for one variant; write the model, its metrics and its history."""
    if variant not in VARIANTS:
        raise PipelineError(f"unknown variant '{variant}'; use one of {', '.join(VARIANTS)}")
    config = params_cfg.train
    data = load_dataset(processed_dir)
    if data.train_images.shape[1] != params_cfg.model.layer_sizes[0]:
        raise PipelineError(f"{processed_dir}: images have {data.train_images.shape[1]} pixels but"
                            f" model.layer_sizes starts at {params_cfg.model.layer_sizes[0]}; re-run 'preprocess'")
    count = len(data.train_labels)
    steps_per_epoch = len(batch_bounds(count, config.batch_size))
    targets = np.asarray(one_hot(data.train_labels, NUM_CLASSES))
    optimizer = make_optimizer(config, steps_per_epoch)

    def after_epoch(epoch: int, seconds: float, params: MLPParams) -> None:
        train_loss, train_acc = loss_and_accuracy(params, data.train_images, data.train_labels)
        _, test_acc = loss_and_accuracy(params, data.test_images, data.test_labels)
        if not math.isfinite(train_loss):
            raise PipelineError(
                f"train@{variant}: the loss became {train_loss} at epoch {epoch}; lower train.step_size"
                f" (now {config.step_size}) in params.yaml. No model was written"
            )
        history.append({"epoch": epoch, "epoch_seconds": round(seconds, 6), "train_loss": train_loss,
                        "train_accuracy": train_acc, "test_accuracy": test_acc})
        log.info("train@%s epoch %d/%d  %.3f s  loss %.6f  train %.2f%%  test %.2f%%", variant, epoch,
                 config.epochs, seconds, train_loss, 100 * train_acc, 100 * test_acc)

    history: list[dict[str, Any]] = []
    with exclusive(f"train@{variant}") as lock_record:
        params = init_params(params_cfg.model.layer_sizes, jax.random.PRNGKey(params_cfg.model.seed),
                             params_cfg.model.init_scale)
        run = run_epochs(variant, optimizer, params, data, targets, config, config.epochs, after_epoch)
    params, compile_seconds = run.params, run.compile_seconds

    epoch_seconds = [h["epoch_seconds"] for h in history]
    steady = epoch_seconds[1:] or epoch_seconds
    median = statistics.median(steady)
    metrics = {
        "variant": variant,
        "epochs": config.epochs,
        "steps_per_epoch": steps_per_epoch,
        "examples_per_epoch": count,
        "compile_seconds": None if compile_seconds is None else round(compile_seconds, 6),
        "first_epoch_seconds": epoch_seconds[0],
        "epoch_seconds_median": round(median, 6),
        "epoch_seconds_median_note": "median over epochs after the first (the first alone if epochs = 1)",
        "total_train_seconds": round(sum(epoch_seconds), 6),
        "steps_per_second": round(steps_per_epoch / median, 3),
        "examples_per_second": round(count / median, 1),
        "final_train_loss": history[-1]["train_loss"],
        "final_train_accuracy": history[-1]["train_accuracy"],
        "final_test_accuracy": history[-1]["test_accuracy"],
        "peak_rss_bytes": peak_rss_bytes(),
        **device_info(),
        **lock_record,
    }
    metadata = {"variant": variant, "layer_sizes": ",".join(map(str, params_cfg.model.layer_sizes)),
                "params_sha256": params_cfg.digest("model", "train"), "jax_version": jax.__version__}
    io.save_params(model_path, to_named_arrays(params), metadata)
    io.write_json(metrics_path, metrics)
    io.write_text(history_path, _history_csv(history))
    return metrics
