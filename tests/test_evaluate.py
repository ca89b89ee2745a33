import csv
import json

import jax
import numpy as np
import pytest

from mnist_jax_pipeline import io
from mnist_jax_pipeline.errors import PipelineError
from mnist_jax_pipeline.evaluate import confusion_matrix, evaluate, per_class
from mnist_jax_pipeline.model import init_params, to_named_arrays


def test_confusion_matrix_and_per_class():
    labels = np.array([0, 0, 1, 1, 2])
    predicted = np.array([0, 1, 1, 1, 0])
    matrix = confusion_matrix(labels, predicted, classes=3)
    assert matrix.tolist() == [[1, 1, 0], [0, 2, 0], [1, 0, 0]]
    stats = per_class(matrix)
    assert stats["0"] == {"precision": 0.5, "recall": 0.5}
    assert stats["1"] == {"precision": round(2 / 3, 6), "recall": 1.0}
    assert stats["2"] == {"precision": 0.0, "recall": 0.0}


def save_model(path, sizes=(784, 16, 10)):
    params = init_params(list(sizes), jax.random.PRNGKey(0), 0.01)
    io.save_params(path, to_named_arrays(params), {"variant": "jit"})


def test_evaluate_writes_metrics_plot_data_and_mistakes(tmp_path, tiny_processed):
    save_model(tmp_path / "m.safetensors")
    metrics = evaluate("jit", tmp_path / "m.safetensors", tiny_processed, tmp_path / "e.json",
                       tmp_path / "c.csv", tmp_path / "d.json")
    assert metrics["test_examples"] == 200 and set(metrics["per_class"]) == {str(c) for c in range(10)}
    details = json.loads((tmp_path / "d.json").read_text())
    assert np.array(details["confusion_matrix"]).sum() == 200
    assert len(details["misclassified_indices"]) == metrics["misclassified"]
    rows = list(csv.DictReader((tmp_path / "c.csv").open()))
    assert len(rows) == 200 and set(rows[0]) == {"actual", "predicted"}
    correct = sum(r["actual"] == r["predicted"] for r in rows)
    assert correct / 200 == pytest.approx(metrics["test_accuracy"])


@pytest.mark.parametrize("damage", ["truncate", "wrong_shape"])
def test_corrupt_model_names_the_train_stage(tmp_path, tiny_processed, damage):
    path = tmp_path / "m.safetensors"
    if damage == "truncate":
        save_model(path)
        path.write_bytes(path.read_bytes()[:500])
    else:
        save_model(path, sizes=(100, 16, 10))
    with pytest.raises(PipelineError, match=r"m.safetensors: .*re-run (the )?'train@jit"):
        evaluate("jit", path, tiny_processed, tmp_path / "e.json", tmp_path / "c.csv", tmp_path / "d.json")
    assert not (tmp_path / "e.json").exists()
