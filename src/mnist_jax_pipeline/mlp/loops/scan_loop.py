"""`jit_scan`: the training set placed on the device once, each epoch one compiled, donated call: a `lax.scan` over
the full batches (plus a step for a partial last batch), batches sliced and shuffled on the device with the other
variants' permutation. With several local devices each batch is sharded along a `data` mesh axis (XLA inserts the
gradient all-reduce) and the state is replicated."""

import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ...config.params import steps_per_epoch
from .base import LoopInputs, TrainingLoop, TrainState, epoch_permutation


class ScanLoop(TrainingLoop):
    """One compiled, donated `lax.scan` per epoch over device-resident data (`jit` is always true)."""

    steps_done = 0  # an epoch is one call: its steps show when the epoch has been awaited

    def __init__(self, inputs: LoopInputs, *, jit: bool = True):
        self.inputs = inputs
        devices = jax.local_devices()
        self.mesh = Mesh(np.array(devices), ("data",)) if len(devices) > 1 else None
        replicated = NamedSharding(self.mesh, P()) if self.mesh else None
        self.images, self.targets = jax.device_put((inputs.images, inputs.targets), replicated)
        self.compiled: Any = None

    def _shard_batch(self, array: jax.Array) -> jax.Array:
        """Split a batch across the devices (when it divides evenly)."""
        if self.mesh is None or array.shape[0] % self.mesh.size:
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
        return jax.device_put(state, NamedSharding(self.mesh, P())) if self.mesh else state

    def compile(self, state: TrainState) -> float:
        jax.block_until_ready((self.images, self.targets))
        epoch_fn = jax.jit(self._epoch, donate_argnums=(0,))
        start = time.perf_counter()
        self.compiled = epoch_fn.lower(state, self.images, self.targets, jnp.int32(1)).compile()
        return time.perf_counter() - start

    def run_epoch(self, state: TrainState, epoch: int) -> TrainState:
        return self.compiled(state, self.images, self.targets, jnp.int32(epoch))

    def steps_per_call(self) -> int:
        return steps_per_epoch(len(self.inputs.images), self.inputs.config.batch_size)

    def run_call(self, state: TrainState, index: int) -> TrainState:
        return self.run_epoch(state, index + 1)
