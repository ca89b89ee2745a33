"""What every training loop shares: its typed interface, the optimizer, the update step, and the
order of the examples in each epoch.

A loop is built with everything it needs (the update, the training arrays, the parameters);
`compile` prepares it, timed apart from the epochs, and `run_epoch` runs one epoch. All loops
see the same examples in the same order and apply the same arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import jax
import numpy as np
import optax
from jax.typing import ArrayLike

from ...artefacts.training import XlaAnalysis
from ...config.params import Params, TrainConfig
from ...foundation.dataset_facts import NUM_CLASSES
from ..model import MLPParams, loss, one_hot


class TrainState(NamedTuple):
    params: MLPParams
    opt_state: optax.OptState


Update = Callable[[TrainState, ArrayLike, ArrayLike], TrainState]


@dataclass(frozen=True)
class LoopInputs:
    """What a loop trains on: the update step, the training arrays and the train parameters."""

    update: Update
    images: np.ndarray  # (N, 784) float32
    targets: np.ndarray  # (N, 10) float32 one-hot, label-smoothed when train.label_smoothing > 0
    config: TrainConfig


class TrainingLoop(Protocol):
    """A variant's way of running the epochs."""

    steps_done: int  # steps the host has run so far (progress.py reads it; nothing waits for it)

    def place(self, state: TrainState) -> TrainState:
        """Put the state where the loop runs it (replicated over the devices, where there are several)."""
        ...

    def compile(self, state: TrainState) -> float | None:
        """Compile ahead of time for this state's shapes; the seconds it took (None: nothing compiled)."""
        ...

    def run_epoch(self, state: TrainState, epoch: int) -> TrainState:
        """Run epoch `epoch` (1-based: it seeds the shuffle) and return the new state."""
        ...

    def analysis(self) -> XlaAnalysis | None:
        """XLA's memory and cost analysis of the compiled step (None: nothing compiled)."""
        ...

    def unit(self) -> str:
        """What one call of `run_call` runs: 'step' (one batch update) or 'epoch'."""
        ...

    def steps_per_call(self) -> int:
        """Training steps one call of `run_call` runs."""
        ...

    def run_call(self, state: TrainState, index: int) -> TrainState:
        """Call `index` (0-based) of the unit the loop repeats, as training runs it: the full batch
        `index` of epoch 1 (wrapping round), or epoch `index + 1` (after `compile`)."""
        ...

    def hlo_text(self) -> str | None:
        """The compiled unit's optimised HLO (None: nothing compiled)."""
        ...


def onecycle_schedule(peak: float, total_steps: int, warmup_fraction: float) -> optax.Schedule:
    """Linear warm-up from 0 to `peak` over the first `warmup_fraction` of `total_steps`, then linear
    decay to 0 at `total_steps`."""
    warmup = warmup_fraction * total_steps
    return optax.join_schedules(
        [optax.linear_schedule(0.0, peak, warmup), optax.linear_schedule(peak, 0.0, total_steps - warmup)], [warmup]
    )


def steps_per_epoch(count: int, batch_size: int) -> int:
    """Batches in one epoch of `count` examples, the last one partial (as batch_bounds cuts them)."""
    return -(-count // batch_size)


def make_optimizer(config: TrainConfig, train_count: int) -> optax.GradientTransformation:
    """Plain SGD by default (w - step_size * grad, as in the tutorial); momentum or Adam on request.

    Adam's b1 is `momentum` and its b2 `beta2`; `nesterov` applies to momentum and Adam.
    """
    rate: float | optax.Schedule = config.step_size
    total_steps = steps_per_epoch(train_count, config.batch_size) * config.epochs
    if config.schedule == "cosine":
        rate = optax.cosine_decay_schedule(config.step_size, decay_steps=total_steps)
    elif config.schedule == "onecycle":
        rate = onecycle_schedule(config.step_size, total_steps, config.warmup_fraction)
    if config.optimizer == "momentum":
        return optax.sgd(rate, momentum=config.momentum, nesterov=config.nesterov)
    if config.optimizer == "adam":
        return optax.adam(rate, b1=config.momentum, b2=config.beta2, nesterov=config.nesterov)
    return optax.sgd(rate)


def make_update(optimizer: optax.GradientTransformation) -> Update:
    """One step: gradients of the tutorial loss, then the optimizer's update."""

    def update(state: TrainState, images: ArrayLike, targets: ArrayLike) -> TrainState:
        grads = jax.grad(loss)(state.params, images, targets)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        return TrainState(optax.apply_updates(state.params, updates), opt_state)

    return update


def epoch_permutation(count: int, config: TrainConfig, epoch: int | jax.Array) -> jax.Array:
    """The example order of a shuffled epoch: a permutation from (shuffle_seed, epoch)."""
    key = jax.random.fold_in(jax.random.PRNGKey(config.shuffle_seed), epoch)
    return jax.random.permutation(key, count)


def epoch_order(count: int, config: TrainConfig, epoch: int) -> np.ndarray | None:
    """The example order of one epoch on the host: None (data order) unless shuffling is on."""
    return np.asarray(epoch_permutation(count, config, epoch)) if config.shuffle else None


def batch_bounds(count: int, batch_size: int) -> list[tuple[int, int]]:
    """[start, stop) of every batch; the last one may be partial, as in the tutorial."""
    return [(start, min(start + batch_size, count)) for start in range(0, count, batch_size)]


def xla_analysis(compiled: jax.stages.Compiled) -> XlaAnalysis | None:
    """XLA's memory analysis and cost analysis of one compiled executable (None where the backend has none)."""
    memory = compiled.memory_analysis()
    if memory is None:
        return None
    costs = compiled.cost_analysis() or {}
    if isinstance(costs, list):  # older JAX returns one dict per device
        costs = costs[0] if costs else {}
    peak = getattr(memory, "peak_memory_in_bytes", None)
    return XlaAnalysis(
        argument_bytes=int(memory.argument_size_in_bytes),
        output_bytes=int(memory.output_size_in_bytes),
        alias_bytes=int(memory.alias_size_in_bytes),
        temp_bytes=int(memory.temp_size_in_bytes),
        generated_code_bytes=int(memory.generated_code_size_in_bytes),
        peak_bytes=None if peak is None else int(peak),
        flops=float(costs["flops"]) if "flops" in costs else None,
        bytes_accessed=float(costs["bytes accessed"]) if "bytes accessed" in costs else None,
    )


def targets_of(labels: np.ndarray, config: TrainConfig) -> jax.Array:
    """What the loss compares predictions with: one-hot rows, label-smoothed as train.label_smoothing says."""
    return optax.smooth_labels(one_hot(labels, NUM_CLASSES), config.label_smoothing)


def loop_inputs(params: Params, images: np.ndarray, labels: np.ndarray) -> LoopInputs:
    """The update step and training arrays every loop is built with."""
    update = make_update(make_optimizer(params.train, len(labels)))
    return LoopInputs(update, images, np.asarray(targets_of(labels, params.train)), params.train)
