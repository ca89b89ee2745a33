"""`nojit` and `jit`: the tutorial's Python loop over host batches, one update call per batch, op by op
(`jit=False`) or through the update compiled ahead of time once per batch size (the full and a partial last)."""

import time
from typing import Any

import jax

from .base import LoopInputs, TrainingLoop, TrainState, Update, batch_bounds, epoch_order


class StepLoop(TrainingLoop):
    """One update call per batch, its steps compiled when `jit`."""

    def __init__(self, inputs: LoopInputs, *, jit: bool):
        self.inputs, self.jit = inputs, jit
        self.bounds = batch_bounds(len(inputs.images), inputs.config.batch_size)
        self.executables: dict[int, Any] = {}  # batch size -> compiled step
        self.compiled: Any = None  # the full-batch step, once compiled
        self.steps_done = 0

    def compile(self, state: TrainState) -> float | None:
        if not self.jit:
            return None
        jitted = jax.jit(self.inputs.update)
        images, targets = self.inputs.images, self.inputs.targets
        start = time.perf_counter()
        for size in sorted({stop - start for start, stop in self.bounds}, reverse=True):
            self.executables[size] = jitted.lower(state, images[:size], targets[:size]).compile()
        self.compiled = self.executables[self.bounds[0][1]]
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

    def steps_per_call(self) -> int:
        return 1

    def run_call(self, state: TrainState, index: int) -> TrainState:
        """One update on a full batch of epoch 1, in data order (a partial last batch is left out)."""
        start, stop = self.bounds[index % max(len(self.inputs.images) // self.inputs.config.batch_size, 1)]
        return self._step(stop - start)(state, self.inputs.images[start:stop], self.inputs.targets[start:stop])
