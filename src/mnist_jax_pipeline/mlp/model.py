"""The MLP of the classic JAX tutorial, in plain JAX, `predict` on one example batched with `vmap`:
h_0 = x,  h_{l+1} = relu(W_l h_l + b_l),  logits = W_L h_L + b_L,  log p(y | x) = logits - logsumexp(logits)
loss = -mean(log p * targets)   (mean over batch and classes; targets one-hot, or label-smoothed)
"""

import math
from collections.abc import Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp

from ..foundation.dataset_facts import NUM_CLASSES

MLPParams = list[tuple[jax.Array, jax.Array]]
EVAL_CHUNK = 10_000  # examples per jitted evaluation call


def init_params(
    layer_sizes: Sequence[int],
    key: jax.Array,
    scale: float,
    init: Literal["normal", "he"] = "normal",
    output_init: Literal["same", "zeros"] = "same",
) -> MLPParams:
    """One key per layer split from `key`, then a weight key and a bias key per layer, as in the tutorial.

    "normal": weights and biases `scale * normal` (the tutorial); "he": weights `sqrt(2 / fan_in) * normal`
    from the same weight key, zero biases. `output_init="zeros"` zeroes the output layer."""
    params: MLPParams = []
    for m, n, key_l in zip(layer_sizes[:-1], layer_sizes[1:], jax.random.split(key, len(layer_sizes)), strict=False):
        w_key, b_key = jax.random.split(key_l)
        if init == "he":
            params.append((math.sqrt(2.0 / m) * jax.random.normal(w_key, (n, m)), jnp.zeros((n,))))
        else:
            params.append((scale * jax.random.normal(w_key, (n, m)), scale * jax.random.normal(b_key, (n,))))
    if output_init == "zeros":
        params[-1] = jax.tree.map(jnp.zeros_like, params[-1])
    return params


def predict(params: MLPParams, image: jax.Array) -> jax.Array:
    """Log-probabilities of the classes for one flattened image."""
    activations = image
    for w, b in params[:-1]:
        activations = jnp.maximum(0, jnp.dot(w, activations) + b)
    final_w, final_b = params[-1]
    logits = jnp.dot(final_w, activations) + final_b
    return logits - logsumexp(logits)


batched_predict = jax.vmap(predict, in_axes=(None, 0))


def loss(params: MLPParams, images: jax.Array, targets: jax.Array) -> jax.Array:
    return -jnp.mean(batched_predict(params, images) * targets)


@jax.jit
def _chunk_stats(params: Any, images: jax.Array, labels: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The summed loss terms of the true classes and the predicted classes of one chunk."""
    log_probs = batched_predict(params, images)
    picked = jnp.take_along_axis(log_probs, labels[:, None], axis=1)[:, 0]
    return -jnp.sum(picked), jnp.argmax(log_probs, axis=1)


def predict_classes(params: Any, images: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """The loss (mean over examples and classes) and every example's predicted class, EVAL_CHUNK at a time."""
    total, preds = 0.0, [np.zeros(0, np.int32)]
    for start in range(0, len(images), EVAL_CHUNK):
        loss_sum, pred = _chunk_stats(params, images[start : start + EVAL_CHUNK], labels[start : start + EVAL_CHUNK])
        total += float(loss_sum)
        preds.append(np.asarray(pred))
    return total / (max(len(images), 1) * NUM_CLASSES), np.concatenate(preds)


def loss_and_accuracy(params: Any, images: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """The loss and the accuracy on a whole split (NaN accuracy for an empty split)."""
    value, predicted = predict_classes(params, images, labels)
    return value, float(np.mean(predicted == labels)) if len(labels) else float("nan")
