"""The tutorial MLP: sizes, initialisation, prediction and loss, checked against NumPy; the model file."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mnist_jax_pipeline.artefacts.model_file import ModelMetadata, layer_sizes_of, load_model, save_model
from mnist_jax_pipeline.config.params import parameter_count
from mnist_jax_pipeline.foundation.errors import PipelineError
from mnist_jax_pipeline.mlp.loops.base import loop_inputs
from mnist_jax_pipeline.mlp.model import batched_predict, init_params, loss, loss_and_accuracy

SIZES = [784, 512, 512, 10]


def test_parameter_count_and_shapes():
    params = init_params(SIZES, jax.random.PRNGKey(0), 0.01)
    assert [w.shape for w, _ in params] == [(512, 784), (512, 512), (10, 512)]
    assert sum(w.size + b.size for w, b in params) == 669_706 == parameter_count(tuple(SIZES))
    assert layer_sizes_of(params) == SIZES


def test_initialisation_is_scale_times_normal_and_reproducible():
    a = init_params(SIZES, jax.random.PRNGKey(0), 0.01)
    b = init_params(SIZES, jax.random.PRNGKey(0), 0.01)
    assert all(np.array_equal(wa, wb) for (wa, _), (wb, _) in zip(a, b, strict=True))
    assert abs(float(jnp.std(a[0][0])) - 0.01) < 2e-4
    c = init_params(SIZES, jax.random.PRNGKey(1), 0.01)
    assert not np.array_equal(a[0][0], c[0][0])


def test_he_initialisation_has_std_sqrt_2_over_fan_in_and_zero_biases():
    params = init_params(SIZES, jax.random.PRNGKey(0), 0.01, init="he")
    for (w, b), fan_in in zip(params, SIZES[:-1], strict=True):
        assert abs(float(jnp.std(w)) / np.sqrt(2 / fan_in) - 1) < 0.05  # 5,120 draws or more per layer
        assert abs(float(jnp.mean(w))) < 0.05 * np.sqrt(2 / fan_in)
        assert not np.any(np.asarray(b))
    # the same weight keys as the tutorial's draw, rescaled: init_scale is unused
    tutorial = init_params(SIZES, jax.random.PRNGKey(0), 1.0)
    for (w, _), (wt, _), fan_in in zip(params, tutorial, SIZES[:-1], strict=True):
        np.testing.assert_allclose(w, np.sqrt(2 / fan_in) * np.asarray(wt), rtol=1e-6)
    assert all(
        np.array_equal(w, v)
        for (w, _), (v, _) in zip(params, init_params(SIZES, jax.random.PRNGKey(0), 5.0, init="he"), strict=True)
    )


@pytest.mark.parametrize("init", ["normal", "he"])
def test_zero_output_layer_leaves_the_other_layers_alone(init):
    same = init_params(SIZES, jax.random.PRNGKey(0), 0.01, init=init)
    zeros = init_params(SIZES, jax.random.PRNGKey(0), 0.01, init=init, output_init="zeros")
    (w, b), (w_same, _) = zeros[-1], same[-1]
    assert w.shape == w_same.shape and not np.any(np.asarray(w)) and not np.any(np.asarray(b))
    for (wa, ba), (wb, bb) in zip(zeros[:-1], same[:-1], strict=True):
        assert np.array_equal(wa, wb) and np.array_equal(ba, bb)
    x = np.random.default_rng(0).random((3, 784), dtype=np.float32)
    np.testing.assert_allclose(batched_predict(zeros, x), np.full((3, 10), -np.log(10)), rtol=1e-6)


def test_default_initialisation_is_the_tutorials():
    explicit = init_params(SIZES, jax.random.PRNGKey(2), 0.01, init="normal", output_init="same")
    for (w, b), (v, c) in zip(init_params(SIZES, jax.random.PRNGKey(2), 0.01), explicit, strict=True):
        assert np.array_equal(w, v) and np.array_equal(b, c)


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.5])
def test_label_smoothing_loss_matches_numpy(smoothing, make_params):
    """The targets training is given (loop_inputs) are label-smoothed as train.label_smoothing says."""
    params = init_params([784, 16, 10], jax.random.PRNGKey(3), 0.1)
    x = np.random.default_rng(1).random((6, 784), dtype=np.float32)
    labels = np.array([0, 3, 9, 3, 1, 7])
    (w0, b0), (w1, b1) = [(np.asarray(w, np.float64), np.asarray(b, np.float64)) for w, b in params]
    logits = np.maximum(0, x @ w0.T + b0) @ w1.T + b1
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    targets = (1 - smoothing) * np.eye(10)[labels] + smoothing / 10
    expected = -np.mean(log_probs * targets)  # the tutorial's mean over examples and classes
    smoothed = loop_inputs(make_params(train__label_smoothing=smoothing), x, labels).targets
    np.testing.assert_allclose(np.asarray(smoothed).sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(float(loss(params, x, smoothed)), expected, rtol=1e-4)
    if smoothing == 0:
        assert np.array_equal(smoothed, jax.nn.one_hot(labels, 10))


def test_predict_and_loss_match_numpy():
    params = init_params([784, 16, 10], jax.random.PRNGKey(3), 0.1)
    x = np.random.default_rng(0).random((5, 784), dtype=np.float32)
    labels = np.array([0, 3, 9, 3, 1])
    (w0, b0), (w1, b1) = [(np.asarray(w, np.float64), np.asarray(b, np.float64)) for w, b in params]
    logits = np.maximum(0, x @ w0.T + b0) @ w1.T + b1
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(batched_predict(params, x), log_probs, rtol=1e-4, atol=1e-5)
    targets = jax.nn.one_hot(labels, 10)
    expected = -np.mean(log_probs * np.eye(10)[labels])  # mean over examples and classes, as the tutorial
    np.testing.assert_allclose(float(loss(params, x, targets)), expected, rtol=1e-4)
    value, accuracy = loss_and_accuracy(params, x, labels)
    np.testing.assert_allclose(value, expected, rtol=1e-4)
    assert accuracy == float(np.mean(log_probs.argmax(axis=1) == labels))


def test_model_file_round_trip_keeps_arrays_and_metadata(tmp_path):
    params = [(np.asarray(w), np.asarray(b)) for w, b in init_params([784, 8, 10], jax.random.PRNGKey(0), 0.01)]
    meta = ModelMetadata(variant="jit", layer_sizes=[784, 8, 10], params_sha256="a" * 64, jax_version="0.0")
    save_model(tmp_path / "m.safetensors", params, meta)
    back, back_meta = load_model(tmp_path / "m.safetensors", "train@jit")
    assert back_meta == meta
    assert all(np.array_equal(w, v) and np.array_equal(b, c) for (w, b), (v, c) in zip(params, back, strict=True))


def test_model_file_with_mismatched_metadata_names_the_stage(tmp_path):
    params = [(np.asarray(w), np.asarray(b)) for w, b in init_params([784, 8, 10], jax.random.PRNGKey(0), 0.01)]
    meta = ModelMetadata(variant="jit", layer_sizes=[784, 9, 10], params_sha256="a" * 64, jax_version="0.0")
    save_model(tmp_path / "m.safetensors", params, meta)
    with pytest.raises(PipelineError, match=r"m.safetensors: arrays of layer sizes .*re-run the 'train@jit' stage"):
        load_model(tmp_path / "m.safetensors", "train@jit")
