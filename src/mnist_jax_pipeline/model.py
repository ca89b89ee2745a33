"""The MLP of the classic JAX tutorial, in plain JAX.

    h_0 = x,  h_{l+1} = relu(W_l h_l + b_l),  logits = W_L h_L + b_L
    log p(y | x) = logits - logsumexp(logits)
    loss = -mean(log p * one_hot(y))   (mean over batch *and* classes, as in the tutorial)

`predict` works on one example and is batched with `vmap`.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

Layer = tuple[jax.Array, jax.Array]
MLPParams = list[Layer]


def init_layer(in_size: int, out_size: int, key: jax.Array, scale: float) -> Layer:
    """Weights (out, in) and biases (out,) drawn `scale * normal`."""
    w_key, b_key = jax.random.split(key)
    return (
        scale * jax.random.normal(w_key, (out_size, in_size)),
        scale * jax.random.normal(b_key, (out_size,)),
    )


def init_params(layer_sizes: Sequence[int], key: jax.Array, scale: float) -> MLPParams:
    """One key per layer, split once from `key`, as in the tutorial."""
    keys = jax.random.split(key, len(layer_sizes))
    return [
        init_layer(m, n, k, scale)
        for m, n, k in zip(layer_sizes[:-1], layer_sizes[1:], keys, strict=False)
    ]


def relu(x: jax.Array) -> jax.Array:
    return jnp.maximum(0, x)


def predict(params: MLPParams, image: jax.Array) -> jax.Array:
    """Log-probabilities of the classes for one flattened image."""
    activations = image
    for w, b in params[:-1]:
        activations = relu(jnp.dot(w, activations) + b)
    final_w, final_b = params[-1]
    logits = jnp.dot(final_w, activations) + final_b
    return logits - logsumexp(logits)


batched_predict = jax.vmap(predict, in_axes=(None, 0))


def one_hot(labels: np.ndarray | jax.Array, num_classes: int, dtype: jnp.dtype = jnp.float32) -> jax.Array:
    """One-hot rows for integer labels."""
    return jnp.array(labels[:, None] == jnp.arange(num_classes), dtype)


def loss(params: MLPParams, images: jax.Array, targets: jax.Array) -> jax.Array:
    """The tutorial's loss: -mean(log-probabilities * one-hot targets)."""
    preds = batched_predict(params, images)
    return -jnp.mean(preds * targets)


def to_named_arrays(params: MLPParams) -> dict[str, np.ndarray]:
    """Name each array for the model file: layer{i}.weight / layer{i}.bias."""
    named = {}
    for i, (w, b) in enumerate(params):
        named[f"layer{i}.weight"] = np.asarray(w)
        named[f"layer{i}.bias"] = np.asarray(b)
    return named


def from_named_arrays(named: dict[str, np.ndarray]) -> MLPParams:
    """Inverse of `to_named_arrays`."""
    count = len(named) // 2
    return [(jnp.asarray(named[f"layer{i}.weight"]), jnp.asarray(named[f"layer{i}.bias"])) for i in range(count)]


def layer_sizes_of(params: MLPParams) -> list[int]:
    """[in, hidden..., out] read off the weight shapes."""
    return [int(params[0][0].shape[1])] + [int(w.shape[0]) for w, _ in params]
