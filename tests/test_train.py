import json
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest

from conftest import write_params
from mnist_jax_pipeline.artefacts import atomic, training
from mnist_jax_pipeline.artefacts.model_file import load_model
from mnist_jax_pipeline.config.params import Params
from mnist_jax_pipeline.foundation import paths
from mnist_jax_pipeline.foundation.errors import PipelineError
from mnist_jax_pipeline.mlp.loops.base import batch_bounds
from mnist_jax_pipeline.stages import train

# Largest |jit - nojit| difference of any final parameter after 3 epochs on the tiny data
# was 7.5e-9 (no shuffle) and 5.6e-9 (shuffle): rounding of fused vs op-by-op float32 arithmetic.
JIT_NOJIT_ATOL = 1e-6


def run(root, params: Params, processed, variant) -> training.TrainMetrics:
    """The train stage's command, writing under `root`."""
    params_path = write_params(root / "params.yaml", params.to_dict())
    train.main(Namespace(params=params_path, variant=variant, processed=processed, root=root))
    return training.read_metrics(variant, root)


def model(root, variant):
    return load_model(paths.MODEL.at(variant, root), f"train@{variant}")


@pytest.fixture
def small_params(make_params):
    return make_params(
        model__layer_sizes=[784, 64, 64, 10], train__epochs=3, train__batch_size=32, train__step_size=0.01
    )


def test_batches_cover_every_example_once():
    bounds = batch_bounds(600, 128)
    assert bounds[-1] == (512, 600) and sum(b - a for a, b in bounds) == 600


@pytest.mark.slow
def test_train_writes_model_metrics_run_and_history(tmp_path, small_params, tiny_processed):
    metrics = run(tmp_path, small_params, tiny_processed, "jit")
    assert metrics.final_test_accuracy > 0.9  # the synthetic digits are easy
    assert metrics.compile_seconds > 0 and metrics.epochs == 3 and metrics.steps_per_epoch == 19
    assert metrics.epoch_seconds_median > 0 and metrics.xla is not None
    run_info = training.read_run("jit", tmp_path)
    assert run_info.backend == "cpu" and run_info.jax_version and run_info.devices
    assert run_info.timing_lock == "held" and run_info.loadavg_1m_at_end is not None
    assert run_info.busy == (run_info.other_cpu_share is not None and run_info.other_cpu_share > 0.1)
    history = training.read_history("jit", tmp_path)
    assert [h.epoch for h in history] == [1, 2, 3]
    assert history[-1].train_loss < history[0].train_loss
    params, metadata = model(tmp_path, "jit")
    assert [w.shape for w, _ in params] == [(64, 784), (64, 64), (10, 64)]
    assert metadata.variant == "jit" and metadata.layer_sizes == [784, 64, 64, 10]
    assert metadata.params_sha256 == small_params.digest("model", "train")


@pytest.mark.slow
def test_metrics_hold_numbers_only(tmp_path, small_params, tiny_processed):
    run(tmp_path, small_params, tiny_processed, "nojit")

    def leaves(node):
        if isinstance(node, dict):
            for value in node.values():
                yield from leaves(value)
        else:
            yield node

    data = json.loads(paths.TRAIN_METRICS.at("nojit", tmp_path).read_text())
    assert all(isinstance(v, int | float) and not isinstance(v, bool) for v in leaves(data))
    assert "compile_seconds" not in data and "xla" not in data  # nothing compiled


@pytest.mark.slow
def test_two_runs_give_byte_identical_models(tmp_path, small_params, tiny_processed):
    for name in ("a", "b"):
        run(tmp_path / name, small_params, tiny_processed, "jit")
    first, second = (paths.MODEL.at("jit", tmp_path / name).read_bytes() for name in ("a", "b"))
    assert first == second


@pytest.mark.slow
@pytest.mark.parametrize("shuffle", [False, True])
def test_jit_and_nojit_agree(tmp_path, make_params, tiny_processed, shuffle):
    params = make_params(
        model__layer_sizes=[784, 64, 64, 10],
        train__epochs=3,
        train__batch_size=32,
        train__step_size=0.01,
        train__shuffle=shuffle,
    )
    run(tmp_path, params, tiny_processed, "jit")
    assert run(tmp_path, params, tiny_processed, "nojit").compile_seconds is None
    for (wj, bj), (wn, bn) in zip(model(tmp_path, "jit")[0], model(tmp_path, "nojit")[0], strict=True):
        np.testing.assert_allclose(wj, wn, rtol=0, atol=JIT_NOJIT_ATOL)
        np.testing.assert_allclose(bj, bn, rtol=0, atol=JIT_NOJIT_ATOL)


@pytest.mark.parametrize("optimizer", ["momentum", "adam"])
def test_other_optimizers_learn(tmp_path, make_params, tiny_processed, optimizer):
    params = make_params(
        model__layer_sizes=[784, 32, 10],
        train__epochs=2,
        train__optimizer=optimizer,
        train__step_size=0.001 if optimizer == "adam" else 0.005,
        train__schedule="cosine",
    )
    assert run(tmp_path, params, tiny_processed, "jit").final_test_accuracy > 0.8


def test_divergence_stops_with_the_epoch_and_writes_no_model(tmp_path, make_params, tiny_processed, monkeypatch):
    params = make_params(model__layer_sizes=[784, 64, 10], model__init_scale=1.0, train__step_size=1e6, train__epochs=3)
    with pytest.raises(PipelineError, match=r"loss became (nan|inf) at epoch 1; lower train.step_size") as err:
        run(tmp_path, params, tiny_processed, "jit")
    assert f"(now 1000000.0) in {tmp_path / 'params.yaml'}. No model" in str(err.value)  # the file it came from
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PipelineError, match=r"\(now 1000000.0\) in sweeps/s.yaml. No model"):  # a point's: its sweep's
        run(Path("sweeps/s/step_size=1000000.0"), params, tiny_processed, "jit")
    assert not [p for p in (tmp_path / "models").rglob("*") if p.is_file()]
    assert not [p for p in (tmp_path / "metrics").rglob("*") if p.is_file()]


def test_corrupt_processed_array_names_preprocess(tmp_path, small_params, tiny_processed):
    path = tiny_processed / "train_images.npy"
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(PipelineError, match=r"train_images.npy: corrupt or truncated.*'preprocess'"):
        run(tmp_path, small_params, tiny_processed, "jit")


def test_no_temporary_file_is_left(tmp_path, small_params, tiny_processed):
    run(tmp_path, small_params, tiny_processed, "jit_scan")
    assert not [p for p in tmp_path.rglob(f"{atomic.TMP_PREFIX}*")]
