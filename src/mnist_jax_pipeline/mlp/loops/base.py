"""What every training loop shares: its interface, the optimizer, the update step and each epoch's example order.
A loop is built with everything it trains on, `compile` prepares it apart from the epochs' clock and `run_epoch`
runs one epoch: every loop sees the same examples in the same order and applies the same arithmetic."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import jax
import numpy as np
import optax
from jax.typing import ArrayLike

from ...artefacts.training import XlaAnalysis
from ...config.params import Params, TrainConfig, steps_per_epoch
from ...foundation.dataset_facts import NUM_CLASSES
from ..model import MLPParams, loss


class TrainState(NamedTuple):
    params: MLPParams
    opt_state: optax.OptState


Update = Callable[[TrainState, ArrayLike, ArrayLike], TrainState]


@dataclass(frozen=True)
class LoopInputs:
    """The update step, the images (N, 784) and targets (N, 10) float32 it trains on, and the train parameters."""

    update: Update
    images: np.ndarray
    targets: np.ndarray  # one-hot, label-smoothed when train.label_smoothing > 0
    config: TrainConfig


class TrainingLoop(Protocol):
    """A variant's way of running the epochs; the loops subclass it for `place`, `analysis` and `hlo_text`.
    `place` puts the state where the loop runs it (here as it is; replicated over several devices); `compile` compiles
    ahead of time, its seconds (None: nothing compiled); `run_epoch` runs epoch `epoch` (1-based: it seeds the shuffle).
    `run_call` runs call `index` of the variant's `call_unit` as training does (full batch `index` of epoch 1, wrapping
    round, or epoch `index + 1`) and `steps_per_call` counts its steps; `analysis` and `hlo_text` are XLA's account of
    `compiled` (None: nothing compiled). The progress bar reads `steps_done`, the steps the host has run so far; nothing
    waits for it."""

    steps_done: int
    compiled: Any  # the compiled unit (a jax.stages.Compiled), None until compiled

    def compile(self, state: TrainState) -> float | None: ...
    def run_epoch(self, state: TrainState, epoch: int) -> TrainState: ...
    def steps_per_call(self) -> int: ...
    def run_call(self, state: TrainState, index: int) -> TrainState: ...

    def place(self, state: TrainState) -> TrainState:
        return state

    def analysis(self) -> XlaAnalysis | None:
        """XLA's memory and cost analysis of the compiled unit (None: none compiled, or the backend has none)."""
        if self.compiled is None or (memory := self.compiled.memory_analysis()) is None:
            return None
        costs = self.compiled.cost_analysis() or {}
        return XlaAnalysis(
            argument_bytes=memory.argument_size_in_bytes,
            output_bytes=memory.output_size_in_bytes,
            alias_bytes=memory.alias_size_in_bytes,
            temp_bytes=memory.temp_size_in_bytes,
            generated_code_bytes=memory.generated_code_size_in_bytes,
            peak_bytes=memory.peak_memory_in_bytes,
            flops=costs.get("flops"),
            bytes_accessed=costs.get("bytes accessed"),
        )

    def hlo_text(self) -> str | None:
        return None if self.compiled is None else self.compiled.as_text()


def batch_bounds(count: int, batch_size: int) -> list[tuple[int, int]]:
    """[start, stop) of every batch; the last one may be partial, as in the tutorial."""
    return [(start, min(start + batch_size, count)) for start in range(0, count, batch_size)]


def onecycle_schedule(peak: float, total_steps: int, warmup_fraction: float) -> optax.Schedule:
    """Linear from 0 to `peak` over the first `warmup_fraction` of `total_steps`, then linear to 0 at the end."""
    warmup = warmup_fraction * total_steps
    return optax.join_schedules(
        [optax.linear_schedule(0.0, peak, warmup), optax.linear_schedule(peak, 0.0, total_steps - warmup)], [warmup]
    )


def make_optimizer(config: TrainConfig, train_count: int) -> optax.GradientTransformation:
    """Plain SGD by default (w - step_size * grad, as in the tutorial), momentum or Adam (b1 `momentum`, b2 `beta2`)
    on request, `nesterov` for both; the rate constant, or scheduled over every step of training."""
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
    """One step: the gradients of the loss, then the optimizer's update."""

    def update(state: TrainState, images: ArrayLike, targets: ArrayLike) -> TrainState:
        grads = jax.grad(loss)(state.params, images, targets)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        return TrainState(optax.apply_updates(state.params, updates), opt_state)

    return update


def epoch_permutation(count: int, config: TrainConfig, epoch: int | jax.Array) -> jax.Array:
    """The example order of a shuffled epoch: a permutation from (shuffle_seed, epoch)."""
    return jax.random.permutation(jax.random.fold_in(jax.random.PRNGKey(config.shuffle_seed), epoch), count)


def epoch_order(count: int, config: TrainConfig, epoch: int) -> np.ndarray | None:
    """The example order of one epoch on the host: None (data order) unless shuffling is on."""
    return np.asarray(epoch_permutation(count, config, epoch)) if config.shuffle else None


def targets_of(labels: np.ndarray, config: TrainConfig) -> jax.Array:
    """One-hot rows of the labels, label-smoothed as train.label_smoothing says."""
    return optax.smooth_labels(jax.nn.one_hot(labels, NUM_CLASSES), config.label_smoothing)


def loop_inputs(params: Params, images: np.ndarray, labels: np.ndarray) -> LoopInputs:
    """The update step and training arrays every loop is built with."""
    update = make_update(make_optimizer(params.train, len(labels)))
    return LoopInputs(update, images, np.asarray(targets_of(labels, params.train)), params.train)
