"""`jit_scan`: the training set placed on the device once, each epoch one compiled call.

The epoch is a `lax.scan` over the full batches (plus one step for a partial last batch, as in
the other variants), with the state donated. Batch slicing, and shuffling when it is on, happen
on the device, with the same permutation the other variants use. With several local devices
the batch is sharded across them along a `data` mesh axis and XLA inserts the gradient
all-reduce; the state stays replicated.
"""

from __future__ import annotations

import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ...artefacts.training import XlaAnalysis
from ...foundation.variants import Variant
from .base import LoopInputs, TrainState, epoch_permutation, xla_analysis


class ScanLoop:
    """One compiled, donated `lax.scan` per epoch over device-resident data."""

    steps_done = 0  # an epoch is one call: its steps show when the epoch has been awaited

    @classmethod
    def for_variant(cls, variant: Variant, inputs: LoopInputs) -> ScanLoop:
        """The loop of `variant` (always compiled: the scan is one program), on every local device."""
        return cls(inputs)

    def __init__(self, inputs: LoopInputs, devices: list[jax.Device] | None = None):
        self.inputs = inputs
        self.devices = devices or jax.local_devices()
        self.mesh = Mesh(np.array(self.devices), ("data",)) if len(self.devices) > 1 else None
        replicated = NamedSharding(self.mesh, P()) if self.mesh else None
        self.images = jax.device_put(inputs.images, replicated)
        self.targets = jax.device_put(inputs.targets, replicated)
        self.executable: Any = None

    def _shard_batch(self, array: jax.Array) -> jax.Array:
        """Split a batch across the devices (when it divides evenly)."""
        if self.mesh is None or array.shape[0] % len(self.devices):
            return array
        return jax.lax.with_sharding_constraint(array, NamedSharding(self.mesh, P("data")))

    def _epoch(self, state: TrainState, images: jax.Array, targets: jax.Array, epoch: jax.Array) -> TrainState:
        config, update = self.inputs.config, self.inputs.update
        count, batch = images.shape[0], config.batch_size
        full, rest = divmod(count, batch)
        order = epoch_permutation(count, config, epoch) if config.shuffle else None

        def take(start: jax.Array | int, size: int) -> tuple[jax.Array, jax.Array]:
            if order is None:
                x = jax.lax.dynamic_slice_in_dim(images, start, size)
                y = jax.lax.dynamic_slice_in_dim(targets, start, size)
            else:
                idx = jax.lax.dynamic_slice_in_dim(order, start, size)
                x, y = images[idx], targets[idx]
            return self._shard_batch(x), self._shard_batch(y)

        def body(carry: TrainState, step: jax.Array) -> tuple[TrainState, None]:
            return update(carry, *take(step * batch, batch)), None

        if full:  # a training split smaller than one batch has no full batch to scan
            state, _ = jax.lax.scan(body, state, jnp.arange(full))
        if rest:
            state = update(state, *take(full * batch, rest))
        return state

    def place(self, state: TrainState) -> TrainState:
        """Replicate the state on the mesh (no-op on one device)."""
        return jax.device_put(state, NamedSharding(self.mesh, P())) if self.mesh else state

    def compile(self, state: TrainState) -> float:
        jax.block_until_ready((self.images, self.targets))
        epoch_fn = jax.jit(self._epoch, donate_argnums=(0,))
        start = time.perf_counter()
        self.executable = epoch_fn.lower(state, self.images, self.targets, jnp.int32(1)).compile()
        return time.perf_counter() - start

    def run_epoch(self, state: TrainState, epoch: int) -> TrainState:
        return self.executable(state, self.images, self.targets, jnp.int32(epoch))

    def analysis(self) -> XlaAnalysis | None:
        return xla_analysis(self.executable) if self.executable is not None else None

    def unit(self) -> str:
        return "epoch"

    def steps_per_call(self) -> int:
        return -(-self.images.shape[0] // self.inputs.config.batch_size)

    def run_call(self, state: TrainState, index: int) -> TrainState:
        return self.run_epoch(state, index + 1)

    def hlo_text(self) -> str | None:
        return self.executable.as_text() if self.executable is not None else None
