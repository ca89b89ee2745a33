import csv
import json

import numpy as np
import pytest

from mnist_jax_pipeline.errors import PipelineError
from mnist_jax_pipeline.evaluate import load_model
from mnist_jax_pipeline.train import batch_bounds, train

# Largest |jit - nojit| difference of any final parameter after 3 epochs on the tiny data
# was 7.5e-9 (no shuffle) and 5.6e-9 (shuffle): rounding of fused vs op-by-op float32 arithmetic.
JIT_NOJIT_ATOL = 1e-6


def run(tmp_path, params, processed, variant, name=None):
    name = name or variant
    return train(params, variant, processed, tmp_path / f"{name}.safetensors",
                 tmp_path / f"{name}.json", tmp_path / f"{name}.csv")


@pytest.fixture
def small_params(make_params):
    return make_params(model__layer_sizes=[784, 64, 64, 10], train__epochs=3, train__batch_size=32,
                       train__step_size=0.01)


def test_batches_cover_every_example_once():
    bounds = batch_bounds(600, 128)
    assert bounds[-1] == (512, 600) and sum(b - a for a, b in bounds) == 600


def test_train_writes_model_metrics_and_history(tmp_path, small_params, tiny_processed):
    metrics = run(tmp_path, small_params, tiny_processed, "jit")
    assert metrics["final_test_accuracy"] > 0.9  # the synthetic digits are easy
    assert metrics["compile_seconds"] > 0 and metrics["epochs"] == 3 and metrics["ran_alone"] is True
    assert metrics["steps_per_epoch"] == 19 and metrics["backend"] == "cpu"
    for key in ("jax_version", "jaxlib_version", "host_cpu_count", "devices", "epoch_seconds_median"):
        assert metrics[key]
    rows = list(csv.DictReader((tmp_path / "jit.csv").open()))
    assert [int(r["epoch"]) for r in rows] == [1, 2, 3]
    assert float(rows[-1]["train_loss"]) < float(rows[0]["train_loss"])
    params, metadata = load_model(tmp_path / "jit.safetensors")
    assert [w.shape for w, _ in params] == [(64, 784), (64, 64), (10, 64)]
    assert metadata["variant"] == "jit"
    assert json.loads((tmp_path / "jit.json").read_text())["variant"] == "jit"


def test_two_runs_give_byte_identical_models(tmp_path, small_params, tiny_processed):
    run(tmp_path, small_params, tiny_processed, "jit", "a")
    run(tmp_path, small_params, tiny_processed, "jit", "b")
    assert (tmp_path / "a.safetensors").read_bytes() == (tmp_path / "b.safetensors").read_bytes()


@pytest.mark.parametrize("shuffle", [False, True])
def test_jit_and_nojit_agree(tmp_path, make_params, small_params, tiny_processed, shuffle):
    params = make_params(**{**{"model__layer_sizes": [784, 64, 64, 10], "train__epochs": 3,
                               "train__batch_size": 32, "train__step_size": 0.01}, "train__shuffle": shuffle})
    run(tmp_path, params, tiny_processed, "jit")
    nojit_metrics = run(tmp_path, params, tiny_processed, "nojit")
    assert nojit_metrics["compile_seconds"] is None
    jit_params, _ = load_model(tmp_path / "jit.safetensors")
    nojit_params, _ = load_model(tmp_path / "nojit.safetensors")
    for (wj, bj), (wn, bn) in zip(jit_params, nojit_params, strict=True):
        np.testing.assert_allclose(wj, wn, rtol=0, atol=JIT_NOJIT_ATOL)
        np.testing.assert_allclose(bj, bn, rtol=0, atol=JIT_NOJIT_ATOL)


@pytest.mark.parametrize("optimizer", ["momentum", "adam"])
def test_other_optimizers_learn(tmp_path, make_params, tiny_processed, optimizer):
    params = make_params(model__layer_sizes=[784, 32, 10], train__epochs=2, train__optimizer=optimizer,
                         train__step_size=0.001 if optimizer == "adam" else 0.005, train__schedule="cosine")
    assert run(tmp_path, params, tiny_processed, "jit")["final_test_accuracy"] > 0.8


def test_divergence_stops_with_the_epoch_and_writes_no_model(tmp_path, make_params, tiny_processed):
    params = make_params(model__layer_sizes=[784, 64, 10], model__init_scale=1.0, train__step_size=1e6,
                         train__epochs=3)
    with pytest.raises(PipelineError, match=r"loss became (nan|inf) at epoch 1; lower train.step_size"):
        run(tmp_path, params, tiny_processed, "jit")
    assert not list(tmp_path.glob("*.safetensors")) and not list(tmp_path.glob("*.json"))


def test_corrupt_processed_array_names_preprocess(tmp_path, small_params, tiny_processed):
    path = tiny_processed / "train_images.npy"
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(PipelineError, match=r"train_images.npy: corrupt or truncated.*'preprocess'"):
        run(tmp_path, small_params, tiny_processed, "jit")
