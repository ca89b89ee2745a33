"""`jit_scan`: the training set placed on the device once, each epoch one compiled call.

The epoch is a `lax.scan` over the full batches (plus one step for a partial last batch,
as in the other variants), with parameters and optimizer state donated. Batch slicing,
and shuffling when it is on, happen on the device; the permutation is the same
`jax.random.permutation(fold_in(PRNGKey(shuffle_seed), epoch), n)` the other variants use.
With several local devices the batch is sharded across them along a `data` mesh axis and
XLA inserts the gradient all-reduce; parameters stay replicated.
"""

from __future__ import annotations

import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .config import NUM_CLASSES, TrainConfig
from .model import MLPParams, one_hot

Update = Any


class ScanLoop:
    """One compiled, donated `lax.scan` per epoch over device-resident data."""

    host_order = False

    def __init__(self, update: Update, config: TrainConfig, devices: list[Any] | None = None):
        self.update = update
        self.config = config
        self.devices = devices or jax.local_devices()
        self.mesh = Mesh(np.array(self.devices), ("data",)) if len(self.devices) > 1 else None
        self.executable: Any = None
        self.images: jax.Array | None = None
        self.targets: jax.Array | None = None

    def _replicated(self) -> NamedSharding | None:
        return NamedSharding(self.mesh, P()) if self.mesh else None

    def _shard_batch(self, array: jax.Array) -> jax.Array:
        """Split a batch across the devices (when it divides evenly)."""
        if self.mesh is None or array.shape[0] % len(self.devices):
            return array
        return jax.lax.with_sharding_constraint(array, NamedSharding(self.mesh, P("data")))

    def _epoch(self, params: MLPParams, opt_state: Any, images: jax.Array, targets: jax.Array,
               epoch: jax.Array) -> tuple[MLPParams, Any]:
        count, batch = images.shape[0], self.config.batch_size
        full, rest = divmod(count, batch)
        order = None
        if self.config.shuffle:
            key = jax.random.fold_in(jax.random.PRNGKey(self.config.shuffle_seed), epoch)
            order = jax.random.permutation(key, count)

        def take(start: jax.Array | int, size: int) -> tuple[jax.Array, jax.Array]:
            if order is None:
                x = jax.lax.dynamic_slice_in_dim(images, start, size)
                y = jax.lax.dynamic_slice_in_dim(targets, start, size)
            else:
                idx = jax.lax.dynamic_slice_in_dim(order, start, size)
                x, y = images[idx], targets[idx]
            return self._shard_batch(x), self._shard_batch(y)

        def body(carry: tuple[MLPParams, Any], step: jax.Array) -> tuple[tuple[MLPParams, Any], None]:
            x, y = take(step * batch, batch)
            return self.update(*carry, x, y), None

        (params, opt_state), _ = jax.lax.scan(body, (params, opt_state), jnp.arange(full))
        if rest:
            x, y = take(full * batch, rest)
            params, opt_state = self.update(params, opt_state, x, y)
        return params, opt_state

    def prepare(self, params: MLPParams, opt_state: Any, data: Any, batch_size: int) -> float:
        """Put the training set on the device(s) and compile the epoch; return compile seconds."""
        sharding = self._replicated()
        self.images = jax.device_put(data.train_images, sharding)
        self.targets = jax.device_put(one_hot(data.train_labels, NUM_CLASSES), sharding)
        jax.block_until_ready((self.images, self.targets))
        epoch_fn = jax.jit(self._epoch, donate_argnums=(0, 1))
        start = time.perf_counter()
        self.executable = epoch_fn.lower(params, opt_state, self.images, self.targets,
                                         jnp.int32(1)).compile()
        return time.perf_counter() - start

    def place(self, tree: Any) -> Any:
        """Replicate parameters / optimizer state on the mesh (no-op on one device)."""
        sharding = self._replicated()
        return jax.device_put(tree, sharding) if sharding else tree

    def run_epoch(self, params: MLPParams, opt_state: Any, data: Any, targets: Any,
                  order: Any, batch_size: int, epoch: int = 1) -> tuple[MLPParams, Any]:
        return self.executable(params, opt_state, self.images, self.targets, jnp.int32(epoch))
