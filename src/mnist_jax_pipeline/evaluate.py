"""The evaluate stage: test metrics, per-class precision/recall, confusion matrix, mistakes."""

from __future__ import annotations

import csv
import io as _io
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import io
from .config import NUM_CLASSES
from .data.preprocess import load_split
from .errors import PipelineError
from .model import MLPParams, batched_predict, from_named_arrays, layer_sizes_of

CHUNK = 10_000


@jax.jit
def _chunk_stats(params: MLPParams, images: jax.Array, labels: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Summed tutorial loss terms and predicted classes for one chunk."""
    log_probs = batched_predict(params, images)
    picked = jnp.take_along_axis(log_probs, labels[:, None], axis=1)[:, 0]
    return -jnp.sum(picked), jnp.argmax(log_probs, axis=1)


def predict_classes(params: MLPParams, images: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """Tutorial loss (mean over examples and classes) and the predicted class of every example."""
    total, preds = 0.0, []
    for start in range(0, len(images), CHUNK):
        loss_sum, pred = _chunk_stats(params, images[start : start + CHUNK], labels[start : start + CHUNK])
        total += float(loss_sum)
        preds.append(np.asarray(pred))
    count = max(len(images), 1)
    predicted = np.concatenate(preds) if preds else np.zeros(0, np.int32)
    return total / (count * NUM_CLASSES), predicted


def loss_and_accuracy(params: MLPParams, images: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """Tutorial loss and accuracy on a whole split (evaluated in jitted chunks)."""
    loss, predicted = predict_classes(params, images, labels)
    accuracy = float(np.mean(predicted == labels)) if len(labels) else float("nan")
    return loss, accuracy


def confusion_matrix(labels: np.ndarray, predicted: np.ndarray, classes: int = NUM_CLASSES) -> np.ndarray:
    """Counts[i, j] of examples of true class i predicted as j."""
    matrix = np.zeros((classes, classes), dtype=np.int64)
    np.add.at(matrix, (labels, predicted), 1)
    return matrix


def per_class(matrix: np.ndarray) -> dict[str, dict[str, float]]:
    """Precision (column-wise) and recall (row-wise) of each class, keyed by class."""
    true_pos = np.diag(matrix).astype(np.float64)
    predicted = matrix.sum(axis=0)
    actual = matrix.sum(axis=1)
    precision = np.divide(true_pos, predicted, out=np.zeros_like(true_pos), where=predicted > 0)
    recall = np.divide(true_pos, actual, out=np.zeros_like(true_pos), where=actual > 0)
    return {
        str(c): {"precision": round(float(precision[c]), 6), "recall": round(float(recall[c]), 6)}
        for c in range(len(true_pos))
    }


def load_model(path: str | Path, made_by: str = "train") -> tuple[MLPParams, dict[str, str]]:
    """Load a model file written by the train stage, checking its layer shapes chain up."""
    named, metadata = io.load_params(path, made_by)
    if len(named) % 2 or not named:
        raise PipelineError(f"{path}: {len(named)} arrays, expected weight/bias pairs; re-run the '{made_by}' stage")
    try:
        params = from_named_arrays(named)
        sizes = layer_sizes_of(params)
    except (KeyError, IndexError) as err:
        raise PipelineError(f"{path}: missing array {err}; re-run the '{made_by}' stage") from err
    for i, (w, b) in enumerate(params):
        if w.ndim != 2 or b.shape != (w.shape[0],) or w.shape[1] != sizes[i]:
            raise PipelineError(f"{path}: layer {i} has shapes {w.shape}/{b.shape}; re-run the '{made_by}' stage")
    return params, metadata


def evaluate(variant: str, model_path: str | Path, processed_dir: str | Path,
             metrics_path: str | Path, confusion_path: str | Path, details_path: str | Path) -> dict[str, Any]:
    """Run the evaluate stage for one trained variant."""
    params, _ = load_model(model_path, made_by=f"train@{variant}")
    images, labels = load_split(processed_dir, "test")
    if layer_sizes_of(params)[0] != images.shape[1]:
        raise PipelineError(f"{model_path}: input size {layer_sizes_of(params)[0]} does not match the data's"
                               f" {images.shape[1]}; re-run 'train@{variant}'")
    loss, predicted = predict_classes(params, images, labels)
    matrix = confusion_matrix(labels, predicted)
    wrong = np.flatnonzero(predicted != labels)
    metrics = {
        "variant": variant,
        "test_accuracy": round(float(np.mean(predicted == labels)), 6),
        "test_loss": round(loss, 8),
        "test_examples": int(len(labels)),
        "misclassified": int(len(wrong)),
        "per_class": per_class(matrix),
    }
    io.write_json(metrics_path, metrics)
    rows = _io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    writer.writerow(["actual", "predicted"])
    writer.writerows(zip(labels.tolist(), predicted.tolist(), strict=True))
    io.write_text(confusion_path, rows.getvalue())
    io.write_json(details_path, {
        "variant": variant,
        "confusion_matrix": matrix.tolist(),
        "misclassified_indices": wrong.tolist(),
        "true": labels[wrong].tolist(),
        "predicted": predicted[wrong].tolist(),
    })
    return metrics
