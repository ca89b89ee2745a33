import json

import numpy as np
import pytest

from mnist_jax_pipeline.artefacts import evaluation, storage
from mnist_jax_pipeline.artefacts.evaluation import ClassScores, ConfusionRow
from mnist_jax_pipeline.artefacts.model_file import ModelMetadata, save_model
from mnist_jax_pipeline.foundation import paths
from mnist_jax_pipeline.foundation.errors import PipelineError
from mnist_jax_pipeline.mlp.model import init_params
from mnist_jax_pipeline.stages.evaluate import confusion_matrix, evaluate, per_class


def test_confusion_matrix_and_per_class():
    labels = np.array([0, 0, 1, 1, 2])
    predicted = np.array([0, 1, 1, 1, 0])
    matrix = confusion_matrix(labels, predicted, classes=3)
    assert matrix.tolist() == [[1, 1, 0], [0, 2, 0], [1, 0, 0]]
    stats = per_class(matrix)
    assert stats["0"] == ClassScores(precision=0.5, recall=0.5)
    assert stats["1"] == ClassScores(precision=round(2 / 3, 6), recall=1.0)
    assert stats["2"] == ClassScores(precision=0.0, recall=0.0)


def write_model(root, sizes=(784, 16, 10), change=lambda host: host):
    import jax

    params = init_params(list(sizes), jax.random.PRNGKey(0), 0.01)
    host = change([(np.asarray(w), np.asarray(b)) for w, b in params])
    meta = ModelMetadata(variant="jit", layer_sizes=list(sizes), params_sha256="0" * 64, jax_version="test")
    save_model(paths.MODEL.at("jit", root), host, meta)


def test_evaluate_writes_metrics_plot_data_and_mistakes(tmp_path, tiny_processed):
    write_model(tmp_path)
    metrics = evaluate("jit", tiny_processed, tmp_path)
    assert metrics.test_examples == 200 and set(metrics.per_class) == {str(c) for c in range(10)}
    assert evaluation.read_metrics("jit", tmp_path) == metrics
    details = evaluation.read_details("jit", 200, tmp_path)
    assert np.array(details.confusion_matrix).sum() == 200
    assert len(details.misclassified_indices) == metrics.misclassified
    rows = storage.read_rows(paths.CONFUSION.at("jit", tmp_path), ConfusionRow, "evaluate@jit")
    assert len(rows) == 200
    correct = sum(r.actual == r.predicted for r in rows)
    assert correct / 200 == pytest.approx(metrics.test_accuracy)


def _flat_first_weight(host):
    return [(host[0][0].reshape(-1), host[0][1]), *host[1:]]


def _nan_weight(host):
    weight = host[1][0].copy()
    weight[0, 0] = np.nan
    return [host[0], (weight, host[1][1])]


@pytest.mark.parametrize("damage", ["truncate", "wrong_shape", "no_metadata", "flat", "five_classes", "nan"])
def test_corrupt_model_names_the_train_stage(tmp_path, tiny_processed, damage):
    path = paths.MODEL.at("jit", tmp_path)
    if damage in ("flat", "nan"):
        write_model(tmp_path, change=_flat_first_weight if damage == "flat" else _nan_weight)
    elif damage == "five_classes":
        write_model(tmp_path, sizes=(784, 16, 5))
    elif damage == "truncate":
        write_model(tmp_path)
        path.write_bytes(path.read_bytes()[:500])
    elif damage == "wrong_shape":
        write_model(tmp_path, sizes=(100, 16, 10))
    else:
        from safetensors.numpy import save

        path.parent.mkdir(parents=True)
        path.write_bytes(
            save({"layer0.weight": np.zeros((10, 784), np.float32), "layer0.bias": np.zeros(10, np.float32)})
        )
    with pytest.raises(PipelineError, match=r"jit.safetensors: .*re-run (the )?'train@jit") as err:
        evaluate("jit", tiny_processed, tmp_path)
    assert "\n" not in str(err.value)
    assert not paths.EVAL_METRICS.at("jit", tmp_path).exists()


def test_a_nan_pixel_names_the_array_and_the_stage(tmp_path, tiny_processed):
    images = np.load(tiny_processed / "test_images.npy")
    images.reshape(-1)[7] = np.nan
    np.save(tiny_processed / "test_images.npy", images)
    write_model(tmp_path)
    with pytest.raises(PipelineError, match=r"test_images.npy: holds NaN or infinite values; re-run the 'preprocess'"):
        evaluate("jit", tiny_processed, tmp_path)


@pytest.mark.slow
def test_the_evaluate_command_says_its_test_accuracy(report_tree, caplog):
    import logging

    from mnist_jax_pipeline.cli import main

    with caplog.at_level(logging.INFO):
        assert main(["evaluate", "--variant", "jit"]) == 0
    metrics = json.loads((report_tree / "metrics/evaluate/jit.json").read_text())
    line = f"test accuracy {100 * metrics['test_accuracy']:.2f}%, test loss {metrics['test_loss']:.4f}"
    assert line in caplog.text
