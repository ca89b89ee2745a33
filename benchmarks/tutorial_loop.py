"""The JAX tutorial's own training loop, as its baseline: the figure every variant's speed-up is taken against.

Source: "Training a Simple Neural Network, with tensorflow/datasets Data Loading", the JAX documentation,
docs/notebooks/neural_network_with_tfds_data.md in github.com/jax-ml/jax (Copyright 2018 The JAX Authors,
Apache License 2.0). The definitions below are the tutorial's, kept as it writes them: parameters a list of
(w, b) pairs drawn scale * normal; `predict` for one image with relu and logsumexp, batched with `vmap`;
`loss` = -mean(preds * targets); `update` a `@jit` function taking the gradient and returning
[(w - step_size * dw, b - step_size * db), ...]; the epoch a Python loop that reshapes each batch with
`jnp.reshape`, one-hot encodes its labels and calls `update`. Only the data source differs: the batches are
slices of the uint8 images and labels in memory, in file order, where the tutorial iterates over a
`tfds` pipeline (as_supervised, batch(batch_size).prefetch(1)) that gives the same uint8 arrays, so data
loading is timed in no loop. The tutorial's global hyper-parameters are the arguments of `make_update`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import jax.numpy as jnp
import numpy as np
from jax import grad, jit, random, vmap
from jax.scipy.special import logsumexp

Params = list[tuple[jnp.ndarray, jnp.ndarray]]


# A helper function to randomly initialize weights and biases
# for a dense neural network layer
def random_layer_params(m, n, key, scale=1e-2):
    w_key, b_key = random.split(key)
    return scale * random.normal(w_key, (n, m)), scale * random.normal(b_key, (n,))


# Initialize all layers for a fully-connected neural network with sizes "sizes"
def init_network_params(sizes, key):
    keys = random.split(key, len(sizes))
    return [random_layer_params(m, n, k) for m, n, k in zip(sizes[:-1], sizes[1:], keys, strict=False)]


def relu(x):
    return jnp.maximum(0, x)


def predict(params, image):
    # per-example predictions
    activations = image
    for w, b in params[:-1]:
        outputs = jnp.dot(w, activations) + b
        activations = relu(outputs)

    final_w, final_b = params[-1]
    logits = jnp.dot(final_w, activations) + final_b
    return logits - logsumexp(logits)


batched_predict = vmap(predict, in_axes=(None, 0))


def one_hot(x, k, dtype=jnp.float32):
    """Create a one-hot encoding of x of size k."""
    return jnp.array(x[:, None] == jnp.arange(k), dtype)


def loss(params, images, targets):
    preds = batched_predict(params, images)
    return -jnp.mean(preds * targets)


def make_update(step_size: float) -> Callable[[Params, jnp.ndarray, jnp.ndarray], Params]:
    """The tutorial's `update`, with its global `step_size` bound here."""

    @jit
    def update(params, x, y):
        grads = grad(loss)(params, x, y)
        return [(w - step_size * dw, b - step_size * db) for (w, b), (dw, db) in zip(params, grads, strict=False)]

    return update


def train_batches(images: np.ndarray, labels: np.ndarray, batch_size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The batches the tutorial's `get_train_batches()` yields: uint8 images (b, 28, 28, 1) and integer labels,
    in order, the last one partial."""
    for start in range(0, len(labels), batch_size):
        yield images[start : start + batch_size], labels[start : start + batch_size]


class TutorialLoop:
    """The tutorial's epoch: `for x, y in get_train_batches(): ...; params = update(params, x, y)`. It compiles
    `update` in its first epoch, as the tutorial does (one shape for the full batches, one for the last)."""

    def __init__(
        self,
        images: np.ndarray,
        labels: np.ndarray,
        layer_sizes: list[int],
        batch_size: int,
        step_size: float,
        seed: int = 0,
    ):
        self.images = images.reshape(len(images), 28, 28, 1)  # uint8, as tfds gives them
        self.labels = labels
        self.batch_size = batch_size
        self.num_pixels = int(np.prod(self.images.shape[1:]))
        self.num_labels = layer_sizes[-1]
        self.update = make_update(step_size)
        self.params = init_network_params(layer_sizes, random.PRNGKey(seed))

    def run_epoch(self) -> Params:
        params = self.params
        for x, y in train_batches(self.images, self.labels, self.batch_size):
            params = self.update(params, jnp.reshape(x, (len(x), self.num_pixels)), one_hot(y, self.num_labels))
        self.params = params
        return params
