"""`nojit` and `jit`: the tutorial's Python loop over host batches, one update call per batch.

Without jit every operation of the update dispatches on its own; with jit the update is
compiled ahead of time once per batch shape (the full batch, and a partial last one).
"""

from __future__ import annotations

import time
from typing import Any

import jax
import jax.numpy as jnp

from ...artefacts.training import XlaAnalysis
from ...foundation.variants import Variant
from .base import LoopInputs, TrainState, Update, batch_bounds, epoch_order, xla_analysis


class StepLoop:
    """One update call per batch, op by op (`jit=False`) or through a compiled step (`jit=True`)."""

    @classmethod
    def for_variant(cls, variant: Variant, inputs: LoopInputs) -> StepLoop:
        """The loop of `variant`: its steps compiled when the variant says `jit`."""
        return cls(inputs, jit=variant.jit)

    def __init__(self, inputs: LoopInputs, *, jit: bool):
        self.inputs = inputs
        self.jit = jit
        self.bounds = batch_bounds(len(inputs.images), inputs.config.batch_size)
        self.executables: dict[int, Any] = {}  # batch size -> compiled step
        self.steps_done = 0

    def place(self, state: TrainState) -> TrainState:
        return state

    def compile(self, state: TrainState) -> float | None:
        if not self.jit:
            return None
        jitted = jax.jit(self.inputs.update)
        pixels, classes = self.inputs.images.shape[1], self.inputs.targets.shape[1]
        start = time.perf_counter()
        for size in sorted({stop - start for start, stop in self.bounds}, reverse=True):
            x = jax.ShapeDtypeStruct((size, pixels), jnp.float32)
            y = jax.ShapeDtypeStruct((size, classes), jnp.float32)
            self.executables[size] = jitted.lower(state, x, y).compile()
        return time.perf_counter() - start

    def _step(self, size: int) -> Update:
        return self.executables[size] if self.jit else self.inputs.update

    def run_epoch(self, state: TrainState, epoch: int) -> TrainState:
        images, targets = self.inputs.images, self.inputs.targets
        order = epoch_order(len(images), self.inputs.config, epoch)
        for start, stop in self.bounds:
            if order is None:  # contiguous slices are views: no copy, as in the tutorial
                x, y = images[start:stop], targets[start:stop]
            else:
                x, y = images[order[start:stop]], targets[order[start:stop]]
            state = self._step(stop - start)(state, x, y)
            self.steps_done += 1
        return state

    def analysis(self) -> XlaAnalysis | None:
        """The analysis of the full-batch step (the first compiled), if compiled."""
        return xla_analysis(next(iter(self.executables.values()))) if self.executables else None

    def unit(self) -> str:
        return "step"

    def steps_per_call(self) -> int:
        return 1

    def run_call(self, state: TrainState, index: int) -> TrainState:
        """One update on a full batch of epoch 1, in data order (the partial last batch is left out)."""
        size = max(stop - start for start, stop in self.bounds)
        full = [(start, stop) for start, stop in self.bounds if stop - start == size]
        start, stop = full[index % len(full)]
        return self._step(size)(state, self.inputs.images[start:stop], self.inputs.targets[start:stop])

    def hlo_text(self) -> str | None:
        return next(iter(self.executables.values())).as_text() if self.executables else None
