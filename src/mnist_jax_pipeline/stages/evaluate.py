"""The evaluate stage: test metrics, per-class precision/recall, confusion matrix, mistakes."""

import argparse
import logging

import numpy as np

from ..artefacts import storage
from ..artefacts.dataset import load_split
from ..artefacts.evaluation import ClassScores, ConfusionRow, EvalDetails, EvalMetrics
from ..artefacts.model_file import load_model
from ..foundation import backend, paths
from ..foundation.dataset_facts import NUM_CLASSES
from ..foundation.errors import PipelineError
from ..foundation.runtime import timing_lock
from ..mlp.model import predict_classes

log = logging.getLogger(__name__)


def confusion_matrix(labels: np.ndarray, predicted: np.ndarray, classes: int = NUM_CLASSES) -> np.ndarray:
    """Counts[i, j] of examples of true class i predicted as j."""
    return np.bincount(labels * classes + predicted, minlength=classes * classes).reshape(classes, classes)


def per_class(matrix: np.ndarray) -> dict[str, ClassScores]:
    """Precision (column-wise) and recall (row-wise) of each class, keyed by class."""
    true_pos, predicted, actual = np.diag(matrix).astype(np.float64), matrix.sum(axis=0), matrix.sum(axis=1)
    precision = np.divide(true_pos, predicted, out=np.zeros_like(true_pos), where=predicted > 0)
    recall = np.divide(true_pos, actual, out=np.zeros_like(true_pos), where=actual > 0)
    scores = zip(precision.tolist(), recall.tolist(), strict=True)
    return {str(c): ClassScores(precision=round(p, 6), recall=round(r, 6)) for c, (p, r) in enumerate(scores)}


def evaluate(variant: str, processed_dir: str, root: str = ".") -> EvalMetrics:
    """Evaluate one trained variant on the test split; write its metrics, details and confusion rows."""
    made_by, model_path = paths.MODEL.stage(variant), paths.MODEL.at(variant, root)
    params, _ = load_model(model_path, made_by)
    images, labels = load_split(processed_dir, "test")  # both checked: 784 pixels in, 10 classes out, not empty
    loss, predicted = predict_classes(params, images, labels)
    if not np.isfinite(loss):
        raise PipelineError(
            f"{model_path}: the test loss is not finite (the weights overflow float32);"
            f" re-run '{made_by}' with a smaller train.step_size or model.init_scale"
        )
    matrix = confusion_matrix(labels, predicted)
    wrong = np.flatnonzero(predicted != labels)
    metrics = EvalMetrics(
        test_accuracy=round(float(np.mean(predicted == labels)), 6),
        test_loss=round(loss, 8),
        test_examples=len(labels),
        misclassified=len(wrong),
        per_class=per_class(matrix),
    )
    storage.write_model(paths.EVAL_HEADLINE.at(variant, root), metrics.headline())
    storage.write_model(paths.EVAL_METRICS.at(variant, root), metrics)
    rows = [ConfusionRow(actual=a, predicted=p) for a, p in zip(labels.tolist(), predicted.tolist(), strict=True)]
    storage.write_rows(paths.CONFUSION.at(variant, root), rows, ConfusionRow)
    details = EvalDetails(
        confusion_matrix=matrix.tolist(),
        misclassified_indices=wrong.tolist(),
        true=labels[wrong].tolist(),
        predicted=predicted[wrong].tolist(),
    )
    storage.write_model(paths.EVAL_DETAILS.at(variant, root), details)
    return metrics


def main(args: argparse.Namespace) -> None:
    """`mnist-pipeline evaluate --variant V` (its parameters checked as the command starts, orchestration/run.py)."""
    with timing_lock(paths.job_name("evaluate", args.variant)):
        backend.start()
        metrics = evaluate(args.variant, args.processed, args.root)
    log.info("test accuracy %.2f%%, test loss %.4f", 100 * metrics.test_accuracy, metrics.test_loss)
