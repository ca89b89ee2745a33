"""The MLP of the classic JAX tutorial, in plain JAX.

    h_0 = x,  h_{l+1} = relu(W_l h_l + b_l),  logits = W_L h_L + b_L
    log p(y | x) = logits - logsumexp(logits)
    loss = -mean(log p * one_hot(y))   (mean over batch *and* classes, as in the tutorial)

`predict` works on one example and is batched with `vmap`. Beyond the tutorial (parameters
whose defaults keep it exact): He-normal initialisation, a zero-initialised output layer, and
label smoothing, which only changes the targets the loss is taken against.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from ..foundation.dataset_facts import NUM_CLASSES

Layer = tuple[jax.Array, jax.Array]
MLPParams = list[Layer]
EVAL_CHUNK = 10_000  # examples per jitted evaluation call


def init_layer(in_size: int, out_size: int, key: jax.Array, scale: float) -> Layer:
    """Weights (out, in) and biases (out,) drawn `scale * normal`."""
    w_key, b_key = jax.random.split(key)
    return (
        scale * jax.random.normal(w_key, (out_size, in_size)),
        scale * jax.random.normal(b_key, (out_size,)),
    )


def init_he_layer(in_size: int, out_size: int, key: jax.Array) -> Layer:
    """He-normal weights N(0, 2 / in_size) from the same weight key as `init_layer`; zero biases."""
    w_key, _ = jax.random.split(key)
    scale = math.sqrt(2.0 / in_size)
    return scale * jax.random.normal(w_key, (out_size, in_size)), jnp.zeros((out_size,))


def init_params(
    layer_sizes: Sequence[int],
    key: jax.Array,
    scale: float,
    init: Literal["normal", "he"] = "normal",
    output_init: Literal["same", "zeros"] = "same",
) -> MLPParams:
    """One key per layer, split once from `key`, as in the tutorial.

    `init="normal"` draws every weight and bias `scale * normal` (the tutorial); `"he"` draws
    weights `sqrt(2 / fan_in) * normal` and sets biases to zero (`scale` unused).
    `output_init="zeros"` then sets the output layer's weights and biases to zero.
    """
    keys = jax.random.split(key, len(layer_sizes))
    pairs = zip(layer_sizes[:-1], layer_sizes[1:], keys, strict=False)
    if init == "he":
        params = [init_he_layer(m, n, k) for m, n, k in pairs]
    else:
        params = [init_layer(m, n, k, scale) for m, n, k in pairs]
    if output_init == "zeros":
        w, b = params[-1]
        params[-1] = (jnp.zeros_like(w), jnp.zeros_like(b))
    return params


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
    """The tutorial's loss: -mean(log-probabilities * targets), one-hot or smoothed (optax.smooth_labels)."""
    preds = batched_predict(params, images)
    return -jnp.mean(preds * targets)


@jax.jit
def _chunk_stats(params: Any, images: jax.Array, labels: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Summed tutorial loss terms and predicted classes for one chunk."""
    log_probs = batched_predict(params, images)
    picked = jnp.take_along_axis(log_probs, labels[:, None], axis=1)[:, 0]
    return -jnp.sum(picked), jnp.argmax(log_probs, axis=1)


def predict_classes(params: Any, images: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """Tutorial loss (mean over examples and classes) and the predicted class of every example."""
    total, preds = 0.0, []
    for start in range(0, len(images), EVAL_CHUNK):
        chunk = slice(start, start + EVAL_CHUNK)
        loss_sum, pred = _chunk_stats(params, images[chunk], labels[chunk])
        total += float(loss_sum)
        preds.append(np.asarray(pred))
    predicted = np.concatenate(preds) if preds else np.zeros(0, np.int32)
    return total / (max(len(images), 1) * NUM_CLASSES), predicted


def loss_and_accuracy(params: Any, images: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """Tutorial loss and accuracy on a whole split (NaN accuracy for an empty split)."""
    value, predicted = predict_classes(params, images, labels)
    accuracy = float(np.mean(predicted == labels)) if len(labels) else float("nan")
    return value, accuracy
